#include "profiler/launcher.h"

#include <fcntl.h>
#include <numa.h>
#include <numaif.h>
#include <sched.h>
#include <sys/personality.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "absl/cleanup/cleanup.h"
#include "traces/base/file.h"
#include "traces/base/strings.h"

namespace tiergym::prof {
namespace {

constexpr int kMaxNodes = 1024;
constexpr size_t kMaskWords = kMaxNodes / (8 * sizeof(unsigned long));

void CloseFd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

// Writes errno into the error pipe and exits; only async-signal-safe calls.
[[noreturn]] void ChildFail(int error_fd, int err) {
  ssize_t ignored = ::write(error_fd, &err, sizeof err);
  (void)ignored;
  _exit(127);
}

absl::Status CheckNode(int node) {
  if (numa_available() < 0) {
    return absl::FailedPreconditionError(
        "this kernel has no NUMA support (numa_available() < 0); run without a node binding");
  }
  if (node < 0 || node > numa_max_node() || node >= kMaxNodes) {
    return absl::InvalidArgumentError(StrCat("NUMA node ", node, " does not exist (nodes 0..",
                                             numa_max_node(), " on this machine)"));
  }
  long long free_bytes = 0;
  if (numa_node_size64(node, &free_bytes) <= 0) {
    return absl::InvalidArgumentError(StrCat("NUMA node ", node, " has no memory"));
  }
  return absl::OkStatus();
}

}  // namespace

std::string ResolveCommand(const std::string& command) {
  auto executable = [](const std::string& p) {
    struct stat st;
    return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(p.c_str(), X_OK) == 0;
  };
  if (command.empty()) return "";
  if (command.find('/') != std::string::npos) {
    if (!executable(command)) return "";
    char buf[PATH_MAX];
    return ::realpath(command.c_str(), buf) != nullptr ? std::string(buf) : command;
  }
  const char* path_env = std::getenv("PATH");
  std::string path = path_env != nullptr ? path_env : "/usr/local/bin:/usr/bin:/bin";
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find(':', start);
    if (end == std::string::npos) end = path.size();
    const std::string dir = end > start ? path.substr(start, end - start) : std::string(".");
    const std::string candidate = StrCat(dir, "/", command);
    if (executable(candidate)) {
      char buf[PATH_MAX];
      return ::realpath(candidate.c_str(), buf) != nullptr ? std::string(buf) : candidate;
    }
    start = end + 1;
  }
  return "";
}

absl::StatusOr<std::vector<int>> ParseCpuList(const std::string& text) {
  std::vector<int> cpus;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    const std::string item = text.substr(start, end - start);
    int lo = 0, hi = 0;
    char extra = 0;
    if (std::sscanf(item.c_str(), "%d-%d%c", &lo, &hi, &extra) == 2) {
    } else if (std::sscanf(item.c_str(), "%d%c", &lo, &extra) == 1) {
      hi = lo;
    } else {
      return absl::InvalidArgumentError(
          StrCat("CPU list '", text, "': '", item, "' is not N or N-M"));
    }
    if (lo < 0 || hi < lo || hi >= CPU_SETSIZE) {
      return absl::InvalidArgumentError(StrCat("CPU list '", text, "': bad range '", item, "'"));
    }
    for (int c = lo; c <= hi; ++c) cpus.push_back(c);
    start = end + 1;
  }
  if (cpus.empty()) return absl::InvalidArgumentError("empty CPU list");
  return cpus;
}

absl::StatusOr<StoppedChild> StoppedChild::Spawn(const LaunchOptions& options) {
  if (options.argv.empty()) return absl::InvalidArgumentError("no command to run");
  unsigned long mask[kMaskWords] = {};
  if (options.membind_node >= 0) {
    absl::Status s = CheckNode(options.membind_node);
    if (!s.ok()) return s;
    mask[options.membind_node / (8 * sizeof(unsigned long))] |=
        1UL << (options.membind_node % (8 * sizeof(unsigned long)));
  }
  cpu_set_t cpuset;
  CPU_ZERO(&cpuset);
  bool bind_cpus = false;
  if (options.cpu_node >= 0) {
    if (numa_available() < 0) {
      return absl::FailedPreconditionError(
          "this kernel has no NUMA support (numa_available() < 0); run without --cpu-node");
    }
    if (options.cpu_node > numa_max_node()) {
      return absl::InvalidArgumentError(StrCat("NUMA node ", options.cpu_node,
                                               " does not exist (nodes 0..", numa_max_node(),
                                               " on this machine)"));
    }
    struct bitmask* bm = numa_allocate_cpumask();
    if (numa_node_to_cpus(options.cpu_node, bm) != 0) {
      numa_free_cpumask(bm);
      return absl::InvalidArgumentError(StrCat("cannot list the CPUs of node ", options.cpu_node));
    }
    for (unsigned i = 0; i < bm->size && i < CPU_SETSIZE; ++i) {
      if (numa_bitmask_isbitset(bm, i)) {
        CPU_SET(i, &cpuset);
        bind_cpus = true;
      }
    }
    numa_free_cpumask(bm);
    if (!bind_cpus) {
      return absl::InvalidArgumentError(StrCat("NUMA node ", options.cpu_node,
                                               " has no CPUs (a memory-only node such as KNL "
                                               "MCDRAM): bind the memory, not the threads"));
    }
  }
  for (int c : options.cpus) {
    CPU_SET(c, &cpuset);
    bind_cpus = true;
  }

  // Everything the child needs is prepared before fork: after it only system calls.
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    const std::string key = entry.substr(0, entry.find('='));
    bool replaced = false;
    for (const auto& kv : options.env) replaced = replaced || kv.first == key;
    if (!replaced) env_strings.push_back(entry);
  }
  for (const auto& [k, v] : options.env) env_strings.push_back(StrCat(k, "=", v));
  std::vector<char*> envp;
  envp.reserve(env_strings.size() + 1);
  for (std::string& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<char*> argv;
  for (const std::string& a : options.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);

  // The parent's descriptors, closed on every return but those the StoppedChild takes
  // (the child never returns: it execs or _exits).
  int out_fd = -1, go[2] = {-1, -1}, err[2] = {-1, -1};
  const absl::Cleanup close_fds = [&] {
    CloseFd(out_fd);
    CloseFd(go[0]);
    CloseFd(go[1]);
    CloseFd(err[0]);
    CloseFd(err[1]);
  };
  if (!options.stdout_path.empty()) {
    out_fd = ::open(options.stdout_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (out_fd < 0) return ErrnoStatus(errno, StrCat("cannot open ", options.stdout_path));
  }
  if (::pipe2(go, O_CLOEXEC) != 0) return ErrnoStatus(errno, "pipe");
  if (::pipe2(err, O_CLOEXEC) != 0) return ErrnoStatus(errno, "pipe");
  const pid_t pid = ::fork();
  if (pid < 0) return ErrnoStatus(errno, "fork");
  if (pid == 0) {
    ::close(go[1]);
    ::close(err[0]);
    // Wait for the go byte; EOF (the parent died or gave up) ends the child unexecuted.
    char byte = 0;
    ssize_t n;
    do {
      n = ::read(go[0], &byte, 1);
    } while (n < 0 && errno == EINTR);
    if (n != 1) _exit(126);
    if (options.membind_node >= 0) {
      const int mode = options.preferred ? MPOL_PREFERRED : MPOL_BIND;
      if (set_mempolicy(mode, mask, kMaxNodes) != 0) ChildFail(err[1], errno);
    }
    if (bind_cpus && ::sched_setaffinity(0, sizeof cpuset, &cpuset) != 0) {
      ChildFail(err[1], errno);
    }
    if (!options.keep_aslr) {
      const int persona = ::personality(0xffffffff);
      if (persona != -1) ::personality(persona | ADDR_NO_RANDOMIZE);
    }
    if (out_fd >= 0 && ::dup2(out_fd, STDOUT_FILENO) < 0) ChildFail(err[1], errno);
    ::execvpe(argv[0], argv.data(), envp.data());
    ChildFail(err[1], errno);
  }
  StoppedChild child;
  child.pid_ = pid;
  child.go_fd_ = std::exchange(go[1], -1);
  child.error_fd_ = std::exchange(err[0], -1);
  return child;
}

StoppedChild::StoppedChild(StoppedChild&& o) noexcept { *this = std::move(o); }

StoppedChild& StoppedChild::operator=(StoppedChild&& o) noexcept {
  if (this != &o) {
    Kill();
    CloseFd(go_fd_);
    CloseFd(error_fd_);
    pid_ = std::exchange(o.pid_, -1);
    go_fd_ = std::exchange(o.go_fd_, -1);
    error_fd_ = std::exchange(o.error_fd_, -1);
    reaped_ = std::exchange(o.reaped_, false);
  }
  return *this;
}

StoppedChild::~StoppedChild() {
  Kill();
  CloseFd(go_fd_);
  CloseFd(error_fd_);
}

absl::Status StoppedChild::Release() {
  if (go_fd_ < 0) return absl::FailedPreconditionError("child already released");
  const char byte = 1;
  if (::write(go_fd_, &byte, 1) != 1) return ErrnoStatus(errno, "releasing the child");
  CloseFd(go_fd_);
  int child_errno = 0;
  ssize_t n;
  do {
    n = ::read(error_fd_, &child_errno, sizeof child_errno);
  } while (n < 0 && errno == EINTR);
  CloseFd(error_fd_);
  if (n == static_cast<ssize_t>(sizeof child_errno)) {
    int status = 0;
    ::waitpid(pid_, &status, 0);
    reaped_ = true;
    return ErrnoStatus(child_errno,
                       "cannot start the command (set_mempolicy, "
                       "sched_setaffinity or exec failed)");
  }
  return absl::OkStatus();
}

absl::StatusOr<int> StoppedChild::Wait() {
  if (reaped_) return absl::FailedPreconditionError("child already waited for");
  int status = 0;
  while (::waitpid(pid_, &status, 0) < 0) {
    if (errno != EINTR) return ErrnoStatus(errno, "waitpid");
  }
  reaped_ = true;
  return status;
}

void StoppedChild::Kill() {
  if (pid_ > 0 && !reaped_) {
    ::kill(pid_, SIGKILL);
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    reaped_ = true;
  }
}

std::string DescribeWaitStatus(int status) {
  if (WIFEXITED(status)) return StrCat("exit ", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    return StrCat("signal ", WTERMSIG(status), " (", strsignal(WTERMSIG(status)), ")");
  }
  return StrCat("wait status ", status);
}

}  // namespace tiergym::prof

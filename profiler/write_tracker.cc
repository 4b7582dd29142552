#include "profiler/write_tracker.h"

#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <utility>

#include "absl/cleanup/cleanup.h"
#include "traces/base/file.h"
#include "traces/base/strings.h"

// Linux 6.7 ABI; Debian 12's headers (6.1) predate it.
#ifndef UFFD_FEATURE_WP_ASYNC
#define UFFD_FEATURE_WP_ASYNC (1 << 15)
#endif

namespace tiergym::prof {
namespace {

uint64_t MonotonicNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// Receives one descriptor (SCM_RIGHTS) from `sock`, waiting at most `timeout_ms`. -1 when
// none came.
int ReceiveDescriptor(int sock, int timeout_ms) {
  pollfd pfd{sock, POLLIN, 0};
  if (::poll(&pfd, 1, timeout_ms) <= 0) return -1;
  char tag = 0;
  iovec iov{&tag, 1};
  union {
    cmsghdr header;
    char bytes[CMSG_SPACE(sizeof(int))];
  } control;
  std::memset(&control, 0, sizeof control);
  msghdr msg;
  std::memset(&msg, 0, sizeof msg);
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control.bytes;
  msg.msg_controllen = sizeof control.bytes;
  if (::recvmsg(sock, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC) <= 0) return -1;
  int fd = -1;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
        c->cmsg_len == CMSG_LEN(sizeof(int))) {
      std::memcpy(&fd, CMSG_DATA(c), sizeof fd);
    }
  }
  return fd;
}

bool IsUserfaultfd(int fd) {
  char link[64];
  std::snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  char target[64] = {};
  const ssize_t n = ::readlink(link, target, sizeof target - 1);
  return n > 0 && std::strstr(target, "userfaultfd") != nullptr;
}

pid_t ParentOf(pid_t pid) {
  auto stat = ReadFile(StrCat("/proc/", pid, "/stat"));
  if (!stat.ok()) return -1;
  // "pid (comm) state ppid ...": comm may hold spaces and parentheses; the last ')' ends it.
  const size_t close = stat->rfind(')');
  if (close == std::string::npos) return -1;
  char state = 0;
  int ppid = -1;
  if (std::sscanf(stat->c_str() + close + 1, " %c %d", &state, &ppid) != 2) return -1;
  return ppid;
}

}  // namespace

bool IsDescendant(pid_t pid, pid_t root) {
  for (int depth = 0; depth < 64 && pid > 1; ++depth) {
    if (pid == root) return true;
    pid = ParentOf(pid);
  }
  return false;
}

absl::StatusOr<std::unique_ptr<WriteTracker>> WriteTracker::Listen(
    const WriteTrackerOptions& options) {
  uint64_t nonce = 0;
  if (::getrandom(&nonce, sizeof nonce, 0) != static_cast<ssize_t>(sizeof nonce)) {
    nonce = MonotonicNs() ^ static_cast<uint64_t>(::getpid());
  }
  char name[64];
  std::snprintf(name, sizeof name, "tiergym-swsample-%d-%016llx", static_cast<int>(::getpid()),
                static_cast<unsigned long long>(nonce));
  const int fd = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return ErrnoStatus(errno, "software backend: socket");
  absl::Cleanup close_fd = [fd] { ::close(fd); };  // until the tracker owns it
  sockaddr_un addr;
  std::memset(&addr, 0, sizeof addr);
  addr.sun_family = AF_UNIX;
  const size_t len = std::strlen(name);
  std::memcpy(addr.sun_path + 1, name, len);
  const auto addr_len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + len);
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&addr), addr_len) != 0 ||
      ::listen(fd, 64) != 0) {
    return ErrnoStatus(errno, "software backend: cannot listen on an abstract Unix socket");
  }
  std::unique_ptr<WriteTracker> t(new WriteTracker(fd, name, options));
  std::move(close_fd).Cancel();
  return t;
}

WriteTracker::~WriteTracker() {
  Stop();  // closes the processes' descriptors (only its thread accepts them)
  if (listen_fd_ >= 0) ::close(listen_fd_);
}

void WriteTracker::Start(pid_t root) {
  root_ = root;
  thread_.Start([this] { Loop(); });
}

void WriteTracker::Stop() {
  if (!thread_.Stop()) return;
  // Descriptors handed over that the thread had no time to accept (a loaded machine can
  // leave it unscheduled for a whole short run) still count as received: every process
  // image that handed one over is in stats().processes, however late it was read.
  AcceptAll();
  for (Process& p : processes_) ::close(p.uffd);
  processes_.clear();
}

WriteTrackerStats WriteTracker::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void WriteTracker::AcceptAll() {
  while (true) {
    const int conn = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (conn < 0) return;
    ucred cred{};
    socklen_t cred_len = sizeof cred;
    const bool have_cred =
        ::getsockopt(conn, SOL_SOCKET, SO_PEERCRED, &cred, &cred_len) == 0 && cred.pid > 0;
    // The agent sends right after connecting; a second is plenty even on a busy machine.
    const int uffd = ReceiveDescriptor(conn, 1000);
    ::close(conn);
    if (uffd < 0) continue;
    absl::Cleanup close_uffd = [uffd] { ::close(uffd); };  // unless it is tracked
    std::string error;
    const std::string stat_path = StrCat("/proc/", cred.pid, "/stat");
    const bool descendant = have_cred && IsDescendant(cred.pid, root_);
    if (have_cred && ::access(stat_path.c_str(), F_OK) != 0) {
      // The process has ended (and been reaped) before its descriptor was read: nothing
      // left to track, and nothing wrong. Checked after the ancestry: a process reaped
      // while its ancestry was read (an exec'd child that ends at once) has none left to
      // read, and must not be called a stranger for that.
      std::lock_guard<std::mutex> lock(mu_);
      ++stats_.processes;
      continue;
    }
    if (!descendant) {
      error = "a descriptor came from a process outside the recorded command";
    } else if (!IsUserfaultfd(uffd)) {
      error = "the descriptor received is not a userfaultfd";
    } else {
      uffdio_api api;
      std::memset(&api, 0, sizeof api);
      api.api = UFFD_API;
      api.features = UFFD_FEATURE_WP_ASYNC;
      if (::ioctl(uffd, UFFDIO_API, &api) != 0) {
        error = StrCat("UFFDIO_API with UFFD_FEATURE_WP_ASYNC failed (", std::strerror(errno),
                       "): asynchronous write-protect needs Linux 6.7 or later");
      }
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (!error.empty()) {
      ++stats_.refused;
      if (stats_.setup_error.empty()) stats_.setup_error = error;
      continue;
    }
    ++stats_.processes;
    processes_.push_back(Process{cred.pid, uffd, {}, {}});
    std::move(close_uffd).Cancel();
  }
}

namespace {

// One line of /proc/PID/maps (or the header line of a mapping in /proc/PID/smaps).
struct Mapping {
  uint64_t start = 0;
  uint64_t stop = 0;
  bool private_anonymous = false;  // heap, stacks, private anonymous mmap'd memory
  bool special = false;            // [vvar], [vvar_vclock], [vdso], [uprobes], [vsyscall]
};

bool ParseMapsLine(const std::string& line, Mapping* m) {
  unsigned long long start = 0, stop = 0, offset = 0, inode = 0;
  char perms[5] = {};
  int name_at = 0;
  if (std::sscanf(line.c_str(), "%llx-%llx %4s %llx %*s %llu %n", &start, &stop, perms, &offset,
                  &inode, &name_at) < 5) {
    return false;
  }
  const char* name = line.c_str() + name_at;
  m->start = start;
  m->stop = stop;
  m->private_anonymous =
      perms[3] == 'p' && inode == 0 &&
      (name[0] == '\0' || std::strncmp(name, "[heap]", 6) == 0 ||
       std::strncmp(name, "[stack]", 7) == 0 || std::strncmp(name, "[anon:", 6) == 0);
  m->special =
      inode == 0 &&
      (std::strncmp(name, "[vvar", 5) == 0 || std::strncmp(name, "[vdso]", 6) == 0 ||
       std::strncmp(name, "[uprobes]", 9) == 0 || std::strncmp(name, "[vsyscall]", 10) == 0);
  return true;
}

// Reads a /proc file whole; empty when it cannot be read (the process is gone).
std::string ReadProcFile(const std::string& path) {
  std::string text;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return text;
  char buf[16384];
  while (true) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return text;
}

// The user address space a registration may cover: from vm.mmap_min_addr (below it the
// kernel refuses a range) to the top of user space (TASK_SIZE: 2^47 - 4096 on x86-64,
// 2^56 - 4096 with five-level page tables, told apart by whether an address above 2^47
// can be mapped). No mapping can straddle either end.
std::pair<uint64_t, uint64_t> UserSpace() {
  static const std::pair<uint64_t, uint64_t> bounds = [] {
    const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
    uint64_t lowest = 65536;
    auto text = ReadFile("/proc/sys/vm/mmap_min_addr");
    if (text.ok()) {
      unsigned long long v = 0;
      if (std::sscanf(text->c_str(), "%llu", &v) == 1) lowest = v;
    }
    lowest = std::max<uint64_t>((lowest + page - 1) / page * page, page);
    uint64_t top = (uint64_t{1} << 47) - page;
#if defined(__x86_64__) && defined(MAP_FIXED_NOREPLACE)
    void* probe = ::mmap(reinterpret_cast<void*>(uint64_t{1} << 47), page, PROT_NONE,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (probe != MAP_FAILED) {
      ::munmap(probe, page);
      top = (uint64_t{1} << 56) - page;
    }
#endif
    return std::make_pair(lowest, top);
  }();
  return bounds;
}

// The mappings of /proc/PID/smaps that a registration cannot include: VM_DROPPABLE ("dp",
// refused by the kernel), without VM_MAYWRITE (no "mw": a read-only shared file mapping,
// refused), hugetlb ("ht": a range may not start or end inside one).
std::vector<std::pair<uint64_t, uint64_t>> Unregistrable(pid_t pid) {
  std::vector<std::pair<uint64_t, uint64_t>> out;
  const std::string text = ReadProcFile(StrCat("/proc/", pid, "/smaps"));
  Mapping current;
  bool have = false;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(pos, end - pos);
    pos = end + 1;
    if (line.compare(0, 8, "VmFlags:") == 0) {
      if (!have) continue;
      const std::string flags = line.substr(8) + " ";
      if (flags.find(" dp ") != std::string::npos || flags.find(" mw ") == std::string::npos ||
          flags.find(" ht ") != std::string::npos) {
        out.emplace_back(current.start, current.stop);
      }
      have = false;
    } else if (Mapping m; ParseMapsLine(line, &m)) {  // a mapping's first line
      current = m;
      have = true;
    }
  }
  return out;
}

}  // namespace

int WriteTracker::RegisterAll(Process& p, const std::vector<std::pair<uint64_t, uint64_t>>& special,
                              uint64_t* calls) {
  std::vector<std::pair<uint64_t, uint64_t>> holes = special;
  holes.insert(holes.end(), p.excluded.begin(), p.excluded.end());
  std::sort(holes.begin(), holes.end());
  const auto [lowest, top] = UserSpace();
  uint64_t from = lowest;
  int first_error = 0;
  auto register_range = [&](uint64_t a, uint64_t b) {
    if (b <= a) return;
    uffdio_register reg;
    std::memset(&reg, 0, sizeof reg);
    reg.range.start = a;
    reg.range.len = b - a;
    reg.mode = UFFDIO_REGISTER_MODE_WP;
    if (::ioctl(p.uffd, UFFDIO_REGISTER, &reg) == 0) {
      ++*calls;
    } else if (first_error == 0) {
      first_error = errno;
    }
  };
  for (const auto& [start, stop] : holes) {
    if (stop <= from) continue;
    if (start >= top) break;
    register_range(from, std::min(start, top));
    from = stop;
  }
  register_range(from, top);
  return first_error;
}

bool WriteTracker::Rearm(Process& p) {
  maps_buffer_ = ReadProcFile(StrCat("/proc/", p.pid, "/maps"));
  if (maps_buffer_.empty()) return false;  // the process has exited (a zombie has no maps)

  std::vector<Mapping> mappings;
  std::vector<std::pair<uint64_t, uint64_t>> special;
  size_t pos = 0;
  while (pos < maps_buffer_.size()) {
    size_t end = maps_buffer_.find('\n', pos);
    if (end == std::string::npos) end = maps_buffer_.size();
    Mapping m;
    if (ParseMapsLine(maps_buffer_.substr(pos, end - pos), &m)) {
      mappings.push_back(m);
      if (m.special) special.emplace_back(m.start, m.stop);
    }
    pos = end + 1;
  }
  if (options_.after_listing_for_test) options_.after_listing_for_test(p.pid);

  uint64_t registered = 0, failed = 0, protected_bytes = 0;
  // Registration, whenever the listing changed: every mapping the program has made since
  // the last one gets the flags, and neighbours merge again as they would without the
  // recorder. Never from the listing's ranges (see the file comment).
  if (maps_buffer_ != p.registered_listing) {
    // Leave out only exclusions that are still mapped as they were.
    std::erase_if(p.excluded, [&](const std::pair<uint64_t, uint64_t>& r) {
      return std::none_of(mappings.begin(), mappings.end(), [&](const Mapping& m) {
        return m.start == r.first && m.stop == r.second;
      });
    });
    int error = RegisterAll(p, special, &registered);
    if (error == EINVAL || error == EPERM) {
      // A mapping the kernel will not register: leave those out and try once more.
      p.excluded = Unregistrable(p.pid);
      error = RegisterAll(p, special, &registered);
    }
    if (error == ESRCH) return false;  // the address space is gone (exit or exec)
    if (error == EBUSY) {
      // The program registered memory with a userfaultfd of its own: leave it alone.
      std::lock_guard<std::mutex> lock(mu_);
      if (stats_.stopped_reason.empty()) {
        stats_.stopped_reason =
            StrCat("process ", p.pid,
                   " registers memory with a userfaultfd of its own: write tracking stopped for it "
                   "(record it with --rearm-us 0)");
      }
      return false;
    }
    if (error != 0) {
      ++failed;
    } else {
      p.registered_listing = maps_buffer_;
    }
  }

  // Write protection of the private anonymous mappings of the listing, runs of adjacent
  // ones as one range. It changes page-table entries only, whatever the listing's age.
  std::vector<std::pair<uint64_t, uint64_t>> runs;
  for (const Mapping& m : mappings) {
    if (!m.private_anonymous) continue;
    if (!runs.empty() && runs.back().second == m.start) {
      runs.back().second = m.stop;
    } else {
      runs.emplace_back(m.start, m.stop);
    }
  }
  for (const auto& [start, stop] : runs) {
    uffdio_writeprotect wp;
    std::memset(&wp, 0, sizeof wp);
    wp.range.start = start;
    wp.range.len = stop - start;
    wp.mode = UFFDIO_WRITEPROTECT_MODE_WP;
    if (::ioctl(p.uffd, UFFDIO_WRITEPROTECT, &wp) != 0) {
      if (errno == ESRCH) return false;
      ++failed;  // ENOENT: a mapping made since the registration; registered next round
      continue;
    }
    protected_bytes += stop - start;
  }
  std::lock_guard<std::mutex> lock(mu_);
  stats_.registered += registered;
  stats_.failed_calls += failed;
  stats_.protected_bytes += protected_bytes;
  return true;
}

void WriteTracker::Loop() {
  const uint64_t interval_ns = static_cast<uint64_t>(options_.interval_us) * 1000;
  uint64_t next_ns = MonotonicNs() + interval_ns;
  pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {thread_.wake_fd(), POLLIN, 0}};
  while (!thread_.stopping()) {
    const uint64_t now = MonotonicNs();
    const int timeout_ms =
        next_ns > now ? static_cast<int>((next_ns - now + 999'999) / 1'000'000) : 0;
    ::poll(fds, 2, timeout_ms);
    if (thread_.stopping()) break;
    if (fds[0].revents & POLLIN) {
      // A new process is protected at once, not at the next round.
      const size_t known = processes_.size();
      AcceptAll();
      for (size_t i = known; i < processes_.size(); ++i) Rearm(processes_[i]);
    }
    if (MonotonicNs() < next_ns) continue;
    const uint64_t begin = MonotonicNs();
    for (size_t i = 0; i < processes_.size();) {
      if (Rearm(processes_[i])) {
        ++i;
      } else {
        ::close(processes_[i].uffd);
        processes_.erase(processes_.begin() + static_cast<std::ptrdiff_t>(i));
      }
    }
    const uint64_t end = MonotonicNs();
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++stats_.rounds;
      stats_.busy_ns += end - begin;
    }
    next_ns = std::max(next_ns + interval_ns, end);
  }
}

}  // namespace tiergym::prof

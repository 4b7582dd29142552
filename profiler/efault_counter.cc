#include "profiler/efault_counter.h"

#include <fcntl.h>
#include <linux/perf_event.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>

#include "traces/base/file.h"
#include "traces/base/strings.h"

namespace tiergym::prof {
namespace {

// The id of the raw_syscalls:sys_exit tracepoint read through a tracefs mounted in a
// private mount namespace of a short-lived child, for a recorder with CAP_SYS_ADMIN on a
// system where tracefs is not mounted: nothing changes outside the child. Empty when that
// is not possible. The child makes system calls only (the recorder may have threads).
std::string SysExitIdFromPrivateTracefs() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return "";
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    return "";
  }
  if (pid == 0) {
    constexpr char kDir[] = "/sys/kernel/tracing";
    if (::unshare(CLONE_NEWNS) != 0 ||
        ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
        ::mount("tracefs", kDir, "tracefs", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0) {
      ::_exit(1);
    }
    const int fd = ::open("/sys/kernel/tracing/events/raw_syscalls/sys_exit/id", O_RDONLY);
    char buf[32];
    const ssize_t n = fd < 0 ? -1 : ::read(fd, buf, sizeof buf);
    if (n > 0 && ::write(fds[1], buf, static_cast<size_t>(n)) == n) ::_exit(0);
    ::_exit(1);
  }
  ::close(fds[1]);
  char buf[32];
  ssize_t n;
  do {
    n = ::read(fds[0], buf, sizeof buf);
  } while (n < 0 && errno == EINTR);
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (n <= 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return "";
  return {buf, static_cast<size_t>(n)};
}

// Counts the system calls of a process (its threads and children included: inherit)
// that return -EFAULT, with the raw_syscalls:sys_exit tracepoint filtered on `ret`. Only
// counting, no samples: the kernel increments a counter, the process sees nothing.

}  // namespace

absl::StatusOr<EfaultCounter> EfaultCounter::Open(pid_t pid) {
  std::string id_text;
  for (const char* dir : {"/sys/kernel/tracing", "/sys/kernel/debug/tracing"}) {
    auto text = ReadFile(StrCat(dir, "/events/raw_syscalls/sys_exit/id"));
    if (text.ok()) {
      id_text = *text;
      break;
    }
  }
  if (id_text.empty()) id_text = SysExitIdFromPrivateTracefs();
  if (id_text.empty()) {
    return absl::UnavailableError(
        "tracefs is not mounted and cannot be mounted privately without CAP_SYS_ADMIN: mount "
        "-t tracefs tracefs /sys/kernel/tracing to count them");
  }
  perf_event_attr attr;
  std::memset(&attr, 0, sizeof attr);
  attr.size = sizeof attr;
  attr.type = PERF_TYPE_TRACEPOINT;
  attr.config = std::strtoull(id_text.c_str(), nullptr, 10);
  attr.inherit = 1;
  // Off until the filter is in place and the command runs: an enabled event counts every
  // system call that ends, whatever it returns, until the filter is set (see the header).
  attr.disabled = 1;
  attr.enable_on_exec = 1;
  const int fd =
      static_cast<int>(::syscall(SYS_perf_event_open, &attr, pid, -1, -1, PERF_FLAG_FD_CLOEXEC));
  if (fd < 0) return ErrnoStatus(errno, "perf_event_open(raw_syscalls:sys_exit) refused");
  EfaultCounter c;
  c.fd_ = fd;
  if (::ioctl(fd, PERF_EVENT_IOC_SET_FILTER, "ret == -14") != 0) {
    return ErrnoStatus(errno, "the kernel refused the filter ret == -14 on sys_exit");
  }
  return c;
}

EfaultCounter::EfaultCounter(EfaultCounter&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}

EfaultCounter::~EfaultCounter() {
  if (fd_ >= 0) ::close(fd_);
}

int64_t EfaultCounter::Read() const {
  uint64_t n = 0;
  if (::read(fd_, &n, sizeof n) != static_cast<ssize_t>(sizeof n)) return -1;
  return static_cast<int64_t>(n);
}

}  // namespace tiergym::prof

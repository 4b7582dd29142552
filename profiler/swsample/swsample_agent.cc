// libtiergym_swsample.so: hands the recorder a userfaultfd of the recorded process.
//
// `tiergym-prof record --backend software` samples the software page-fault event. To see
// more than first touches, the recorder write-protects the process's anonymous memory
// again every interval through userfaultfd in asynchronous write-protect mode
// (UFFD_FEATURE_WP_ASYNC, Linux 6.7+): the next write to each page takes a minor fault
// that the kernel resolves by itself (no signal, no handler thread, no waiting, also for
// writes the kernel makes on the process's behalf), and the fault is the perf sample.
//
// A userfaultfd acts on the memory of the process that created it, so the process has to
// create it; that is all this agent does. Its constructor, run by the dynamic loader
// before main():
//   1. creates a userfaultfd (close-on-exec, non-blocking, user-mode faults only: the
//      mode an unprivileged process may use; asynchronous write-protect faults never reach
//      a handler, so nothing depends on who handles kernel-mode faults);
//   2. connects to the recorder's abstract Unix socket named by TIERGYM_SWSAMPLE_SOCKET
//      (non-blocking: a full or absent listener means no hand-over, never a wait) and
//      sends the descriptor with SCM_RIGHTS (MSG_NOSIGNAL: never SIGPIPE);
//   3. closes both descriptors and restores errno.
// After that the process holds nothing of the agent: no descriptor, no thread, no signal
// handler, no interposed function, no memory. Everything else (registering mappings,
// write-protecting them again each interval) is done by the recorder from outside through
// the descriptor it received, which works on the process's memory from any process.
//
// Every failure is silent (the program's output must not change): the recorder notices
// that no descriptor arrived and says so. Each exec'd image loads the agent again
// (LD_PRELOAD is inherited) and hands over its own descriptor; forked children without
// exec keep no write tracking (the kernel drops userfaultfd registrations on fork).
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace {

void SendDescriptor(const char* name, int fd) {
  sockaddr_un addr;
  std::memset(&addr, 0, sizeof addr);
  const size_t len = std::strlen(name);
  if (len == 0 || len + 1 > sizeof addr.sun_path) return;
  const int sock = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (sock < 0) return;
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path + 1, name, len);  // abstract: sun_path[0] == '\0'
  const socklen_t addr_len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + len);
  if (::connect(sock, reinterpret_cast<const sockaddr*>(&addr), addr_len) == 0) {
    char tag = 'u';
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
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &fd, sizeof fd);
    (void)::sendmsg(sock, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
  }
  ::close(sock);
}

__attribute__((constructor)) void HandOverUserfaultfd() {
  const int saved_errno = errno;
  const char* name = std::getenv("TIERGYM_SWSAMPLE_SOCKET");
  if (name != nullptr && *name != '\0') {
    long fd = ::syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK | UFFD_USER_MODE_ONLY);
    if (fd < 0 && errno == EINVAL) fd = ::syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
    if (fd >= 0) {
      SendDescriptor(name, static_cast<int>(fd));
      ::close(static_cast<int>(fd));
    }
  }
  errno = saved_errno;
}

}  // namespace

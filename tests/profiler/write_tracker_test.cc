// The write tracker's registrations never split a mapping of the program, however stale
// its listing of the mappings is. A child process hands the tracker its userfaultfd (as
// the agent does) and owns one mapping X in an otherwise empty stretch of its address
// space. Between the tracker's first listing (which shows X) and its registration, the
// child replaces X by a larger mapping Y that straddles both ends of X's old range (what a
// program does now and then while a busy machine leaves the tracker unscheduled: free a
// chunk, map a larger one). Registering X's old range from that listing would split Y in
// three, and the child's mremap of Y would fail with EFAULT until a later round merged
// the pieces again (the `alloc_churn` failures under load). After the registration, at the
// tracker's next listing, the child checks that Y is still one mapping, that it is
// registered (its VmFlags carry `uw`) and that mremap of all of it succeeds.
#include "profiler/write_tracker.h"

#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "gtest/gtest.h"

namespace tiergym::prof {
namespace {

constexpr size_t kMiB = size_t{1} << 20;

// What the agent does: a userfaultfd sent to the tracker's abstract socket.
bool HandOver(const std::string& name) {
  const long fd = ::syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK | UFFD_USER_MODE_ONLY);
  if (fd < 0) return false;
  const int sock = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  sockaddr_un addr;
  std::memset(&addr, 0, sizeof addr);
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path + 1, name.data(), name.size());
  const auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  if (::connect(sock, reinterpret_cast<const sockaddr*>(&addr), len) != 0) return false;
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
  const int ufd = static_cast<int>(fd);
  std::memcpy(CMSG_DATA(c), &ufd, sizeof ufd);
  const bool sent = ::sendmsg(sock, &msg, MSG_NOSIGNAL) == 1;
  ::close(sock);
  ::close(ufd);
  return sent;
}

// One byte through a pipe, waiting at most 10 s: false on a timeout or a closed pipe.
bool Receive(int fd, char* byte) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, 10'000) == 1 && ::read(fd, byte, 1) == 1;
}
bool Send(int fd, char byte) { return ::write(fd, &byte, 1) == 1; }

// The lines of /proc/self/smaps for the mappings overlapping [start, stop): each mapping's
// first line and its VmFlags line.
std::string SmapsOf(uintptr_t start, uintptr_t stop) {
  std::ifstream in("/proc/self/smaps");
  std::string line, out;
  bool inside = false;
  while (std::getline(in, line)) {
    unsigned long a = 0, b = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx ", &a, &b) == 2 && line.find(' ') > line.find('-')) {
      inside = a < stop && b > start;
      if (inside) out += line.substr(0, line.find(' ')) + " ";
    } else if (inside && line.compare(0, 8, "VmFlags:") == 0) {
      out += line + "\n";
    }
  }
  return out;
}

// The child: X, hand-over, then on 'r' replace X by Y, on 'c' check Y. Exit 0 when Y is
// one registered mapping that mremap moves whole; 10+ otherwise (and prints why).
[[noreturn]] void Child(const std::string& socket_name, int commands, int answers) {
  char* base =
      static_cast<char*>(::mmap(nullptr, 8 * kMiB, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  if (base == MAP_FAILED) ::_exit(10);
  ::munmap(base, 8 * kMiB);  // an empty stretch: nothing else of the child maps there
  char* x = base + 3 * kMiB;
  if (::mmap(x, kMiB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1,
             0) != x) {
    ::_exit(11);
  }
  std::memset(x, 1, kMiB);
  if (!HandOver(socket_name)) ::_exit(12);
  char* y = base + 2 * kMiB;  // [2, 5) MiB: straddles both ends of X's [3, 4)
  char command = 0;
  while (Receive(commands, &command)) {
    if (command == 'r') {
      ::munmap(x, kMiB);
      if (::mmap(y, 3 * kMiB, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0) != y) {
        ::_exit(13);
      }
      std::memset(y, 2, 3 * kMiB);
      Send(answers, 'k');
    } else if (command == 'c') {
      const std::string smaps =
          SmapsOf(reinterpret_cast<uintptr_t>(y), reinterpret_cast<uintptr_t>(y + 3 * kMiB));
      std::fprintf(stderr, "the child's mappings over Y:\n%s", smaps.c_str());
      int lines = 0;
      for (char ch : smaps) lines += ch == '\n';
      const bool registered = smaps.find(" uw") != std::string::npos;
      void* moved = ::mremap(y, 3 * kMiB, 6 * kMiB, MREMAP_MAYMOVE);
      if (moved == MAP_FAILED) std::perror("mremap of Y");
      Send(answers, 'k');
      ::_exit(lines != 1 ? 14 : !registered ? 15 : moved == MAP_FAILED ? 16 : 0);
    }
  }
  ::_exit(17);
}

TEST(WriteTrackerTest, NeverSplitsAMappingMadeAfterItsListing) {
  int commands[2], answers[2];
  ASSERT_EQ(::pipe2(commands, O_CLOEXEC), 0);
  ASSERT_EQ(::pipe2(answers, O_CLOEXEC), 0);
  std::atomic<int> listings{0};
  std::atomic<bool> replaced{false}, checked{false};
  WriteTrackerOptions options;
  options.interval_us = 2000;
  options.after_listing_for_test = [&](pid_t) {
    char answer = 0;
    const int n = ++listings;
    if (n == 1) {  // the listing shows X; the registration follows this call
      replaced = Send(commands[1], 'r') && Receive(answers[0], &answer);
    } else if (n == 2) {  // the first registration is done; the next is yet to come
      checked = Send(commands[1], 'c') && Receive(answers[0], &answer);
    }
  };
  auto tracker = WriteTracker::Listen(options);
  ASSERT_TRUE(tracker.ok()) << tracker.status();
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) Child((*tracker)->socket_name(), commands[0], answers[1]);
  (*tracker)->Start(child);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  (*tracker)->Stop();
  const WriteTrackerStats stats = (*tracker)->stats();
  if (!stats.setup_error.empty()) GTEST_SKIP() << stats.setup_error;
  ASSERT_TRUE(WIFEXITED(status)) << status;
  if (WEXITSTATUS(status) == 12) GTEST_SKIP() << "userfaultfd refused here";
  EXPECT_TRUE(replaced.load());
  EXPECT_TRUE(checked.load());
  EXPECT_EQ(WEXITSTATUS(status), 0)
      << "14: Y was split; 15: Y not registered; 16: mremap of Y failed; 17: no command";
  EXPECT_EQ(stats.processes, 1u);
  EXPECT_GE(stats.registered, 1u);
  for (int fd : {commands[0], commands[1], answers[0], answers[1]}) ::close(fd);
}

// A child that maps what the kernel will not register (a read-only shared file mapping:
// no VM_MAYWRITE) beside anonymous memory, hands its descriptor over, waits for the
// tracker's third listing and reports whether its anonymous memory got registered and its
// file mapping did not. With `own_userfaultfd`, it first registers the anonymous memory
// with a userfaultfd of its own, which must stay as it is: the tracker gives such a
// process up (and says so) rather than register around the program's own registrations.
int RunChildWith(bool own_userfaultfd, WriteTrackerStats* stats) {
  int go[2];
  if (::pipe2(go, O_CLOEXEC) != 0) return -1;
  std::atomic<int> listings{0};
  WriteTrackerOptions options;
  options.interval_us = 2000;
  options.after_listing_for_test = [&](pid_t) {
    if (++listings == 3 && !own_userfaultfd) Send(go[1], 'c');
  };
  auto tracker = WriteTracker::Listen(options);
  if (!tracker.ok()) return -1;
  const pid_t child = ::fork();
  if (child < 0) return -1;
  if (child == 0) {
    const int file = ::open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
    void* shared = ::mmap(nullptr, 4096, PROT_READ, MAP_SHARED, file, 0);
    char* anon = static_cast<char*>(
        ::mmap(nullptr, kMiB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    if (shared == MAP_FAILED || anon == MAP_FAILED) ::_exit(10);
    std::memset(anon, 1, kMiB);
    if (own_userfaultfd) {
      const long own = ::syscall(SYS_userfaultfd, O_CLOEXEC | UFFD_USER_MODE_ONLY);
      uffdio_api api{UFFD_API, 0, 0};
      uffdio_register reg;
      std::memset(&reg, 0, sizeof reg);
      reg.range.start = reinterpret_cast<uintptr_t>(anon);
      reg.range.len = kMiB;
      reg.mode = UFFDIO_REGISTER_MODE_MISSING;
      if (own < 0 || ::ioctl(static_cast<int>(own), UFFDIO_API, &api) != 0 ||
          ::ioctl(static_cast<int>(own), UFFDIO_REGISTER, &reg) != 0) {
        ::_exit(12);
      }
    }
    if (!HandOver((*tracker)->socket_name())) ::_exit(12);
    char c = 0;
    if (!Receive(go[0], &c)) ::_exit(17);
    const uintptr_t a = reinterpret_cast<uintptr_t>(anon);
    const uintptr_t f = reinterpret_cast<uintptr_t>(shared);
    const std::string anon_flags = SmapsOf(a, a + kMiB), file_flags = SmapsOf(f, f + 4096);
    std::fprintf(stderr, "anonymous: %sfile: %s", anon_flags.c_str(), file_flags.c_str());
    if (own_userfaultfd) {  // its own registration (missing mode) as it was, nothing of ours
      ::_exit(anon_flags.find(" um") != std::string::npos &&
                      anon_flags.find(" uw") == std::string::npos
                  ? 0
                  : 15);
    }
    ::_exit(anon_flags.find(" uw") != std::string::npos &&
                    file_flags.find(" uw") == std::string::npos
                ? 0
                : 15);
  }
  (*tracker)->Start(child);
  if (own_userfaultfd) {  // the tracker gives the child up: look once it has
    for (int i = 0; i < 1000 && (*tracker)->stats().stopped_reason.empty(); ++i) {
      ::poll(nullptr, 0, 10);
    }
    Send(go[1], 'c');
  }
  int status = 0;
  const pid_t waited = ::waitpid(child, &status, 0);
  (*tracker)->Stop();
  *stats = (*tracker)->stats();
  ::close(go[0]);
  ::close(go[1]);
  return waited == child && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(WriteTrackerTest, RegistersAroundMappingsTheKernelRefuses) {
  WriteTrackerStats stats;
  const int code = RunChildWith(false, &stats);
  if (!stats.setup_error.empty()) GTEST_SKIP() << stats.setup_error;
  if (code == 12) GTEST_SKIP() << "userfaultfd refused here";
  EXPECT_EQ(code, 0) << "15: the anonymous memory is not registered or the file mapping is";
  EXPECT_TRUE(stats.stopped_reason.empty()) << stats.stopped_reason;
}

TEST(WriteTrackerTest, LeavesAProgramThatUsesUserfaultfdItselfAlone) {
  WriteTrackerStats stats;
  const int code = RunChildWith(true, &stats);
  if (!stats.setup_error.empty()) GTEST_SKIP() << stats.setup_error;
  if (code == 12) GTEST_SKIP() << "userfaultfd refused here";
  EXPECT_EQ(code, 0) << "15: the child's own registration changed; 17: no listing came";
  EXPECT_NE(stats.stopped_reason.find("userfaultfd of its own"), std::string::npos)
      << stats.stopped_reason;
}

}  // namespace
}  // namespace tiergym::prof

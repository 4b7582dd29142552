// The recorder's harm check counts the EFAULT returns of the command and nothing else.
//
// The process it is opened on is the recorder's launcher child, which runs recorder code
// until it execs the command (on a loaded machine, just when the counter is being opened:
// set_robust_list, closes). Those calls are not the command's, and an
// event enabled before its `ret == -14` filter was set counted them whatever they
// returned: "EFAULT returns: 1" to "4" in recordings where no call failed. Here the child
// makes failing calls of both kinds (EAGAIN and EFAULT) before exec, the whole time the
// counter is opened and afterwards, then execs a program that makes exactly one read into
// a bad pointer: the count must be 1.
#include "profiler/efault_counter.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

#include "gtest/gtest.h"

namespace tiergym::prof {
namespace {

const std::string kPrograms = TIERGYM_PROF_PROGRAMS_DIR;

// Lets the child waiting on `go_fd` go on (one byte) and waits for it: its wait status, or
// -1 when the byte could not be written or the child not waited for.
int ReleaseAndWait(int go_fd, pid_t pid) {
  const char byte = 1;
  const bool released = ::write(go_fd, &byte, 1) == 1;
  ::close(go_fd);
  int status = 0;
  if (::waitpid(pid, &status, 0) != pid || !released) return -1;
  return status;
}

// Whether the machine cannot count EFAULT returns at all (no tracefs to be had).
bool CannotCount(const absl::StatusOr<EfaultCounter>& counter) {
  return !counter.ok() && counter.status().code() == absl::StatusCode::kUnavailable;
}

TEST(EfaultCounterTest, CountsTheCommandsEfaultReturnsAndNoCallBeforeItsExec) {
  const std::string program = kPrograms + "/prof-test-syscall_buffers";
  int go[2];
  ASSERT_EQ(::pipe2(go, O_CLOEXEC), 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::close(go[1]);
    ::fcntl(go[0], F_SETFL, O_NONBLOCK);
    const int null_fd = ::open("/dev/null", O_RDWR);
    if (null_fd < 0 || ::dup2(null_fd, STDOUT_FILENO) < 0) ::_exit(126);
    const int zero = ::open("/dev/zero", O_RDONLY | O_CLOEXEC);
    void* volatile bad = reinterpret_cast<void*>(16);
    char byte = 0;
    // Until the go byte: reads that fail with EAGAIN (empty pipe) and with EFAULT.
    while (::read(go[0], &byte, 1) != 1) {
      if (::read(zero, bad, 8) >= 0) ::_exit(125);
    }
    ::execl(program.c_str(), program.c_str(), "--bad-pointer", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(go[0]);
  auto counter = EfaultCounter::Open(pid);
  // Let the child fail some more calls with the counter open.
  ::usleep(20 * 1000);
  const int status = ReleaseAndWait(go[1], pid);
  ASSERT_NE(status, -1);
  if (CannotCount(counter))
    GTEST_SKIP() << "EFAULT returns cannot be counted here: " << counter.status();
  ASSERT_TRUE(counter.ok()) << counter.status();
  ASSERT_TRUE(WIFEXITED(status)) << status;
  ASSERT_EQ(WEXITSTATUS(status), 0) << "the child failed before or at exec";
  EXPECT_EQ(counter->Read(), 1);
}

TEST(EfaultCounterTest, CountsNothingForACommandWhoseCallsAllSucceed) {
  int go[2];
  ASSERT_EQ(::pipe2(go, O_CLOEXEC), 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::close(go[1]);
    char byte = 0;
    if (::read(go[0], &byte, 1) != 1) ::_exit(126);
    ::execl("/bin/sh", "sh", "-c", "true; (true) && exit 0", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(go[0]);
  auto counter = EfaultCounter::Open(pid);
  const int status = ReleaseAndWait(go[1], pid);
  ASSERT_NE(status, -1);
  if (CannotCount(counter))
    GTEST_SKIP() << "EFAULT returns cannot be counted here: " << counter.status();
  ASSERT_TRUE(counter.ok()) << counter.status();
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_EQ(counter->Read(), 0);
}

}  // namespace
}  // namespace tiergym::prof

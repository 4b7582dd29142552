// Tests of libphasemark.so: the anchor mode (Linux) and the system-call mode (McKernel),
// chosen by TIERGYM_PHASEMARK when the library loads. On Linux the McKernel system call
// number is unassigned, so a call in system-call mode comes back with ENOSYS: that shows
// the call was made.
#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <string>

#include "gtest/gtest.h"
#include "kernel_patches/abi/tiergym_mckernel.h"

namespace {

const std::string kLib = std::string(TIERGYM_BIN_DIR) + "/../lib/libphasemark.so";

// Loads the library in a child with TIERGYM_PHASEMARK=`mode` (nullptr: unset), calls
// phasemark() and exits with 10 + uses_syscall + 2 * (errno == ENOSYS), or 1 on a failure.
int ChildResult(const char* mode) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (mode != nullptr) {
      ::setenv("TIERGYM_PHASEMARK", mode, 1);
    } else {
      ::unsetenv("TIERGYM_PHASEMARK");
    }
    void* h = ::dlopen(kLib.c_str(), RTLD_NOW);
    if (h == nullptr) ::_exit(1);
    auto mark = reinterpret_cast<void (*)()>(::dlsym(h, "phasemark"));
    auto uses = reinterpret_cast<int (*)()>(::dlsym(h, "phasemark_uses_syscall"));
    if (mark == nullptr || uses == nullptr) ::_exit(1);
    errno = 0;
    mark();
    const int enosys = errno == ENOSYS;
    ::_exit(10 + uses() + 2 * enosys);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(PhasemarkTest, IsAnAnchorOnLinuxByDefault) {
  EXPECT_EQ(ChildResult(nullptr), 10);
  EXPECT_EQ(ChildResult("anchor"), 10);
}

TEST(PhasemarkTest, IssuesTheMcKernelSystemCallWhenAsked) {
  // The number is McKernel's; on Linux it must be unassigned for this test to mean much.
  ASSERT_GT(TIERGYM_PHASEMARK_SYSCALL, 547) << "the number collides with a Linux system call";
  EXPECT_EQ(ChildResult("syscall"), 10 + 1 + 2);
}

TEST(PhasemarkTest, ExportsOnlyItsCAbi) {
  void* h = ::dlopen(kLib.c_str(), RTLD_NOW);
  ASSERT_NE(h, nullptr) << ::dlerror();
  EXPECT_NE(::dlsym(h, "phasemark"), nullptr);
  EXPECT_NE(::dlsym(h, "phasemark_uses_syscall"), nullptr);
  EXPECT_EQ(::dlsym(h, "phasemark_init"), nullptr);  // the constructor stays private
  ::dlclose(h);
}

}  // namespace

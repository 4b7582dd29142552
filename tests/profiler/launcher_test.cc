// Tests of starting commands held before exec: release, exec failures, NUMA binding, and
// the process handling both backends rely on (statuses, signals, stdin/stdout, reaping).
#include "profiler/launcher.h"

#include <numa.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tiergym::prof {
namespace {

using ::testing::HasSubstr;

int ExitCode(const LaunchOptions& o) {
  auto child = StoppedChild::Spawn(o);
  EXPECT_TRUE(child.ok()) << child.status();
  if (!child.ok()) return -1;
  EXPECT_TRUE(child->Release().ok());
  auto status = child->Wait();
  EXPECT_TRUE(status.ok());
  return WIFEXITED(*status) ? WEXITSTATUS(*status) : -1;
}

TEST(StoppedChildTest, RunsTheCommandOnlyWhenReleased) {
  const std::string marker = "/tmp/tiergym_launcher_test." + std::to_string(::getpid());
  LaunchOptions o;
  o.argv = {"sh", "-c", "touch " + marker};
  auto child = StoppedChild::Spawn(o);
  ASSERT_TRUE(child.ok()) << child.status();
  ::usleep(100 * 1000);
  EXPECT_NE(::access(marker.c_str(), F_OK), 0) << "the command ran before Release()";
  ASSERT_TRUE(child->Release().ok());
  auto status = child->Wait();
  ASSERT_TRUE(status.ok());
  EXPECT_EQ(DescribeWaitStatus(*status), "exit 0");
  EXPECT_EQ(::access(marker.c_str(), F_OK), 0);
  ::unlink(marker.c_str());
}

TEST(StoppedChildTest, ReportsTheExitStatusAndTheSignalFaithfully) {
  LaunchOptions o;
  o.argv = {"sh", "-c", "exit 77"};
  EXPECT_EQ(ExitCode(o), 77);
  o.argv = {"sh", "-c", "kill -SEGV $$"};
  auto child = StoppedChild::Spawn(o);
  ASSERT_TRUE(child.ok()) << child.status();
  ASSERT_TRUE(child->Release().ok());
  auto status = child->Wait();
  ASSERT_TRUE(status.ok());
  ASSERT_TRUE(WIFSIGNALED(*status));
  EXPECT_EQ(WTERMSIG(*status), SIGSEGV);
  EXPECT_THAT(DescribeWaitStatus(*status), HasSubstr("signal 11 ("));
}

TEST(StoppedChildTest, PassesStandardInputAndOutputThrough) {
  int in[2], out[2];
  ASSERT_EQ(::pipe(in), 0);
  ASSERT_EQ(::pipe(out), 0);
  const int saved_in = ::dup(STDIN_FILENO), saved_out = ::dup(STDOUT_FILENO);
  ::dup2(in[0], STDIN_FILENO);
  ::dup2(out[1], STDOUT_FILENO);
  LaunchOptions o;
  o.argv = {"sh", "-c", "read line; echo \"got $line\""};
  auto child = StoppedChild::Spawn(o);
  ::dup2(saved_in, STDIN_FILENO);
  ::dup2(saved_out, STDOUT_FILENO);
  ::close(saved_in);
  ::close(saved_out);
  ::close(in[0]);
  ::close(out[1]);
  ASSERT_TRUE(child.ok()) << child.status();
  ASSERT_EQ(::write(in[1], "hello\n", 6), 6);
  ::close(in[1]);
  ASSERT_TRUE(child->Release().ok());
  auto status = child->Wait();
  ASSERT_TRUE(status.ok());
  EXPECT_EQ(DescribeWaitStatus(*status), "exit 0");
  char buf[64] = {};
  const ssize_t n = ::read(out[0], buf, sizeof buf - 1);
  ::close(out[0]);
  EXPECT_EQ(std::string(buf, n > 0 ? static_cast<size_t>(n) : 0), "got hello\n");
}

TEST(StoppedChildTest, LeavesNoChildBehindWhateverHappens) {
  {
    LaunchOptions o;
    o.argv = {"true"};
    EXPECT_EQ(ExitCode(o), 0);
  }
  {
    LaunchOptions o;
    o.argv = {"/nonexistent/tiergym-no-such-program"};
    auto child = StoppedChild::Spawn(o);
    ASSERT_TRUE(child.ok());
    EXPECT_FALSE(child->Release().ok());
  }
  {
    LaunchOptions o;
    o.argv = {"sleep", "100"};
    auto released = StoppedChild::Spawn(o);
    ASSERT_TRUE(released.ok());
    ASSERT_TRUE(released->Release().ok());  // destroyed while running: killed and reaped
    auto held = StoppedChild::Spawn(o);
    ASSERT_TRUE(held.ok());  // destroyed before release
  }
  // Every child was reaped: none is left, not even a zombie.
  errno = 0;
  EXPECT_EQ(::waitpid(-1, nullptr, WNOHANG), -1);
  EXPECT_EQ(errno, ECHILD);
}

TEST(StoppedChildTest, ReportsACommandThatCannotBeFound) {
  LaunchOptions o;
  o.argv = {"/nonexistent/tiergym-no-such-program"};
  auto child = StoppedChild::Spawn(o);
  ASSERT_TRUE(child.ok()) << child.status();
  absl::Status s = child->Release();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;
}

TEST(StoppedChildTest, SetsTheEnvironmentAndTurnsAslrOff) {
  LaunchOptions o;
  o.argv = {"sh", "-c", "test \"$TIERGYM_X\" = 42 && grep -q '^Mems_allowed' /proc/self/status"};
  o.env = {{"TIERGYM_X", "42"}};
  EXPECT_EQ(ExitCode(o), 0);
  // personality(ADDR_NO_RANDOMIZE): bit 0x0040000 of /proc/self/personality.
  o.argv = {"sh", "-c", "p=$(cat /proc/self/personality); test $((0x$p & 0x40000)) -ne 0"};
  EXPECT_EQ(ExitCode(o), 0);
  o.keep_aslr = true;
  EXPECT_EQ(ExitCode(o), 1);
}

TEST(StoppedChildTest, BindsMemoryToTheNode) {
  if (numa_available() < 0) GTEST_SKIP() << "no NUMA support in this kernel";
  LaunchOptions o;
  o.membind_node = 0;
  // numa_maps lists the policy of each mapping: "bind:0" once the task policy is MPOL_BIND.
  o.argv = {"sh", "-c", "grep -q 'bind:0' /proc/self/numa_maps"};
  EXPECT_EQ(ExitCode(o), 0);
  o.membind_node = -1;
  EXPECT_EQ(ExitCode(o), 1);
}

TEST(StoppedChildTest, RefusesANodeThatDoesNotExist) {
  if (numa_available() < 0) GTEST_SKIP() << "no NUMA support in this kernel";
  LaunchOptions o;
  o.argv = {"true"};
  o.membind_node = numa_max_node() + 1;
  auto child = StoppedChild::Spawn(o);
  EXPECT_EQ(child.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(child.status().message()), HasSubstr("does not exist"));
}

TEST(StoppedChildTest, KillsAnUnreleasedChildWhenDestroyed) {
  pid_t pid = 0;
  {
    LaunchOptions o;
    o.argv = {"sleep", "100"};
    auto child = StoppedChild::Spawn(o);
    ASSERT_TRUE(child.ok());
    pid = child->pid();
  }
  EXPECT_NE(::kill(pid, 0), 0) << "the child outlived its owner";
}

TEST(ParseCpuListTest, ReadsRangesAndSingles) {
  auto cpus = ParseCpuList("0-2,5,7-8");
  ASSERT_TRUE(cpus.ok());
  EXPECT_EQ(*cpus, (std::vector<int>{0, 1, 2, 5, 7, 8}));
  EXPECT_FALSE(ParseCpuList("1-").ok());
  EXPECT_FALSE(ParseCpuList("a").ok());
  EXPECT_FALSE(ParseCpuList("3-1").ok());
}

TEST(ResolveCommandTest, SearchesPathAndResolvesLinks) {
  const std::string sh = ResolveCommand("sh");
  ASSERT_FALSE(sh.empty());
  EXPECT_EQ(sh[0], '/');
  EXPECT_EQ(::access(sh.c_str(), X_OK), 0);
  EXPECT_EQ(ResolveCommand("tiergym-no-such-program"), "");
}

}  // namespace
}  // namespace tiergym::prof

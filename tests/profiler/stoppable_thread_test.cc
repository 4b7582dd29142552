#include "profiler/stoppable_thread.h"

#include <poll.h>

#include <atomic>
#include <chrono>

#include "gtest/gtest.h"

namespace tiergym::prof {
namespace {

// A loop that would sleep in poll() for a minute unless its wake descriptor wakes it;
// counts its rounds and says when it has ended.
void SleepUntilStopped(StoppableThread* thread, std::atomic<int>* rounds,
                       std::atomic<bool>* ended) {
  pollfd fd{thread->wake_fd(), POLLIN, 0};
  while (!thread->stopping()) {
    ::poll(&fd, 1, 60'000);
    ++*rounds;
  }
  *ended = true;
}

TEST(StoppableThreadTest, StopWakesALoopBlockedInPollAndJoinsIt) {
  StoppableThread thread;
  ASSERT_GE(thread.wake_fd(), 0);
  std::atomic<int> rounds{0};
  std::atomic<bool> ended{false};
  thread.Start([&] { SleepUntilStopped(&thread, &rounds, &ended); });
  ::poll(nullptr, 0, 50);  // the loop is asleep in poll by now
  const auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(thread.Stop());
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_TRUE(ended.load());
  EXPECT_LE(rounds.load(), 1);
  EXPECT_TRUE(thread.stopping());
}

TEST(StoppableThreadTest, StopWithoutARunningThreadSaysSo) {
  StoppableThread never_started;
  EXPECT_FALSE(never_started.Stop());
  StoppableThread stopped;
  stopped.Start([] {});
  EXPECT_TRUE(stopped.Stop());
  EXPECT_FALSE(stopped.Stop());
}

TEST(StoppableThreadTest, ARestartedLoopSleepsUntilItsOwnStop) {
  StoppableThread thread;
  std::atomic<int> rounds{0};
  std::atomic<bool> ended{false};
  thread.Start([&] { SleepUntilStopped(&thread, &rounds, &ended); });
  ASSERT_TRUE(thread.Stop());
  // The first Stop's wake-up is consumed: the second loop sleeps until the second Stop.
  std::atomic<int> second{0};
  std::atomic<bool> second_ended{false};
  thread.Start([&] { SleepUntilStopped(&thread, &second, &second_ended); });
  ::poll(nullptr, 0, 50);
  EXPECT_EQ(second.load(), 0);
  EXPECT_FALSE(second_ended.load());
  ASSERT_TRUE(thread.Stop());
  EXPECT_TRUE(second_ended.load());
}

TEST(StoppableThreadTest, TheDestructorStopsTheThread) {
  std::atomic<int> rounds{0};
  std::atomic<bool> ended{false};
  {
    StoppableThread thread;
    thread.Start([&] { SleepUntilStopped(&thread, &rounds, &ended); });
    ::poll(nullptr, 0, 20);
  }
  EXPECT_TRUE(ended.load());
}

}  // namespace
}  // namespace tiergym::prof

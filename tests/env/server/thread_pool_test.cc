// ThreadPool::ParallelFor: every index once, on the caller and at most max_helpers workers.
#include "env/server/thread_pool.h"

#include <chrono>
#include <cstdint>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace tiergym::env {
namespace {

// The threads that ran a ParallelFor of `n` slow-ish indices, and how often each index ran.
struct LoopRun {
  std::set<std::thread::id> threads;
  std::vector<int> calls;
};

LoopRun RunLoop(ThreadPool& pool, size_t n, size_t max_helpers) {
  LoopRun run;
  run.calls.assign(n, 0);
  std::mutex mu;
  pool.ParallelFor(
      n,
      [&](size_t i) {
        std::this_thread::sleep_for(std::chrono::microseconds(200));
        std::lock_guard<std::mutex> lock(mu);
        run.threads.insert(std::this_thread::get_id());
        ++run.calls[i];
      },
      max_helpers);
  return run;
}

TEST(ThreadPoolTest, ParallelForCallsEveryIndexOnce) {
  ThreadPool pool(3);
  const LoopRun run = RunLoop(pool, 200, SIZE_MAX);
  for (size_t i = 0; i < run.calls.size(); ++i) EXPECT_EQ(run.calls[i], 1) << i;
  EXPECT_LE(run.threads.size(), 4u);
}

TEST(ThreadPoolTest, ParallelForUsesAtMostMaxHelpersWorkers) {
  ThreadPool pool(3);
  const LoopRun alone = RunLoop(pool, 50, 0);
  EXPECT_EQ(alone.threads, std::set<std::thread::id>{std::this_thread::get_id()})
      << "no helper: the caller runs every index";
  for (int c : alone.calls) EXPECT_EQ(c, 1);
  const LoopRun one = RunLoop(pool, 200, 1);
  EXPECT_LE(one.threads.size(), 2u) << "the caller and one worker at most";
  for (int c : one.calls) EXPECT_EQ(c, 1);
}

}  // namespace
}  // namespace tiergym::env

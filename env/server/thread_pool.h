// A fixed pool of worker threads: the server's request workers and the parallel steps of
// step_batch.
//
// Submit() queues a task; ParallelFor() runs a loop body over [0, n) on the calling
// thread and on idle workers. ParallelFor may be called from a pool thread (a worker
// serving a step_batch): the caller works through the indices itself and only waits for
// indices other threads have already started, so it never waits for a queued task and
// cannot deadlock however busy the pool is. Thread-safe.
#ifndef TIERGYM_ENV_SERVER_THREAD_POOL_H_
#define TIERGYM_ENV_SERVER_THREAD_POOL_H_

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace tiergym::env {

class ThreadPool {
 public:
  // REQUIRES: threads >= 1.
  explicit ThreadPool(int threads);
  // Runs the tasks already queued, then joins the threads.
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  void Submit(std::function<void()> task);
  int size() const { return static_cast<int>(threads_.size()); }

  // Calls body(i) once for every i in [0, n), concurrently, and returns when all calls
  // have returned. body must not throw. At most `max_helpers` pool threads help the caller
  // (a caller outside the pool that stands for one of its threads passes size() - 1).
  void ParallelFor(size_t n, const std::function<void(size_t)>& body,
                   size_t max_helpers = SIZE_MAX);

 private:
  void WorkerLoop();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace tiergym::env

#endif  // TIERGYM_ENV_SERVER_THREAD_POOL_H_

#include "env/server/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <memory>

namespace tiergym::env {

ThreadPool::ThreadPool(int threads) {
  threads_.reserve(std::max(1, threads));
  for (int i = 0; i < std::max(1, threads); ++i) threads_.emplace_back([this] { WorkerLoop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void ThreadPool::Submit(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    tasks_.push_back(std::move(task));
  }
  cv_.notify_one();
}

void ThreadPool::WorkerLoop() {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stopping_ || !tasks_.empty(); });
      if (tasks_.empty()) return;  // stopping and drained
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task();
  }
}

namespace {

// Shared between the caller of ParallelFor and its helpers; helpers that start after every
// index was claimed touch nothing but the counters.
struct LoopState {
  std::atomic<size_t> next{0};
  size_t done = 0;  // guarded by mu
  size_t n = 0;
  const std::function<void(size_t)>* body = nullptr;
  std::mutex mu;
  std::condition_variable cv;

  void Work() {
    size_t finished = 0;
    for (size_t i; (i = next.fetch_add(1, std::memory_order_relaxed)) < n;) {
      (*body)(i);
      ++finished;
    }
    if (finished == 0) return;
    std::lock_guard<std::mutex> lock(mu);
    done += finished;
    if (done == n) cv.notify_all();
  }
};

}  // namespace

void ThreadPool::ParallelFor(size_t n, const std::function<void(size_t)>& body,
                             size_t max_helpers) {
  if (n == 0) return;
  if (n == 1 || max_helpers == 0) {
    for (size_t i = 0; i < n; ++i) body(i);
    return;
  }
  auto state = std::make_shared<LoopState>();
  state->n = n;
  state->body = &body;
  const size_t helpers = std::min({n - 1, threads_.size(), max_helpers});
  for (size_t h = 0; h < helpers; ++h) Submit([state] { state->Work(); });
  state->Work();
  std::unique_lock<std::mutex> lock(state->mu);
  state->cv.wait(lock, [&] { return state->done == n; });
}

}  // namespace tiergym::env

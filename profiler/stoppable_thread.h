// A thread that waits in poll() and that another thread stops at once, for the recorder's
// ring drainer and the software backend's write tracker: Stop() sets the flag the loop
// checks, wakes the loop's poll through an eventfd (wake_fd(), which the loop adds to its
// poll set) and joins.
//
// Thread-safety: Start/Stop from one thread; stopping() and wake_fd() from the loop.
#ifndef TIERGYM_PROFILER_STOPPABLE_THREAD_H_
#define TIERGYM_PROFILER_STOPPABLE_THREAD_H_

#include <atomic>
#include <functional>
#include <thread>

namespace tiergym::prof {

class StoppableThread {
 public:
  // Makes the eventfd (-1 if it cannot be made: Stop() then waits for the loop's timeout).
  StoppableThread();
  // Stops the thread, then closes the eventfd.
  ~StoppableThread();
  StoppableThread(const StoppableThread&) = delete;
  StoppableThread& operator=(const StoppableThread&) = delete;

  // Runs `loop` on a new thread; it should return soon after stopping() turns true.
  void Start(std::function<void()> loop);
  // Asks the loop to stop, wakes it and joins it. False when no thread was running (never
  // started, or already stopped).
  bool Stop();

  bool stopping() const { return stop_.load(); }
  // Becomes readable when Stop() is called.
  int wake_fd() const { return wake_fd_; }

 private:
  int wake_fd_ = -1;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace tiergym::prof

#endif  // TIERGYM_PROFILER_STOPPABLE_THREAD_H_

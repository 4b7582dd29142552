#include "profiler/stoppable_thread.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cstdint>
#include <utility>

namespace tiergym::prof {

StoppableThread::StoppableThread() : wake_fd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {}

StoppableThread::~StoppableThread() {
  Stop();
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

void StoppableThread::Start(std::function<void()> loop) {
  uint64_t pending = 0;  // a wake-up left by an earlier Stop()
  ssize_t ignored = ::read(wake_fd_, &pending, sizeof pending);
  (void)ignored;
  stop_ = false;
  thread_ = std::thread(std::move(loop));
}

bool StoppableThread::Stop() {
  if (!thread_.joinable()) return false;
  stop_ = true;
  const uint64_t one = 1;
  ssize_t ignored = ::write(wake_fd_, &one, sizeof one);
  (void)ignored;
  thread_.join();
  return true;
}

}  // namespace tiergym::prof

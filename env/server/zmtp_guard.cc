#include "env/server/zmtp_guard.h"

#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string_view>
#include <unordered_map>

namespace tiergym::env {

bool ZmtpMessageMeter::StartFrame() {
  if (opaque_) {
    // Frames of a CURVE connection, commands and encrypted messages alike.
    const uint64_t limit = 2 * max_message_bytes_;
    if (body_left_ > limit) return false;
    opaque_bytes_ += body_left_ + kFrameOverheadBytes;
    return opaque_bytes_ <= limit;
  }
  const bool more = (flags_ & 1) != 0;
  const bool command = (flags_ & 4) != 0;
  if (command) return true;  // READY, PING, PONG...: not part of a message
  ++message_frames_;
  message_bytes_ += body_left_;
  if (message_frames_ > max_frames_ || message_bytes_ > max_message_bytes_) return false;
  if (!more) message_bytes_ = 0, message_frames_ = 0;  // the message ends with this frame
  return true;
}

bool ZmtpMessageMeter::Feed(const uint8_t* data, size_t n) {
  size_t i = 0;
  while (i < n) {
    switch (phase_) {
      case Phase::kBroken:
        return false;
      case Phase::kGreeting: {
        const uint8_t byte = data[i++];
        // The signature (0xFF, 8 bytes, 0x7F: libzmq would read anything else as ZMTP 1.0)
        // and a major version of 3 or more.
        if ((greeting_read_ == 0 && byte != 0xff) || (greeting_read_ == 9 && (byte & 1) == 0) ||
            (greeting_read_ == 10 && byte < 3)) {
          phase_ = Phase::kBroken;
          return false;
        }
        if (greeting_read_ >= kMechanismAt && greeting_read_ < kMechanismAt + kMechanismBytes) {
          mechanism_[greeting_read_ - kMechanismAt] = static_cast<char>(byte);
        }
        if (++greeting_read_ == kGreetingBytes) {
          phase_ = Phase::kFlags;
          opaque_ = std::string_view(mechanism_, 5) != std::string_view("NULL\0", 5);
        }
        break;
      }
      case Phase::kFlags:
        flags_ = data[i++];
        if ((flags_ & ~7u) != 0) {
          phase_ = Phase::kBroken;
          return false;
        }
        size_read_ = 0;
        size_need_ = (flags_ & 2) != 0 ? 8 : 1;
        phase_ = Phase::kSize;
        break;
      case Phase::kSize:
        size_bytes_[size_read_++] = data[i++];
        if (size_read_ < size_need_) break;
        body_left_ = 0;
        for (size_t b = 0; b < size_need_; ++b) body_left_ = body_left_ << 8 | size_bytes_[b];
        if (!StartFrame()) {
          phase_ = Phase::kBroken;
          return false;
        }
        phase_ = body_left_ > 0 ? Phase::kBody : Phase::kFlags;
        break;
      case Phase::kBody: {
        const uint64_t take = std::min<uint64_t>(body_left_, n - i);
        i += take;
        body_left_ -= take;
        if (body_left_ == 0) phase_ = Phase::kFlags;
        break;
      }
    }
  }
  return phase_ != Phase::kBroken;
}

namespace {

struct Guard {
  std::mutex mu;
  std::unordered_map<int, std::unique_ptr<ZmtpMessageMeter>> meters;  // accepted descriptors
  std::atomic<bool> on{false};
  std::atomic<uint64_t> max_message_bytes{0};
  std::atomic<uint32_t> max_frames{0};
  std::atomic<size_t> max_connections{SIZE_MAX};
  std::atomic<uint64_t> dropped{0};
  std::atomic<uint64_t> refused{0};
};

Guard& TheGuard() {
  static auto* guard = new Guard;  // never destroyed: recv may run during exit
  return *guard;
}

}  // namespace

// Defined by zmtp_hooks.cc, in the programs that link it; null elsewhere.
extern "C" [[gnu::weak]] int tiergym_zmtp_hooks_linked();

bool GuardAcceptedConnections(uint64_t max_message_bytes, uint32_t max_frames,
                              size_t max_connections) {
  Guard& g = TheGuard();
  g.max_message_bytes = max_message_bytes;
  g.max_frames = max_frames;
  g.max_connections = max_connections;
  g.on = true;
  return ZmtpHooksLinked();
}

bool ZmtpHooksLinked() { return tiergym_zmtp_hooks_linked != nullptr; }

uint64_t GuardedConnectionsDropped() { return TheGuard().dropped.load(); }

uint64_t GuardedConnectionsRefused() { return TheGuard().refused.load(); }

size_t GuardedConnectionsOpen() {
  Guard& g = TheGuard();
  std::lock_guard<std::mutex> lock(g.mu);
  return g.meters.size();
}

void GuardMessageTaken(int fd) {
  Guard& g = TheGuard();
  if (fd < 0 || !g.on.load(std::memory_order_relaxed)) return;
  std::lock_guard<std::mutex> lock(g.mu);
  auto it = g.meters.find(fd);
  if (it != g.meters.end() && it->second != nullptr) it->second->MessageTaken();
}

namespace internal {

int GuardAccepted(int fd) {
  Guard& g = TheGuard();
  if (fd < 0 || !g.on.load()) return fd;
  auto meter = std::make_unique<ZmtpMessageMeter>(g.max_message_bytes.load(), g.max_frames.load());
  {
    std::lock_guard<std::mutex> lock(g.mu);
    if (g.meters.size() < g.max_connections.load()) {
      g.meters[fd] = std::move(meter);
      return fd;
    }
  }
  // Over the connection limit: closed at once, and ECONNABORTED, which libzmq takes for a
  // connection that went before it was accepted.
  g.refused.fetch_add(1);
  ::syscall(SYS_close, fd);
  errno = ECONNABORTED;
  return -1;
}

ssize_t GuardedRecv(int fd, void* buf, size_t len, int flags) {
  Guard& g = TheGuard();
  if (!g.on.load(std::memory_order_relaxed)) {
    return ::syscall(SYS_recvfrom, fd, buf, len, flags, nullptr, nullptr);
  }
  bool followed = false, refused = false;
  {
    std::lock_guard<std::mutex> lock(g.mu);
    auto it = g.meters.find(fd);
    followed = it != g.meters.end();
    refused = followed && it->second == nullptr;
  }
  if (refused) {  // ZeroMQ is closing it
    errno = ECONNRESET;
    return -1;
  }
  // Never under the lock: a blocking recv of another descriptor must not hold the others.
  const ssize_t n = ::syscall(SYS_recvfrom, fd, buf, len, flags, nullptr, nullptr);
  if (!followed || n <= 0 || (flags & MSG_PEEK) != 0) return n;
  std::lock_guard<std::mutex> lock(g.mu);
  auto it = g.meters.find(fd);
  if (it != g.meters.end() && it->second != nullptr &&
      !it->second->Feed(static_cast<const uint8_t*>(buf), static_cast<size_t>(n))) {
    it->second.reset();
    g.dropped.fetch_add(1);
    errno = ECONNRESET;
    return -1;
  }
  return n;
}

void GuardClosing(int fd) {
  Guard& g = TheGuard();
  if (!g.on.load(std::memory_order_relaxed)) return;
  std::lock_guard<std::mutex> lock(g.mu);
  g.meters.erase(fd);
}

}  // namespace internal
}  // namespace tiergym::env

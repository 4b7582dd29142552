// Bounds what one ZMTP peer can make ZeroMQ hold for a message it never finishes.
//
// ZeroMQ delivers a message only once its last frame has arrived, and ZMQ_MAXMSGSIZE bounds
// each frame, not the message: a peer that sends frames with MORE set, forever, grows the
// receiving process without limit while the server never sees a byte of it.
// ZmtpMessageMeter follows one connection's ZMTP 3 byte stream (greeting, then frames:
// a flags byte, a 1- or 8-byte size, the body) and says when a message passes a limit of
// bytes (its frames' bodies together) or frames. Commands (heartbeats, READY) are skipped.
//
// GuardAcceptedConnections turns it on for this process: every connection accepted by
// accept(2)/accept4(2) is followed through recv(2), the calls libzmq reads its TCP and
// ipc connections with, and a connection whose message passes a limit, or whose peer does
// not speak ZMTP 3, gets ECONNRESET from its next recv: ZeroMQ drops it and frees what it
// held (a disconnection the server's monitor then reports, closing the connection's
// sessions). Descriptors are forgotten on close(2). Connections this process makes
// (connect(2)) are never followed.
//
// Following them takes libc's accept, accept4, recv and close redefined, which only a
// program may do: zmtp_hooks.cc defines them (each passing the call to the kernel through
// the internal functions below) and is linked into the `tiergym` executable (and the tests
// that check the guard), never into a library, so that no library a process loads (the
// Python extension, a program of the install's users) replaces libc's functions for the
// whole process. In a program without the hooks the guard does nothing and
// GuardAcceptedConnections says so.
// Thread-safe.
#ifndef TIERGYM_ENV_SERVER_ZMTP_GUARD_H_
#define TIERGYM_ENV_SERVER_ZMTP_GUARD_H_

#include <sys/types.h>

#include <cstddef>
#include <cstdint>

namespace tiergym::env {

class ZmtpMessageMeter {
 public:
  ZmtpMessageMeter(uint64_t max_message_bytes, uint32_t max_frames)
      : max_message_bytes_(max_message_bytes), max_frames_(max_frames) {}

  // Follows `n` more bytes of the stream; false from the first byte that breaks a limit
  // or the ZMTP 3 framing on (and for every later call).
  bool Feed(const uint8_t* data, size_t n);

 private:
  static constexpr size_t kGreetingBytes = 64;
  enum class Phase { kGreeting, kFlags, kSize, kBody, kBroken };

  bool StartFrame();

  uint64_t max_message_bytes_;
  uint32_t max_frames_;
  Phase phase_ = Phase::kGreeting;
  size_t greeting_read_ = 0;
  uint8_t flags_ = 0;
  uint8_t size_bytes_[8] = {};
  size_t size_read_ = 0;
  size_t size_need_ = 0;
  uint64_t body_left_ = 0;
  uint64_t message_bytes_ = 0;  // bodies of the message's frames so far
  uint32_t message_frames_ = 0;
};

// Follows every connection this process accepts from now on, with these limits (a later
// call changes them for connections accepted after it). Returns whether this program
// links the hooks (ZmtpHooksLinked): without them nothing is followed.
bool GuardAcceptedConnections(uint64_t max_message_bytes, uint32_t max_frames);

// Whether the program links zmtp_hooks.cc (libc's accept, accept4, recv and close
// redefined to follow connections).
bool ZmtpHooksLinked();

// Connections refused so far (a limit or the framing broken).
uint64_t GuardedConnectionsDropped();

// What the hooks call (zmtp_hooks.cc); each does what libc's function would, through the
// kernel, and follows the connection.
namespace internal {
// A descriptor accept(2) returned (< 0: nothing to follow).
void GuardAccepted(int fd);
// recv(2) of `fd`, fed to its meter; -1 with ECONNRESET once the connection broke a rule.
ssize_t GuardedRecv(int fd, void* buf, size_t len, int flags);
// `fd` is being closed: forgotten.
void GuardClosing(int fd);
}  // namespace internal

}  // namespace tiergym::env

#endif  // TIERGYM_ENV_SERVER_ZMTP_GUARD_H_

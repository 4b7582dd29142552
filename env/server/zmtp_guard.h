// Bounds what one ZMTP peer can make ZeroMQ hold for a message it never finishes.
//
// ZeroMQ delivers a message only once its last frame has arrived, and ZMQ_MAXMSGSIZE bounds
// each frame, not the message: a peer that sends frames with MORE set, forever, grows the
// receiving process without limit while the server never sees a byte of it.
// ZmtpMessageMeter follows one connection's ZMTP 3 byte stream (greeting, then frames:
// a flags byte, a 1- or 8-byte size, the body) and says when a message passes a limit of
// bytes (its frames' bodies together) or frames. Commands (heartbeats, READY) are skipped.
//
// Under CURVE (the mechanism the greeting names) every frame after the handshake is an
// encrypted MESSAGE command whose MORE flag is inside the encryption, so where a message
// ends cannot be seen on the wire. There the meter bounds instead what the connection sent
// since the server last took a message from it (MessageTaken): every frame's body plus 64
// bytes (what ZeroMQ spends to hold a frame), at most twice the message limit. A message
// that never ends passes that bound as it grows; a client whose requests are read as they
// come never nears it. Only a client that passed the CURVE handshake (an allowed key) can
// send such frames at all.
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

  // The server took a whole message from this connection (CURVE: what came before it no
  // longer counts; the NULL mechanism needs no telling).
  void MessageTaken() { opaque_bytes_ = 0; }

  // Whether the peer's greeting named a mechanism other than NULL (known once the greeting
  // has been read).
  bool opaque() const { return opaque_; }

 private:
  static constexpr size_t kGreetingBytes = 64;
  // Where the greeting names its mechanism (20 bytes, NUL-padded).
  static constexpr size_t kMechanismAt = 12, kMechanismBytes = 20;
  // What ZeroMQ spends to hold one frame beyond its body (a msg_t), counted per frame of a
  // CURVE connection.
  static constexpr uint64_t kFrameOverheadBytes = 64;
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
  char mechanism_[kMechanismBytes] = {};
  bool opaque_ = false;        // not the NULL mechanism (CURVE): frames are encrypted
  uint64_t opaque_bytes_ = 0;  // CURVE: frames (bodies + overhead) since the last message taken
};

// Follows every connection this process accepts from now on, with these limits (a later
// call changes them for connections accepted after it). A connection accepted while
// `max_connections` are open is closed at once (its peer sees the connection reset and
// retries later): a process never runs out of descriptors for its clients. Returns whether
// this program links the hooks (ZmtpHooksLinked): without them nothing is followed.
bool GuardAcceptedConnections(uint64_t max_message_bytes, uint32_t max_frames,
                              size_t max_connections = SIZE_MAX);

// Whether the program links zmtp_hooks.cc (libc's accept, accept4, recv and close
// redefined to follow connections).
bool ZmtpHooksLinked();

// Connections dropped so far (a limit or the framing broken).
uint64_t GuardedConnectionsDropped();

// Connections closed at accept so far, over max_connections.
uint64_t GuardedConnectionsRefused();

// Connections followed now (accepted and not closed).
size_t GuardedConnectionsOpen();

// The server took a whole message that came on descriptor `fd` (ZMQ_SRCFD): its meter
// counts a CURVE connection's bytes from here (ZmtpMessageMeter::MessageTaken).
void GuardMessageTaken(int fd);

// What the hooks call (zmtp_hooks.cc); each does what libc's function would, through the
// kernel, and follows the connection.
namespace internal {
// A descriptor accept(2) returned (< 0: nothing to follow): itself, or -1 (ECONNABORTED)
// when it was closed at once, max_connections being open.
int GuardAccepted(int fd);
// recv(2) of `fd`, fed to its meter; -1 with ECONNRESET once the connection broke a rule.
ssize_t GuardedRecv(int fd, void* buf, size_t len, int flags);
// `fd` is being closed: forgotten.
void GuardClosing(int fd);
}  // namespace internal

}  // namespace tiergym::env

#endif  // TIERGYM_ENV_SERVER_ZMTP_GUARD_H_

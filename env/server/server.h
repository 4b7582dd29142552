// The ZeroMQ front of the environment service: one ROUTER socket, two pools of workers.
//
// The thread that calls Run() owns the socket (ZeroMQ sockets are not thread-safe): it
// receives requests, hands them to the workers (Service::Handle) and sends the replies the
// workers hand back through a queue signalled by an eventfd. `make` and `estimate`, which
// may load assets, run on their own `load_threads`, so that a load never holds up hello,
// stats, close or the steps of sessions already made. When every worker is idle the I/O
// thread answers quick small requests itself (ServerOptions::inline_quick_requests).
//
// Connections: requests of one connection are handled one at a time in the order they
// arrived (a connection may pipeline up to `max_pending_per_client`, holding at most
// `max_queued_request_bytes`); different connections are served concurrently. The
// connection (its ZeroMQ routing id) owns the sessions it makes (Service). A connection
// that goes away (a socket monitor reports its disconnection; ZMTP heartbeats notice a
// peer that vanished without closing; a reply that cannot be routed) has its sessions
// closed at once. Replies a connection does not read wait in a per-connection outbox of at
// most `max_queued_reply_bytes`, and its next requests wait until it reads; a reply that
// does not fit is dropped and counted (`replies_dropped` in stats): the only case in which
// a request gets no reply (env/PROTOCOL.md). A message of more than 16 frames is refused
// (its extra frames dropped); a connection whose message passes 64 frames or the message
// size limit + 1 MiB in all is dropped before ZeroMQ holds more of it (zmtp_guard.h).
//
// Stop() (thread-safe and async-signal-safe, for SIGINT/SIGTERM handlers) ends Run():
// requests being handled get up to `drain_timeout_s` to finish and get their replies,
// requests still queued get an UNAVAILABLE reply. Drained() tells whether every worker is
// idle; when not, the caller may exit without destroying the server (the workers may be
// in a long load). The destructor closes the socket and removes an ipc:// socket file.
// Binding an ipc:// path on which another process listens is refused (ZeroMQ alone would
// silently take it over). Exceptions from cppzmq never leave this class: they become
// statuses or, per message, are logged and the loop goes on.
#ifndef TIERGYM_ENV_SERVER_SERVER_H_
#define TIERGYM_ENV_SERVER_SERVER_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "env/provider/env_provider.h"
#include "env/server/service.h"
#include "env/server/thread_pool.h"

namespace zmq {
class context_t;
class socket_t;
}  // namespace zmq

namespace tiergym::env {

struct ServerOptions {
  // tcp://HOST:PORT (PORT 0: a free port), ipc://PATH, inproc://NAME (tests). Default
  // tcp://127.0.0.1:5555.
  std::string endpoint = "tcp://127.0.0.1:5555";
  // Worker threads. Default 2.
  int threads = 2;
  // Worker threads for make and estimate (which may load assets). Default 1.
  int load_threads = 1;
  // Requests queued per connection beyond the one being handled, and their bytes.
  // Default 64 and 64 MiB.
  uint64_t max_pending_per_client = 64;
  uint64_t max_queued_request_bytes = uint64_t{64} << 20;
  // The same over all connections. Default 512 MiB.
  uint64_t max_queued_request_bytes_total = uint64_t{512} << 20;
  // Bytes of replies a connection has not read, queued beyond ZeroMQ's send high-water
  // mark (`send_hwm` messages). Default 64 MiB and 8.
  uint64_t max_queued_reply_bytes = uint64_t{64} << 20;
  // The same over all connections (then replies are dropped). Default 512 MiB.
  uint64_t max_queued_reply_bytes_total = uint64_t{512} << 20;
  int send_hwm = 8;
  // Messages ZeroMQ buffers per connection before the server reads them. Default 256.
  int receive_hwm = 256;
  // ZMTP heartbeat interval (a peer that does not answer within 3 intervals is
  // disconnected and its sessions closed); 0: no heartbeats. Default 10 s.
  double heartbeat_s = 10;
  // Period of idle-session reclamation. Default 1 s.
  double reclaim_interval_s = 1;
  // Stop when this process has exited (the Python client's private server); 0: never.
  // Default 0.
  int parent_pid = 0;
  // How long Stop() waits for requests being handled. Default 2 s.
  double drain_timeout_s = 2;
  // When no worker is busy, the I/O thread answers a small request of a quick op (step,
  // reset, close, hello, list, stats; under 4 KiB) itself instead of handing it to a
  // worker and back: this saves two thread hand-offs for the common single synchronous
  // client. Others' requests then wait at most one such op. So too a step_batch under
  // 16 KiB (64 entries of 64 regions with one-byte actions), whose entries the I/O thread
  // steps together with the idle workers: the batched client's round trip is then the
  // in-process steps plus one message each way. Default true.
  bool inline_quick_requests = true;
  // CURVE (ZeroMQ's authentication and encryption, libzmq with libsodium): with a secret
  // key (Z85, 40 characters; curve_keys.h reads it from a certificate file) the socket is a
  // CURVE server, and only clients whose public key is in `curve_allowed_clients` finish
  // the handshake: the others (no CURVE, another server key, a key not listed, a replayed
  // handshake) never get a message through, nor a reply. A ZAP handler (ZeroMQ's RFC 27)
  // on the I/O thread answers libzmq for each handshake. Default: none (the NULL mechanism:
  // whoever reaches the endpoint is a client).
  std::string curve_secret_key;
  std::vector<std::string> curve_allowed_clients;
  // Serve a tcp:// endpoint bound to an address other than loopback without CURVE. Default
  // false: Create refuses it (FailedPrecondition saying what to do).
  bool open_without_curve = false;
  // Connections open at once; one more is closed as soon as it is accepted (its peer sees
  // the connection reset and retries), so that clients never exhaust the process's file
  // descriptors (in a program that links the ZMTP guard's hooks, zmtp_guard.h). Default
  // 1024.
  size_t max_connections = 1024;
};

class Server {
 public:
  // Binds the socket. FailedPrecondition when the address is in use, InvalidArgument for
  // a malformed endpoint; the message names the endpoint.
  static absl::StatusOr<std::unique_ptr<Server>> Create(const ServerOptions& options,
                                                        ServiceOptions service_options,
                                                        std::shared_ptr<EnvProvider> provider);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // The endpoint bound, with the port chosen ("tcp://127.0.0.1:40513").
  const std::string& endpoint() const { return endpoint_; }
  // Whether the endpoint is reachable from other machines (tcp:// bound to an address other
  // than loopback).
  bool network_reachable() const { return network_reachable_; }
  // CURVE handshakes refused so far (a client key not allowed); Run() thread only.
  uint64_t curve_refused() const { return curve_refused_; }
  Service& service() { return *service_; }

  // Serves until Stop(). Returns an error only when the socket fails for good.
  absl::Status Run();
  // Ends Run(). Async-signal-safe.
  void Stop();
  // After Run(): whether no request is still being handled (when not, destroying the
  // Server waits for the workers).
  bool Drained() const { return in_flight_ == 0; }

 private:
  struct Job;
  // A reply on its way: the envelope and the bytes, shared with ZeroMQ while it sends.
  struct Outgoing {
    std::vector<std::string> envelope;
    std::shared_ptr<std::string> reply;
  };
  struct Client {
    bool busy = false;
    bool gone = false;  // disconnected while a worker had its request
    std::deque<std::shared_ptr<Job>> queued;
    uint64_t queued_bytes = 0;
    std::deque<Outgoing> outbox;  // replies ZeroMQ would not take yet
    uint64_t outbox_bytes = 0;
  };
  enum class Sent { kSent, kWouldBlock, kGone };

  Server(const ServerOptions& options, std::unique_ptr<zmq::context_t> context,
         std::unique_ptr<zmq::socket_t> socket, std::unique_ptr<zmq::socket_t> monitor,
         std::unique_ptr<zmq::socket_t> zap, std::string endpoint, int event_fd,
         ServiceOptions service_options, std::shared_ptr<EnvProvider> provider);

  void ReceiveAll();
  void Accept(std::shared_ptr<Job> job);
  void Dispatch(std::shared_ptr<Job> job);
  // Whether the I/O thread may answer this request itself (see inline_quick_requests).
  bool Quick(const Job& job) const;
  void SendFinished();
  // Sends, or queues in the connection's outbox, or drops (counted) when that is full.
  void SendReply(Job& job, std::string reply);
  Sent TrySend(const Outgoing& out);
  // Sends what outboxes hold as far as ZeroMQ takes it; dispatches connections drained.
  void FlushOutboxes();
  // Dispatches the connection's next queued request when it may run.
  void Next(const std::string& client);
  // Reads the socket monitor: disconnected connections have their sessions closed.
  void DrainMonitor();
  // Answers libzmq's ZAP requests: a CURVE client key is allowed or not.
  void AnswerZap();
  void PeerGone(const std::string& client);
  bool ParentGone() const;

  ServerOptions options_;
  std::unique_ptr<zmq::context_t> context_;
  std::unique_ptr<zmq::socket_t> socket_;
  std::unique_ptr<zmq::socket_t> monitor_;
  std::unique_ptr<zmq::socket_t> zap_;  // the ZAP handler (CURVE), else null
  std::set<std::string> allowed_keys_;  // CURVE client keys allowed, 32 bytes each
  std::string endpoint_;
  bool network_reachable_ = false;
  uint64_t curve_refused_ = 0;
  std::chrono::steady_clock::time_point refusal_logged_;  // the last refusal written to stderr
  int event_fd_;
  std::atomic<bool> stop_{false};
  bool discarding_ = false;          // dropping the frames of an over-long message
  int trim_ticks_ = 0;               // reclamation ticks left on which to give freed memory back
  uint64_t guard_dropped_seen_ = 0;  // connections zmtp_guard.h dropped, as of the last tick
  uint64_t outbox_clients_ = 0;      // connections with replies in their outbox
  uint64_t outbox_bytes_ = 0;        // replies in all outboxes
  uint64_t queued_bytes_ = 0;        // requests queued on all connections

  // Declared before the pool: the pool is destroyed first, joining workers that use these.
  std::unique_ptr<Service> service_;
  std::mutex finished_mu_;
  std::deque<std::shared_ptr<Job>> finished_;  // guarded by finished_mu_
  std::map<std::string, Client> clients_;      // Run() thread only
  // The file descriptor each connection's messages came on, and back (Run() thread only).
  std::map<std::string, int> fd_of_;
  std::map<int, std::vector<std::string>> peers_of_fd_;
  std::atomic<uint64_t> in_flight_{0};  // written by the Run() thread only
  uint64_t in_flight_fast_ = 0;         // Run() thread only
  std::unique_ptr<ThreadPool> load_pool_;
  std::unique_ptr<ThreadPool> pool_;
};

}  // namespace tiergym::env

#endif  // TIERGYM_ENV_SERVER_SERVER_H_

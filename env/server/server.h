// The ZeroMQ front of the environment service: one ROUTER socket, a pool of workers.
//
// The thread that calls Run() owns the socket (ZeroMQ sockets are not thread-safe): it
// receives requests, hands them to the workers (Service::Handle) and sends the replies the
// workers hand back through a queue signalled by an eventfd. When every worker is idle it
// answers quick small requests itself (ServerOptions::inline_quick_requests). Requests of one connection
// are handled one at a time in the order they arrived (a connection may pipeline up to
// `max_pending_per_client`); different connections are served concurrently. Idle sessions
// are reclaimed every `reclaim_interval_s`.
//
// Stop() (thread-safe and async-signal-safe, for SIGINT/SIGTERM handlers) ends Run():
// requests being handled finish and get their replies, requests still queued get an
// UNAVAILABLE reply. The destructor closes the socket and removes an ipc:// socket file.
// Binding an ipc:// path on which another process listens is refused (ZeroMQ alone would
// silently take it over).
// Exceptions from cppzmq never leave this class: they become statuses or, per message,
// are logged and the loop goes on.
#ifndef TIERGYM_ENV_SERVER_SERVER_H_
#define TIERGYM_ENV_SERVER_SERVER_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "absl/status/statusor.h"
#include "env/server/env_provider.h"
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
  // Requests queued per connection beyond the one being handled. Default 64.
  uint64_t max_pending_per_client = 64;
  // Period of idle-session reclamation. Default 1 s.
  double reclaim_interval_s = 1;
  // Stop when this process has exited (the Python client's private server); 0: never.
  // Default 0.
  int parent_pid = 0;
  // How long Stop() waits for requests being handled. Default 10 s.
  double drain_timeout_s = 10;
  // When no worker is busy, the I/O thread answers a small request of a quick op (step,
  // reset, close, hello, list, stats; under 4 KiB) itself instead of handing it to a
  // worker and back: this saves two thread hand-offs for the common single synchronous
  // client. Others' requests then wait at most one such op. Default true.
  bool inline_quick_requests = true;
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
  Service& service() { return *service_; }

  // Serves until Stop(). Returns an error only when the socket fails for good.
  absl::Status Run();
  // Ends Run(). Async-signal-safe.
  void Stop();

 private:
  struct Job;
  struct Client {
    bool busy = false;
    std::deque<std::shared_ptr<Job>> queued;
  };

  Server(const ServerOptions& options, std::unique_ptr<zmq::context_t> context,
         std::unique_ptr<zmq::socket_t> socket, std::string endpoint, int event_fd,
         ServiceOptions service_options, std::shared_ptr<EnvProvider> provider);

  void ReceiveAll();
  void Dispatch(std::shared_ptr<Job> job);
  // Whether the I/O thread may answer this request itself (see inline_quick_requests).
  bool Quick(const Job& job) const;
  void SendFinished();
  void SendReply(Job& job, std::string reply);
  bool ParentGone() const;

  ServerOptions options_;
  std::unique_ptr<zmq::context_t> context_;
  std::unique_ptr<zmq::socket_t> socket_;
  std::string endpoint_;
  int event_fd_;
  std::atomic<bool> stop_{false};

  // Declared before the pool: the pool is destroyed first, joining workers that use these.
  std::unique_ptr<Service> service_;
  std::mutex finished_mu_;
  std::deque<std::shared_ptr<Job>> finished_;  // guarded by finished_mu_
  std::map<std::string, Client> clients_;      // Run() thread only
  uint64_t in_flight_ = 0;                     // Run() thread only
  std::unique_ptr<ThreadPool> pool_;
};

}  // namespace tiergym::env

#endif  // TIERGYM_ENV_SERVER_SERVER_H_

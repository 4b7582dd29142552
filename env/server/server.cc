#include "env/server/server.h"

#include <signal.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <iostream>
#include <utility>
#include <vector>

#include "env/protocol/protocol.h"
#include "traces/base/strings.h"
#include "zmq.hpp"

namespace tiergym::env {

struct Server::Job {
  std::vector<zmq::message_t> envelope;  // identity (and a REQ socket's empty delimiter)
  zmq::message_t payload;
  std::string client;  // the identity, as a map key
  std::string reply;   // set by the worker
};

namespace {

absl::Status BindError(const zmq::error_t& e, const std::string& endpoint) {
  if (e.num() == EADDRINUSE) {
    return absl::FailedPreconditionError(
        StrCat(endpoint,
               ": address in use (another tiergym serve?); choose another endpoint, "
               "or tcp://127.0.0.1:0 for a free port"));
  }
  if (e.num() == EINVAL || e.num() == EPROTONOSUPPORT || e.num() == ENOCOMPATPROTO) {
    return absl::InvalidArgumentError(
        StrCat(endpoint, ": not a valid endpoint (", e.what(),
               "); expected tcp://HOST:PORT, ipc://PATH or inproc://NAME"));
  }
  return absl::UnavailableError(StrCat(endpoint, ": cannot bind: ", e.what()));
}

// The file of an ipc:// endpoint ("" for other transports and abstract sockets).
std::string IpcPath(const std::string& endpoint) {
  constexpr std::string_view kIpc = "ipc://";
  if (endpoint.compare(0, kIpc.size(), kIpc) != 0) return "";
  std::string path = endpoint.substr(kIpc.size());
  return !path.empty() && path[0] == '@' ? "" : path;
}

// Whether a process accepts connections on the Unix socket `path` (ZeroMQ would silently
// take the path over from it).
bool SomeoneListens(const std::string& path) {
  sockaddr_un addr = {};
  if (path.size() >= sizeof addr.sun_path) return false;
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  const bool connected = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  close(fd);
  return connected;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Server>> Server::Create(const ServerOptions& options,
                                                       ServiceOptions service_options,
                                                       std::shared_ptr<EnvProvider> provider) {
  if (options.threads < 1) return absl::InvalidArgumentError("threads: must be at least 1");
  if (const std::string path = IpcPath(options.endpoint); !path.empty() && SomeoneListens(path)) {
    return absl::FailedPreconditionError(
        StrCat(options.endpoint, ": address in use (another tiergym serve?); choose another path"));
  }
  const int event_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (event_fd < 0) return absl::InternalError(StrCat("eventfd: ", std::strerror(errno)));
  try {
    auto context = std::make_unique<zmq::context_t>(1);
    auto socket = std::make_unique<zmq::socket_t>(*context, zmq::socket_type::router);
    socket->set(zmq::sockopt::linger, 1000);
    // ZeroMQ drops a connection sending more than this; the service replies
    // RESOURCE_EXHAUSTED to messages between its own limit and this one.
    const uint64_t cap = service_options.max_message_bytes * 4 + (1u << 20);
    socket->set(zmq::sockopt::maxmsgsize, static_cast<int64_t>(cap));
    try {
      socket->bind(options.endpoint);
    } catch (const zmq::error_t& e) {
      close(event_fd);
      return BindError(e, options.endpoint);
    }
    std::string endpoint = socket->get(zmq::sockopt::last_endpoint);
    return std::unique_ptr<Server>(new Server(options, std::move(context), std::move(socket),
                                              std::move(endpoint), event_fd,
                                              std::move(service_options), std::move(provider)));
  } catch (const zmq::error_t& e) {
    close(event_fd);
    return absl::InternalError(StrCat(options.endpoint, ": ZeroMQ: ", e.what()));
  }
}

Server::Server(const ServerOptions& options, std::unique_ptr<zmq::context_t> context,
               std::unique_ptr<zmq::socket_t> socket, std::string endpoint, int event_fd,
               ServiceOptions service_options, std::shared_ptr<EnvProvider> provider)
    : options_(options),
      context_(std::move(context)),
      socket_(std::move(socket)),
      endpoint_(std::move(endpoint)),
      event_fd_(event_fd) {
  pool_ = std::make_unique<ThreadPool>(options.threads);
  service_ =
      std::make_unique<Service>(std::move(service_options), std::move(provider), pool_.get());
}

Server::~Server() {
  pool_.reset();  // workers done before the socket and the queue go
  try {
    socket_->close();
    context_->close();
  } catch (const zmq::error_t&) {
  }
  close(event_fd_);
  // libzmq 4.3 leaves the socket file of an ipc:// endpoint behind.
  if (const std::string path = IpcPath(endpoint_); !path.empty()) unlink(path.c_str());
}

void Server::Stop() {
  stop_.store(true);
  const uint64_t one = 1;
  [[maybe_unused]] ssize_t n = write(event_fd_, &one, sizeof one);
}

bool Server::ParentGone() const {
  return options_.parent_pid > 0 && kill(options_.parent_pid, 0) != 0 && errno == ESRCH;
}

void Server::SendReply(Job& job, std::string reply) {
  try {
    for (zmq::message_t& frame : job.envelope) {
      socket_->send(frame, zmq::send_flags::sndmore | zmq::send_flags::dontwait);
    }
    // ZeroMQ takes the reply's bytes over instead of copying them (a step_batch reply is
    // tens of KB); it frees them, from its own thread, once they are sent.
    auto* owned = new std::string(std::move(reply));
    zmq::message_t message(
        owned->data(), owned->size(),
        [](void*, void* hint) { delete static_cast<std::string*>(hint); }, owned);
    socket_->send(message, zmq::send_flags::dontwait);
  } catch (const zmq::error_t& e) {
    // EHOSTUNREACH and the like: the client left; nothing to tell anyone.
    if (e.num() == ETERM) stop_.store(true);
  }
}

void Server::Dispatch(std::shared_ptr<Job> job) {
  clients_[job->client].busy = true;
  ++in_flight_;
  pool_->Submit([this, job = std::move(job)] {
    job->reply = service_->Handle(
        std::string_view(static_cast<const char*>(job->payload.data()), job->payload.size()));
    {
      std::lock_guard<std::mutex> lock(finished_mu_);
      finished_.push_back(job);
    }
    const uint64_t one = 1;
    [[maybe_unused]] ssize_t n = write(event_fd_, &one, sizeof one);
  });
}

bool Server::Quick(const Job& job) const {
  if (!options_.inline_quick_requests || in_flight_ > 0 || job.payload.size() > 4096) return false;
  const std::optional<protocol::Op> op = protocol::PeekRequestOp(
      std::string_view(static_cast<const char*>(job.payload.data()), job.payload.size()));
  using protocol::Op;
  return op == Op::kStep || op == Op::kReset || op == Op::kClose || op == Op::kHello ||
         op == Op::kList || op == Op::kStats;
}

void Server::ReceiveAll() {
  // At most a bounded number per wake-up, so that replies keep flowing under load.
  for (int i = 0; i < 1024; ++i) {
    std::vector<zmq::message_t> frames;
    for (;;) {
      zmq::message_t frame;
      if (!socket_->recv(frame, zmq::recv_flags::dontwait)) break;
      const bool more = frame.more();
      frames.push_back(std::move(frame));
      if (!more) break;
    }
    if (frames.empty()) return;
    if (frames.size() < 2) continue;  // a ROUTER always prepends the identity
    auto job = std::make_shared<Job>();
    job->payload = std::move(frames.back());
    frames.pop_back();
    job->client = frames[0].to_string();
    job->envelope = std::move(frames);
    Client& client = clients_[job->client];
    if (!client.busy && client.queued.empty() && Quick(*job)) {
      SendReply(*job, service_->Handle(std::string_view(
                          static_cast<const char*>(job->payload.data()), job->payload.size())));
      clients_.erase(job->client);
    } else if (!client.busy) {
      Dispatch(std::move(job));
    } else if (client.queued.size() >= options_.max_pending_per_client) {
      const std::optional<uint64_t> id = protocol::PeekReplyId(
          std::string_view(static_cast<const char*>(job->payload.data()), job->payload.size()));
      SendReply(
          *job,
          protocol::EncodeReply(protocol::Reply{
              id, protocol::MakeError(absl::StatusCode::kResourceExhausted, protocol::kPayloadField,
                                      StrCat("more than ", options_.max_pending_per_client,
                                             " requests outstanding on this "
                                             "connection; wait for replies"))}));
    } else {
      client.queued.push_back(std::move(job));
    }
  }
}

void Server::SendFinished() {
  uint64_t count;
  [[maybe_unused]] ssize_t n = read(event_fd_, &count, sizeof count);
  std::deque<std::shared_ptr<Job>> done;
  {
    std::lock_guard<std::mutex> lock(finished_mu_);
    done.swap(finished_);
  }
  for (std::shared_ptr<Job>& job : done) {
    --in_flight_;
    SendReply(*job, std::move(job->reply));
    auto it = clients_.find(job->client);
    if (it == clients_.end()) continue;
    Client& client = it->second;
    client.busy = false;
    if (!client.queued.empty() && !stop_.load()) {
      std::shared_ptr<Job> next = std::move(client.queued.front());
      client.queued.pop_front();
      Dispatch(std::move(next));
    } else if (client.queued.empty()) {
      clients_.erase(it);
    }
  }
}

absl::Status Server::Run() {
  using Clock = std::chrono::steady_clock;
  Clock::time_point next_reclaim = Clock::now();
  const auto reclaim_every = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(options_.reclaim_interval_s));
  while (!stop_.load()) {
    zmq::pollitem_t items[] = {{socket_->handle(), 0, ZMQ_POLLIN, 0},
                               {nullptr, event_fd_, ZMQ_POLLIN, 0}};
    const int rc = zmq_poll(items, 2, 250);
    if (rc < 0) {
      if (zmq_errno() == EINTR) continue;
      if (zmq_errno() == ETERM) break;
      return absl::InternalError(StrCat("zmq_poll: ", zmq_strerror(zmq_errno())));
    }
    try {
      if (items[1].revents & ZMQ_POLLIN) SendFinished();
      if (!stop_.load() && (items[0].revents & ZMQ_POLLIN)) ReceiveAll();
    } catch (const zmq::error_t& e) {
      if (e.num() == ETERM) break;
      if (e.num() != EINTR && e.num() != EAGAIN) {
        std::cerr << "tiergym serve: ZeroMQ: " << e.what() << " (going on)\n";
      }
    }
    if (Clock::now() >= next_reclaim) {
      service_->ReclaimIdle();
      next_reclaim = Clock::now() + reclaim_every;
      if (ParentGone()) {
        std::cerr << "tiergym serve: parent process " << options_.parent_pid
                  << " has exited; stopping\n";
        break;
      }
    }
  }
  // Drain: replies for requests being handled, UNAVAILABLE for those still queued.
  const Clock::time_point deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(
                         std::chrono::duration<double>(options_.drain_timeout_s));
  try {
    for (auto& [name, client] : clients_) {
      for (std::shared_ptr<Job>& job : client.queued) {
        const std::optional<uint64_t> id = protocol::PeekReplyId(
            std::string_view(static_cast<const char*>(job->payload.data()), job->payload.size()));
        SendReply(*job, protocol::EncodeReply(protocol::Reply{
                            id, protocol::MakeError(absl::StatusCode::kUnavailable,
                                                    protocol::kPayloadField,
                                                    "the server is shutting down")}));
      }
      client.queued.clear();
    }
    while (in_flight_ > 0 && Clock::now() < deadline) {
      zmq::pollitem_t item = {nullptr, event_fd_, ZMQ_POLLIN, 0};
      if (zmq_poll(&item, 1, 100) > 0) SendFinished();
    }
  } catch (const zmq::error_t&) {
  }
  return absl::OkStatus();
}

}  // namespace tiergym::env

#include "env/server/server.h"

#include <arpa/inet.h>
#include <malloc.h>
#include <netinet/in.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <iostream>
#include <utility>
#include <vector>

#include "env/curve/curve_keys.h"
#include "env/protocol/protocol.h"
#include "env/server/shm_batch.h"
#include "env/server/zmtp_guard.h"
#include "traces/base/strings.h"
#include "zmq.hpp"

namespace tiergym::env {

struct Server::Job {
  std::vector<std::string> envelope;  // identity (and a REQ socket's empty delimiter)
  zmq::message_t payload;
  std::string client;  // the identity, as a map key
  std::string reply;   // set by the worker
  bool slow = false;   // make or estimate: on the load workers
  [[nodiscard]] std::string_view bytes() const {
    return {static_cast<const char*>(payload.data()), payload.size()};
  }
};

namespace {

// How many reclamation ticks (reclaim_interval_s apart) memory is trimmed after clients or
// sessions went: unused configurations are released up to a couple of seconds later.
constexpr int kTrimTicks = 4;
// Frames of one message past which its connection is dropped (the server reads 16).
constexpr uint32_t kGuardFrames = 64;

// Whether a bound endpoint is reachable from this machine only: ipc:// and inproc://, or
// tcp:// on a loopback address (127.0.0.0/8, ::1, ::ffff:127.x.y.z). `bound` is what
// ZeroMQ reports (ZMQ_LAST_ENDPOINT): a numeric address, whatever name was bound.
bool LocalOnly(const std::string& bound) {
  constexpr std::string_view kTcp = "tcp://";
  if (bound.compare(0, kTcp.size(), kTcp) != 0) return true;
  std::string host = bound.substr(kTcp.size());
  host = host.substr(0, host.rfind(':'));
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  in_addr v4 = {};
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6 = {};
  if (inet_pton(AF_INET6, host.c_str(), &v6) == 1) {
    return IN6_IS_ADDR_LOOPBACK(&v6) || (IN6_IS_ADDR_V4MAPPED(&v6) && v6.s6_addr[12] == 127);
  }
  return false;  // not an address ZeroMQ would report: take it as reachable
}

std::string Z85(std::string_view key_bytes) {
  char text[41] = "";
  if (key_bytes.size() != 32 ||
      zmq_z85_encode(text, reinterpret_cast<const uint8_t*>(key_bytes.data()), 32) == nullptr) {
    return "(not a key)";
  }
  return text;
}

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

// A descriptor closed at the end of its scope unless released.
class OwnedFd {
 public:
  explicit OwnedFd(int fd) : fd_(fd) {}
  ~OwnedFd() {
    if (fd_ >= 0) close(fd_);
  }
  OwnedFd(const OwnedFd&) = delete;
  OwnedFd& operator=(const OwnedFd&) = delete;
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

absl::Status CheckCurveOptions(const ServerOptions& options) {
  if (options.curve_secret_key.empty()) return absl::OkStatus();
  if (!CurveAvailable()) {
    return absl::UnimplementedError(
        "CURVE: this libzmq was built without it (no libsodium); Debian's libzmq5 has it");
  }
  if (!IsCurveKey(options.curve_secret_key)) {
    return absl::InvalidArgumentError("curve_secret_key: not a Z85 CURVE key (40 characters)");
  }
  if (options.curve_allowed_clients.empty()) {
    return absl::InvalidArgumentError(
        "curve_allowed_clients: empty: with CURVE, the clients allowed must be listed");
  }
  for (size_t i = 0; i < options.curve_allowed_clients.size(); ++i) {
    if (!IsCurveKey(options.curve_allowed_clients[i])) {
      return absl::InvalidArgumentError(
          StrCat("curve_allowed_clients[", i, "]: not a Z85 CURVE key (40 characters)"));
    }
  }
  return absl::OkStatus();
}

// The ROUTER's options (before it binds): CURVE, the frame bound `cap`, high-water marks,
// heartbeats.
void ConfigureRouter(zmq::socket_t& socket, const ServerOptions& options, uint64_t cap) {
  socket.set(zmq::sockopt::linger, 1000);
  if (!options.curve_secret_key.empty()) {
    socket.set(zmq::sockopt::curve_server, true);
    socket.set(zmq::sockopt::curve_secretkey, CurveKeyBytes(options.curve_secret_key));
    socket.set(zmq::sockopt::zap_domain, "tiergym");
  }
  socket.set(zmq::sockopt::maxmsgsize, static_cast<int64_t>(cap));
  socket.set(zmq::sockopt::sndhwm, options.send_hwm);
  socket.set(zmq::sockopt::rcvhwm, options.receive_hwm);
  // A reply to a connection that is gone fails (EHOSTUNREACH) and one that would pass the
  // high-water mark waits (EAGAIN) instead of vanishing silently.
  socket.set(zmq::sockopt::router_mandatory, 1);
  if (options.heartbeat_s > 0) {
    const int ivl_ms = static_cast<int>(options.heartbeat_s * 1000);
    socket.set(zmq::sockopt::heartbeat_ivl, ivl_ms);
    socket.set(zmq::sockopt::heartbeat_timeout, 3 * ivl_ms);
    socket.set(zmq::sockopt::heartbeat_ttl, 3 * ivl_ms);
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<Server>> Server::Create(const ServerOptions& options,
                                                       ServiceOptions service_options,
                                                       std::shared_ptr<EnvProvider> provider) {
  if (options.threads < 1) return absl::InvalidArgumentError("threads: must be at least 1");
  if (options.load_threads < 1) {
    return absl::InvalidArgumentError("load_threads: must be at least 1");
  }
  const bool curve = !options.curve_secret_key.empty();
  if (absl::Status s = CheckCurveOptions(options); !s.ok()) return s;
  if (const std::string path = IpcPath(options.endpoint); !path.empty() && SomeoneListens(path)) {
    return absl::FailedPreconditionError(
        StrCat(options.endpoint, ": address in use (another tiergym serve?); choose another path"));
  }
  // Segments of servers that died (SIGKILL) before unlinking theirs.
  if (service_options.max_shm_bytes > 0) RemoveStaleShmSegments();
  OwnedFd event_fd(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));  // until the Server owns it
  if (event_fd.get() < 0) return absl::InternalError(StrCat("eventfd: ", std::strerror(errno)));
  service_options.max_pending_per_connection = options.max_pending_per_client;
  try {
    auto context = std::make_unique<zmq::context_t>(1);
    std::unique_ptr<zmq::socket_t> zap;
    if (curve) {
      // libzmq asks this socket of the same context about every CURVE handshake (RFC 27,
      // ZAP); it must be bound before the first client connects.
      zap = std::make_unique<zmq::socket_t>(*context, zmq::socket_type::rep);
      zap->set(zmq::sockopt::linger, 0);
      zap->bind("inproc://zeromq.zap.01");
    }
    auto socket = std::make_unique<zmq::socket_t>(*context, zmq::socket_type::router);
    // ZeroMQ drops a connection sending a frame larger than this; the service replies
    // RESOURCE_EXHAUSTED to messages between its own limit and this one.
    const uint64_t cap = service_options.max_message_bytes + (1u << 20);
    ConfigureRouter(*socket, options, cap);
    // ... and a connection sending a message (its frames together) over the same bound, or
    // of more than kGuardFrames frames: ZeroMQ would hold such a message whole, however
    // long it grows, before handing it over (zmtp_guard.h).
    if (!GuardAcceptedConnections(cap, kGuardFrames, options.max_connections)) {
      std::cerr << "tiergym: this program does not link env/server/zmtp_hooks.cc: a message "
                   "is bounded per frame only, not in all, and connections are not counted "
                   "(zmtp_guard.h)\n";
    }
    try {
      socket->bind(options.endpoint);
    } catch (const zmq::error_t& e) {
      return BindError(e, options.endpoint);
    }
    std::string endpoint = socket->get(zmq::sockopt::last_endpoint);
    const bool reachable = !LocalOnly(endpoint);
    if (reachable && !curve && !options.open_without_curve) {
      return absl::FailedPreconditionError(StrCat(
          options.endpoint, " (bound as ", endpoint,
          ") is reachable from other machines, without CURVE: anyone who reaches it could "
          "make sessions, read the served profiles and watch the traffic. Require CURVE "
          "(tiergym serve --curve-key FILE --curve-clients PATH, keys from `tiergym keygen`), "
          "bind tcp://127.0.0.1:PORT (remote agents through ssh -L), or serve it open on "
          "purpose (--insecure-open)"));
    }
    // Disconnections, to close the sessions of connections that went away.
    const std::string monitor_endpoint =
        StrCat("inproc://tiergym-monitor-", reinterpret_cast<uintptr_t>(socket.get()));
    if (zmq_socket_monitor(socket->handle(), monitor_endpoint.c_str(), ZMQ_EVENT_DISCONNECTED) !=
        0) {
      return absl::InternalError(StrCat("zmq_socket_monitor: ", zmq_strerror(zmq_errno())));
    }
    auto monitor = std::make_unique<zmq::socket_t>(*context, zmq::socket_type::pair);
    monitor->set(zmq::sockopt::linger, 0);
    monitor->connect(monitor_endpoint);
    std::unique_ptr<Server> server(new Server(
        options, std::move(context), std::move(socket), std::move(monitor), std::move(zap),
        std::move(endpoint), event_fd.release(), std::move(service_options), std::move(provider)));
    server->network_reachable_ = reachable;
    for (const std::string& key : options.curve_allowed_clients) {
      server->allowed_keys_.insert(CurveKeyBytes(key));
    }
    return server;
  } catch (const zmq::error_t& e) {
    return absl::InternalError(StrCat(options.endpoint, ": ZeroMQ: ", e.what()));
  }
}

Server::Server(const ServerOptions& options, std::unique_ptr<zmq::context_t> context,
               std::unique_ptr<zmq::socket_t> socket, std::unique_ptr<zmq::socket_t> monitor,
               std::unique_ptr<zmq::socket_t> zap, std::string endpoint, int event_fd,
               ServiceOptions service_options, std::shared_ptr<EnvProvider> provider)
    : options_(options),
      context_(std::move(context)),
      socket_(std::move(socket)),
      monitor_(std::move(monitor)),
      zap_(std::move(zap)),
      endpoint_(std::move(endpoint)),
      event_fd_(event_fd) {
  load_pool_ = std::make_unique<ThreadPool>(options.load_threads);
  pool_ = std::make_unique<ThreadPool>(options.threads);
  service_ =
      std::make_unique<Service>(std::move(service_options), std::move(provider), pool_.get());
}

Server::~Server() {
  load_pool_.reset();  // workers done before the socket and the queue go
  pool_.reset();
  try {
    zmq_socket_monitor(socket_->handle(), nullptr, 0);
    monitor_->close();
    socket_->close();
    if (zap_ != nullptr) zap_->close();
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

Server::Sent Server::TrySend(const Outgoing& out) {
  try {
    for (const std::string& f : out.envelope) {
      // With ZMQ_ROUTER_MANDATORY the first frame decides: EAGAIN or EHOSTUNREACH come
      // before anything is queued.
      if (!socket_->send(zmq::buffer(f.data(), f.size()),
                         zmq::send_flags::sndmore | zmq::send_flags::dontwait)) {
        return Sent::kWouldBlock;
      }
    }
    // ZeroMQ shares the reply's bytes instead of copying them (a step_batch reply is tens
    // of KB); it drops its reference, from its own thread, once they are sent.
    auto* ref = new std::shared_ptr<std::string>(out.reply);
    zmq::message_t message(
        out.reply->data(), out.reply->size(),
        [](void*, void* hint) { delete static_cast<std::shared_ptr<std::string>*>(hint); }, ref);
    if (!socket_->send(message, zmq::send_flags::dontwait)) return Sent::kWouldBlock;
    return Sent::kSent;
  } catch (const zmq::error_t& e) {
    if (e.num() == ETERM) stop_.store(true);
    return e.num() == EAGAIN ? Sent::kWouldBlock : Sent::kGone;
  }
}

void Server::SendReply(Job& job, std::string reply) {
  if (reply.empty()) return;  // a step_batch with shm_signal: the segment told the client
  Outgoing out{job.envelope, std::make_shared<std::string>(std::move(reply))};
  auto it = clients_.find(job.client);
  if (it != clients_.end() && it->second.gone) return;  // nobody to tell
  if (it == clients_.end() || it->second.outbox.empty()) {
    switch (TrySend(out)) {
      case Sent::kSent:
        return;
      case Sent::kGone:
        PeerGone(job.client);
        return;
      case Sent::kWouldBlock:
        break;
    }
  }
  Client& client = clients_[job.client];
  if (client.outbox_bytes + out.reply->size() > options_.max_queued_reply_bytes ||
      outbox_bytes_ + out.reply->size() > options_.max_queued_reply_bytes_total) {
    service_->CountDroppedReply();  // PROTOCOL.md: the one case without a reply
    if (!client.busy && client.queued.empty() && client.outbox.empty()) {
      clients_.erase(job.client);
    }
    return;
  }
  if (client.outbox.empty()) ++outbox_clients_;
  client.outbox_bytes += out.reply->size();
  outbox_bytes_ += out.reply->size();
  client.outbox.push_back(std::move(out));
}

void Server::FlushOutboxes() {
  if (outbox_clients_ == 0) return;
  std::vector<std::string> drained, gone;
  for (auto& [name, client] : clients_) {
    while (!client.outbox.empty()) {
      const Sent sent = TrySend(client.outbox.front());
      if (sent == Sent::kWouldBlock) break;
      if (sent == Sent::kGone) {
        gone.push_back(name);
        break;
      }
      client.outbox_bytes -= client.outbox.front().reply->size();
      outbox_bytes_ -= client.outbox.front().reply->size();
      client.outbox.pop_front();
      if (client.outbox.empty()) {
        --outbox_clients_;
        drained.push_back(name);
      }
    }
  }
  for (const std::string& name : gone) PeerGone(name);
  for (const std::string& name : drained) Next(name);
}

void Server::PeerGone(const std::string& name) {
  service_->CloseSessionsOf(name);
  trim_ticks_ = kTrimTicks;
  if (auto f = fd_of_.find(name); f != fd_of_.end()) {
    auto& peers = peers_of_fd_[f->second];
    peers.erase(std::remove(peers.begin(), peers.end(), name), peers.end());
    if (peers.empty()) peers_of_fd_.erase(f->second);
    fd_of_.erase(f);
  }
  auto it = clients_.find(name);
  if (it == clients_.end()) return;
  if (!it->second.outbox.empty()) --outbox_clients_;
  outbox_bytes_ -= it->second.outbox_bytes;
  queued_bytes_ -= it->second.queued_bytes;
  if (it->second.busy) {
    // A worker has its request: the client entry stays until the reply comes back.
    it->second.gone = true;
    it->second.queued.clear();
    it->second.queued_bytes = 0;
    it->second.outbox.clear();
    it->second.outbox_bytes = 0;
  } else {
    clients_.erase(it);
  }
}

void Server::DrainMonitor() {
  for (int i = 0; i < 4096; ++i) {
    zmq::message_t event;
    if (!monitor_->recv(event, zmq::recv_flags::dontwait)) return;
    zmq::message_t address;
    if (event.more()) (void)monitor_->recv(address, zmq::recv_flags::dontwait);
    if (event.size() < 6) continue;
    uint16_t what;
    uint32_t fd;
    std::memcpy(&what, event.data(), sizeof what);
    std::memcpy(&fd, static_cast<const char*>(event.data()) + 2, sizeof fd);
    if (what != ZMQ_EVENT_DISCONNECTED) continue;
    auto it = peers_of_fd_.find(static_cast<int>(fd));
    if (it == peers_of_fd_.end()) continue;
    const std::vector<std::string> peers = it->second;
    for (const std::string& peer : peers) PeerGone(peer);
    peers_of_fd_.erase(static_cast<int>(fd));
  }
}

void Server::AnswerZap() {
  // At most a bounded number per wake-up; a handshake waits for its answer, nothing else.
  for (int i = 0; i < 256; ++i) {
    std::vector<zmq::message_t> request;
    for (;;) {
      zmq::message_t frame;
      if (!zap_->recv(frame, zmq::recv_flags::dontwait)) break;
      const bool more = frame.more();
      if (request.size() < 16) request.push_back(std::move(frame));
      if (!more) break;
    }
    if (request.empty()) return;
    const auto text = [&](size_t k) {
      return k < request.size() ? request[k].to_string() : std::string();
    };
    // RFC 27: version, request id, domain, address, routing id, mechanism, credentials.
    const std::string key = text(6);
    const bool allowed = request.size() >= 7 && text(0) == "1.0" && text(5) == "CURVE" &&
                         key.size() == 32 && allowed_keys_.count(key) > 0;
    const std::string status = allowed ? "200" : "400";
    const std::string reason = allowed ? "OK" : "client key not allowed";
    const std::string user = allowed ? Z85(key) : "";
    const std::string version = "1.0", id = text(1);
    for (const std::string* f : {&version, &id, &status, &reason, &user}) {
      zap_->send(zmq::buffer(*f), zmq::send_flags::sndmore);
    }
    zap_->send(zmq::message_t(), zmq::send_flags::none);
    if (allowed) continue;
    ++curve_refused_;
    // Said on stderr at most once a second (a stranger may knock continuously).
    const auto now = std::chrono::steady_clock::now();
    if (now - refusal_logged_ >= std::chrono::seconds(1)) {
      refusal_logged_ = now;
      std::cerr << "tiergym serve: refused a CURVE client from " << text(3) << " (key " << Z85(key)
                << " is not allowed; " << curve_refused_ << " refused so far)\n";
    }
  }
}

void Server::Dispatch(std::shared_ptr<Job> job) {
  clients_[job->client].busy = true;
  in_flight_.fetch_add(1);
  if (!job->slow) ++in_flight_fast_;
  ThreadPool& pool = job->slow ? *load_pool_ : *pool_;
  pool.Submit([this, job = std::move(job)] {
    job->reply = service_->Handle(job->bytes(), job->client);
    {
      std::lock_guard<std::mutex> lock(finished_mu_);
      finished_.push_back(job);
    }
    const uint64_t one = 1;
    [[maybe_unused]] ssize_t n = write(event_fd_, &one, sizeof one);
  });
}

bool Server::Quick(const Job& job) const {
  constexpr size_t kQuickBytes = 4096, kQuickBatchBytes = 16384;
  if (!options_.inline_quick_requests || in_flight_fast_ > 0 ||
      job.payload.size() > kQuickBatchBytes) {
    return false;
  }
  const std::optional<protocol::Op> op = protocol::PeekRequestOp(job.bytes());
  using protocol::Op;
  if (op == Op::kStepBatch) return true;  // its entries on this thread and the idle workers
  return job.payload.size() <= kQuickBytes &&
         (op == Op::kStep || op == Op::kReset || op == Op::kClose || op == Op::kHello ||
          op == Op::kList || op == Op::kStats);
}

void Server::Next(const std::string& name) {
  auto it = clients_.find(name);
  if (it == clients_.end()) return;
  Client& client = it->second;
  if (client.busy || !client.outbox.empty()) return;
  if (client.queued.empty() || stop_.load()) {
    if (client.queued.empty()) clients_.erase(it);
    return;
  }
  std::shared_ptr<Job> next = std::move(client.queued.front());
  client.queued.pop_front();
  client.queued_bytes -= next->payload.size();
  queued_bytes_ -= next->payload.size();
  Dispatch(std::move(next));
}

void Server::Accept(std::shared_ptr<Job> job) {
  Client& client = clients_[job->client];
  if (!client.busy && client.queued.empty() && client.outbox.empty()) {
    if (Quick(*job)) {
      SendReply(*job, service_->Handle(job->bytes(), job->client));
      Next(job->client);
      return;
    }
    const std::optional<protocol::Op> op = protocol::PeekRequestOp(job->bytes());
    job->slow = op == protocol::Op::kMake || op == protocol::Op::kEstimate ||
                op == protocol::Op::kCoschedMake;
    Dispatch(std::move(job));
    return;
  }
  if (client.queued.size() >= options_.max_pending_per_client ||
      client.queued_bytes + job->payload.size() > options_.max_queued_request_bytes ||
      queued_bytes_ + job->payload.size() > options_.max_queued_request_bytes_total) {
    SendReply(*job,
              protocol::EncodeReply(protocol::Reply{
                  protocol::PeekReplyId(job->bytes()),
                  protocol::MakeError(absl::StatusCode::kResourceExhausted, protocol::kPayloadField,
                                      StrCat("more than ", options_.max_pending_per_client,
                                             " requests (or ", options_.max_queued_request_bytes,
                                             " bytes of them) outstanding on this connection; read "
                                             "replies before sending more"))}));
    return;
  }
  const std::optional<protocol::Op> op = protocol::PeekRequestOp(job->bytes());
  job->slow = op == protocol::Op::kMake || op == protocol::Op::kEstimate ||
              op == protocol::Op::kCoschedMake;
  client.queued_bytes += job->payload.size();
  queued_bytes_ += job->payload.size();
  client.queued.push_back(std::move(job));
}

void Server::ReceiveAll() {
  constexpr size_t kMaxFrames = 16;
  // At most a bounded number per wake-up, so that replies keep flowing under load.
  for (int i = 0; i < 1024; ++i) {
    std::vector<zmq::message_t> frames;
    bool more = false;
    for (;;) {
      zmq::message_t frame;
      if (!socket_->recv(frame, zmq::recv_flags::dontwait)) break;
      more = frame.more();
      // CURVE hides where messages end from the guard: it is told of each one taken.
      if (!more && zap_ != nullptr) GuardMessageTaken(zmq_msg_get(frame.handle(), ZMQ_SRCFD));
      if (discarding_) {
        discarding_ = more;
        continue;
      }
      if (frames.size() < kMaxFrames) frames.push_back(std::move(frame));
      if (!more) break;
      if (frames.size() >= kMaxFrames) discarding_ = true;
    }
    if (frames.empty()) return;
    if (frames.size() < 2 || discarding_ || frames.size() >= kMaxFrames) {
      continue;  // a ROUTER always prepends the identity; over-long messages are dropped
    }
    const int fd = zmq_msg_get(frames.back().handle(), ZMQ_SRCFD);
    auto job = std::make_shared<Job>();
    job->payload = std::move(frames.back());
    frames.pop_back();
    job->client = frames[0].to_string();
    for (zmq::message_t& f : frames) job->envelope.push_back(f.to_string());
    // Disconnections reported before this message arrived are applied first, so that a
    // new connection reusing a closed one's descriptor is never taken for it.
    DrainMonitor();
    if (fd >= 0) {
      auto [it, inserted] = fd_of_.emplace(job->client, fd);
      if (inserted) {
        peers_of_fd_[fd].push_back(job->client);
      } else if (it->second != fd) {
        auto& old = peers_of_fd_[it->second];
        old.erase(std::remove(old.begin(), old.end(), job->client), old.end());
        it->second = fd;
        peers_of_fd_[fd].push_back(job->client);
      }
    }
    Accept(std::move(job));
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
    in_flight_.fetch_sub(1);
    if (!job->slow) --in_flight_fast_;
    auto it = clients_.find(job->client);
    if (it != clients_.end() && it->second.gone) {
      // It left while a worker had its request: what that request made goes too.
      service_->CloseSessionsOf(job->client);
      clients_.erase(it);
      continue;
    }
    if (it != clients_.end()) it->second.busy = false;
    SendReply(*job, std::move(job->reply));
    Next(job->client);
  }
}

absl::Status Server::Run() {
  using Clock = std::chrono::steady_clock;
  Clock::time_point next_reclaim = Clock::now();
  const auto reclaim_every = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(options_.reclaim_interval_s));
  while (!stop_.load()) {
    zmq::pollitem_t items[] = {{socket_->handle(), 0, ZMQ_POLLIN, 0},
                               {nullptr, event_fd_, ZMQ_POLLIN, 0},
                               {monitor_->handle(), 0, ZMQ_POLLIN, 0},
                               {zap_ != nullptr ? zap_->handle() : nullptr, 0, ZMQ_POLLIN, 0}};
    // Outboxes are retried every few milliseconds (a ROUTER cannot be polled for room
    // towards one peer).
    const int rc = zmq_poll(items, zap_ != nullptr ? 4 : 3, outbox_clients_ > 0 ? 5 : 250);
    if (rc < 0) {
      if (zmq_errno() == EINTR) continue;
      if (zmq_errno() == ETERM) break;
      return absl::InternalError(StrCat("zmq_poll: ", zmq_strerror(zmq_errno())));
    }
    try {
      if (zap_ != nullptr && (items[3].revents & ZMQ_POLLIN)) AnswerZap();
      if (items[2].revents & ZMQ_POLLIN) DrainMonitor();
      FlushOutboxes();
      if (items[1].revents & ZMQ_POLLIN) SendFinished();
      if (!stop_.load() && (items[0].revents & ZMQ_POLLIN)) ReceiveAll();
    } catch (const zmq::error_t& e) {
      if (e.num() == ETERM) break;
      if (e.num() != EINTR && e.num() != EAGAIN) {
        std::cerr << "tiergym serve: ZeroMQ: " << e.what() << " (going on)\n";
      }
    }
    if (Clock::now() >= next_reclaim) {
      if (service_->ReclaimIdle() > 0) trim_ticks_ = kTrimTicks;
      // A connection dropped for a message that never ended leaves what ZeroMQ held of it.
      const uint64_t guard_dropped = GuardedConnectionsDropped();
      if (guard_dropped != guard_dropped_seen_) trim_ticks_ = kTrimTicks;
      guard_dropped_seen_ = guard_dropped;
      if (trim_ticks_ > 0) {
        // Connections and sessions went: hand their memory back to the system, again on
        // the next ticks, for what is freed after them (configurations left unused are
        // released a while later).
        malloc_trim(0);
        --trim_ticks_;
      }
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
        Outgoing out{
            job->envelope,
            std::make_shared<std::string>(protocol::EncodeReply(protocol::Reply{
                protocol::PeekReplyId(job->bytes()),
                protocol::MakeError(absl::StatusCode::kUnavailable, protocol::kPayloadField,
                                    "the server is shutting down")}))};
        (void)TrySend(out);
      }
      client.queued.clear();
      queued_bytes_ -= client.queued_bytes;
      client.queued_bytes = 0;
    }
    while (in_flight_ > 0 && Clock::now() < deadline) {
      zmq::pollitem_t item = {nullptr, event_fd_, ZMQ_POLLIN, 0};
      if (zmq_poll(&item, 1, 100) > 0) SendFinished();
    }
    FlushOutboxes();
  } catch (const zmq::error_t&) {
  }
  return absl::OkStatus();
}

}  // namespace tiergym::env

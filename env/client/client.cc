#include "env/client/client.h"

#include <chrono>
#include <cstring>
#include <functional>
#include <utility>

#include "env/curve/curve_keys.h"
#include "traces/base/strings.h"
#include "zmq.hpp"

namespace tiergym::env {

using Clock = std::chrono::steady_clock;

namespace {

constexpr int kMonitorEvents = ZMQ_EVENT_DISCONNECTED | ZMQ_EVENT_HANDSHAKE_SUCCEEDED |
                               ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL |
                               ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                               ZMQ_EVENT_HANDSHAKE_FAILED_AUTH | ZMQ_EVENT_CONNECT_RETRIED;

template <typename T>
absl::StatusOr<T> BodyAs(absl::StatusOr<protocol::ReplyBody> body) {
  if (!body.ok()) return body.status();
  if (auto* e = std::get_if<protocol::Error>(&*body)) return protocol::ToStatus(*e);
  if (auto* t = std::get_if<T>(&*body)) return std::move(*t);
  return absl::InternalError("reply of the wrong kind");
}

Clock::duration Seconds(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

}  // namespace

// The DEALER and the monitor of its connection.
struct Client::Socket {
  zmq::context_t context{1};
  zmq::socket_t socket{context, zmq::socket_type::dealer};
  zmq::socket_t monitor{context, zmq::socket_type::pair};
  bool handshaken = false;  // a handshake succeeded on this socket
  uint64_t retries = 0;     // connection attempts that failed
  bool refused = false;     // a CURVE server refused this client's key
  bool curve = false;       // this client uses CURVE
  std::string endpoint;

  static absl::StatusOr<std::unique_ptr<Socket>> Open(const ClientOptions& options);
  // Reads the monitor's events; returns why the connection is lost ("" while it holds).
  std::string Lost();
};

absl::StatusOr<std::unique_ptr<Client::Socket>> Client::Socket::Open(const ClientOptions& o) {
  auto s = std::make_unique<Socket>();
  s->endpoint = o.endpoint;
  const bool curve =
      !o.curve_server_key.empty() || !o.curve_public_key.empty() || !o.curve_secret_key.empty();
  s->curve = curve;
  if (curve && !CurveAvailable()) {
    return absl::UnimplementedError("CURVE: this libzmq was built without it (no libsodium)");
  }
  if (curve) {
    for (const auto& [name, key] :
         {std::pair<const char*, const std::string*>{"curve_server_key", &o.curve_server_key},
          {"curve_public_key", &o.curve_public_key},
          {"curve_secret_key", &o.curve_secret_key}}) {
      if (!IsCurveKey(*key)) {
        return absl::InvalidArgumentError(
            StrCat(name,
                   ": not a Z85 CURVE key (40 characters); CURVE takes the server's "
                   "public key and this client's key pair"));
      }
    }
  }
  try {
    s->socket.set(zmq::sockopt::linger, 0);
    if (curve) {
      s->socket.set(zmq::sockopt::curve_serverkey, CurveKeyBytes(o.curve_server_key));
      s->socket.set(zmq::sockopt::curve_publickey, CurveKeyBytes(o.curve_public_key));
      s->socket.set(zmq::sockopt::curve_secretkey, CurveKeyBytes(o.curve_secret_key));
    }
    if (o.reconnect) {
      // A server whose node vanished without closing the connection is noticed too.
      s->socket.set(zmq::sockopt::heartbeat_ivl, 2000);
      s->socket.set(zmq::sockopt::heartbeat_timeout, 6000);
      s->socket.set(zmq::sockopt::reconnect_ivl_max,
                    static_cast<int>(o.reconnect_max_backoff_s * 1000));
    }
    const std::string monitor_endpoint =
        StrCat("inproc://tiergym-client-monitor-", reinterpret_cast<uintptr_t>(s.get()));
    if (zmq_socket_monitor(s->socket.handle(), monitor_endpoint.c_str(), kMonitorEvents) != 0) {
      return absl::InternalError(StrCat("zmq_socket_monitor: ", zmq_strerror(zmq_errno())));
    }
    s->monitor.set(zmq::sockopt::linger, 0);
    s->monitor.connect(monitor_endpoint);
    s->socket.connect(o.endpoint);
  } catch (const zmq::error_t& e) {
    return absl::InvalidArgumentError(StrCat(o.endpoint, ": cannot connect: ", e.what()));
  }
  return s;
}

std::string Client::Socket::Lost() {
  std::string lost;
  for (;;) {
    zmq::message_t event, address;
    if (!monitor.recv(event, zmq::recv_flags::dontwait)) break;
    if (event.more()) (void)monitor.recv(address, zmq::recv_flags::dontwait);
    if (event.size() < 6) continue;
    uint16_t what;
    uint32_t value;
    std::memcpy(&what, event.data(), sizeof what);
    std::memcpy(&value, static_cast<const char*>(event.data()) + 2, sizeof value);
    std::string reason;
    switch (what) {
      case ZMQ_EVENT_HANDSHAKE_SUCCEEDED:
        handshaken = true;
        break;
      case ZMQ_EVENT_CONNECT_RETRIED:
        ++retries;
        break;
      case ZMQ_EVENT_DISCONNECTED:
        reason = handshaken
                     ? StrCat("the connection to ", endpoint, " was closed (the server went away)")
                     : StrCat("the connection to ", endpoint,
                              " was closed during the handshake (the server is full: "
                              "--max-connections; or, with CURVE, curve_server_key is "
                              "not the server's public key)");
        break;
      case ZMQ_EVENT_HANDSHAKE_FAILED_AUTH:
        refused = true;
        reason =
            StrCat("the server at ", endpoint, " refused this client's CURVE key (status ", value,
                   "): add its public certificate (NAME.key) to the server's "
                   "--curve-clients");
        break;
      case ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL:
        reason = value == ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH
                     ? StrCat("the server at ", endpoint,
                              " and this client disagree on CURVE (one side uses it, the "
                              "other not)")
                     : StrCat("the handshake with ", endpoint, " failed (protocol error 0x",
                              Hex(value), ")");
        break;
      case ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL:
        reason = StrCat("the handshake with ", endpoint, " failed",
                        curve ? " (with CURVE: is the server's public key the right one, and "
                                "this client's key in its --curve-clients?)"
                              : " (does the server require CURVE? then give its public key "
                                "and this client's key pair)");
        break;
      default:
        break;
    }
    if (lost.empty()) lost = std::move(reason);
  }
  return lost;
}

absl::StatusOr<ClientOptions> WithCurveCertificates(ClientOptions options,
                                                    const std::string& server_certificate,
                                                    const std::string& client_secret_certificate) {
  absl::StatusOr<CurveKeyPair> server = ReadCurveCertificate(server_certificate, false);
  if (!server.ok()) return server.status();
  absl::StatusOr<CurveKeyPair> own = ReadCurveCertificate(client_secret_certificate, true);
  if (!own.ok()) return own.status();
  options.curve_server_key = server->public_key;
  options.curve_public_key = own->public_key;
  options.curve_secret_key = own->secret_key;
  return options;
}

Client::Client(ClientOptions options, std::unique_ptr<Socket> socket)
    : options_(std::move(options)), socket_(std::move(socket)) {}

Client::~Client() = default;

absl::StatusOr<std::unique_ptr<Client>> Client::Connect(const ClientOptions& options) {
  absl::StatusOr<std::unique_ptr<Socket>> socket = Socket::Open(options);
  if (!socket.ok()) return socket.status();
  std::unique_ptr<Client> client(new Client(options, std::move(*socket)));
  absl::StatusOr<protocol::HelloReply> hello =
      BodyAs<protocol::HelloReply>(client->Call(protocol::Op::kHello, std::monostate{}));
  if (!hello.ok()) return hello.status();
  if (hello->protocol != protocol::kVersion) {
    return absl::FailedPreconditionError(StrCat(options.endpoint, " speaks protocol version ",
                                                hello->protocol, "; this client speaks ",
                                                protocol::kVersion));
  }
  client->hello_ = std::move(*hello);
  return client;
}

absl::StatusOr<std::string> Client::CallRaw(std::string_view payload) {
  try {
    zmq::socket_t& s = socket_->socket;
    s.send(zmq::buffer(payload.data(), payload.size()), zmq::send_flags::none);
    zmq::pollitem_t item = {s.handle(), 0, ZMQ_POLLIN, 0};
    const long timeout_ms = static_cast<long>(options_.timeout_s * 1000);
    if (zmq::poll(&item, 1, std::chrono::milliseconds(timeout_ms)) == 0) {
      return absl::DeadlineExceededError(StrCat("no reply from ", options_.endpoint, " within ",
                                                options_.timeout_s, " s; is the server running?"));
    }
    zmq::message_t reply;
    if (!s.recv(reply, zmq::recv_flags::dontwait)) return absl::UnavailableError("no reply");
    return reply.to_string();
  } catch (const zmq::error_t& e) {
    return absl::UnavailableError(StrCat(options_.endpoint, ": ", e.what()));
  }
}

absl::StatusOr<protocol::ReplyBody> Client::Call(protocol::Op op, protocol::RequestBody body) {
  const auto lost = [&](std::string reason) -> absl::Status {
    lost_ = std::move(reason);
    if (socket_->refused) return absl::PermissionDeniedError(lost_);
    return absl::UnavailableError(StrCat(
        lost_, " (op ", protocol::OpName(op), ")",
        options_.reconnect || op == protocol::Op::kHello ? "" : "; its sessions are gone with it"));
  };
  if (!lost_.empty()) return lost(lost_);
  // A loss noticed since the last call: the request would reach whatever answers now.
  if (std::string reason = socket_->Lost(); !reason.empty()) return lost(std::move(reason));
  const uint64_t id = next_id_++;
  const std::string payload =
      protocol::EncodeRequest(protocol::Request{op, protocol::kVersion, id, std::move(body)});
  try {
    zmq::socket_t& s = socket_->socket;
    s.send(zmq::buffer(payload), zmq::send_flags::none);
    const auto deadline = Clock::now() + Seconds(options_.timeout_s);
    for (;;) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      zmq::pollitem_t items[] = {{s.handle(), 0, ZMQ_POLLIN, 0},
                                 {socket_->monitor.handle(), 0, ZMQ_POLLIN, 0}};
      if (left.count() <= 0 || zmq::poll(items, 2, left) == 0) {
        return absl::DeadlineExceededError(
            StrCat("no reply from ", options_.endpoint, " within ", options_.timeout_s, " s (op ",
                   protocol::OpName(op), "); is the server running?"));
      }
      if ((items[0].revents & ZMQ_POLLIN) == 0) {
        if (std::string reason = socket_->Lost(); !reason.empty()) return lost(std::move(reason));
        continue;
      }
      zmq::message_t reply;
      if (!s.recv(reply, zmq::recv_flags::dontwait)) continue;
      const std::string_view bytes(static_cast<const char*>(reply.data()), reply.size());
      if (protocol::PeekReplyId(bytes) != id) continue;  // a late reply to an earlier call
      absl::StatusOr<protocol::Reply> decoded = protocol::DecodeReply(bytes, op);
      if (!decoded.ok()) return decoded.status();
      return std::move(decoded->body);
    }
  } catch (const zmq::error_t& e) {
    return absl::UnavailableError(StrCat(options_.endpoint, ": ", e.what()));
  }
}

const protocol::SessionId& Client::Current(const protocol::SessionId& session) const {
  auto it = made_.find(session);
  return it == made_.end() ? session : it->second.current;
}

absl::Status Client::Reconnect() {
  const auto deadline = Clock::now() + Seconds(options_.reconnect_give_up_s);
  const std::string why = lost_;
  uint64_t attempts = 0;
  for (;;) {
    // A fresh socket: nothing queued for the old connection goes to the new server.
    socket_.reset();
    absl::StatusOr<std::unique_ptr<Socket>> socket = Socket::Open(options_);
    if (!socket.ok()) return socket.status();
    socket_ = std::move(*socket);
    lost_.clear();
    ++attempts;
    // libzmq connects, retrying with a doubling pause, until a server answers hello.
    const double wait_s = std::chrono::duration<double>(deadline - Clock::now()).count();
    if (wait_s <= 0) break;
    const double saved = options_.timeout_s;
    options_.timeout_s = wait_s;
    absl::StatusOr<protocol::HelloReply> hello =
        BodyAs<protocol::HelloReply>(Call(protocol::Op::kHello, std::monostate{}));
    options_.timeout_s = saved;
    attempts += socket_->retries;
    if (socket_->refused) return absl::PermissionDeniedError(lost_);
    if (!hello.ok()) {
      if (hello.status().code() == absl::StatusCode::kDeadlineExceeded) break;
      if (!lost_.empty()) continue;  // connected and lost again: once more
      return hello.status();
    }
    if (hello->protocol != protocol::kVersion) {
      return absl::FailedPreconditionError(
          StrCat("reconnected to ", options_.endpoint, ", which speaks protocol version ",
                 hello->protocol, "; this client speaks ", protocol::kVersion));
    }
    hello_ = std::move(*hello);
    // Every session made again, with its configuration.
    bool again = false;
    for (auto& [id, made] : made_) {
      absl::StatusOr<protocol::ReplyBody> reply =
          Call(protocol::Op::kMake, protocol::MakeRequest{made.env_id, made.config});
      if (!reply.ok() && !lost_.empty()) {
        again = true;  // the new server went too
        break;
      }
      if (reply.ok()) {
        if (auto* m = std::get_if<protocol::MakeReply>(&*reply)) {
          made.current = m->session;
          continue;
        }
      }
      const absl::Status s =
          reply.ok() ? protocol::ToStatus(std::get<protocol::Error>(*reply)) : reply.status();
      return {s.code(), StrCat("reconnected to ", options_.endpoint, ", but making session ", id,
                               " again failed: ", s.message())};
    }
    if (again) continue;
    ++reconnections_;
    interrupted_episodes_ += made_.size();
    return absl::OkStatus();
  }
  return absl::UnavailableError(StrCat(options_.endpoint, " did not come back within ",
                                       options_.reconnect_give_up_s, " s (", attempts,
                                       " attempts to connect) after: ", why));
}

absl::StatusOr<protocol::ReplyBody> Client::CallOrReconnect(
    protocol::Op op, const std::function<protocol::RequestBody()>& body, bool retry,
    bool* interrupted) {
  absl::StatusOr<protocol::ReplyBody> reply = Call(op, body());
  // A connection lost and made again at most 3 times for one call.
  for (int round = 0; round < 3; ++round) {
    if (reply.ok() || lost_.empty() || !options_.reconnect || socket_->refused) return reply;
    const std::string why = lost_;
    if (absl::Status s = Reconnect(); !s.ok()) return s;
    if (!retry) {
      interrupted_ = StrCat("server lost: ", why);
      *interrupted = true;
      return reply;
    }
    reply = Call(op, body());  // with the sessions' new ids
  }
  return reply;
}

absl::StatusOr<protocol::ListReply> Client::List() {
  interrupted_.clear();
  bool interrupted = false;
  return BodyAs<protocol::ListReply>(CallOrReconnect(
      protocol::Op::kList, [] { return std::monostate{}; }, true, &interrupted));
}

absl::StatusOr<protocol::MakeReply> Client::Make(const protocol::ConfigMap& config,
                                                 const std::string& env_id) {
  interrupted_.clear();
  bool interrupted = false;
  absl::StatusOr<protocol::MakeReply> made = BodyAs<protocol::MakeReply>(CallOrReconnect(
      protocol::Op::kMake,
      [&] {
        return protocol::MakeRequest{env_id, config};
      },
      true, &interrupted));
  if (made.ok() && options_.reconnect) {
    made_[made->session] = Made{env_id, config, made->session, {}, {}};
  }
  return made;
}

absl::StatusOr<StepResult> Client::Reset(const protocol::SessionId& session,
                                         std::optional<uint64_t> seed,
                                         const ResetOptions& options) {
  interrupted_.clear();
  bool interrupted = false;
  absl::StatusOr<protocol::ResetReply> r = BodyAs<protocol::ResetReply>(CallOrReconnect(
      protocol::Op::kReset,
      [&] {
        return protocol::ResetRequest{Current(session), seed, options};
      },
      true, &interrupted));
  if (!r.ok()) return r.status();
  if (auto it = made_.find(session); it != made_.end()) it->second.last = r->result;
  return std::move(r->result);
}

absl::StatusOr<StepResult> Client::Step(const protocol::SessionId& session, const Action& action) {
  interrupted_.clear();
  bool interrupted = false;
  absl::StatusOr<protocol::ReplyBody> body = CallOrReconnect(
      protocol::Op::kStep,
      [&] {
        return protocol::StepRequest{Current(session), action, {}};
      },
      false, &interrupted);
  auto it = made_.find(session);
  if (interrupted && it != made_.end()) {
    StepResult cut = it->second.last;
    cut.reward = 0;
    cut.terminated = false;
    cut.truncated = true;
    return cut;
  }
  absl::StatusOr<protocol::StepReply> r = BodyAs<protocol::StepReply>(std::move(body));
  if (!r.ok()) return r.status();
  if (it != made_.end()) it->second.last = r->result;
  return std::move(r->result);
}

absl::StatusOr<protocol::StepBatchReply> Client::StepBatch(
    const protocol::StepBatchRequest& request) {
  interrupted_.clear();
  bool interrupted = false;
  absl::StatusOr<protocol::ReplyBody> body = CallOrReconnect(
      protocol::Op::kStepBatch,
      [&]() -> protocol::RequestBody {
        protocol::StepBatchRequest current = request;
        if (!made_.empty()) {
          for (protocol::SessionId& s : current.sessions) s = Current(s);
        }
        return current;
      },
      false, &interrupted);
  if (interrupted) {
    // Every entry's episode is cut: its last result, truncated.
    protocol::StepBatchReply cut;
    for (const protocol::SessionId& s : request.sessions) {
      auto it = made_.find(s);
      StepResult r = it == made_.end() ? StepResult{} : it->second.last;
      r.reward = 0;
      r.terminated = false;
      r.truncated = true;
      cut.results.push_back(std::move(r));
      cut.was_reset.push_back(0);
    }
    return cut;
  }
  absl::StatusOr<protocol::StepBatchReply> r = BodyAs<protocol::StepBatchReply>(std::move(body));
  if (r.ok() && !made_.empty() && r->results.size() == request.sessions.size()) {
    for (size_t i = 0; i < request.sessions.size(); ++i) {
      if (auto it = made_.find(request.sessions[i]); it != made_.end()) {
        it->second.last = r->results[i];
      }
    }
  }
  return r;
}

absl::StatusOr<protocol::EstimateReply> Client::Estimate(const protocol::EstimateRequest& request) {
  interrupted_.clear();
  bool interrupted = false;
  return BodyAs<protocol::EstimateReply>(CallOrReconnect(
      protocol::Op::kEstimate,
      [&]() -> protocol::RequestBody {
        protocol::EstimateRequest current = request;
        current.session = Current(request.session);
        return current;
      },
      true, &interrupted));
}

absl::Status Client::Close(const protocol::SessionId& session) {
  interrupted_.clear();
  bool interrupted = false;
  absl::StatusOr<protocol::ReplyBody> body = CallOrReconnect(
      protocol::Op::kClose, [&] { return protocol::CloseRequest{Current(session)}; }, false,
      &interrupted);
  made_.erase(session);
  if (interrupted) {
    interrupted_.clear();  // nothing was cut: the session was closing
    return absl::OkStatus();
  }
  return BodyAs<protocol::CloseReply>(std::move(body)).status();
}

absl::StatusOr<protocol::SessionId> Client::Fork(const protocol::SessionId& session) {
  absl::StatusOr<protocol::ForkReply> r =
      BodyAs<protocol::ForkReply>(Call(protocol::Op::kFork, protocol::ForkRequest{session}));
  if (!r.ok()) return r.status();
  return std::move(r->session);
}

absl::StatusOr<protocol::StatsReply> Client::Stats() {
  interrupted_.clear();
  bool interrupted = false;
  return BodyAs<protocol::StatsReply>(CallOrReconnect(
      protocol::Op::kStats, [] { return std::monostate{}; }, true, &interrupted));
}

// Nodes are made, reset and stepped with make, reset and step (their older spelling,
// cosched_make, cosched_reset and cosched_step, goes in the next protocol version).
absl::StatusOr<protocol::CoschedMakeReply> Client::CoschedMake(const protocol::ConfigMap& config) {
  interrupted_.clear();
  bool interrupted = false;
  absl::StatusOr<protocol::MakeReply> made = BodyAs<protocol::MakeReply>(CallOrReconnect(
      protocol::Op::kMake,
      [&] {
        return protocol::MakeRequest{protocol::kCoschedEnvId, config};
      },
      true, &interrupted));
  if (!made.ok()) return made.status();
  if (options_.reconnect) {
    made_[made->session] = Made{protocol::kCoschedEnvId, config, made->session, {}, {}};
  }
  return protocol::CoschedMakeReply{std::move(made->session), std::move(made->spec),
                                    std::move(made->tenants), std::move(made->config)};
}

absl::StatusOr<protocol::CoschedStepReply> Client::CoschedReset(const protocol::SessionId& session,
                                                                std::optional<uint64_t> seed) {
  interrupted_.clear();
  bool interrupted = false;
  absl::StatusOr<protocol::CoschedStepReply> r = BodyAs<protocol::CoschedStepReply>(CallOrReconnect(
      protocol::Op::kReset,
      [&] {
        return protocol::ResetRequest{Current(session), seed, {}};
      },
      true, &interrupted));
  if (r.ok()) {
    if (auto it = made_.find(session); it != made_.end()) it->second.last_node = *r;
  }
  return r;
}

absl::StatusOr<protocol::CoschedStepReply> Client::CoschedStep(const protocol::SessionId& session,
                                                               const std::vector<Action>& actions) {
  interrupted_.clear();
  bool interrupted = false;
  absl::StatusOr<protocol::ReplyBody> body = CallOrReconnect(
      protocol::Op::kStep,
      [&] {
        return protocol::StepRequest{Current(session), {}, actions};
      },
      false, &interrupted);
  auto it = made_.find(session);
  if (interrupted && it != made_.end()) {
    // The node's episode is cut: its last step, every tenant truncated, the node done.
    protocol::CoschedStepReply cut = it->second.last_node.value_or(protocol::CoschedStepReply{});
    for (protocol::CoschedTenant& t : cut.tenants) {
      t.result.reward = 0;
      t.result.terminated = false;
      t.result.truncated = true;
    }
    cut.done = true;
    return cut;
  }
  absl::StatusOr<protocol::CoschedStepReply> r =
      BodyAs<protocol::CoschedStepReply>(std::move(body));
  if (r.ok() && it != made_.end()) it->second.last_node = *r;
  return r;
}

}  // namespace tiergym::env

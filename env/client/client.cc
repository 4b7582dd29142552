#include "env/client/client.h"

#include <chrono>
#include <utility>

#include "traces/base/strings.h"
#include "zmq.hpp"

namespace tiergym::env {

struct Client::Socket {
  zmq::context_t context{1};
  zmq::socket_t socket{context, zmq::socket_type::dealer};
};

namespace {

template <typename T>
absl::StatusOr<T> BodyAs(absl::StatusOr<protocol::ReplyBody> body) {
  if (!body.ok()) return body.status();
  if (auto* e = std::get_if<protocol::Error>(&*body)) return protocol::ToStatus(*e);
  if (auto* t = std::get_if<T>(&*body)) return std::move(*t);
  return absl::InternalError("reply of the wrong kind");
}

}  // namespace

Client::Client(ClientOptions options, std::unique_ptr<Socket> socket)
    : options_(std::move(options)), socket_(std::move(socket)) {}

Client::~Client() = default;

absl::StatusOr<std::unique_ptr<Client>> Client::Connect(const ClientOptions& options) {
  auto socket = std::make_unique<Socket>();
  try {
    socket->socket.set(zmq::sockopt::linger, 0);
    socket->socket.connect(options.endpoint);
  } catch (const zmq::error_t& e) {
    return absl::InvalidArgumentError(StrCat(options.endpoint, ": cannot connect: ", e.what()));
  }
  std::unique_ptr<Client> client(new Client(options, std::move(socket)));
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
  const uint64_t id = next_id_++;
  const std::string payload =
      protocol::EncodeRequest(protocol::Request{op, protocol::kVersion, id, std::move(body)});
  try {
    zmq::socket_t& s = socket_->socket;
    s.send(zmq::buffer(payload), zmq::send_flags::none);
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                              std::chrono::duration<double>(options_.timeout_s));
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      zmq::pollitem_t item = {s.handle(), 0, ZMQ_POLLIN, 0};
      if (left.count() <= 0 || zmq::poll(&item, 1, left) == 0) {
        return absl::DeadlineExceededError(
            StrCat("no reply from ", options_.endpoint, " within ", options_.timeout_s, " s (op ",
                   protocol::OpName(op), "); is the server running?"));
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

absl::StatusOr<protocol::ListReply> Client::List() {
  return BodyAs<protocol::ListReply>(Call(protocol::Op::kList, std::monostate{}));
}

absl::StatusOr<protocol::MakeReply> Client::Make(const protocol::ConfigMap& config,
                                                 const std::string& env_id) {
  return BodyAs<protocol::MakeReply>(
      Call(protocol::Op::kMake, protocol::MakeRequest{env_id, config}));
}

absl::StatusOr<StepResult> Client::Reset(const protocol::SessionId& session,
                                         std::optional<uint64_t> seed,
                                         const ResetOptions& options) {
  absl::StatusOr<protocol::ResetReply> r = BodyAs<protocol::ResetReply>(
      Call(protocol::Op::kReset, protocol::ResetRequest{session, seed, options}));
  if (!r.ok()) return r.status();
  return std::move(r->result);
}

absl::StatusOr<StepResult> Client::Step(const protocol::SessionId& session, const Action& action) {
  absl::StatusOr<protocol::StepReply> r = BodyAs<protocol::StepReply>(
      Call(protocol::Op::kStep, protocol::StepRequest{session, action}));
  if (!r.ok()) return r.status();
  return std::move(r->result);
}

absl::StatusOr<protocol::StepBatchReply> Client::StepBatch(
    const protocol::StepBatchRequest& request) {
  return BodyAs<protocol::StepBatchReply>(Call(protocol::Op::kStepBatch, request));
}

absl::StatusOr<protocol::EstimateReply> Client::Estimate(const protocol::EstimateRequest& request) {
  return BodyAs<protocol::EstimateReply>(Call(protocol::Op::kEstimate, request));
}

absl::Status Client::Close(const protocol::SessionId& session) {
  return BodyAs<protocol::CloseReply>(Call(protocol::Op::kClose, protocol::CloseRequest{session}))
      .status();
}

absl::StatusOr<protocol::SessionId> Client::Fork(const protocol::SessionId& session) {
  absl::StatusOr<protocol::ForkReply> r =
      BodyAs<protocol::ForkReply>(Call(protocol::Op::kFork, protocol::ForkRequest{session}));
  if (!r.ok()) return r.status();
  return std::move(r->session);
}

absl::StatusOr<protocol::StatsReply> Client::Stats() {
  return BodyAs<protocol::StatsReply>(Call(protocol::Op::kStats, std::monostate{}));
}

absl::StatusOr<protocol::CoschedMakeReply> Client::CoschedMake(const protocol::ConfigMap& config) {
  return BodyAs<protocol::CoschedMakeReply>(
      Call(protocol::Op::kCoschedMake, protocol::CoschedMakeRequest{config}));
}

absl::StatusOr<protocol::CoschedStepReply> Client::CoschedReset(const protocol::SessionId& session,
                                                                std::optional<uint64_t> seed) {
  return BodyAs<protocol::CoschedStepReply>(
      Call(protocol::Op::kCoschedReset, protocol::CoschedResetRequest{session, seed}));
}

absl::StatusOr<protocol::CoschedStepReply> Client::CoschedStep(const protocol::SessionId& session,
                                                               const std::vector<Action>& actions) {
  return BodyAs<protocol::CoschedStepReply>(
      Call(protocol::Op::kCoschedStep, protocol::CoschedStepRequest{session, actions}));
}

}  // namespace tiergym::env

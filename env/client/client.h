// A synchronous C++ client of `tiergym serve` (env/PROTOCOL.md), for C++ agents and the
// benchmarks.
//
// One Client is one DEALER connection. Every call sends one request and waits for its
// reply at most `timeout_s`: a dead or absent server gives DeadlineExceeded naming the
// endpoint, never a hang. Replies are matched by request id, so a late reply to a call
// that timed out is discarded. Error replies become statuses with the server's code and
// message ("action[3]: tier 7 out of range [0, 2)").
//
// Not thread-safe: use one Client per thread.
#ifndef TIERGYM_ENV_CLIENT_CLIENT_H_
#define TIERGYM_ENV_CLIENT_CLIENT_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "env/protocol/protocol.h"

namespace tiergym::env {

struct ClientOptions {
  // The server's endpoint, e.g. "tcp://127.0.0.1:5555" or "ipc:///tmp/tiergym.sock". Required.
  std::string endpoint;
  // Longest wait for one reply, in seconds. Default 30.
  double timeout_s = 30;
};

class Client {
 public:
  // Connects and says hello; FailedPrecondition when the server speaks another protocol
  // version, DeadlineExceeded when no server answers.
  static absl::StatusOr<std::unique_ptr<Client>> Connect(const ClientOptions& options);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  const protocol::HelloReply& hello() const { return hello_; }

  absl::StatusOr<protocol::ListReply> List();
  absl::StatusOr<protocol::MakeReply> Make(const protocol::ConfigMap& config,
                                           const std::string& env_id = protocol::kEnvId);
  absl::StatusOr<StepResult> Reset(const protocol::SessionId& session,
                                   std::optional<uint64_t> seed = std::nullopt,
                                   const ResetOptions& options = {});
  absl::StatusOr<StepResult> Step(const protocol::SessionId& session, const Action& action);
  absl::StatusOr<protocol::StepBatchReply> StepBatch(const protocol::StepBatchRequest& request);
  absl::StatusOr<protocol::EstimateReply> Estimate(const protocol::EstimateRequest& request);
  absl::Status Close(const protocol::SessionId& session);
  // A new session at `session`'s state (PROTOCOL.md "fork"): its handle.
  absl::StatusOr<protocol::SessionId> Fork(const protocol::SessionId& session);
  absl::StatusOr<protocol::StatsReply> Stats();

  // Co-scheduling nodes (PROTOCOL.md "Co-scheduling"): a node of K tenants; reset and step
  // give the node step (one CoschedTenant per tenant). actions: one per tenant, an empty
  // one keeps the tenant's placement. Close() closes a node too.
  absl::StatusOr<protocol::CoschedMakeReply> CoschedMake(const protocol::ConfigMap& config);
  absl::StatusOr<protocol::CoschedStepReply> CoschedReset(
      const protocol::SessionId& session, std::optional<uint64_t> seed = std::nullopt);
  absl::StatusOr<protocol::CoschedStepReply> CoschedStep(const protocol::SessionId& session,
                                                         const std::vector<Action>& actions);

  // Sends a raw payload and returns the raw reply (the benchmarks' echo baseline, tests of
  // malformed requests). The reply is the next message received, whatever its id.
  absl::StatusOr<std::string> CallRaw(std::string_view payload);

 private:
  struct Socket;
  Client(ClientOptions options, std::unique_ptr<Socket> socket);
  absl::StatusOr<protocol::ReplyBody> Call(protocol::Op op, protocol::RequestBody body);

  ClientOptions options_;
  std::unique_ptr<Socket> socket_;
  uint64_t next_id_ = 1;
  protocol::HelloReply hello_;
};

}  // namespace tiergym::env

#endif  // TIERGYM_ENV_CLIENT_CLIENT_H_

// A synchronous C++ client of `tiergym serve` (env/PROTOCOL.md), for C++ agents and the
// benchmarks.
//
// One Client is one DEALER connection. Every call sends one request and waits for its
// reply at most `timeout_s`: a dead or absent server gives DeadlineExceeded naming the
// endpoint, never a hang; a connection that drops while a call waits (a socket monitor
// reports it) gives Unavailable at once. Replies are matched by request id, so a late
// reply to a call that timed out is discarded. Error replies become statuses with the
// server's code and message ("action[3]: tier 7 out of range [0, 2)").
//
// CURVE (ZeroMQ's authentication and encryption): with the server's public key and this
// client's key pair the connection is a CURVE client (`tiergym serve --curve-key`); a
// server that refuses the key gives PermissionDenied at Connect.
//
// Reconnection (ClientOptions::reconnect, off by default): when the connection to the
// server is lost (the server died, was restarted or its node rebooted), the call that
// noticed waits for a server at the same endpoint (libzmq retries with a backoff up to
// `reconnect_max_backoff_s`, for `reconnect_give_up_s` at most, then Unavailable saying
// so), makes every open session again with its configuration (the same SessionId keeps
// working: the client maps it to the new session) and answers as follows. Step,
// CoschedStep and StepBatch: the episode was interrupted: the result is truncated, with the
// session's last observation and info, reward 0, and interrupted() says why; the session
// must be reset (as after any truncation). Make, Reset, Estimate, List, Stats and hello: done
// again on the new server. Close: done (the session was gone with the server). A
// shared-memory segment does not survive: a batch must ask for a new one. Off by default:
// an interrupted episode changes what an evaluation measures, so carrying on must be asked
// for.
//
// Not thread-safe: use one Client per thread.
#ifndef TIERGYM_ENV_CLIENT_CLIENT_H_
#define TIERGYM_ENV_CLIENT_CLIENT_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "env/protocol/protocol.h"

namespace tiergym::env {

struct ClientOptions {
  // The server's endpoint, e.g. "tcp://127.0.0.1:5555" or "ipc:///tmp/tiergym.sock". Required.
  std::string endpoint;
  // Longest wait for one reply, in seconds. Default 30.
  double timeout_s = 30;
  // CURVE: the server's public key and this client's key pair, Z85 (40 characters each);
  // all empty (default): no CURVE. WithCurveCertificates reads them from certificate files.
  std::string curve_server_key = {};
  std::string curve_public_key = {};
  std::string curve_secret_key = {};
  // Carry on through the loss of the server (see above). Default false.
  bool reconnect = false;
  // How long a lost connection is waited for before the call fails. Default 60 s.
  double reconnect_give_up_s = 60;
  // The longest pause between two attempts to connect (they start 0.1 s apart and double).
  // Default 5 s.
  double reconnect_max_backoff_s = 5;
};

// `options` with the CURVE keys of the files `tiergym keygen` writes: the server's public
// certificate (NAME.key) and this client's secret one (NAME.key_secret, which must be
// private to its owner: FailedPrecondition otherwise, naming the file and the fix).
absl::StatusOr<ClientOptions> WithCurveCertificates(ClientOptions options,
                                                    const std::string& server_certificate,
                                                    const std::string& client_secret_certificate);

class Client {
 public:
  // Connects and says hello; FailedPrecondition when the server speaks another protocol
  // version, DeadlineExceeded when no server answers, PermissionDenied when a CURVE server
  // refuses this client's key, Unavailable when the handshake fails otherwise (CURVE on
  // one side only, another server key).
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

  // Co-scheduling nodes (PROTOCOL.md "Co-scheduling"): a node of K tenants, made with make
  // of tiergym/CoschedNode-v0; reset and step (with actions) give the node step (one
  // CoschedTenant per tenant). actions: one per tenant, an empty one keeps the tenant's
  // placement. Close() closes a node too.
  absl::StatusOr<protocol::CoschedMakeReply> CoschedMake(const protocol::ConfigMap& config);
  absl::StatusOr<protocol::CoschedStepReply> CoschedReset(
      const protocol::SessionId& session, std::optional<uint64_t> seed = std::nullopt);
  absl::StatusOr<protocol::CoschedStepReply> CoschedStep(const protocol::SessionId& session,
                                                         const std::vector<Action>& actions);

  // Sends a raw payload and returns the raw reply (the benchmarks' echo baseline, tests of
  // malformed requests). The reply is the next message received, whatever its id.
  absl::StatusOr<std::string> CallRaw(std::string_view payload);

  // Why the last call's result is an interrupted episode (reconnect): "" when it is not.
  const std::string& interrupted() const { return interrupted_; }
  // Episodes interrupted so far (one per session open when a connection was lost).
  uint64_t interrupted_episodes() const { return interrupted_episodes_; }
  // Connections lost and made again so far.
  uint64_t reconnections() const { return reconnections_; }

 private:
  struct Socket;
  // What a session was made with, to make it again after a reconnection, and its last
  // result, to report its interrupted episode with (kept only with `reconnect`).
  struct Made {
    std::string env_id;  // made by make of this id (a node too)
    protocol::ConfigMap config;
    protocol::SessionId current;  // the id on the server of the moment
    StepResult last;
    std::optional<protocol::CoschedStepReply> last_node;
  };

  Client(ClientOptions options, std::unique_ptr<Socket> socket);
  // One request and its reply. Unavailable (with `lost_` set) when the connection dropped.
  absl::StatusOr<protocol::ReplyBody> Call(protocol::Op op, protocol::RequestBody body);
  // Call(), and with `reconnect` when the connection is lost: Reconnect(), then `op` again
  // when `retry` (the request did not depend on the lost sessions' state). `interrupted`
  // tells the caller that the connection was made again and the request not retried.
  // `body` makes the request with the sessions' current ids.
  absl::StatusOr<protocol::ReplyBody> CallOrReconnect(
      protocol::Op op, const std::function<protocol::RequestBody()>& body, bool retry,
      bool* interrupted);
  // A new connection to the endpoint (waiting up to reconnect_give_up_s), hello, and every
  // session made again.
  absl::Status Reconnect();
  // The session's id on the current server (sessions made again get new ones).
  const protocol::SessionId& Current(const protocol::SessionId& session) const;

  ClientOptions options_;
  std::unique_ptr<Socket> socket_;
  uint64_t next_id_ = 1;
  protocol::HelloReply hello_;
  std::string lost_;                          // why the connection was lost ("" while it holds)
  std::map<protocol::SessionId, Made> made_;  // by the id the caller holds (reconnect only)
  std::string interrupted_;
  uint64_t interrupted_episodes_ = 0;
  uint64_t reconnections_ = 0;
};

}  // namespace tiergym::env

#endif  // TIERGYM_ENV_CLIENT_CLIENT_H_

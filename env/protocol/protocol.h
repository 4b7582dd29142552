// The environment protocol, version 1 (env/PROTOCOL.md): its constants, the request and
// reply structs, and the codec between them and MessagePack payloads.
//
// The codec is pure: bytes in, structs out (and back), no sockets, no sessions. The
// server decodes requests and encodes replies; the C++ client (env/client/) encodes
// requests and decodes replies; the tests round-trip both. Decoding never throws: every
// malformed payload becomes an Error whose code is an absl::StatusCode, whose field is the
// request field at fault (carried as data: traces/base/field_status.h) and whose message
// starts with it ("action[3]: ..."). MessagePack stays inside
// protocol.cc; this header is free of it.
//
// Thread-safety: plain values and functions without shared state.
#ifndef TIERGYM_ENV_PROTOCOL_PROTOCOL_H_
#define TIERGYM_ENV_PROTOCOL_PROTOCOL_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "env/spec/config_value.h"
#include "env/spec/env_spec.h"
#include "env/spec/field_path.h"
#include "traces/placement.h"

namespace tiergym::env::protocol {

inline constexpr uint64_t kVersion = 2;
// A session handle: 32 lowercase hex digits (128 random bits), opaque to clients.
using SessionId = std::string;
inline constexpr size_t kMaxSessionIdBytes = 64;
inline constexpr char kEnvId[] = "tiergym/TierPlacement-v0";
// What `hello` and `list` call the co-scheduling nodes (made by cosched_make, not make).
inline constexpr char kCoschedEnvId[] = "tiergym/CoschedNode-v0";
// The field named by errors about the message as a whole.
inline constexpr char kPayloadField[] = "(payload)";

// The co-scheduling ops (cosched_*) drive a node of K tenants (env/cosched/cosched_env.h);
// `close` closes their sessions too.
enum class Op {
  kHello,
  kList,
  kMake,
  kReset,
  kStep,
  kStepBatch,
  kEstimate,
  kClose,
  kStats,
  kCoschedMake,
  kCoschedReset,
  kCoschedStep
};
inline constexpr int kNumOps = 12;
std::string_view OpName(Op op);
std::optional<Op> ParseOp(std::string_view name);

enum class Autoreset { kNone, kSameStep };

// An error as it travels. REQUIRES (for messages built by MakeError): message starts with
// field + ": ".
struct Error {
  absl::StatusCode code = absl::StatusCode::kUnknown;
  std::string field;
  std::string message;
};
// An Error whose message is "FIELD: DETAIL" (DETAIL kept as is when it already starts
// with "FIELD").
Error MakeError(absl::StatusCode code, std::string field, std::string_view detail);
// The Error of `status` (not OK): on the field it carries (traces/base/field_status.h),
// or on `field` when it carries none.
Error ErrorFromStatus(const absl::Status& status, std::string field);
// The path of member `key` of the map at `path` ("config.steps", `config["a b"]`) and a
// client's bytes fit to quote in a reply (env/spec/field_path.h).
using ::tiergym::env::MemberPath;
using ::tiergym::env::Printable;
// Back to a status for client code: code and message.
absl::Status ToStatus(const Error& error);
// "INVALID_ARGUMENT" <-> absl::StatusCode::kInvalidArgument. Unknown names give kUnknown.
std::string CodeName(absl::StatusCode code);
absl::StatusCode ParseCodeName(std::string_view name);

// Configuration values as the client typed them (env/spec/config_value.h).
using ConfigMap = ::tiergym::env::ConfigMap;
// Configuration values in their text form (the make reply's `config`).
using ConfigText = std::map<std::string, std::string>;

struct MakeRequest {
  std::string env;
  ConfigMap config;
};

struct ResetRequest {
  SessionId session;
  std::optional<uint64_t> seed;
  ResetOptions options;  // profile by name or by index ("0", "1", ...)
};

struct StepRequest {
  SessionId session;
  Action action;
};

struct StepBatchRequest {
  std::vector<SessionId> sessions;
  std::vector<Action> actions;                 // one per session
  std::vector<uint8_t> reset;                  // empty or one per session
  std::vector<std::optional<uint64_t>> seeds;  // empty or one per session
  std::vector<ResetOptions> options;           // empty or one per session
  Autoreset autoreset = Autoreset::kNone;
  // Shared memory (PROTOCOL.md "Shared memory"): shm_new asks for a new segment holding
  // this batch's results; shm_segment names one made earlier on this connection (32 hex
  // digits). Neither: the results travel in the reply.
  bool shm_new = false;
  std::string shm_segment;
  // With shm_segment (a segment whose making reply said `signal`): no reply on success;
  // the segment's seq word is the ready signal (a futex the server wakes).
  bool shm_signal = false;
  // With shm_new: the segment also takes this batch's sessions' later requests (PROTOCOL.md
  // "Requests through the segment"), when the server offers it.
  bool shm_requests = false;
};

struct EstimateRequest {
  SessionId session;                // empty: use `config`
  std::optional<ConfigMap> config;  // neither: the server's default configuration
  std::string profile;              // name or index
  std::string placement_json;       // the placement as JSON text, or:
  // as a map (decoded, not yet checked: traces/placement.h CheckPlacement).
  std::optional<Placement> placement;
};

struct CloseRequest {
  SessionId session;
};

// A co-scheduling node (cosched_make): its configuration (env/cosched's keys).
struct CoschedMakeRequest {
  ConfigMap config;
};

struct CoschedResetRequest {
  SessionId session;
  std::optional<uint64_t> seed;  // reseeds the start jitter's generator
};

// One action per tenant, in tenant order; an empty action (nil on the wire) keeps the
// tenant's placement.
struct CoschedStepRequest {
  SessionId session;
  std::vector<Action> actions;
};

using RequestBody = std::variant<std::monostate, MakeRequest, ResetRequest, StepRequest,
                                 StepBatchRequest, EstimateRequest, CloseRequest,
                                 CoschedMakeRequest, CoschedResetRequest, CoschedStepRequest>;

struct Request {
  Op op = Op::kHello;
  uint64_t version = kVersion;
  std::optional<uint64_t> id;
  RequestBody body;  // monostate for hello, list, stats
};

// What DecodeRequest found: on failure `error` is set and `request.id` holds the request
// id when it could be read (so that the error reply still carries it).
struct DecodedRequest {
  Request request;
  std::optional<Error> error;
};

struct DecodeLimits {
  // Entries of one MessagePack array / map (also bounded by the payload size). Default 1 << 22.
  uint64_t max_array_elements = 1 << 22;
  // Entries per step_batch. Default 65536.
  uint64_t max_batch = 65536;
};

// Decodes one request payload. Checks types, required and unknown keys and the shape of
// arrays; not what depends on a session (action ranges, session ids): that is the
// service's job. Versions other than kVersion decode (so that hello can answer) and are
// refused by the service.
DecodedRequest DecodeRequest(std::string_view payload, const DecodeLimits& limits = {});
std::string EncodeRequest(const Request& request);

// --- Replies --------------------------------------------------------------------------

struct Limits {
  uint64_t max_sessions = 0;
  uint64_t max_sessions_per_connection = 0;
  uint64_t max_pending_per_connection = 0;
  uint64_t max_asset_bytes = 0;
  uint64_t max_message_bytes = 0;
  uint64_t max_batch = 0;
  double idle_timeout_s = 0;
  uint64_t threads = 0;
  // Bytes of shared-memory segments the server holds at most; 0: no shared memory (absent
  // from the replies of servers that have none).
  uint64_t max_shm_bytes = 0;
  // Segments taking requests (one server thread each) at most over all connections; 0:
  // requests through shared memory are not offered (absent from the replies then).
  uint64_t max_shm_request_threads = 0;
};

struct HelloReply {
  uint64_t protocol = kVersion;
  std::string server;
  std::vector<std::string> envs;
  Limits limits;
};

struct EnvDescription {
  std::string id;
  std::string description;
  std::vector<ConfigKey> config_keys;
  std::string op = "make";  // the op that makes a session of it: "make" or "cosched_make"
};

struct ListReply {
  std::vector<EnvDescription> envs;
};

struct MakeReply {
  SessionId session;
  EnvSpec spec;
  ConfigText config;  // every key with its value in force
};

struct ResetReply {
  StepResult result;  // observation and info; reward and flags unused
};

struct StepReply {
  StepResult result;
};

// One array of a shared-memory segment: `shape` values of `dtype` (a protocol dtype),
// C order, at byte `offset`.
struct ShmArray {
  std::string name;
  std::string dtype;
  std::vector<uint64_t> shape;
  uint64_t offset = 0;
};

// Where a step_batch's results went when they went through shared memory.
struct ShmReply {
  std::string segment;     // the handle to name in later requests
  uint64_t seq = 0;        // this batch's number, also in the segment's `seq` array
  uint64_t rows = 0;       // rows written (the batch's entries), from row 0
  bool has_final = false;  // the final_* arrays hold this batch's ended episodes
  // Only in the reply that made the segment (empty `name` otherwise): its POSIX
  // shared-memory name, size and layout, and whether later batches may ask for the
  // futex signal instead of a reply (shm_signal).
  std::string name;
  uint64_t bytes = 0;
  std::vector<ShmArray> layout;
  bool signal = false;
  // The segment takes requests (the making request asked for shm_requests and the server
  // had a thread for it).
  bool requests = false;
};

struct StepBatchReply {
  std::vector<StepResult> results;  // one per entry: after the step or the reset
  std::vector<uint8_t> was_reset;   // one per entry
  // With autoreset same_step when an episode ended: one per entry, the result of the step
  // that ended it (for other entries, a copy of `results[i]`). Otherwise empty.
  std::vector<StepResult> finals;
  // Set when the results are in a shared-memory segment; then `results` is empty (the
  // arrays are not in the reply) except in the reply that made the segment, which carries
  // both.
  std::optional<ShmReply> shm;
  // Nothing is sent: the results are in the segment and its seq word told the client
  // (shm_signal). Not on the wire.
  bool quiet = false;
};

struct EstimateReply {
  double runtime_ns = 0;
  double default_runtime_ns = 0;
  // 1 - runtime_ns / default_runtime_ns: the time saved as a fraction of the default run
  // (the service computes it; the codec carries it).
  double speedup = 0;
};

struct CloseReply {};

struct StatsReply {
  uint64_t sessions = 0;
  uint64_t sessions_made = 0;
  uint64_t sessions_closed = 0;
  uint64_t sessions_reclaimed = 0;
  uint64_t asset_sets = 0;
  uint64_t asset_bytes = 0;
  uint64_t requests = 0;
  uint64_t errors = 0;
  uint64_t replies_dropped = 0;
  uint64_t threads = 0;
  double uptime_s = 0;
  uint64_t rss_bytes = 0;
  uint64_t shm_segments = 0;         // shared-memory segments held
  uint64_t shm_bytes = 0;            // their bytes
  uint64_t shm_request_threads = 0;  // threads serving segments' requests
  std::map<std::string, uint64_t> ops;
};

struct CoschedMakeReply {
  SessionId session;
  EnvSpec spec;                      // one tenant's spaces (every tenant has the same)
  std::vector<std::string> tenants;  // the tenants' names, in tenant order
  ConfigText config;                 // every key with its value in force
};

// One tenant's part of a node step (env/cosched/cosched_env.h TenantStep).
struct CoschedTenant {
  StepResult result;  // observation, reward, terminated (truncated unused), info
  bool active = false;
  bool waiting = false;
  double solo_interval_ns = 0;
  std::vector<double> slowdown;           // per tier
  std::vector<double> bandwidth_gbps;     // per tier
  std::vector<double> interference_gbps;  // per tier
};

// The reply to cosched_reset and cosched_step (NodeStep).
struct CoschedStepReply {
  std::vector<CoschedTenant> tenants;
  uint64_t step = 0;
  double step_ns = 0;
  double elapsed_ns = 0;
  std::vector<uint64_t> tier_used_bytes;
  std::vector<double> tier_bandwidth_gbps;
  bool done = false;
};

using ReplyBody =
    std::variant<Error, HelloReply, ListReply, MakeReply, ResetReply, StepReply, StepBatchReply,
                 EstimateReply, CloseReply, StatsReply, CoschedMakeReply, CoschedStepReply>;

struct Reply {
  std::optional<uint64_t> id;
  ReplyBody body;
};

// Encodes a reply. REQUIRES: in a StepBatchReply every result has the same observation
// size, tier count and action-mask size.
std::string EncodeReply(const Reply& reply);

// Decodes a reply to a request of kind `op`: an Error body when the server said ok=false,
// a body of the op's kind otherwise. InvalidArgument when the payload is not such a reply.
absl::StatusOr<Reply> DecodeReply(std::string_view payload, Op op);

// The reply id of a payload without decoding the rest; nullopt when absent or unreadable.
std::optional<uint64_t> PeekReplyId(std::string_view payload);

// The op of a request payload without decoding the rest; nullopt when it has none or is
// unreadable. Never throws.
std::optional<Op> PeekRequestOp(std::string_view payload);

}  // namespace tiergym::env::protocol

#endif  // TIERGYM_ENV_PROTOCOL_PROTOCOL_H_

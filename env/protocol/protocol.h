// The environment protocol (env/PROTOCOL.md): its messages and the codec between them and
// MessagePack payloads.
//
// The messages (the version, the ops, every request and reply struct) are declared once, in
// env/protocol/schema.json, and generated from it into env/protocol/messages.h, as are
// their encoders and decoders; this header adds the envelope (Request, Reply), errors and
// the codec's entry points. The codec is pure: bytes in, structs out (and back), no sockets,
// no sessions. The server decodes requests and encodes replies; the C++ client
// (env/client/) encodes requests and decodes replies; the tests round-trip both. Decoding
// never throws: every malformed payload becomes an Error whose code is an absl::StatusCode,
// whose field is the request field at fault (carried as data: traces/base/field_status.h)
// and whose message starts with it ("action[3]: ..."). MessagePack stays inside the codec's
// .cc files; this header is free of it.
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
#include "env/protocol/messages.h"
#include "env/protocol/types.h"

namespace tiergym::env::protocol {

std::string_view OpName(Op op);
std::optional<Op> ParseOp(std::string_view name);

// An Error whose message is "FIELD: DETAIL" (DETAIL kept as is when it already starts
// with "FIELD").
Error MakeError(absl::StatusCode code, std::string field, std::string_view detail);
// The Error of `status` (not OK): on the field it carries (traces/base/field_status.h),
// or on `field` when it carries none.
Error ErrorFromStatus(const absl::Status& status, std::string field);
// Back to a status for client code: code and message.
absl::Status ToStatus(const Error& error);
// "INVALID_ARGUMENT" <-> absl::StatusCode::kInvalidArgument. Unknown names give kUnknown.
std::string CodeName(absl::StatusCode code);
absl::StatusCode ParseCodeName(std::string_view name);

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

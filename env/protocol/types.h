// The protocol's plain types that its messages (the generated env/protocol/messages.h) are
// made of, besides the environment's own (env/spec/env_spec.h): session handles, the
// autoreset mode, configurations as they travel, and how a field is named in an error.
//
// Thread-safety: plain values.
#ifndef TIERGYM_ENV_PROTOCOL_TYPES_H_
#define TIERGYM_ENV_PROTOCOL_TYPES_H_

#include <cstddef>
#include <map>
#include <string>

#include "env/spec/config_value.h"
#include "env/spec/field_path.h"

namespace tiergym::env::protocol {

// A session handle: 32 lowercase hex digits (128 random bits), opaque to clients.
using SessionId = std::string;
inline constexpr size_t kMaxSessionIdBytes = 64;
// The field named by errors about the message as a whole.
inline constexpr char kPayloadField[] = "(payload)";

// What step_batch does with an entry whose step ends its episode.
enum class Autoreset { kNone, kSameStep };

// Configuration values as the client typed them (env/spec/config_value.h).
using ConfigMap = ::tiergym::env::ConfigMap;
// Configuration values in their text form (the make reply's `config`).
using ConfigText = std::map<std::string, std::string>;

// The path of member `key` of the map at `path` ("config.steps", `config["a b"]`) and a
// client's bytes fit to quote in a reply (env/spec/field_path.h).
using ::tiergym::env::MemberPath;
using ::tiergym::env::Printable;

}  // namespace tiergym::env::protocol

#endif  // TIERGYM_ENV_PROTOCOL_TYPES_H_

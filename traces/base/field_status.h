// Errors that name the field they belong to, as data.
//
// A status made by FieldError carries its field ("steps", "action[3]", "ranges[2].tier") as
// an absl::Status payload besides its message "FIELD: DETAIL". Code that routes an error
// (the protocol's `field`, env/PROTOCOL.md) reads the field with ErrorField and never out of
// the message text. NestField puts a field inside its parent ("steps" -> "config.steps").
//
// Thread-safety: plain functions on values.
#ifndef TIERGYM_TRACES_BASE_FIELD_STATUS_H_
#define TIERGYM_TRACES_BASE_FIELD_STATUS_H_

#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace tiergym {

// The payload type URL under which a status carries its field.
inline constexpr char kFieldPayloadUrl[] = "type.tiergym/field";

// A status of `code` with message "FIELD: DETAIL" and `field` as its payload.
// REQUIRES: code is not kOk.
absl::Status FieldError(absl::StatusCode code, std::string_view field, std::string_view detail);
// FieldError(kInvalidArgument, ...).
absl::Status InvalidFieldError(std::string_view field, std::string_view detail);

// The field `status` carries; nullopt when it carries none (or is OK).
std::optional<std::string> ErrorField(const absl::Status& status);

// `status` (not OK) with `field` as its payload; message and code unchanged.
absl::Status WithField(absl::Status status, std::string_view field);

// `status` with its field placed inside `parent`: "steps" becomes "parent.steps",
// "[2]" becomes "parent[2]"; a status without a field gets `parent` itself. The message is
// unchanged. OK stays OK.
absl::Status NestField(absl::Status status, std::string_view parent);

}  // namespace tiergym

#endif  // TIERGYM_TRACES_BASE_FIELD_STATUS_H_

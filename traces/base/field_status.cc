#include "traces/base/field_status.h"

#include <utility>

#include "absl/strings/cord.h"
#include "absl/types/optional.h"
#include "traces/base/strings.h"

namespace tiergym {

absl::Status FieldError(absl::StatusCode code, std::string_view field, std::string_view detail) {
  return WithField(absl::Status(code, StrCat(field, ": ", detail)), field);
}

absl::Status InvalidFieldError(std::string_view field, std::string_view detail) {
  return FieldError(absl::StatusCode::kInvalidArgument, field, detail);
}

std::optional<std::string> ErrorField(const absl::Status& status) {
  const absl::optional<absl::Cord> field = status.GetPayload(kFieldPayloadUrl);
  if (!field) return std::nullopt;
  return std::string(*field);
}

absl::Status WithField(absl::Status status, std::string_view field) {
  status.SetPayload(kFieldPayloadUrl, absl::Cord(absl::string_view(field.data(), field.size())));
  return status;
}

absl::Status NestField(absl::Status status, std::string_view parent) {
  if (status.ok()) return status;
  const std::optional<std::string> field = ErrorField(status);
  if (!field || field->empty()) return WithField(std::move(status), parent);
  if (parent.empty()) return status;
  return WithField(std::move(status),
                   (*field)[0] == '[' ? StrCat(parent, *field) : StrCat(parent, ".", *field));
}

}  // namespace tiergym

// The one check of an action against an action space (env/spec/env_spec.h): the
// environment's Step and the server's batch check (which refuses a whole step_batch before
// anything moves) both call it, so that an action is judged by one rule with one text.
#ifndef TIERGYM_ENV_SPEC_ACTION_CHECK_H_
#define TIERGYM_ENV_SPEC_ACTION_CHECK_H_

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "absl/status/status.h"
#include "env/spec/env_spec.h"
#include "traces/base/field_status.h"
#include "traces/base/strings.h"

namespace tiergym::env {

// OK when `action` fits `space` (MultiDiscrete: shape[0] values, each in [0, n); Discrete:
// one value in [0, n)). Otherwise InvalidArgument on the field at fault (field_status.h):
// `field` ("action", "actions[3]") for the wrong number of values, `field[i]` for value i.
// `tiers` (the machine's tier count; 0: unknown) words a MultiDiscrete value by what it
// means: a tier index in placement mode (n == tiers), in keep mode (n == 1 + tiers) 0 to
// keep the region where it is or 1 + t to move it to tier t.
inline absl::Status CheckAction(const Space& space, const Action& action, std::string_view field,
                                size_t tiers = 0) {
  if (space.kind == Space::kMultiDiscrete) {
    const int64_t want = space.shape.empty() ? 0 : space.shape[0];
    const bool keep = tiers > 0 && static_cast<size_t>(space.n) == tiers + 1;
    if (static_cast<int64_t>(action.values.size()) != want) {
      return InvalidFieldError(field, StrCat("expected ", want,
                                             keep ? " values (a keep-or-move code per region), got "
                                                  : " values (a tier per region), got ",
                                             action.values.size()));
    }
    for (size_t i = 0; i < action.values.size(); ++i) {
      const int64_t v = action.values[i];
      if (v >= 0 && v < space.n) continue;
      if (keep) {
        return InvalidFieldError(
            StrCat(field, "[", i, "]"),
            StrCat("code ", v, " out of range [0, ", space.n,
                   ") (keep mode: 0 keeps the region where it is, 1 + t moves it to tier t, t < ",
                   tiers, ")"));
      }
      return InvalidFieldError(StrCat(field, "[", i, "]"),
                               StrCat("tier ", v, " out of range [0, ", space.n, ")"));
    }
    return absl::OkStatus();
  }
  if (space.kind == Space::kDiscrete) {
    if (action.values.size() != 1) {
      return InvalidFieldError(
          field, StrCat("expected one integer in [0, ", space.n, ") (move mode), got ",
                        action.values.size(), " values"));
    }
    if (action.values[0] < 0 || action.values[0] >= space.n) {
      return InvalidFieldError(field, StrCat(action.values[0], " out of range [0, ", space.n, ")"));
    }
    return absl::OkStatus();
  }
  return FieldError(absl::StatusCode::kInternal, field, "the action space is not discrete");
}

// CheckAction against an environment's action space, worded for its action mode.
inline absl::Status CheckAction(const EnvSpec& spec, const Action& action, std::string_view field) {
  return CheckAction(spec.action, action, field, spec.tiers.size());
}

}  // namespace tiergym::env

#endif  // TIERGYM_ENV_SPEC_ACTION_CHECK_H_

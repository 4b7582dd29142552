// Readers of configuration keys as a client typed them (env/spec/config_value.h), shared by
// ParseEnvConfig (env/environment.h) and ParseCoschedConfig (env/cosched/cosched_env.h):
// each takes a value as sent (an integer, a number, a string, a list) or its text (command
// lines, clients that send text), checks its range, and on error returns InvalidArgument
// with the key in the message ("config key 'steps': ...") and as its field
// (traces/base/field_status.h).
#ifndef TIERGYM_ENV_CONFIG_READER_H_
#define TIERGYM_ENV_CONFIG_READER_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "env/spec/config_value.h"

namespace tiergym::env {

// InvalidArgument "config key 'KEY': DETAIL", with KEY as its field.
absl::Status ConfigKeyError(std::string_view key, std::string_view detail);

// An integer in [lo, hi]: an integer (or a number with an integral value) as sent, or its
// decimal text.
absl::StatusOr<int64_t> ConfigInt(const std::string& key, const ConfigValue& value, int64_t lo,
                                  int64_t hi);
// Decimal text of an integer in [lo, hi] (an item of a list key, for example).
absl::StatusOr<int64_t> ConfigIntText(const std::string& key, const std::string& text, int64_t lo,
                                      int64_t hi);
// A finite number in [lo, hi]: a number as sent, or its text.
absl::StatusOr<double> ConfigReal(const std::string& key, const ConfigValue& value, double lo,
                                  double hi);
// A string as sent.
absl::StatusOr<std::string> ConfigString(const std::string& key, const ConfigValue& value);
// A list of strings: a list as sent, or comma-separated text. Empty items are left out.
absl::StatusOr<std::vector<std::string>> ConfigList(const std::string& key,
                                                    const ConfigValue& value);

}  // namespace tiergym::env

#endif  // TIERGYM_ENV_CONFIG_READER_H_

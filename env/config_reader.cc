#include "env/config_reader.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "traces/base/field_status.h"
#include "traces/base/strings.h"

namespace tiergym::env {

// Errors name the key in the message ("config key 'steps': ...") and carry it as their
// field (traces/base/field_status.h).
absl::Status ConfigKeyError(std::string_view key, std::string_view detail) {
  return WithField(absl::InvalidArgumentError(StrCat("config key '", key, "': ", detail)), key);
}

absl::StatusOr<int64_t> ConfigIntText(const std::string& key, const std::string& value, int64_t lo,
                                      int64_t hi) {
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(value.c_str(), &end, 10);
  if (value.empty() || *end != '\0' || errno != 0 || v < lo || v > hi) {
    return ConfigKeyError(key, StrCat("'", value, "' is not an integer in [", lo, ", ", hi, "]"));
  }
  return v;
}

namespace {

absl::StatusOr<double> ConfigRealText(const std::string& key, const std::string& value, double lo,
                                      double hi) {
  char* end = nullptr;
  const double v = std::strtod(value.c_str(), &end);
  if (value.empty() || *end != '\0' || !std::isfinite(v) || v < lo || v > hi) {
    return ConfigKeyError(key, StrCat("'", value, "' is not a number in [", lo, ", ", hi, "]"));
  }
  return v;
}

}  // namespace

// An integer key: an integer (or a real with an integral value) as sent, or its decimal
// text (command lines, version-2 clients that sent text).
absl::StatusOr<int64_t> ConfigInt(const std::string& key, const ConfigValue& value, int64_t lo,
                                  int64_t hi) {
  if (const std::string* text = value.string()) return ConfigIntText(key, *text, lo, hi);
  int64_t v = 0;
  if (const int64_t* i = value.integer()) {
    v = *i;
  } else if (const double* d = value.real();
             d != nullptr && std::isfinite(*d) && std::trunc(*d) == *d && std::abs(*d) < 9e18) {
    v = static_cast<int64_t>(*d);
  } else {
    return ConfigKeyError(
        key, StrCat("expected an integer in [", lo, ", ", hi, "], got ",
                    value.real() != nullptr ? ConfigValueText(value) : value.TypeName()));
  }
  if (v < lo || v > hi)
    return ConfigKeyError(key, StrCat(v, " is not an integer in [", lo, ", ", hi, "]"));
  return v;
}

// A real key: a number as sent, or its text.
absl::StatusOr<double> ConfigReal(const std::string& key, const ConfigValue& value, double lo,
                                  double hi) {
  if (const std::string* text = value.string()) return ConfigRealText(key, *text, lo, hi);
  double v = 0;
  if (const int64_t* i = value.integer()) {
    v = static_cast<double>(*i);
  } else if (const double* d = value.real()) {
    v = *d;
  } else {
    return ConfigKeyError(
        key, StrCat("expected a number in [", lo, ", ", hi, "], got ", value.TypeName()));
  }
  if (!std::isfinite(v) || v < lo || v > hi) {
    return ConfigKeyError(key, StrCat(v, " is not a number in [", lo, ", ", hi, "]"));
  }
  return v;
}

absl::StatusOr<std::string> ConfigString(const std::string& key, const ConfigValue& value) {
  if (const std::string* text = value.string()) return *text;
  return ConfigKeyError(key, StrCat("expected a string, got ", value.TypeName()));
}

// A list key: a list as sent, or comma-separated text (command lines, older clients).
// Empty items are left out.
absl::StatusOr<std::vector<std::string>> ConfigList(const std::string& key,
                                                    const ConfigValue& value) {
  std::vector<std::string> out;
  if (const ConfigValue::List* list = value.list()) {
    for (const std::string& item : *list) {
      if (!item.empty()) out.push_back(item);
    }
    return out;
  }
  if (const std::string* text = value.string()) {
    for (std::string_view field : SplitFields(*text, ',')) {
      if (!field.empty()) out.emplace_back(field);
    }
    return out;
  }
  return ConfigKeyError(key, StrCat("expected a list of strings, got ", value.TypeName()));
}

}  // namespace tiergym::env

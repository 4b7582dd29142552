// A configuration value as a client gives it: typed (a string, an integer, a real number, a
// bool, or a list of strings), from the protocol message (env/PROTOCOL.md, `make`) to
// ParseEnvConfig (env/environment.h) without a detour through text. Lists stay lists.
//
// ConfigValueText is the value's text form, for display (the `make` reply's `config`) and
// for `help` defaults; it is never parsed back on the way to EnvConfig.
//
// Thread-safety: plain values.
#ifndef TIERGYM_ENV_SPEC_CONFIG_VALUE_H_
#define TIERGYM_ENV_SPEC_CONFIG_VALUE_H_

#include <charconv>
#include <concepts>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace tiergym::env {

struct ConfigValue {
  using List = std::vector<std::string>;
  std::variant<std::string, int64_t, double, bool, List> value;

  ConfigValue() = default;
  ConfigValue(std::string s) : value(std::move(s)) {}         // NOLINT(google-explicit-constructor)
  ConfigValue(const char* s) : value(std::string(s)) {}       // NOLINT(google-explicit-constructor)
  ConfigValue(std::string_view s) : value(std::string(s)) {}  // NOLINT(google-explicit-constructor)
  template <typename T>
  requires(std::integral<T> && !std::same_as<T, bool>) ConfigValue(T v)
      : value(static_cast<int64_t>(v)) {}       // NOLINT(google-explicit-constructor)
  ConfigValue(double v) : value(v) {}           // NOLINT(google-explicit-constructor)
  ConfigValue(bool v) : value(v) {}             // NOLINT(google-explicit-constructor)
  ConfigValue(List v) : value(std::move(v)) {}  // NOLINT(google-explicit-constructor)

  const std::string* string() const { return std::get_if<std::string>(&value); }
  const int64_t* integer() const { return std::get_if<int64_t>(&value); }
  const double* real() const { return std::get_if<double>(&value); }
  const bool* boolean() const { return std::get_if<bool>(&value); }
  const List* list() const { return std::get_if<List>(&value); }

  // "a string", "an integer", "a number", "a bool", "a list": for error messages.
  std::string_view TypeName() const {
    static constexpr std::string_view kNames[] = {"a string", "an integer", "a number", "a bool",
                                                  "a list"};
    return kNames[value.index()];
  }

  friend bool operator==(const ConfigValue&, const ConfigValue&) = default;
};

// Configuration keys and their values.
using ConfigMap = std::map<std::string, ConfigValue>;

// The text form: strings as they are, integers in decimal, reals in the shortest form
// that reads back the same, bools as true/false, lists joined with commas.
inline std::string ConfigValueText(const ConfigValue& v) {
  struct Visitor {
    std::string operator()(const std::string& s) const { return s; }
    std::string operator()(int64_t i) const { return std::to_string(i); }
    std::string operator()(double d) const {
      char buf[32];
      const auto r = std::to_chars(buf, buf + sizeof buf, d);
      return std::string(buf, r.ptr);
    }
    std::string operator()(bool b) const { return b ? "true" : "false"; }
    std::string operator()(const ConfigValue::List& l) const {
      std::string out;
      for (size_t i = 0; i < l.size(); ++i) {
        if (i > 0) out += ',';
        out += l[i];
      }
      return out;
    }
  };
  return std::visit(Visitor{}, v.value);
}

}  // namespace tiergym::env

#endif  // TIERGYM_ENV_SPEC_CONFIG_VALUE_H_

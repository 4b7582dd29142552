// String concatenation for the project.
//
// Debian's Abseil 20220623 is built with its own absl::string_view (not std::string_view),
// so absl::StrCat refuses std::string_view arguments. tiergym::StrCat accepts what the
// project uses: std::string, std::string_view, absl::string_view, C strings, single chars, integers
// and floating-point numbers (shortest representation that round-trips).
#ifndef TIERGYM_TRACES_BASE_STRINGS_H_
#define TIERGYM_TRACES_BASE_STRINGS_H_

#include <charconv>
#include <concepts>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "absl/strings/string_view.h"

namespace tiergym {
namespace strings_internal {

inline void Append(std::string& out, std::string_view s) { out.append(s); }
inline void Append(std::string& out, const char* s) { out.append(s); }
inline void Append(std::string& out, const std::string& s) { out.append(s); }
// absl::Status::message() and other Abseil APIs return Abseil's own string_view.
inline void Append(std::string& out, absl::string_view s) { out.append(s.data(), s.size()); }
inline void Append(std::string& out, char c) { out.push_back(c); }

template <typename T>
requires(std::integral<T> && !std::same_as<T, char> &&
         !std::same_as<T, bool>) void Append(std::string& out, T v) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

inline void Append(std::string& out, bool v) { out.append(v ? "true" : "false"); }

template <typename T>
requires std::floating_point<T>
void Append(std::string& out, T v) {
  char buf[32];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

}  // namespace strings_internal

template <typename... Args>
std::string StrCat(const Args&... args) {
  std::string out;
  (strings_internal::Append(out, args), ...);
  return out;
}

template <typename... Args>
void StrAppend(std::string* out, const Args&... args) {
  (strings_internal::Append(*out, args), ...);
}

// `value` with `digits` digits after the decimal point ("12.35").
std::string FixedDecimal(double value, int digits);

// `value` in lowercase hexadecimal with a 0x prefix ("0x7f3a2000"), as addresses are
// written in the project's messages.
std::string Hex(uint64_t value);

// The fields of one line of a CSV without quoting: split at every `separator`; an empty
// line gives one empty field.
// The unsigned integer that `text` spells in decimal, exactly (digits only: no sign, space
// or prefix), or nullopt (also when it does not fit in T).
template <std::unsigned_integral T>
std::optional<T> ParseDecimal(std::string_view text) {
  T v{};
  if (text.empty()) return std::nullopt;
  const auto r = std::from_chars(text.data(), text.data() + text.size(), v, 10);
  if (r.ec != std::errc() || r.ptr != text.data() + text.size()) return std::nullopt;
  return v;
}

std::vector<std::string_view> SplitFields(std::string_view line, char separator = ',');

}  // namespace tiergym

#endif  // TIERGYM_TRACES_BASE_STRINGS_H_

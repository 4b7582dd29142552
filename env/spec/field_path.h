// The path of a field inside a message or a configuration, as errors name it
// ("config.steps", `config["a b"]`), and a client's bytes fit to quote in an error: one
// spelling for the protocol's codec (env/protocol), the environment providers
// (env/provider) and the in-process vector environment.
//
// Thread-safety: pure functions.
#ifndef TIERGYM_ENV_SPEC_FIELD_PATH_H_
#define TIERGYM_ENV_SPEC_FIELD_PATH_H_

#include <algorithm>
#include <string>
#include <string_view>

namespace tiergym::env {

// The path of member `key` of the map at `path`. A key that is a plain name (letters,
// digits, '_', '-') joins its path with a dot ("config.steps"; the key alone when `path` is
// empty); any other key, the empty one included, is bracketed and quoted, its bytes outside
// printable ASCII and '"', '\\', ':' written as \xNN (`config["a b"]`), so that a path is
// never empty and never holds the ": " that ends it in an error message.
inline std::string MemberPath(std::string_view path, std::string_view key) {
  const bool plain = !key.empty() && std::all_of(key.begin(), key.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-';
  });
  std::string out(path);
  if (plain) {
    if (!out.empty()) out += '.';
    out += key;
    return out;
  }
  out += "[\"";
  for (const char ch : key) {
    const auto c = static_cast<unsigned char>(ch);
    if (c >= 0x20 && c < 0x7f && c != '\\' && c != '"' && c != ':') {
      out += ch;
    } else {
      static constexpr char kHex[] = "0123456789abcdef";
      const char escape[] = {'\\', 'x', kHex[c >> 4], kHex[c & 15]};
      out.append(escape, sizeof escape);
    }
  }
  out += "\"]";
  return out;
}

// Bytes a client sent, fit to quote in a reply: printable ASCII kept, other bytes (and
// backslashes) as \xNN, at most 64 bytes of it (then "..."). Replies never carry a
// client's bytes otherwise.
inline std::string Printable(std::string_view text) {
  std::string out;
  for (const char ch : text) {
    if (out.size() >= 64) {
      out += "...";
      break;
    }
    const auto c = static_cast<unsigned char>(ch);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += static_cast<char>(c);
    } else {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

}  // namespace tiergym::env

#endif  // TIERGYM_ENV_SPEC_FIELD_PATH_H_

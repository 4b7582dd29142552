// Builds MessagePack payloads piece by piece for the protocol tests, including payloads
// no well-behaved client would send (wrong types, unknown keys, bad arrays). Each function
// returns the encoding of one value; Map/Arr assemble encoded values. IsUtf8 checks what
// replies carry.
#ifndef TIERGYM_TESTS_ENV_MSGPACK_BUILDER_H_
#define TIERGYM_TESTS_ENV_MSGPACK_BUILDER_H_

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "msgpack.hpp"

namespace tiergym::testing::mp {

namespace internal {
template <typename F>
std::string Packed(F&& f) {
  msgpack::sbuffer buf;
  msgpack::packer<msgpack::sbuffer> pk(buf);
  f(pk);
  return std::string(buf.data(), buf.size());
}
}  // namespace internal

inline std::string U(uint64_t v) {
  return internal::Packed([&](auto& pk) { pk.pack_uint64(v); });
}
inline std::string I(int64_t v) {
  return internal::Packed([&](auto& pk) { pk.pack_int64(v); });
}
// Always a float64 (msgpack-c's pack_double writes integral values as integers).
inline std::string F(double v) {
  uint64_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  std::string b(1, static_cast<char>(0xcb));
  for (int i = 0; i < 8; ++i) b.push_back(static_cast<char>(bits >> (56 - 8 * i)));
  return b;
}
inline std::string B(bool v) {
  return internal::Packed([&](auto& pk) { v ? pk.pack_true() : pk.pack_false(); });
}
inline std::string Nil() {
  return internal::Packed([&](auto& pk) { pk.pack_nil(); });
}
inline std::string S(std::string_view s) {
  return internal::Packed([&](auto& pk) {
    pk.pack_str(static_cast<uint32_t>(s.size()));
    pk.pack_str_body(s.data(), static_cast<uint32_t>(s.size()));
  });
}
inline std::string Bin(std::string_view s) {
  return internal::Packed([&](auto& pk) {
    pk.pack_bin(static_cast<uint32_t>(s.size()));
    pk.pack_bin_body(s.data(), static_cast<uint32_t>(s.size()));
  });
}
inline std::string Arr(const std::vector<std::string>& items) {
  std::string out =
      internal::Packed([&](auto& pk) { pk.pack_array(static_cast<uint32_t>(items.size())); });
  for (const std::string& i : items) out += i;
  return out;
}
inline std::string Map(const std::vector<std::pair<std::string, std::string>>& members) {
  std::string out =
      internal::Packed([&](auto& pk) { pk.pack_map(static_cast<uint32_t>(members.size())); });
  for (const auto& [k, v] : members) out += S(k) + v;
  return out;
}
// An ndarray map (env/PROTOCOL.md "Arrays").
template <typename T>
std::string Nd(std::string_view dtype, const std::vector<uint64_t>& shape,
               const std::vector<T>& v) {
  std::vector<std::string> dims;
  for (uint64_t d : shape) dims.push_back(U(d));
  return Map({{"dtype", S(dtype)},
              {"shape", Arr(dims)},
              {"data", Bin(std::string_view(reinterpret_cast<const char*>(v.data()),
                                            v.size() * sizeof(T)))}});
}

// A version 2 request map: {"v": 2, "op": op, ...members}.
inline std::string Req(std::string_view op,
                       std::vector<std::pair<std::string, std::string>> members = {}) {
  members.insert(members.begin(), {{"v", U(2)}, {"op", S(op)}});
  return Map(members);
}

// Whether `s` is well-formed UTF-8 (lead and continuation bytes; what a Python client's
// decoder demands of every string a reply carries). Written apart from the protocol's own
// check, so that a test of that check does not use it.
inline bool IsUtf8(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    const size_t len = c < 0x80         ? 1
                       : (c >> 5) == 6  ? 2
                       : (c >> 4) == 14 ? 3
                       : (c >> 3) == 30 ? 4
                                        : 0;
    if (len == 0 || i + len > s.size()) return false;
    for (size_t k = 1; k < len; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) & 0xc0) != 0x80) return false;
    }
    i += len;
  }
  return true;
}

}  // namespace tiergym::testing::mp

#endif  // TIERGYM_TESTS_ENV_MSGPACK_BUILDER_H_

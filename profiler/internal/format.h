// Small formatting helpers shared by the profiler's sources (internal to profiler/).
#ifndef TIERGYM_PROFILER_INTERNAL_FORMAT_H_
#define TIERGYM_PROFILER_INTERNAL_FORMAT_H_

#include <cstdint>
#include <cstdio>
#include <string>

namespace tiergym::prof::internal {

// "0x1f": lowercase hex with a 0x prefix.
inline std::string Hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

}  // namespace tiergym::prof::internal

#endif  // TIERGYM_PROFILER_INTERNAL_FORMAT_H_

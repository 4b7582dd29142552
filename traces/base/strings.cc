#include "traces/base/strings.h"

#include <charconv>
#include <cstdio>

namespace tiergym {

std::string FixedDecimal(double value, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, value);
  return buf;
}

std::vector<std::string_view> SplitFields(std::string_view line, char separator) {
  std::vector<std::string_view> fields;
  size_t start = 0;
  while (true) {
    const size_t at = line.find(separator, start);
    if (at == std::string_view::npos) {
      fields.push_back(line.substr(start));
      return fields;
    }
    fields.push_back(line.substr(start, at - start));
    start = at + 1;
  }
}

std::string Hex(uint64_t value) {
  char buf[2 + 16] = {'0', 'x'};
  const std::to_chars_result r = std::to_chars(buf + 2, buf + sizeof buf, value, 16);
  return std::string(buf, r.ptr);
}

}  // namespace tiergym

#include "traces/util/strings.h"

#include <cstdio>

namespace tiergym {

std::string FixedDecimal(double value, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, value);
  return buf;
}

}  // namespace tiergym

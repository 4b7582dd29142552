// What a placement provider's memory budget still has room for, as the tests of its charges
// (sessions, forks) measure it from outside: by charging.
#ifndef TIERGYM_TESTS_ENV_PROVIDER_BUDGET_H_
#define TIERGYM_TESTS_ENV_PROVIDER_BUDGET_H_

#include <cstdint>

#include "env/provider/placement_provider.h"

namespace tiergym::env::testing {

// The bytes `provider` (of memory budget `budget`) still has room for, to within 1 KiB:
// Charge refuses what does not fit, and what it takes is given back at once.
inline uint64_t FreeBytes(PlacementProvider& provider, uint64_t budget) {
  uint64_t lo = 0, hi = budget;
  while (hi - lo > 1024) {
    const uint64_t mid = lo + (hi - lo) / 2;
    if (provider.Charge(mid).ok()) {
      provider.Uncharge(mid);
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return lo;
}

}  // namespace tiergym::env::testing

#endif  // TIERGYM_TESTS_ENV_PROVIDER_BUDGET_H_

// A placement resolved to pages of one profile: every page of the address space maps to
// the index of a tier among the profile's devices.
//
// Range placements map pages by their start address (a range covers a page when it
// covers the page's first byte; ranges are byte ranges, pages are what the kernel
// places). Fraction placements follow the first-touch rule of the placement format: the
// footprint pages (pages seen in any run of the profile) in order of first touch, that is
// the time of the page's first sample in the first run that holds it, where runs are
// taken base run first (the run on the placement's default tier) then by device name;
// tiers are filled in the order listed, each with round(fraction * footprint) pages.
//
// Immutable after construction; thread-safe.
#ifndef TIERGYM_ESTIMATOR_PAGE_PLACEMENT_H_
#define TIERGYM_ESTIMATOR_PAGE_PLACEMENT_H_

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "traces/placement.h"
#include "traces/profile.h"

namespace tiergym {

class PagePlacement {
 public:
  // InvalidArgument when the placement names a tier the profile has no run for (the
  // message lists the profile's devices).
  static absl::StatusOr<PagePlacement> Resolve(const Profile& profile, const Placement& placement);

  // Tier index (into the profile's runs()) of the page holding `address`.
  int TierOfAddress(uint64_t address) const { return TierOfPage(address >> page_shift_); }
  int TierOfPage(uint64_t page) const;
  int default_tier() const { return default_tier_; }
  // log2 of the profile's page size.
  int page_shift() const { return page_shift_; }

  // Sorted, disjoint page intervals [start, end) that are not on the default tier.
  struct Interval {
    uint64_t start_page;
    uint64_t end_page;
    int tier;
  };
  const std::vector<Interval>& intervals() const { return intervals_; }

 private:
  int page_shift_ = 12;
  int default_tier_ = 0;
  std::vector<Interval> intervals_;
};

// Index of `device` among profile.runs(), or -1.
int DeviceIndex(const Profile& profile, const std::string& device);

// The profile's footprint pages (page numbers) in first-touch order: base run first, then
// the other runs in profile.runs() order, each page at its first sample.
std::vector<uint64_t> FirstTouchPages(const Profile& profile, int base);

// The first-touch rule of `fractions` placements over keys in first-touch order (page
// numbers or any dense page ids): tiers are filled in the order listed, each with
// round(fraction * keys) keys. Returns sorted, merged key intervals [start, end).
std::vector<PagePlacement::Interval> AssignFractions(
    const std::vector<uint64_t>& first_touch_keys,
    const std::vector<std::pair<int, double>>& tier_fractions);

// InvalidArgument naming the tier and the profile's devices unless every tier the
// placement names has a run in the profile.
absl::Status CheckPlacementTiers(const Profile& profile, const Placement& placement);

// Pages whose first byte lies in [start, end): [first, last) page numbers.
inline std::pair<uint64_t, uint64_t> PagesOfRange(uint64_t start, uint64_t end, int page_shift) {
  const uint64_t page_size = uint64_t{1} << page_shift;
  const uint64_t first = (start + page_size - 1) >> page_shift;
  const uint64_t last = end == 0 ? 0 : ((end - 1) >> page_shift) + 1;
  return {first, std::max(first, last)};
}

}  // namespace tiergym

#endif  // TIERGYM_ESTIMATOR_PAGE_PLACEMENT_H_

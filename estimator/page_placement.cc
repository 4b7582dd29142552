#include "estimator/page_placement.h"

#include <algorithm>
#include <bit>
#include <cmath>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_join.h"
#include "traces/base/strings.h"

namespace tiergym {

int DeviceIndex(const Profile& profile, const std::string& device) {
  for (size_t i = 0; i < profile.runs().size(); ++i) {
    if (profile.runs()[i].metadata().device == device) return static_cast<int>(i);
  }
  return -1;
}

int PagePlacement::TierOfPage(uint64_t page) const {
  auto it = std::upper_bound(intervals_.begin(), intervals_.end(), page,
                             [](uint64_t p, const Interval& iv) { return p < iv.start_page; });
  if (it == intervals_.begin()) return default_tier_;
  --it;
  return page < it->end_page ? it->tier : default_tier_;
}

absl::Status CheckPlacementTiers(const Profile& profile, const Placement& placement) {
  for (const std::string& tier : placement.Tiers()) {
    if (DeviceIndex(profile, tier) < 0) {
      return absl::InvalidArgumentError(
          StrCat("placement names tier '", tier, "' but profile ", profile.name(),
                 " has runs only for: ", absl::StrJoin(profile.devices(), ", ")));
    }
  }
  return absl::OkStatus();
}

std::vector<uint64_t> FirstTouchPages(const Profile& profile, int base) {
  const int shift = std::countr_zero(profile.runs().front().metadata().page_size);
  std::vector<const Trace*> order = {&profile.runs()[base]};
  for (const Trace& t : profile.runs()) {
    if (&t != order.front()) order.push_back(&t);
  }
  absl::flat_hash_set<uint64_t> seen;
  std::vector<uint64_t> pages;
  for (const Trace* t : order) {
    for (uint64_t a : t->address()) {
      if (seen.insert(a >> shift).second) pages.push_back(a >> shift);
    }
  }
  return pages;
}

std::vector<PagePlacement::Interval> AssignFractions(
    const std::vector<uint64_t>& first_touch_keys,
    const std::vector<std::pair<int, double>>& tier_fractions) {
  const auto footprint = static_cast<double>(first_touch_keys.size());
  std::vector<std::pair<uint64_t, int>> assigned;
  size_t next = 0;
  for (const auto& [tier, fraction] : tier_fractions) {
    const size_t count = std::min(first_touch_keys.size() - next,
                                  static_cast<size_t>(std::llround(fraction * footprint)));
    for (size_t i = 0; i < count; ++i) assigned.emplace_back(first_touch_keys[next + i], tier);
    next += count;
  }
  std::sort(assigned.begin(), assigned.end());
  std::vector<PagePlacement::Interval> out;
  for (const auto& [key, tier] : assigned) {
    if (!out.empty() && out.back().end_page == key && out.back().tier == tier) {
      ++out.back().end_page;
    } else {
      out.push_back({key, key + 1, tier});
    }
  }
  return out;
}

absl::StatusOr<PagePlacement> PagePlacement::Resolve(const Profile& profile,
                                                     const Placement& placement) {
  if (absl::Status s = CheckPlacementTiers(profile, placement); !s.ok()) return s;
  PagePlacement out;
  out.page_shift_ = std::countr_zero(profile.runs().front().metadata().page_size);
  out.default_tier_ = DeviceIndex(profile, placement.default_tier);
  if (!placement.uses_fractions()) {
    for (const PlacementRange& r : placement.ranges) {
      const auto [first, last] = PagesOfRange(r.start, r.end, out.page_shift_);
      if (first < last) out.intervals_.push_back({first, last, DeviceIndex(profile, r.tier)});
    }
    return out;
  }
  std::vector<std::pair<int, double>> fractions;
  for (const auto& [tier, fraction] : placement.fractions) {
    fractions.emplace_back(DeviceIndex(profile, tier), fraction);
  }
  out.intervals_ = AssignFractions(FirstTouchPages(profile, out.default_tier_), fractions);
  return out;
}

}  // namespace tiergym

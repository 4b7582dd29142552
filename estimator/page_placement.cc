#include "estimator/page_placement.h"

#include <algorithm>
#include <bit>
#include <cmath>

#include "absl/container/flat_hash_map.h"
#include "traces/util/strings.h"

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

absl::StatusOr<PagePlacement> PagePlacement::Resolve(const Profile& profile,
                                                     const Placement& placement) {
  PagePlacement out;
  out.page_shift_ = std::countr_zero(profile.runs().front().metadata().page_size);
  for (const std::string& tier : placement.Tiers()) {
    if (DeviceIndex(profile, tier) < 0) {
      std::string devices;
      for (const std::string& d : profile.devices()) StrAppend(&devices, devices.empty() ? "" : ", ", d);
      return absl::InvalidArgumentError(
          StrCat("placement names tier '", tier, "' but profile ", profile.name(),
                 " has runs only for: ", devices));
    }
  }
  out.default_tier_ = DeviceIndex(profile, placement.default_tier);
  const uint64_t page_size = uint64_t{1} << out.page_shift_;
  if (!placement.uses_fractions()) {
    for (const PlacementRange& r : placement.ranges) {
      // Pages whose first byte lies in [start, end).
      const uint64_t first = (r.start + page_size - 1) >> out.page_shift_;
      const uint64_t last = ((r.end - 1) >> out.page_shift_) + 1;
      if (first < last) out.intervals_.push_back({first, last, DeviceIndex(profile, r.tier)});
    }
    return out;
  }
  // First-touch order: base run first, then the others in device-name order.
  std::vector<const Trace*> order = {&profile.runs()[out.default_tier_]};
  for (const Trace& t : profile.runs()) {
    if (&t != order.front()) order.push_back(&t);
  }
  absl::flat_hash_map<uint64_t, size_t> seen;
  std::vector<uint64_t> pages_in_order;
  for (const Trace* t : order) {
    for (uint64_t a : t->address()) {
      const uint64_t page = a >> out.page_shift_;
      if (seen.emplace(page, pages_in_order.size()).second) pages_in_order.push_back(page);
    }
  }
  const double footprint = static_cast<double>(pages_in_order.size());
  std::vector<std::pair<uint64_t, int>> assigned;
  size_t next = 0;
  for (const auto& [tier, fraction] : placement.fractions) {
    const size_t count = std::min(pages_in_order.size() - next,
                                  static_cast<size_t>(std::llround(fraction * footprint)));
    const int index = DeviceIndex(profile, tier);
    for (size_t i = 0; i < count; ++i) assigned.emplace_back(pages_in_order[next + i], index);
    next += count;
  }
  std::sort(assigned.begin(), assigned.end());
  for (const auto& [page, tier] : assigned) {
    if (!out.intervals_.empty() && out.intervals_.back().end_page == page &&
        out.intervals_.back().tier == tier) {
      ++out.intervals_.back().end_page;
    } else {
      out.intervals_.push_back({page, page + 1, tier});
    }
  }
  return out;
}

}  // namespace tiergym

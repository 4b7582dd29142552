#include "estimator/estimator_index.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_join.h"
#include "estimator/internal/index_builder.h"
#include "estimator/internal/run_segments.h"
#include "estimator/models/roofline_model.h"
#include "estimator/page_placement.h"
#include "traces/base/status_macros.h"
#include "traces/base/strings.h"

namespace tiergym {
namespace {

template <typename T>
size_t Bytes(const std::vector<T>& v) {
  return v.capacity() * sizeof(T);
}

}  // namespace

absl::StatusOr<std::shared_ptr<const EstimatorIndex>> EstimatorIndex::Build(
    const Profile& profile, const IndexOptions& options) {
  auto index = std::shared_ptr<EstimatorIndex>(new EstimatorIndex());
  TG_RETURN_IF_ERROR(Builder(profile, options, *index).Run());
  return std::shared_ptr<const EstimatorIndex>(std::move(index));
}

absl::StatusOr<double> EstimatorIndex::RuntimeNs(const ResolvedPlacement& placement, Model model,
                                                 double tier_overlap) const {
  if (model != Model::kRoofline) return RuntimeNs(placement, model);
  return RuntimeNsUnder(placement, RooflineModel(tier_overlap));
}

std::pair<uint32_t, uint32_t> EstimatorIndex::IdsOfPages(uint64_t first_page,
                                                         uint64_t last_page) const {
  const auto lo = std::lower_bound(pages_.begin(), pages_.end(), first_page);
  const auto hi = std::lower_bound(lo, pages_.end(), last_page);
  return {static_cast<uint32_t>(lo - pages_.begin()), static_cast<uint32_t>(hi - pages_.begin())};
}

absl::StatusOr<ResolvedPlacement> EstimatorIndex::Resolve(const Placement& placement) const {
  auto index_of = [&](const std::string& tier) {
    for (size_t d = 0; d < n_; ++d) {
      if (devices_[d] == tier) return static_cast<int>(d);
    }
    return -1;
  };
  for (const std::string& tier : placement.Tiers()) {
    if (index_of(tier) < 0) {
      return absl::InvalidArgumentError(
          StrCat("placement names tier '", tier,
                 "' but the profile has runs only for: ", absl::StrJoin(devices_, ", ")));
    }
  }
  ResolvedPlacement out;
  out.default_tier = index_of(placement.default_tier);
  if (out.default_tier != base_) {
    return absl::InvalidArgumentError(StrCat("placement defaults to '", placement.default_tier,
                                             "' but this index was built ", "with base run '",
                                             devices_[base_], "'"));
  }
  if (!placement.uses_fractions()) {
    for (const PlacementRange& r : placement.ranges) {
      const auto [first, last] = PagesOfRange(r.start, r.end, page_shift_);
      const auto [begin, end] = IdsOfPages(first, last);
      const int tier = index_of(r.tier);
      if (begin < end && tier != base_) out.ranges.push_back({begin, end, tier});
    }
    return out;
  }
  std::vector<std::pair<int, double>> fractions;
  for (const auto& [tier, fraction] : placement.fractions) {
    fractions.emplace_back(index_of(tier), fraction);
  }
  // first_touch_ maps first-touch rank to page id; ranks below num_base_pages_ are the
  // base run's pages.
  if (first_touch_mode_ == FirstTouchFootprint::kExtents) {
    // Tiers take round(fraction * extent pages) pages in turn, extent by extent.
    size_t e = 0;
    uint64_t used = 0;  // pages of extents_[e] already taken
    for (const auto& [tier, fraction] : fractions) {
      auto quota =
          static_cast<uint64_t>(std::llround(fraction * static_cast<double>(extent_pages_)));
      while (quota > 0 && e < extents_.size()) {
        const auto [first, last] = extents_[e];
        const uint64_t take = std::min(quota, last - first - used);
        const auto [begin, end] = IdsOfPages(first + used, first + used + take);
        if (begin < end && tier != base_) out.ranges.push_back({begin, end, tier});
        quota -= take;
        used += take;
        if (used == last - first) {
          ++e;
          used = 0;
        }
      }
    }
    std::sort(out.ranges.begin(), out.ranges.end(),
              [](const ResolvedPlacement::IdRange& a, const ResolvedPlacement::IdRange& b) {
                return a.begin < b.begin;
              });
    return out;
  }
  const size_t ranks =
      first_touch_mode_ == FirstTouchFootprint::kBase ? num_base_pages_ : first_touch_.size();
  const std::vector<uint64_t> keys(first_touch_.begin(),
                                   first_touch_.begin() + static_cast<std::ptrdiff_t>(ranks));
  for (const PagePlacement::Interval& iv : AssignFractions(keys, fractions)) {
    if (iv.tier != base_) {
      out.ranges.push_back(
          {static_cast<uint32_t>(iv.start_page), static_cast<uint32_t>(iv.end_page), iv.tier});
    }
  }
  return out;
}

std::vector<uint8_t> EstimatorIndex::TierArray(const ResolvedPlacement& placement) const {
  std::vector<uint8_t> tier(pages_.size(), static_cast<uint8_t>(placement.default_tier));
  for (const ResolvedPlacement::IdRange& r : placement.ranges) {
    std::fill(tier.begin() + r.begin, tier.begin() + r.end, static_cast<uint8_t>(r.tier));
  }
  return tier;
}

absl::Status EstimatorIndex::CheckModel(const RuntimeModel& model) const {
  if (!model.needs_machine() || has_machine_) return absl::OkStatus();
  return absl::InvalidArgumentError(
      "the concurrent and roofline models need the machine's tier bandwidths and latencies "
      "(give a machine)");
}

absl::StatusOr<double> EstimatorIndex::RuntimeNs(const ResolvedPlacement& placement,
                                                 Model model) const {
  return RuntimeNsUnder(placement, RuntimeModelFor(model));
}

absl::StatusOr<double> EstimatorIndex::RuntimeNsUnder(const ResolvedPlacement& placement,
                                                      const RuntimeModel& m) const {
  const size_t stride = pages_.size() + 1;
  const double* def = &lin_prefix_[placement.default_tier * stride];
  double total = constant_ns_ + def[pages_.size()];
  for (const ResolvedPlacement::IdRange& r : placement.ranges) {
    const double* to = &lin_prefix_[r.tier * stride];
    total += (to[r.end] - to[r.begin]) - (def[r.end] - def[r.begin]);
  }
  if (m.linear()) return total;
  TG_RETURN_IF_ERROR(CheckModel(m));
  const std::vector<uint8_t> tier = TierArray(placement);
  std::vector<uint64_t> hits(n_);
  for (size_t k = 0; k + 1 < blk_offset_.size(); ++k) {
    std::fill(hits.begin(), hits.end(), 0);
    for (size_t e = blk_offset_[k]; e < blk_offset_[k + 1]; ++e) {
      hits[tier[blk_page_[e]]] += blk_count_[e];
    }
    total -= Correction(k, hits.data(), m);
  }
  return total;
}

absl::StatusOr<Estimate> EstimatorIndex::EstimateDetailed(const ResolvedPlacement& placement,
                                                          Model model) const {
  const RuntimeModel& m = RuntimeModelFor(model);
  TG_RETURN_IF_ERROR(CheckModel(m));
  const std::vector<uint8_t> tier = TierArray(placement);
  const size_t n = n_;
  Estimate est;
  est.devices = devices_;
  est.device_runtime_ns = device_runtime_ns_;
  est.access_share.assign(n, 0.0);
  est.time_share.assign(n, 0.0);
  std::vector<uint64_t> hits(n), seg_hits(n), all_hits(n, 0);
  for (size_t s = 0; s + 1 < seg_begin_pos_.size(); ++s) {
    PhaseEstimate pe;
    pe.phase = static_cast<uint32_t>(s);
    pe.windows = seg_windows_[s];
    for (size_t d = 0; d < n; ++d) {
      pe.measured_ns.push_back(static_cast<uint64_t>(seg_duration_[s * n + d]));
    }
    std::fill(seg_hits.begin(), seg_hits.end(), 0);
    for (size_t k = seg_first_blk_[s]; k < seg_first_blk_[s + 1]; ++k) {
      std::fill(hits.begin(), hits.end(), 0);
      for (size_t e = blk_offset_[k]; e < blk_offset_[k + 1]; ++e) {
        hits[tier[blk_page_[e]]] += blk_count_[e];
      }
      for (size_t d = 0; d < n; ++d) seg_hits[d] += hits[d];
      if (!m.linear()) pe.estimated_ns -= Correction(k, hits.data(), m);
    }
    if (seg_total_[s] == 0) {
      pe.estimated_ns += seg_duration_[s * n + base_];
      est.time_share[base_] += seg_duration_[s * n + base_];
    } else {
      for (size_t i = seg_first_win_[s]; i < seg_first_win_[s + 1]; ++i) {
        std::fill(hits.begin(), hits.end(), 0);
        for (size_t e = win_offset_[i]; e < win_offset_[i + 1]; ++e) {
          hits[tier[win_page_[e]]] += win_count_[e];
        }
        const auto h = static_cast<double>(win_total_[i]);
        for (size_t d = 0; d < n; ++d) {
          const double t = static_cast<double>(hits[d]) / h * win_time_[i * n + d];
          pe.estimated_ns += t;
          est.time_share[d] += t;
        }
      }
      const auto h = static_cast<double>(seg_total_[s]);
      for (size_t d = 0; d < n; ++d) {
        const double t = empty_base_ ? (static_cast<int>(d) == base_ ? seg_empty_[s * n + d] : 0)
                                     : static_cast<double>(seg_hits[d]) / h * seg_empty_[s * n + d];
        pe.estimated_ns += t;
        est.time_share[d] += t;
        all_hits[d] += seg_hits[d];
      }
    }
    est.runtime_ns += pe.estimated_ns;
    est.phases.push_back(std::move(pe));
  }
  double total_hits = 0, weighted = 0;
  for (size_t d = 0; d < n; ++d) {
    total_hits += static_cast<double>(all_hits[d]);
    weighted += est.time_share[d];
  }
  for (size_t d = 0; d < n; ++d) {
    est.access_share[d] = total_hits > 0 ? static_cast<double>(all_hits[d]) / total_hits
                                         : (static_cast<int>(d) == base_);
    est.time_share[d] = weighted > 0 ? est.time_share[d] / weighted : 0.0;
  }
  return est;
}

double EstimatorIndex::WinLo(size_t i) const {
  return static_cast<double>(uint64_t{win_index_[i]} * window_instructions_);
}

double EstimatorIndex::WinHi(size_t i) const {
  const size_t s = win_segment_[i];
  if (win_index_[i] + 1 >= seg_windows_[s]) return static_cast<double>(seg_instr_[s]);
  return static_cast<double>((uint64_t{win_index_[i]} + 1) * window_instructions_);
}

size_t EstimatorIndex::FirstWindowEndingAfter(size_t s, double a) const {
  size_t lo = seg_first_win_[s], hi = seg_first_win_[s + 1];
  while (lo < hi) {
    const size_t mid = (lo + hi) / 2;
    if (WinHi(mid) <= a) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

double EstimatorIndex::RunTimeAt(size_t s, size_t d, double x) const {
  const auto len = static_cast<double>(seg_instr_[s]);
  const double duration = seg_duration_[s * n_ + d];
  if (x <= 0) return 0;
  if (x >= len) return duration;
  // The last non-empty window starting at or before x.
  size_t lo = seg_first_win_[s], hi = seg_first_win_[s + 1];
  while (lo < hi) {
    const size_t mid = (lo + hi) / 2;
    if (WinLo(mid) <= x) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  double x0 = 0, y0 = 0;  // the point before x
  if (lo > seg_first_win_[s]) {
    const size_t i = lo - 1;
    const double wlo = WinLo(i), whi = WinHi(i);
    const double c = win_cum_[i * n_ + d], t = win_time_[i * n_ + d];
    if (x < whi) return c + t * (x - wlo) / (whi - wlo);
    x0 = whi;
    y0 = c + t;
  }
  double x1 = len, y1 = duration;  // the point after x
  if (lo < seg_first_win_[s + 1]) {
    x1 = WinLo(lo);
    y1 = win_cum_[lo * n_ + d];
  }
  return x1 > x0 ? y0 + (y1 - y0) * (x - x0) / (x1 - x0) : y0;
}

double EstimatorIndex::PaperIntervalNs(size_t s, double a, double b, const uint8_t* tier,
                                       const uint64_t* seg_hits, const double* factor) const {
  const size_t n = n_;
  auto f_of = [&](size_t d) { return factor ? factor[d] : 1.0; };
  if (seg_total_[s] == 0) return f_of(base_) * (RunTimeAt(s, base_, b) - RunTimeAt(s, base_, a));
  double total = 0;
  std::vector<double> nonempty(n, 0.0);
  std::vector<uint64_t> hits(n);
  // Non-empty windows that overlap [a, b).
  for (size_t i = FirstWindowEndingAfter(s, a); i < seg_first_win_[s + 1] && WinLo(i) < b; ++i) {
    const double f = internal::FractionInside(WinLo(i), WinHi(i), a, b);
    if (f == 0) continue;
    std::fill(hits.begin(), hits.end(), 0);
    for (size_t e = win_offset_[i]; e < win_offset_[i + 1]; ++e) {
      hits[tier[win_page_[e]]] += win_count_[e];
    }
    const auto h = static_cast<double>(win_total_[i]);
    for (size_t d = 0; d < n; ++d) {
      total += f * static_cast<double>(hits[d]) / h * win_time_[i * n + d] * f_of(d);
      nonempty[d] += f * win_time_[i * n + d];
    }
  }
  const auto h = static_cast<double>(seg_total_[s]);
  for (size_t d = 0; d < n; ++d) {
    if (empty_base_ ? static_cast<int>(d) != base_ : seg_hits[d] == 0) continue;
    const double empty = std::max(0.0, RunTimeAt(s, d, b) - RunTimeAt(s, d, a) - nonempty[d]);
    total += (empty_base_ ? 1.0 : static_cast<double>(seg_hits[d]) / h) * empty * f_of(d);
  }
  return total;
}

size_t EstimatorIndex::MemoryBytes() const {
  return sizeof(*this) + Bytes(device_runtime_ns_) + Bytes(pages_) + Bytes(first_touch_) +
         Bytes(lin_prefix_) + Bytes(seg_begin_pos_) + Bytes(seg_instr_) + Bytes(seg_windows_) +
         Bytes(seg_first_win_) + Bytes(seg_first_blk_) + Bytes(seg_total_) + Bytes(seg_duration_) +
         Bytes(seg_empty_) + Bytes(win_index_) + Bytes(win_segment_) + Bytes(win_total_) +
         Bytes(win_time_) + Bytes(win_cum_) + Bytes(win_offset_) + Bytes(win_page_) +
         Bytes(win_count_) + Bytes(blk_first_win_) + Bytes(blk_segment_) + blocks_.MemoryBytes() +
         Bytes(blk_offset_) + Bytes(blk_page_) + Bytes(blk_count_) + Bytes(pb_offset_) +
         Bytes(pb_block_) + Bytes(pb_count_);
}

template <typename Weight>
std::vector<double> EstimatorIndex::PerGroup(uint64_t from, uint64_t to,
                                             const std::vector<uint32_t>& group_of_page,
                                             size_t num_groups, Weight weight) const {
  std::vector<double> out(num_groups, 0.0);
  from = std::min(from, total_instructions_);
  to = std::min(to, total_instructions_);
  if (from >= to) return out;
  // Segments overlapping [from, to), then their non-empty windows.
  size_t s = std::upper_bound(seg_begin_pos_.begin(), seg_begin_pos_.end() - 1, from) -
             seg_begin_pos_.begin();
  s = s == 0 ? 0 : s - 1;
  const size_t segs = seg_begin_pos_.size() - 1;
  for (; s < segs && seg_begin_pos_[s] < to; ++s) {
    const auto begin = static_cast<double>(seg_begin_pos_[s]);
    const double a = static_cast<double>(from) - begin, b = static_cast<double>(to) - begin;
    for (size_t i = seg_first_win_[s]; i < seg_first_win_[s + 1]; ++i) {
      if (WinLo(i) >= b) break;
      const double f = internal::FractionInside(WinLo(i), WinHi(i), a, b) * weight(i);
      if (f == 0) continue;
      for (size_t e = win_offset_[i]; e < win_offset_[i + 1]; ++e) {
        out[group_of_page[win_page_[e]]] += f * win_count_[e];
      }
    }
  }
  return out;
}

std::vector<double> EstimatorIndex::AccessesPerGroup(uint64_t from, uint64_t to,
                                                     const std::vector<uint32_t>& group_of_page,
                                                     size_t num_groups) const {
  return PerGroup(from, to, group_of_page, num_groups, [](size_t) { return 1.0; });
}

std::vector<double> EstimatorIndex::LoadWeightedAccessesPerGroup(
    uint64_t from, uint64_t to, const std::vector<uint32_t>& group_of_page,
    size_t num_groups) const {
  // A window holds a sample or two (a window is far shorter than a PEBS reset's worth of
  // misses), so its own rate would be its speed; the rate is its block's (block_samples
  // samples): the weighted samples over the base run's time from the block's first
  // non-empty window to the end of its last. Windows are visited in order: one block's
  // rate at a time.
  const auto base = static_cast<size_t>(base_);
  size_t block_end = 0;  // windows [.., block_end) are the current block's
  double rate = 0;
  return PerGroup(from, to, group_of_page, num_groups, [&](size_t i) {
    if (i >= block_end) {
      const size_t block =
          static_cast<size_t>(std::upper_bound(blk_first_win_.begin(), blk_first_win_.end(), i) -
                              blk_first_win_.begin()) -
          1;
      const size_t first = blk_first_win_[block];
      block_end = blk_first_win_[block + 1];
      double samples = 0;
      for (size_t j = first; j < block_end; ++j) samples += win_total_[j];
      const double ns = win_cum_[(block_end - 1) * n_ + base] +
                        win_time_[(block_end - 1) * n_ + base] - win_cum_[first * n_ + base];
      rate = ns > 0 ? samples / ns : 0.0;
    }
    return rate;
  });
}

}  // namespace tiergym

#include "estimator/placement_state.h"

#include <algorithm>

#include "estimator/internal/run_segments.h"
#include "estimator/page_placement.h"
#include "traces/base/strings.h"

namespace tiergym {

PlacementState::PlacementState(std::shared_ptr<const EstimatorIndex> index,
                               const ResolvedPlacement& placement, Model model)
    : index_(std::move(index)), model_(model), runtime_(&RuntimeModelFor(model)) {
  const EstimatorIndex& x = *index_;
  const size_t n = x.n_;
  tier_ = x.TierArray(placement);
  const size_t blocks = x.blk_segment_.size();
  blk_hits_.assign(blocks * n, 0);
  seg_hits_.assign(x.seg_total_.size() * n, 0);
  blk_corr_.assign(blocks, 0.0);
  for (size_t k = 0; k < blocks; ++k) {
    for (size_t e = x.blk_offset_[k]; e < x.blk_offset_[k + 1]; ++e) {
      blk_hits_[k * n + tier_[x.blk_page_[e]]] += x.blk_count_[e];
    }
    for (size_t d = 0; d < n; ++d) seg_hits_[x.blk_segment_[k] * n + d] += blk_hits_[k * n + d];
    if (!runtime_->linear()) {
      blk_corr_[k] = x.Correction(k, &blk_hits_[k * n], *runtime_);
      correction_ns_ += blk_corr_[k];
    }
  }
  paper_ns_ = *x.RuntimeNs(placement, Model::kPaper);
}

absl::Status PlacementState::Move(uint64_t start_address, uint64_t end_address, int tier) {
  const EstimatorIndex& x = *index_;
  const size_t n = x.n_;
  if (tier < 0 || static_cast<size_t>(tier) >= n) {
    return absl::InvalidArgumentError(
        StrCat("tier index ", tier, " out of range: the profile has ", n, " devices"));
  }
  if (start_address > end_address) {
    return absl::InvalidArgumentError(
        StrCat("range start ", start_address, " is after its end ", end_address));
  }
  const auto [first, last] = PagesOfRange(start_address, end_address, x.page_shift_);
  const auto [begin, end] = x.IdsOfPages(first, last);
  const size_t stride = x.pages_.size() + 1;
  std::vector<uint32_t> dirty;
  for (uint32_t id = begin; id < end; ++id) {
    const int old = tier_[id];
    if (old == tier) continue;
    const double* to = &x.lin_prefix_[tier * stride];
    const double* from = &x.lin_prefix_[old * stride];
    paper_ns_ += (to[id + 1] - to[id]) - (from[id + 1] - from[id]);
    tier_[id] = static_cast<uint8_t>(tier);
    for (size_t e = x.pb_offset_[id]; e < x.pb_offset_[id + 1]; ++e) {
      const uint32_t k = x.pb_block_[e];
      const uint32_t c = x.pb_count_[e];
      blk_hits_[k * n + old] -= c;
      blk_hits_[k * n + tier] += c;
      seg_hits_[x.blk_segment_[k] * n + old] -= c;
      seg_hits_[x.blk_segment_[k] * n + tier] += c;
      if (!runtime_->linear()) dirty.push_back(k);
    }
  }
  if (!dirty.empty()) {
    std::sort(dirty.begin(), dirty.end());
    dirty.erase(std::unique(dirty.begin(), dirty.end()), dirty.end());
    for (uint32_t k : dirty) {
      const double c = x.Correction(k, &blk_hits_[k * n], *runtime_);
      correction_ns_ += c - blk_corr_[k];
      blk_corr_[k] = c;
    }
  }
  return absl::OkStatus();
}

double PlacementState::IntervalNs(uint64_t from, uint64_t to,
                                  const std::vector<double>& device_factor) const {
  const EstimatorIndex& x = *index_;
  const size_t n = x.n_;
  const double* factor = device_factor.empty() ? nullptr : device_factor.data();
  double sum = 0;
  x.ForEachSegment(from, to, [&](size_t s, double a, double b) {
    sum += x.PaperIntervalNs(s, a, b, tier_.data(), &seg_hits_[s * n], factor);
    if (runtime_->linear()) return;
    for (size_t k = x.seg_first_blk_[s]; k < x.seg_first_blk_[s + 1]; ++k) {
      const auto [lo, hi] = x.CorrectionSpan(k, *runtime_);
      const double overlap = internal::FractionInside(lo, hi, a, b);
      if (overlap == 0) continue;
      const double c =
          factor ? x.Correction(k, &blk_hits_[k * n], *runtime_, factor) : blk_corr_[k];
      sum -= c * overlap;
    }
  });
  return sum;
}

std::vector<double> PlacementState::AccessesPerDevice(uint64_t from, uint64_t to) const {
  const EstimatorIndex& x = *index_;
  std::vector<uint32_t> tiers(tier_.begin(), tier_.end());
  return x.AccessesPerGroup(from, to, tiers, x.n_);
}

}  // namespace tiergym

#include "estimator/sampling_spread.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "traces/base/status_macros.h"

namespace tiergym {

absl::StatusOr<SamplingInterval> SamplingSpread(const EstimatorIndex& x,
                                                const ResolvedPlacement& placement, Model model,
                                                int replicates, uint64_t seed, double level) {
  if (replicates < 2) return absl::InvalidArgumentError("replicates must be at least 2");
  if (!(level > 0 && level < 1)) return absl::InvalidArgumentError("level must be in (0, 1)");
  const RuntimeModel& m = RuntimeModelFor(model);
  TG_RETURN_IF_ERROR(x.CheckModel(m));
  const size_t n = x.n_;
  const std::vector<uint8_t> tier = x.TierArray(placement);
  // Observed hits per device of every non-empty window under the placement.
  const size_t windows = x.win_index_.size();
  std::vector<uint64_t> observed(windows * n, 0);
  std::vector<uint8_t> mixed(windows, 0);  // hits on two devices or more: counts vary
  for (size_t i = 0; i < windows; ++i) {
    for (size_t e = x.win_offset_[i]; e < x.win_offset_[i + 1]; ++e) {
      observed[i * n + tier[x.win_page_[e]]] += x.win_count_[e];
    }
    int devices = 0;
    for (size_t d = 0; d < n; ++d) devices += observed[i * n + d] > 0;
    mixed[i] = devices > 1;
  }
  std::mt19937_64 rng(seed);
  std::vector<double> values;
  values.reserve(replicates);
  std::vector<uint64_t> drawn(n), seg_hits(n), blk_hits(n);
  for (int r = 0; r < replicates; ++r) {
    double total = x.constant_ns_;
    for (size_t s = 0; s + 1 < x.seg_begin_pos_.size(); ++s) {
      if (x.seg_total_[s] == 0) continue;
      std::fill(seg_hits.begin(), seg_hits.end(), 0);
      size_t k = x.seg_first_blk_[s];
      std::fill(blk_hits.begin(), blk_hits.end(), 0);
      for (size_t i = x.seg_first_win_[s]; i < x.seg_first_win_[s + 1]; ++i) {
        // Blocks partition the segment's non-empty windows: close the block before i.
        if (!m.linear() && k + 1 < x.seg_first_blk_[s + 1] && i == x.blk_first_win_[k + 1]) {
          total -= x.Correction(k, blk_hits.data(), m);
          std::fill(blk_hits.begin(), blk_hits.end(), 0);
          ++k;
        }
        // Multinomial by conditional binomials.
        uint64_t left = x.win_total_[i];
        double p_left = 1.0;
        for (size_t d = 0; d < n && !mixed[i]; ++d) drawn[d] = observed[i * n + d];
        for (size_t d = 0; d < n && mixed[i]; ++d) {
          const double p = static_cast<double>(observed[i * n + d]) / x.win_total_[i];
          uint64_t count = 0;
          if (d + 1 == n || p_left <= 0) {
            count = left;
          } else if (p > 0 && left > 0) {
            std::binomial_distribution<uint64_t> b(left, std::min(1.0, p / p_left));
            count = b(rng);
          }
          drawn[d] = count;
          left -= count;
          p_left -= p;
        }
        const auto h = static_cast<double>(x.win_total_[i]);
        for (size_t d = 0; d < n; ++d) {
          total += static_cast<double>(drawn[d]) / h * x.win_time_[i * n + d];
          seg_hits[d] += drawn[d];
          blk_hits[d] += drawn[d];
        }
      }
      if (!m.linear() && k < x.seg_first_blk_[s + 1]) {
        total -= x.Correction(k, blk_hits.data(), m);
      }
      const auto h = static_cast<double>(x.seg_total_[s]);
      for (size_t d = 0; d < n; ++d) {
        total += x.empty_base_ ? (static_cast<int>(d) == x.base_ ? x.seg_empty_[s * n + d] : 0.0)
                               : static_cast<double>(seg_hits[d]) / h * x.seg_empty_[s * n + d];
      }
    }
    values.push_back(total);
  }
  std::sort(values.begin(), values.end());
  auto quantile = [&](double q) {
    const double at = q * static_cast<double>(values.size() - 1);
    const auto i = static_cast<size_t>(at);
    const double f = at - static_cast<double>(i);
    return i + 1 < values.size() ? values[i] * (1 - f) + values[i + 1] * f : values[i];
  };
  double mean = 0;
  for (double v : values) mean += v / static_cast<double>(values.size());
  double var = 0;
  for (double v : values) var += (v - mean) * (v - mean) / static_cast<double>(values.size() - 1);
  SamplingInterval out;
  out.lo_ns = quantile((1 - level) / 2);
  out.hi_ns = quantile((1 + level) / 2);
  out.stddev_ns = std::sqrt(var);
  out.replicates = replicates;
  out.level = level;
  return out;
}

}  // namespace tiergym

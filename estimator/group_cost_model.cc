#include "estimator/group_cost_model.h"

#include <algorithm>

#include "estimator/internal/run_segments.h"

namespace tiergym {

void GroupCostModel::Costs::Add(const Costs& other) {
  constant_ns += other.constant_ns;
  if (cost.size() < other.cost.size()) cost.resize(other.cost.size(), 0.0);
  for (size_t i = 0; i < other.cost.size(); ++i) cost[i] += other.cost[i];
}

GroupCostModel::GroupCostModel(std::shared_ptr<const EstimatorIndex> index,
                               std::vector<uint32_t> group_of_page, size_t num_groups)
    : index_(std::move(index)), group_of_page_(std::move(group_of_page)), num_groups_(num_groups) {
  const EstimatorIndex& x = *index_;
  const size_t segs = x.seg_total_.size();
  std::vector<uint64_t> dense(num_groups_, 0);
  std::vector<uint32_t> touched;
  seg_offset_.push_back(0);
  for (size_t s = 0; s < segs; ++s) {
    for (size_t i = x.seg_first_win_[s]; i < x.seg_first_win_[s + 1]; ++i) {
      for (size_t e = x.win_offset_[i]; e < x.win_offset_[i + 1]; ++e) {
        const uint32_t g = group_of_page_[x.win_page_[e]];
        if (dense[g] == 0) touched.push_back(g);
        dense[g] += x.win_count_[e];
      }
    }
    std::sort(touched.begin(), touched.end());
    for (uint32_t g : touched) {
      seg_group_.push_back(g);
      seg_count_.push_back(dense[g]);
      dense[g] = 0;
    }
    touched.clear();
    seg_offset_.push_back(seg_group_.size());
  }
}

GroupCostModel::Costs GroupCostModel::IntervalCosts(
    uint64_t from, uint64_t to, const std::vector<double>& device_factor) const {
  Costs out;
  out.cost.assign(num_groups_ * index_->n_, 0.0);
  const double* factor = device_factor.empty() ? nullptr : device_factor.data();
  // The segments PlacementState::IntervalNs visits.
  index_->ForEachSegment(from, to,
                         [&](size_t s, double a, double b) { AddSegment(s, a, b, factor, out); });
  return out;
}

// EstimatorIndex::PaperIntervalNs, with each page's hits credited to its group.
void GroupCostModel::AddSegment(size_t s, double a, double b, const double* factor,
                                Costs& out) const {
  const EstimatorIndex& x = *index_;
  const size_t n = x.n_;
  auto f_of = [&](size_t d) { return factor ? factor[d] : 1.0; };
  if (x.seg_total_[s] == 0) {
    out.constant_ns += f_of(x.base_) * (x.RunTimeAt(s, x.base_, b) - x.RunTimeAt(s, x.base_, a));
    return;
  }
  std::vector<double> nonempty(n, 0.0), weight(n);
  for (size_t i = x.FirstWindowEndingAfter(s, a); i < x.seg_first_win_[s + 1] && x.WinLo(i) < b;
       ++i) {
    const double f = internal::FractionInside(x.WinLo(i), x.WinHi(i), a, b);
    if (f == 0) continue;
    const auto h = static_cast<double>(x.win_total_[i]);
    for (size_t d = 0; d < n; ++d) {
      weight[d] = f / h * x.win_time_[i * n + d] * f_of(d);
      nonempty[d] += f * x.win_time_[i * n + d];
    }
    for (size_t e = x.win_offset_[i]; e < x.win_offset_[i + 1]; ++e) {
      double* c = &out.cost[group_of_page_[x.win_page_[e]] * n];
      const auto count = static_cast<double>(x.win_count_[e]);
      for (size_t d = 0; d < n; ++d) c[d] += count * weight[d];
    }
  }
  const auto h = static_cast<double>(x.seg_total_[s]);
  for (size_t d = 0; d < n; ++d) {
    const double empty =
        std::max(0.0, x.RunTimeAt(s, d, b) - x.RunTimeAt(s, d, a) - nonempty[d]) * f_of(d);
    if (empty == 0) continue;
    if (x.empty_base_) {
      if (static_cast<int>(d) == x.base_) out.constant_ns += empty;
      continue;
    }
    for (size_t e = seg_offset_[s]; e < seg_offset_[s + 1]; ++e) {
      out.cost[seg_group_[e] * n + d] += static_cast<double>(seg_count_[e]) / h * empty;
    }
  }
}

}  // namespace tiergym

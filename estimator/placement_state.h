// One placement of an estimator index (estimator_index.h), changed range by range: the
// environment's state. The estimate is kept current at a cost proportional to what a move
// touches: the paper's linear part by per-page costs, the model's corrections
// (models/runtime_model.h) block by block.
#ifndef TIERGYM_ESTIMATOR_PLACEMENT_STATE_H_
#define TIERGYM_ESTIMATOR_PLACEMENT_STATE_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "estimator/estimator_index.h"
#include "estimator/models/runtime_model.h"

namespace tiergym {

// Not thread-safe; the index must outlive it (held by shared_ptr).
class PlacementState {
 public:
  // REQUIRES: `placement` was resolved by `index`.
  PlacementState(std::shared_ptr<const EstimatorIndex> index, const ResolvedPlacement& placement,
                 Model model);

  // Moves the pages whose first byte lies in [start, end) to device `tier`. Cost: the
  // range's footprint pages and their blocks. InvalidArgument for an unknown tier or
  // start > end.
  absl::Status Move(uint64_t start_address, uint64_t end_address, int tier);

  // The estimate of the whole run under the current placement. O(1).
  double runtime_ns() const { return paper_ns_ - correction_ns_; }

  // Estimated time of base-run instruction positions [from, to) (counted from the run
  // start, clamped to [0, total_instructions]); partial windows count pro rata.
  // IntervalNs(0, total_instructions()) == runtime_ns(). Cost: the interval's windows.
  double IntervalNs(uint64_t from, uint64_t to) const { return IntervalNs(from, to, {}); }
  // The same with each device's time multiplied by device_factor[d] (>= 1: the slowdown
  // co-runners cause on that device's memory during the interval; empty: all 1). Under
  // the concurrent model the bandwidth floors scale alike. Cost: the interval's windows
  // and blocks (the cached block corrections are not used when factors are given).
  double IntervalNs(uint64_t from, uint64_t to, const std::vector<double>& device_factor) const;

  // Weighted sampled accesses per device in [from, to) under the current placement.
  std::vector<double> AccessesPerDevice(uint64_t from, uint64_t to) const;

  int TierOfPageId(uint32_t id) const { return tier_[id]; }
  const EstimatorIndex& index() const { return *index_; }
  Model model() const { return model_; }

 private:
  std::shared_ptr<const EstimatorIndex> index_;
  Model model_;
  const RuntimeModel* runtime_;     // the model's implementation
  std::vector<uint8_t> tier_;       // per page id
  std::vector<uint64_t> blk_hits_;  // [k * N + d]
  std::vector<uint64_t> seg_hits_;  // [s * N + d]
  std::vector<double> blk_corr_;    // per block: its correction (models that are not linear)
  double paper_ns_ = 0;
  double correction_ns_ = 0;
};

}  // namespace tiergym

#endif  // TIERGYM_ESTIMATOR_PLACEMENT_STATE_H_

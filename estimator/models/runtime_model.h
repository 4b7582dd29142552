// A runtime model: how the estimate of a placement departs from the paper's weighted mean,
// block by block. One interface, one file per model beside it (paper_model.h,
// concurrent_model.h, roofline_model.h), picked by name.
//
// Contract:
//   - A model prices block k of an index (estimator_index.h) as a correction, in ns, to
//     subtract from the paper's linear estimate of the block's windows. It reads only the
//     BlockTable the index builder filled (block_table.h) and the block's weighted
//     sampled accesses per device under the placement (`hits`, one per device, summing
//     to the block's total); it holds no state, so one instance serves every index and
//     thread.
//   - The correction is 0 when one device holds all of the block's hits, and it does not
//     depend on anything but `hits` and `factor`.
//   - `factor` is null (no co-runners) or one factor >= 1 per device: the slowdown that
//     co-runners put on the time the estimate attributes to that device (interference.h).
//   - A `linear()` model has no correction at all (every Correction is 0): callers may
//     skip the per-block work and price a placement from per-page costs alone
//     (GroupCostModel). A model that `needs_machine()` reads tier bandwidths and
//     latencies the index only has when it was built with a machine; callers refuse it
//     otherwise (InvalidArgument naming the need).
//   - CorrectionSpan says over which segment-local base-run positions the block's
//     correction is spread when a part of the run is estimated (IntervalNs); `windows` is
//     the span of the block's non-empty windows.
//
// Adding a model: a class in its own file pair beside this one, a row in the table of
// runtime_model.cc, a value of Model. Nothing registers itself.
#ifndef TIERGYM_ESTIMATOR_MODELS_RUNTIME_MODEL_H_
#define TIERGYM_ESTIMATOR_MODELS_RUNTIME_MODEL_H_

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <utility>

#include "absl/status/statusor.h"
#include "estimator/models/block_table.h"

namespace tiergym {

// The models by name, as configurations (commands, the environment's `model` key,
// calibration files) spell them.
enum class Model {
  kPaper,       // "paper": the weighted mean of Denoyelle et al. (N tiers: the weighted model)
  kConcurrent,  // "concurrent": plus the overlap of bandwidth-bound work on different tiers
  kRoofline,    // "roofline": per block, latency and bandwidth bounds per tier, compute overlap
};
// "paper" / "concurrent" / "roofline".
std::string_view ModelName(Model model);
// InvalidArgument naming the known models for any other name.
absl::StatusOr<Model> ParseModel(std::string_view name);

class RuntimeModel {
 public:
  // [lo, hi): segment-local base-run instruction positions.
  using Span = std::pair<double, double>;

  virtual ~RuntimeModel() = default;

  // The name configurations use ("paper", ...).
  virtual std::string_view name() const = 0;
  // No correction: the paper's estimate as it is.
  virtual bool linear() const = 0;
  // Reads the machine's tier bandwidths and latencies.
  virtual bool needs_machine() const = 0;
  // The correction of block k (ns) with `hits[d]` of its weighted sampled accesses on
  // device d. REQUIRES: k < blocks.total.size(); hits has blocks.devices entries.
  virtual double Correction(const BlockTable& blocks, size_t k, const uint64_t* hits,
                            const double* factor) const = 0;
  // Where block k's correction belongs in its segment.
  virtual Span CorrectionSpan(const BlockTable& blocks, size_t k, Span windows) const = 0;
};

// The model named `name`, or nullptr.
const RuntimeModel* FindRuntimeModel(std::string_view name);
// The model `model` names (never null).
const RuntimeModel& RuntimeModelFor(Model model);

}  // namespace tiergym

#endif  // TIERGYM_ESTIMATOR_MODELS_RUNTIME_MODEL_H_

// The roofline model (estimator/README.md, "Beyond the paper: the roofline model", the
// default of the commands with a machine). Every block's measured time on each device d was
// fitted (roofline_fit.h) to t_d = roof(C, m_d), m_d = max(lambda_d x, M L / B_d); a mix
// with shares s_d takes
//     t = sum_d s_d t_d - [ sum_d s_d roof(C, m_d) - roof(C, m_mix) ],
// the mix's misses sharing the miss slots (latency-bound times add up over the tiers) and
// transferring concurrently (bandwidth-bound times overlap), each device's latency loaded
// by its own share of the bandwidth when the machine has measured curves. The bracket,
// scaled by the segment's tail (BlockTable::scale), is the correction.
#ifndef TIERGYM_ESTIMATOR_MODELS_ROOFLINE_MODEL_H_
#define TIERGYM_ESTIMATOR_MODELS_ROOFLINE_MODEL_H_

#include <optional>

#include "estimator/index_options.h"
#include "estimator/models/runtime_model.h"
#include "traces/machine.h"

namespace tiergym {

// The loaded-latency curve the roofline prices device `tier` along (IndexOptions): its
// own measured curve at the read share; for a tier without curves, with queue_like, that
// tier's latency ratio with its rise scaled by queue_strength (ratio 1 + q (r(u) - 1); q = 0
// or no queue_like: flat, the two-number model exactly).
LoadCurve QueueingCurve(const TierSpec& tier, const IndexOptions& options);

class RooflineModel final : public RuntimeModel {
 public:
  // The mixes combine the tiers' bandwidth-bound times by the blocks' tier overlap
  // (BlockTable::memory), or by `tier_overlap` when given (the blocks' fits do not depend on
  // it: what a calibration tries, and an estimate's serialization, on one index).
  // REQUIRES: tier_overlap in [0, 1].
  explicit RooflineModel(std::optional<double> tier_overlap = std::nullopt)
      : tier_overlap_(tier_overlap) {}

  std::string_view name() const override { return "roofline"; }
  bool linear() const override { return false; }
  bool needs_machine() const override { return true; }
  double Correction(const BlockTable& blocks, size_t k, const uint64_t* hits,
                    const double* factor) const override;
  // The span the block was fitted over (its windows widened to the next block's).
  Span CorrectionSpan(const BlockTable& blocks, size_t k, Span) const override {
    return {blocks.lo[k], blocks.hi[k]};
  }

 private:
  std::optional<double> tier_overlap_;
};

}  // namespace tiergym

#endif  // TIERGYM_ESTIMATOR_MODELS_ROOFLINE_MODEL_H_

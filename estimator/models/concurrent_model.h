// The concurrent model (estimator/README.md, "Beyond the paper: the concurrent model"):
// tiers serve requests concurrently, so the bandwidth-bound parts of a block's time on
// different devices overlap instead of adding up. With s_d the block's access share on
// device d and b_d its bandwidth floor there (BlockTable::bandwidth_floor), the block takes
//     sum_d s_d (t_d - b_d) + max_d s_d b_d        instead of    sum_d s_d t_d,
// a correction of sum_d s_d b_d - max_d s_d b_d. Needs the machine's tier bandwidths.
#ifndef TIERGYM_ESTIMATOR_MODELS_CONCURRENT_MODEL_H_
#define TIERGYM_ESTIMATOR_MODELS_CONCURRENT_MODEL_H_

#include "estimator/models/runtime_model.h"

namespace tiergym {

class ConcurrentModel final : public RuntimeModel {
 public:
  std::string_view name() const override { return "concurrent"; }
  bool linear() const override { return false; }
  bool needs_machine() const override { return true; }
  double Correction(const BlockTable& blocks, size_t k, const uint64_t* hits,
                    const double* factor) const override;
  // The block's non-empty windows.
  Span CorrectionSpan(const BlockTable&, size_t, Span windows) const override { return windows; }
};

}  // namespace tiergym

#endif  // TIERGYM_ESTIMATOR_MODELS_CONCURRENT_MODEL_H_

// The paper's model (Denoyelle et al., "Rapid Execution Time Estimation for Heterogeneous
// Memory Systems through Differential Tracing", section 4.2; N tiers by the weighted
// local/remote model): a window's time is sum_d (hits_d / hits) * t_d, so a block needs no
// correction. Linear in the placement.
#ifndef TIERGYM_ESTIMATOR_MODELS_PAPER_MODEL_H_
#define TIERGYM_ESTIMATOR_MODELS_PAPER_MODEL_H_

#include "estimator/models/runtime_model.h"

namespace tiergym {

class PaperModel final : public RuntimeModel {
 public:
  std::string_view name() const override { return "paper"; }
  bool linear() const override { return true; }
  bool needs_machine() const override { return false; }
  double Correction(const BlockTable&, size_t, const uint64_t*, const double*) const override {
    return 0;
  }
  Span CorrectionSpan(const BlockTable&, size_t, Span windows) const override { return windows; }
};

}  // namespace tiergym

#endif  // TIERGYM_ESTIMATOR_MODELS_PAPER_MODEL_H_

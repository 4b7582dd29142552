// The uncertainty an estimate owes to sampling (estimator/README.md, "Sampling intervals"):
// a parametric bootstrap over an estimator index (estimator_index.h). Each replicate
// redraws every non-empty window's sampled accesses per device from a multinomial with the
// window's observed shares under the placement (PEBS samples a window's misses
// independently), then estimates as usual (the windows' shares, the empty windows' segment
// shares and the blocks' corrections under the model all follow the redrawn counts).
// Window times and the roofline fits stay as measured. Seeded: the same arguments give the
// same interval. Thread-safe (reads the immutable index only).
#ifndef TIERGYM_ESTIMATOR_SAMPLING_SPREAD_H_
#define TIERGYM_ESTIMATOR_SAMPLING_SPREAD_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "estimator/estimator_index.h"

namespace tiergym {

struct SamplingInterval {
  double lo_ns = 0, hi_ns = 0;  // the central `level` interval of the replicates
  double stddev_ns = 0;
  int replicates = 0;
  double level = 0;
};

// The sampling interval of `placement`'s estimate under `model`. Cost: replicates *
// (non-empty windows * devices + blocks). InvalidArgument for replicates < 2, a level
// outside (0, 1), or a model that needs a machine the index lacks.
absl::StatusOr<SamplingInterval> SamplingSpread(const EstimatorIndex& index,
                                                const ResolvedPlacement& placement, Model model,
                                                int replicates = 200, uint64_t seed = 1,
                                                double level = 0.9);

}  // namespace tiergym

#endif  // TIERGYM_ESTIMATOR_SAMPLING_SPREAD_H_

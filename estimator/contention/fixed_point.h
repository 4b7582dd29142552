// The damped fixed point that composes a runtime estimate with the contention estimator.
//
// A co-runner's bandwidth on a tier is its bytes there over its time, and its time grows
// with the slowdown the others cause it: slowed tenants put less bandwidth on the tiers,
// so the others are slowed less. The contention paper's rule reads the co-runners at their
// solo bandwidth (one pass), which over-predicts; the estimate that agrees with synthetic
// co-runs (`tiergym validate --corun`, estimator/README.md "Co-runs") is the fixed point
// of times -> the times their bandwidths give. Both the composed estimate of co-runs
// (estimator/corun.h) and the co-scheduled node (env/cosched) iterate it with this
// function.
//
// `times` holds groups of durations (a tenant's pieces, or one interval per tenant).
// `pass(times, next)` fills next[g][q], the undamped new durations given every current one
// (a Jacobi pass: every group sees the others' previous durations). The first pass is taken
// whole; later passes are damped, because the map is anti-monotone (a slowed tenant loads
// the others less, which speeds them up, which slows it again) and an undamped iteration
// can oscillate:
//   kHalf             every later pass moves the durations half way to the new values:
//                     geometric convergence where the map is smooth (one interval per
//                     tenant, as the co-scheduled node prices a step);
//   kHalfThenHarmonic passes 2-5 half way, pass k > 5 by 1 / (k - 3), so that the
//                     durations become running means of the passes, which settle even
//                     where the map is not smooth (bursty phases sliding past each other
//                     as the timelines of a co-run stretch; estimator/corun.h). The price:
//                     the steps shrink, so a small change between two passes says less
//                     about the distance to the fixed point.
// It stops once no group's total moves by more than `tolerance` (relative) between two
// passes, or after max_iterations passes.
//
// Deterministic: the same inputs and pass give bit-identical durations.
#ifndef TIERGYM_ESTIMATOR_CONTENTION_FIXED_POINT_H_
#define TIERGYM_ESTIMATOR_CONTENTION_FIXED_POINT_H_

#include <vector>

#include "absl/functional/function_ref.h"

namespace tiergym::contention {

enum class Damping { kHalf, kHalfThenHarmonic };

struct FixedPointOptions {
  int max_iterations = 50;  // >= 1; 1: one pass (the contention paper's rule)
  double tolerance = 1e-3;  // relative change of every group's total, > 0
  Damping damping = Damping::kHalf;
};

struct FixedPointResult {
  int iterations = 0;      // passes made
  bool converged = false;  // the last pass moved no group by more than the tolerance
};

using FixedPointPass = absl::FunctionRef<void(const std::vector<std::vector<double>>& times,
                                              std::vector<std::vector<double>>& next)>;

// Iterates `times` (updated in place to the damped durations of the last pass) with
// `pass`. `next` arrives sized like `times`. REQUIRES: options in range.
FixedPointResult IterateDampedFixedPoint(std::vector<std::vector<double>>& times,
                                         FixedPointPass pass, const FixedPointOptions& options);

}  // namespace tiergym::contention

#endif  // TIERGYM_ESTIMATOR_CONTENTION_FIXED_POINT_H_

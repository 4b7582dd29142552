// The composed estimate of co-running applications: each tenant's differential-trace
// estimate of its placement, with the time it attributes to each tier scaled by the
// contention estimator's slowdown given the co-runners' bandwidth and read share on that
// tier at that time (estimator/README.md, "Co-runs").
//
// Each tenant's run is cut into pieces (every phase of its profile into
// `pieces_per_phase` equal parts of its base-run instructions). A piece's traffic per tier
// comes from the tenant's own trace and placement: its sampled accesses on the tier
// (PlacementState::AccessesPerDevice) times the misses a weighted sample stands for (the
// runs' PEBS reset) times the cache line; its bandwidth is that over the piece's
// estimated time. The tenants' pieces laid end to end from their start times make
// timelines. For a piece of tenant i, tier t's co-runners are the other tenants with their
// mean bandwidth on t over the piece's time span and their read shares; the slowdown
// ContentionModel::Slowdown of the (app i, tier t) family scales tier t's time in the
// piece (PlacementState::IntervalNs with device factors).
//
// Slowed tenants put less bandwidth on the tiers and line up differently in time, so the
// timelines are recomputed from the slowed estimates until no tenant's runtime moves by
// more than `tolerance` between two passes (a fixed point, damped: the first passes move
// the pieces' times half way to the new estimate, later ones by 1/k, because the map is
// not smooth, bursty phases sliding past each other as the timelines stretch, and half
// steps keep wandering by a few percent; contention/fixed_point.h, Damping::
// kHalfThenHarmonic, the iteration the co-scheduled node shares; `iterations` says how many
// passes it took, `converged` whether the tolerance was met before max_iterations). With
// fixed_point = false one pass is made from the contention-blind timelines: the co-runners
// at their solo bandwidth, as the contention paper's rule reads them.
//
// Thread-safe: pure function; the indexes are shared const.
#ifndef TIERGYM_ESTIMATOR_CORUN_H_
#define TIERGYM_ESTIMATOR_CORUN_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "estimator/contention/contention_model.h"
#include "estimator/estimator_index.h"
#include "estimator/placement_state.h"

namespace tiergym {

struct CorunTenantInput {
  std::string name;
  std::shared_ptr<const EstimatorIndex> index;  // the tenant's profile, indexed
  ResolvedPlacement placement;                  // resolved by `index`
  double start_ns = 0;                          // from the scenario's start, >= 0
  double read_pct = 100;                        // share of reads in its traffic, [0, 100]
  // The misses one weighted sample stands for (CorunMissesPerSample of its profile), > 0.
  double misses_per_sample = 1;
  // Per device of `index`: the tenant's sensitivity to co-runners on that tier; nullopt:
  // the tier is not slowed by co-runners.
  std::vector<std::optional<contention::ContentionModel>> sensitivity;
};

struct CorunEstimateOptions {
  Model model = Model::kRoofline;
  double cache_line_bytes = 64;
  int pieces_per_phase = 4;  // >= 1
  bool fixed_point = true;
  int max_iterations = 50;  // >= 1
  // Relative change of every runtime between two passes.
  double tolerance = 1e-3;
};

struct CorunTenantEstimate {
  std::string name;
  double blind_ns = 0;     // the plain estimate of its placement (no co-runners)
  double composed_ns = 0;  // with the co-runners' slowdowns
  // Time-weighted mean slowdown per device over its run (1 where nothing slows it).
  std::vector<double> mean_slowdown;
};

struct CorunEstimate {
  std::vector<CorunTenantEstimate> tenants;  // in input order
  int iterations = 0;                        // passes over the tenants
  bool converged = false;                    // within the tolerance (always with one pass)
};

// The misses one sample of `index`'s weighted counts stands for in one run: the profile's
// runs' PEBS resets over their sample weights, averaged, divided by the number of runs
// (the counts pool every run's samples). 1 per run when the traces carry no reset.
double CorunMissesPerSample(const Profile& profile);

// InvalidArgument for no tenants, a missing index, a sensitivity list whose size is not the
// index's device count, a negative start or a read share outside [0, 100], or options
// out of range.
absl::StatusOr<CorunEstimate> EstimateCorun(const std::vector<CorunTenantInput>& tenants,
                                            const CorunEstimateOptions& options);

}  // namespace tiergym

#endif  // TIERGYM_ESTIMATOR_CORUN_H_

// The differential-trace runtime estimator as published (Denoyelle et al., "Rapid Execution
// Time Estimation for Heterogeneous Memory Systems through Differential Tracing", section
// 4.2), replaying the samples for every estimate, generalised to N tiers by the weighted
// local/remote model of the RMA-cluster memory-scheduling work
// (section III, equation 4).
//
// The runs of a profile are walked phase by phase (phasemarks are the anchors). Each
// phase is cut into windows of `window_instructions` retired instructions of the base run
// (the run on the placement's default tier); every other run's window boundaries are
// scaled by the ratio of its phase instruction count to the base run's. A window's time on
// device d comes from run d's relation between instructions and time (piecewise linear
// through its samples' (instructions, time) points and the phase's ends). The window's
// estimate is the per-device times weighted by the share of the window's sampled accesses
// (all runs' samples, each weighted by its run's PEBS reset relative to the other runs', so
// runs recorded with different periods count misses alike) that the placement puts on
// each device:
//     t = sum_d share_d * t_d        (two tiers: t_ddr - (t_ddr - t_hbm) * share_hbm).
// A window without samples takes its phase's shares; a phase without samples runs at the
// base device's time. Phases are contiguous, so no time lies between them.
//
// This is the reference (and the benchmark baseline) of the estimator: its cost grows
// with the number of samples for every estimate. Thread-safe: pure function.
#ifndef TIERGYM_ESTIMATOR_REPLAY_ESTIMATOR_H_
#define TIERGYM_ESTIMATOR_REPLAY_ESTIMATOR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "traces/placement.h"
#include "traces/profile.h"

namespace tiergym {

struct EstimateOptions {
  // Window length in base-run instructions. Default 1,000,000: a few hundred thousand
  // to a few million instructions, as the paper configures it; long enough to hold
  // samples at PEBS reset values of 16-64, short enough to follow access-pattern changes
  // inside a phase.
  uint64_t window_instructions = 1'000'000;
  // Use the phasemarks to synchronise the runs (the paper's method). false treats the
  // whole run as one phase (the paper's ablation).
  bool use_phasemarks = true;
  // Scale the other runs' windows by the ratio of their sampled work's extents (default, as
  // IndexOptions::align) instead of instruction counts (false: the paper's rule).
  bool align_by_samples = true;
};

struct PhaseEstimate {
  uint32_t phase = 0;
  double estimated_ns = 0;
  std::vector<uint64_t> measured_ns;  // per device (profile.runs() order)
  uint64_t windows = 0;
};

struct Estimate {
  double runtime_ns = 0;
  std::vector<std::string> devices;         // profile.runs() order
  std::vector<uint64_t> device_runtime_ns;  // each run's measured runtime
  std::vector<double> access_share;         // share of all sampled accesses per device
  std::vector<double> time_share;           // share of the estimated time weighted per device
  std::vector<PhaseEstimate> phases;
};

absl::StatusOr<Estimate> EstimateByReplay(const Profile& profile, const Placement& placement,
                                          const EstimateOptions& options = {});

}  // namespace tiergym

#endif  // TIERGYM_ESTIMATOR_REPLAY_ESTIMATOR_H_

// The runtime estimator of one profile: the entry point for commands and the environment.
//
// An Estimator owns a loaded profile and builds, on first use, one EstimatorIndex per base
// device (the device placements default to; the base run cuts the windows, so placements
// with different defaults need different indexes). Estimates then cost what the index
// costs (estimator_index.h), not a pass over the samples.
//
//   TG_ASSIGN_OR_RETURN(Profile profile, LoadProfile(dir));
//   TG_ASSIGN_OR_RETURN(auto estimator, Estimator::Create(std::move(profile), {}));
//   TG_ASSIGN_OR_RETURN(Estimate e, estimator->EstimatePlacement(placement, Model::kPaper));
//
// Thread-safe: indexes are built one at a time (under a mutex of their own, so that asking
// what is held never waits for a build) and shared as shared_ptr<const>.
#ifndef TIERGYM_ESTIMATOR_ESTIMATOR_H_
#define TIERGYM_ESTIMATOR_ESTIMATOR_H_

#include <map>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "estimator/estimator_index.h"
#include "estimator/replay_estimator.h"
#include "estimator/sampling_spread.h"
#include "traces/machine.h"
#include "traces/placement.h"
#include "traces/profile.h"

namespace tiergym {

struct EstimatorOptions {
  uint64_t window_instructions = 1'000'000;  // see EstimateOptions
  bool use_phasemarks = true;                // see EstimateOptions
  // Enables Model::kConcurrent. Default none.
  std::optional<Machine> machine;
  uint64_t block_samples = 256;   // see IndexOptions
  uint64_t fit_span_samples = 0;  // Model::kRoofline (IndexOptions)
  // Design decisions (IndexOptions; estimator/README.md, "Ablation").
  ShareRuns share_runs = ShareRuns::kPooled;
  WindowAlignment align = WindowAlignment::kSamples;
  FirstTouchFootprint first_touch = FirstTouchFootprint::kExtents;
  EmptyWindows empty_windows = EmptyWindows::kSegmentShares;
  uint64_t extent_gap_pages = 64;      // FirstTouchFootprint::kExtents
  bool join_sweeps = true;             // FirstTouchFootprint::kExtents
  double compute_overlap = 0.5;        // Model::kRoofline
  bool fit_overlap = true;             // Model::kRoofline, three runs or more
  double fit_tolerance = 0;            // Model::kRoofline (IndexOptions)
  double tier_overlap = 1;             // Model::kRoofline (IndexOptions)
  double limit_smoothness = 0;         // Model::kRoofline (IndexOptions)
  std::optional<TierSpec> queue_like;  // Model::kRoofline (IndexOptions)
  double queue_strength = 1;           // Model::kRoofline, with queue_like (IndexOptions)
  bool queue_from_profile = true;      // Model::kRoofline with a machine (IndexOptions)
  bool subset_fits = false;            // Model::kRoofline (IndexOptions)
  bool tail_window_apart = true;       // Model::kRoofline
  double read_pct = 100;               // machines with measured curves: the traffic's read share

  // Model::kRoofline (IndexOptions).
  ShareBias share_bias = ShareBias::kKeep;
};

// The recommended options (estimator/README.md, "Ablation"), which are the struct's
// defaults (first-touch sweeps, sample alignment, pooled shares), with a machine; with
// one, use Model::kRoofline.
inline EstimatorOptions RecommendedEstimatorOptions(std::optional<Machine> machine = {}) {
  EstimatorOptions o;
  o.machine = std::move(machine);
  return o;
}

class Estimator {
 public:
  // InvalidArgument for a zero window or block size, or a machine without one of the
  // profile's devices.
  static absl::StatusOr<std::unique_ptr<Estimator>> Create(Profile profile,
                                                           EstimatorOptions options);

  // The index for placements defaulting to `base_device` (built on first use, then held
  // as long as the estimator).
  absl::StatusOr<std::shared_ptr<const EstimatorIndex>> IndexFor(const std::string& base_device);
  // Whether the index for `base_device` is built (IndexFor would not build it).
  bool HasIndex(const std::string& base_device) const;
  // Bytes of every index held (EstimatorIndex::MemoryBytes summed), one per base device a
  // placement or IndexFor has asked for. Never waits for a build under way (counted once it
  // is done).
  size_t IndexBytes() const;

  // The estimate of `placement` with its breakdown. Fails like EstimatorIndex::Resolve.
  absl::StatusOr<Estimate> EstimatePlacement(const Placement& placement, Model model);

  // The runtime of `placement` were the tiers' bandwidth-bound times not to overlap at all
  // (the tier overlap 0; the other options the same): what Serialization()
  // (prediction_interval.h) compares the estimate with, priced on the placement's index
  // (EstimatorIndex::RuntimeNs with a tier overlap: no second index). Models other than
  // kRoofline do not read the tier overlap: their estimate. Fails like EstimatePlacement.
  absl::StatusOr<double> SerializedRuntimeNs(const Placement& placement, Model model);

  // The sampling interval of the estimate (sampling_spread.h).
  absl::StatusOr<SamplingInterval> SamplingSpread(const Placement& placement, Model model,
                                                  int replicates, uint64_t seed, double level);

  const Profile& profile() const { return profile_; }
  const EstimatorOptions& options() const { return options_; }
  bool has_machine() const { return options_.machine.has_value(); }

 private:
  Estimator(Profile profile, EstimatorOptions options)
      : profile_(std::move(profile)), options_(std::move(options)) {}

  const Profile profile_;
  const EstimatorOptions options_;
  absl::Mutex build_mu_;  // held while an index is built: one build at a time
  mutable absl::Mutex mu_;
  std::map<std::string, std::shared_ptr<const EstimatorIndex>> indexes_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tiergym

#endif  // TIERGYM_ESTIMATOR_ESTIMATOR_H_

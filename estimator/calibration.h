// Calibration of the runtime estimator from measured runs.
//
// Quantities the profile alone cannot determine, fitted on measured runs of mixed
// placements (estimator/README.md, "Calibration from measured runs"):
//   - compute_overlap: the share of the shorter of compute and memory time that hides under
//     the longer (the roofline model's `o`; with two devices the runs cannot separate it
//     from the compute time, nor three within their noise where compute hides under a
//     tier's latency). In [0, 1]: 0 and 1 are physical bounds (nothing, or all of the
//     shorter time, hidden). With three devices or more and per-block overlap fits in the
//     base options (IndexOptions::fit_overlap), the fit also chooses between them and one
//     overlap for every block (options["fit-overlap"] "off"; the overlap on a grid of
//     0.05 then, where the blocks fitting their own start from one of 0, 0.1, .., 1);
//   - tier_overlap: the share of the shorter tiers' bandwidth-bound time that overlaps the
//     longest in a mix (IndexOptions::tier_overlap; a single-tier run cannot show it). In
//     [0.4, 1]: 1 is the physical bound (the tiers transfer concurrently), 0.4 the
//     smallest the grid tries;
//   - queue_strength: how much of a measured curve's latency rise with bandwidth use the
//     tiers without measured curves have (IndexOptions::queue_like, queue_strength; the
//     curve: CalibrationOptions::queue_like, default xeonmax:ddr, the measured DDR5). In
//     [0, 2] on a grid 0, 0.5, .., 2: 0 is the physical bound (a flat latency, the
//     uncalibrated prior), 1 the measured curve's own rise, 2 the largest the grid tries;
//   - the fit tolerance (IndexOptions::fit_tolerance, options["fit-tolerance"]): with three
//     devices or more, how much more misfit each block's fit may take to take less
//     concurrency, where compute hidden under a tier's latency leaves the concurrency to the
//     runs' noise. 0, 0.003 or 0.01: 0 (the best fit) is the uncalibrated prior, 0.01 the
//     largest the grid tries;
//   - with CalibrationOptions::fit_smoothness, the limit smoothness
//     (IndexOptions::limit_smoothness, options["limit-smoothness"]): 0 (the hard maximum of
//     latency- and bandwidth-bound time, the prior), 2 or 4 (their p-norm);
//   - the prediction interval: the cross-validated residuals of the runs, each divided by
//     its prior scale (prediction_interval.h), as the scores of a split-conformal interval;
//     and relative_noise, their root mean square under the final fit.
// Calibrate() fits them on a grid (compute_overlap as above and queue_strength by
// rebuilding the index; tier_overlap 1, 0.95, 0.9, 0.8, .., 0.4 on the index as built,
// EstimatorIndex::RuntimeNs with a tier overlap; by the one-standard-error rule: of the candidates
// whose mean absolute error is within one standard error of the lowest, the one nearest the prior),
// in stages: compute and tier overlap at the prior queue strength; queue strength (with
// fit_smoothness, and limit smoothness) and tier overlap at the prior compute overlap; if the
// queue strength or smoothness moved, compute and tier overlap again at them;
// with three devices or more, the fit tolerance and tier overlap at the chosen rest.
// It reports k-fold cross-validated errors: every run is scored by parameters fitted on the other
// folds only, and its interval from scores of those folds only (nested: the scores of the other
// folds come from fits without the run's fold either). The folds are stratified by the number of
// tiers a placement names (CalibrationFolds).
//
// File format (JSON, written by WriteCalibration, read by ReadCalibration):
//   {"format": "tiergym-calibration", "version": 8,
//    "model": "roofline",            // the model the parameters were fitted for
//    "fit_span": 2048,               // version 6: the fit span the runs were fitted with
//    "machine": "disagg",            // version 7, optional: the machine's name
//    "options": {"window": "1000000", "block-samples": "256", ...},
//                                    // version 7: every option RecordedOptions names, as
//                                    // the command line writes it ("fit-tolerance" since
//                                    // version 8; a version 7 file leaves it as given)
//    "compute_overlap": 0.7,         // in [0, 1]
//    "tier_overlap": 0.9,            // in [0, 1]; version 1 files: 1
//    "queue_strength": 0.5,          // version 4, in [0, 4]; with "queue_like", both or neither
//    "queue_like": "xeonmax:ddr",    // version 4: the measured curve queue_strength scales
//    "relative_noise": 0.006,        // >= 0, relative standard deviation
//    "interval": {"noise": 0.009, "model_error": 0.07,   // the prior the scores divide by
//                 "mix_error": 0.02,                     // version 3; before: 0
//                 "overlap_error": 0.16,                 // version 5; before: 0
//                 "scores": [0.2, 1.1, ...]},            // optional
//    "fitted_runs": 18,              // informational
//    "cross_validation": {"folds": 5, "mean_error_pct": .., "max_error_pct": ..,
//                         "uncalibrated_mean_error_pct": .., "uncalibrated_max_error_pct": ..,
//                         "coverage": ..}}   // coverage optional
// Unknown keys are errors; "cross_validation", "fitted_runs", "tier_overlap", "interval",
// "fit_span", "machine", "options", "queue_strength" and "queue_like" are optional on reading
// (version 1-7 files read as before: version 7 has no "fit-tolerance" (the estimator's is left
// alone), version 6 no "options" (the estimator's are left alone),
// version 5 no "fit_span" (the estimator's fit span is left alone),
// version 4 no "overlap_error" (its scores were divided by a scale without the
// serialization term: 0), version 3 no queueing keys (the estimator's queue options are
// left alone), version 2 no "mix_error", version 1 no "tier_overlap" and no "interval"). A
// version 4 or 5 file without the queueing keys was fitted without a queueing curve.
#ifndef TIERGYM_ESTIMATOR_CALIBRATION_H_
#define TIERGYM_ESTIMATOR_CALIBRATION_H_

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "estimator/estimator.h"
#include "estimator/prediction_interval.h"
#include "traces/measured_runs.h"
#include "traces/placement.h"

namespace tiergym {

struct Calibration {
  Model model = Model::kRoofline;
  double compute_overlap = 0.5;
  double tier_overlap = 1;
  // The queueing fit (version 4): the strength, the curve it scales ("MACHINE:TIER") and
  // that curve's tier; queue_shape empty when the calibration did not fit queueing.
  double queue_strength = 0;
  std::string queue_like;
  std::optional<TierSpec> queue_shape;
  double relative_noise = 0;
  // The fit span (IndexOptions::fit_span_samples) the parameters and scores were fitted
  // with (version 6); absent in older files, whose fit span the user had to repeat.
  std::optional<uint64_t> fit_span_samples;
  // The other options of the estimate the parameters and scores were fitted with (version
  // 7; RecordedOptions): key and value, as the command line writes them. Empty in older
  // files, whose options the user had to repeat.
  std::vector<std::pair<std::string, std::string>> options;
  // The name of the machine it was fitted on (version 7; Machine::name): its parameters
  // stand in for what that machine's spec sheet leaves out. Empty: not recorded.
  std::string machine;
  // The split-conformal scores (ascending) and the prior they are relative to.
  IntervalPrior prior;
  std::vector<double> interval_scores;
  int fitted_runs = 0;
  // Cross-validation (k-fold) of the fit; folds == 0 when absent.
  int folds = 0;
  double cv_mean_error_pct = 0, cv_max_error_pct = 0;
  double uncalibrated_mean_error_pct = 0, uncalibrated_max_error_pct = 0;
  double cv_coverage = -1;  // share of runs inside their cross-validated 90 % interval
  // Per run, in the order given: the cross-validated relative residual (estimate /
  // measured - 1) and whether it lay in its cross-validated 90 % interval. Not written to
  // the file.
  std::vector<double> cv_residual;
  std::vector<bool> cv_inside;
  // What one fit chose: the terms above and the recorded options it fits.
  struct Parameters {
    bool fit_overlap = true;  // per-block compute overlap fits
    double compute_overlap = 0, tier_overlap = 1, queue_strength = 0, fit_tolerance = 0,
           limit_smoothness = 0;
  };
  // Per run, the fold it was held out in (CalibrationFolds), and per fold what the fit on
  // the other folds chose: which runs were held out together, and where the folds' fits
  // disagree. Not written to the file.
  std::vector<int> cv_fold;
  std::vector<Parameters> fold_fits;
  // How many estimators (compute overlap, queue strength) the fit built. Not in the file.
  int estimator_builds = 0;
};

// The fit span `tiergym calibrate` fits with unless given one (at least the block size):
// chosen for calibrated estimates by the family of ground truths' leave-one-model-out
// (estimator/README.md, "After calibration"), as 0 was for uncalibrated ones.
inline constexpr uint64_t kCalibrationFitSpan = 2048;
// The compute overlap `tiergym calibrate` takes as its prior unless given one (the
// candidate the one-standard-error rule stays nearest): chosen for calibrated estimates by
// the family's leave-one-model-out under both rules (estimator/README.md, "The calibration's
// prior compute overlap"); uncalibrated estimates keep IndexOptions::compute_overlap's 0.5.
inline constexpr double kCalibrationComputeOverlap = 0.7;
// The cross-validation folds `tiergym calibrate` makes unless told (one per run when there are
// fewer runs). Ten were tried on the family of ground truths and not kept: they moved the worst
// held-out mixes from some profiles to others (estimator/README.md, "Ten folds, tried").
inline constexpr int kDefaultCalibrationFolds = 5;

// The folds of a k-fold cross-validation over the runs `which` (indices into `placements`):
// ordered by the number of tiers their placements name (Placement::Tiers: one tier, two-tier
// fractions and ranges, three-tier mixes), then as given, the i-th of that order in fold i % k.
// Each kind of placement then spreads over the folds, whatever order the runs were listed in:
// no fold holds two runs of a kind that has at most k.
std::vector<std::vector<size_t>> CalibrationFolds(const std::vector<Placement>& placements,
                                                  const std::vector<size_t>& which, int k);

// The options of an estimate a calibration records (version 7) besides the fit span and the
// parameters it fits, in the command line's names and syntax (`tiergym estimate --help`):
// window, phasemarks (on|off: --no-phasemarks), block-samples, shares, first-touch,
// extent-gap, empty-windows, align, segment-tail, limit-smoothness, subset-fits, fit-overlap,
// fit-tolerance (version 8), share-bias, read-pct. Each changes the blocks or their fits, so a
// calibration's parameters and residuals hold under its own values only.
std::vector<std::pair<std::string, std::string>> RecordedOptions(const EstimatorOptions& options);

// A recorded option whose value differs between a calibration and other options: its key
// (RecordedOptions, or "fit-span" for the fit span), the calibration's value and the other's.
struct OptionConflict {
  std::string key, recorded, other;
};
std::vector<OptionConflict> ConflictingOptions(const Calibration& calibration,
                                               const EstimatorOptions& options);

// OK when the calibration may price estimates on `machine` (none: without a machine): it
// records none, or `machine`'s name. InvalidArgument otherwise, naming both machines.
absl::Status CheckCalibrationMachine(const Calibration& calibration,
                                     const std::optional<Machine>& machine);

// Sets the options the calibration determines (compute_overlap, tier_overlap, the fit span
// and the recorded options when the file records them; with a queueing fit, queue_like and
// queue_strength: none when the fitted strength is 0, and queue_from_profile false: the fitted
// strength supersedes the one read from the profile).
void ApplyCalibration(const Calibration& calibration, EstimatorOptions* options);

// The interval of an estimate under the calibration: ConformalInterval with its scores
// and prior (the prior interval when it has no scores).
PredictionInterval CalibratedInterval(const Calibration& calibration, double estimate_ns,
                                      double paper_ns, const SamplingInterval& sampling,
                                      double level, double mixing = 0, double serialization = 0);

absl::StatusOr<Calibration> ReadCalibration(const std::string& path);
absl::StatusOr<Calibration> ParseCalibration(std::string_view text, std::string_view source);
std::string FormatCalibration(const Calibration& calibration);

struct CalibrationOptions {
  // >= 2, <= the number of runs; 0: kDefaultCalibrationFolds, or one per run when there are
  // fewer runs (leave-one-out).
  int folds = 0;
  Model model = Model::kRoofline;
  // The prior the interval scores are relative to.
  IntervalPrior prior;
  // The measured curve (MACHINE:TIER) whose latency rise the queue strength scales; empty:
  // no queueing fit. When the base options have a queue_like, it must name that curve.
  std::string queue_like = std::string(kDefaultQueueLike);
  // Whether to fit the limit between latency- and bandwidth-bound time
  // (EstimatorOptions::limit_smoothness) among the hard maximum and the p-norms 2 and 4,
  // with the queue strength; the fitted value is a recorded option (estimator/README.md,
  // "A fitted limit smoothness"). Off: the base options' smoothness holds.
  bool fit_smoothness = false;
  // Progress lines (may be empty).
  std::function<void(const std::string&)> progress;
};

// Fits the calibration on `runs` with estimators built from `base` options (its
// compute_overlap and tier_overlap are the uncalibrated prior; each candidate's
// queue_from_profile is false: the strength is the candidate's, fitted on the runs).
// InvalidArgument for fewer runs than folds, fewer than 2 folds or fewer than 2 runs; estimation
// errors name the run.
absl::StatusOr<Calibration> Calibrate(const Profile& profile, const EstimatorOptions& base,
                                      const std::vector<std::pair<MeasuredRun, Placement>>& runs,
                                      const CalibrationOptions& options = {});

}  // namespace tiergym

#endif  // TIERGYM_ESTIMATOR_CALIBRATION_H_

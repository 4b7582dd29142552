// Calibration of the runtime estimator from measured runs.
//
// Two physically meaningful quantities the profile alone cannot determine:
//   - compute_overlap: the share of the shorter of compute and memory time that hides under
//     the longer (the roofline model's `o`; with two devices the runs cannot separate it
//     from the compute time, estimator/README.md, "The roofline model");
//   - relative_noise: the run-to-run variation of measured runtimes that the estimate does
//     not model (relative standard deviation of the residuals), which widens the sampling
//     interval into a prediction interval.
// Calibrate() fits them on measured runs and reports k-fold cross-validated errors: every
// run is scored by parameters fitted on the other folds only.
//
// File format (JSON, written by WriteCalibration, read by ReadCalibration):
//   {"format": "tiergym-calibration", "version": 1,
//    "model": "roofline",            // the model the parameters were fitted for
//    "compute_overlap": 0.7,         // in [0, 1]
//    "relative_noise": 0.006,        // >= 0, relative standard deviation
//    "fitted_runs": 18,              // informational
//    "cross_validation": {"folds": 5, "mean_error_pct": .., "max_error_pct": ..,
//                         "uncalibrated_mean_error_pct": .., "uncalibrated_max_error_pct": ..}}
// Unknown keys are errors; "cross_validation" and "fitted_runs" are optional on reading.
#ifndef TIERGYM_ESTIMATOR_CALIBRATION_H_
#define TIERGYM_ESTIMATOR_CALIBRATION_H_

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "estimator/estimator.h"
#include "traces/measured_runs.h"
#include "traces/placement.h"

namespace tiergym {

struct Calibration {
  Model model = Model::kRoofline;
  double compute_overlap = 0.5;
  double relative_noise = 0;
  int fitted_runs = 0;
  // Cross-validation (k-fold) of the fit; folds == 0 when absent.
  int folds = 0;
  double cv_mean_error_pct = 0, cv_max_error_pct = 0;
  double uncalibrated_mean_error_pct = 0, uncalibrated_max_error_pct = 0;
};

// Sets the options the calibration determines (compute_overlap).
void ApplyCalibration(const Calibration& calibration, EstimatorOptions* options);

// The sampling interval [lo, hi] of `estimate_ns` widened by the calibration's noise: the
// half-widths add in quadrature with z(level) * relative_noise * estimate_ns.
std::pair<double, double> WidenInterval(const Calibration& calibration, double estimate_ns,
                                        double lo_ns, double hi_ns, double level);

absl::StatusOr<Calibration> ReadCalibration(const std::string& path);
absl::StatusOr<Calibration> ParseCalibration(std::string_view text, std::string_view source);
std::string FormatCalibration(const Calibration& calibration);

struct CalibrationOptions {
  int folds = 5;  // >= 2, <= the number of runs
  // Candidate overlaps: 0, 0.1, .., 1.
  Model model = Model::kRoofline;
  // Progress lines (may be empty).
  std::function<void(const std::string&)> progress;
};

// Fits the calibration on `runs` with estimators built from `base` options (its
// compute_overlap is the uncalibrated prior). InvalidArgument for fewer runs than folds
// or fewer than 2 folds; estimation errors name the run.
absl::StatusOr<Calibration> Calibrate(const Profile& profile, const EstimatorOptions& base,
                                      const std::vector<std::pair<MeasuredRun, Placement>>& runs,
                                      const CalibrationOptions& options = {});

// The standard normal quantile (for intervals), p in (0, 1).
double NormalQuantile(double p);

}  // namespace tiergym

#endif  // TIERGYM_ESTIMATOR_CALIBRATION_H_

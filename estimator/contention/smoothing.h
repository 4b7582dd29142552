// Smoothing of one sensitivity curve (the contention paper, sections 3.5 and 4.2): a function from
// the interferer's solo bandwidth to the target's normalized performance.
//
//   kLinear         least-squares line a + b x through the curve's points
//   kPoly2          least-squares parabola a + b x + c x^2
//   kInterpolation  no smoothing: piecewise-linear through the points, the repeated
//                   measurements of one interference level averaged
// applied to all points (PointSet::kAll) or only to those nearest 25/50/75/100 % of the
// curve's maximum interference, as prior work measures curves (PointSet::kSampled, see
// SampledPoints). Fits use every repeated measurement as its own observation. The
// curve's points may come in any order.
//
// Shape of every smoothed curve, with x0 the smallest and xmax the largest interference
// used and body() the fit or the interpolation:
//   x <= 0        1.0 (no interference: the solo run)
//   0 < x < x0    straight line from (0, 1.0) to (x0, body(x0))
//   x0 <= x       body(min(x, xmax)): beyond the largest measured interference the curve
//                 stays flat (the interferer cannot push the memory harder than its
//                 sustainable bandwidth, the curve's last point); fits do not extrapolate.
//
// SmoothedCurve is an immutable value; thread-safe.
#ifndef TIERGYM_ESTIMATOR_CONTENTION_SMOOTHING_H_
#define TIERGYM_ESTIMATOR_CONTENTION_SMOOTHING_H_

#include <array>
#include <cstddef>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "estimator/contention/sensitivity_csv.h"

namespace tiergym::contention {

enum class Smoothing { kLinear, kPoly2, kInterpolation };
enum class PointSet { kAll, kSampled };
// How kLinear and kPoly2 fit their points (interpolation has no fit):
//   kLeastSquares  ordinary least squares (the contention paper's fits)
//   kRobust        Tukey's biweight by iteratively reweighted least squares: a measurement
//                  far from the curve (a run disturbed by something else) loses its weight
//                  instead of pulling the fit; the scale is the median absolute residual.
//                  With no more points than the fit's unknowns plus two it is ordinary
//                  least squares.
//   kAuto          chosen by the curve's own residuals: the robust fit when one of its
//                  residuals is an outlier by the modified z-score rule (beyond 3.5 robust
//                  standard deviations, 1.4826 times the median absolute residual;
//                  Iglewicz and Hoaglin's threshold), the least-squares fit otherwise.
enum class Fit { kLeastSquares, kRobust, kAuto };

// "linear", "poly2", "interpolation"; "all", "sampled" (the keys of validate --json).
std::string_view SmoothingName(Smoothing s);
std::string_view PointSetName(PointSet p);

class SmoothedCurve {
 public:
  Smoothing smoothing() const { return smoothing_; }
  double read_pct() const { return read_pct_; }
  double first_gbps() const { return first_gbps_; }  // x0
  double max_gbps() const { return max_gbps_; }      // xmax
  // Distinct interference levels used (what profiling the curve cost).
  size_t distinct_points() const { return distinct_points_; }
  // Fits: {a, b, c} of a + b x + c x^2 (c = 0 for kLinear). Interpolation: zeros.
  const std::array<double, 3>& coefficients() const { return coefficients_; }
  // Interpolation: (interference, mean normalized performance) per level, ascending.
  // Fits: empty.
  const std::vector<std::pair<double, double>>& knots() const { return knots_; }

  // Normalized performance at interference `gbps` (shape above); 1.0 for gbps <= 0.
  double Evaluate(double gbps) const;

  // min(1, min of Evaluate over [0, gbps]): the curve made non-increasing and never
  // above 1.0, for uses that must never predict a speed-up from more interference.
  double Envelope(double gbps) const;

 private:
  friend absl::StatusOr<SmoothedCurve> SmoothCurve(const SensitivityCurve&, Smoothing, PointSet,
                                                   Fit);
  double Body(double gbps) const;

  Smoothing smoothing_ = Smoothing::kInterpolation;
  double read_pct_ = 100;
  double first_gbps_ = 0;
  double max_gbps_ = 0;
  size_t distinct_points_ = 0;
  std::array<double, 3> coefficients_{};
  std::vector<std::pair<double, double>> knots_;
};

// The points of `curve` at the interference levels nearest 25, 50, 75 and 100 % of its
// largest interference (ties go to the lower level), every repeat of those levels
// included, ascending. A sparse curve may yield fewer than four levels (one level can be
// nearest to two targets). Empty for an empty curve.
std::vector<CurvePoint> SampledPoints(const SensitivityCurve& curve);

// Smooths `curve`. FailedPrecondition, naming the curve's read share, when the points
// used have fewer distinct interference levels than the method needs (kLinear 2,
// kPoly2 3, kInterpolation 1).
absl::StatusOr<SmoothedCurve> SmoothCurve(const SensitivityCurve& curve, Smoothing smoothing,
                                          PointSet points, Fit fit);
// Fit::kLeastSquares.
absl::StatusOr<SmoothedCurve> SmoothCurve(const SensitivityCurve& curve, Smoothing smoothing,
                                          PointSet points);

}  // namespace tiergym::contention

#endif  // TIERGYM_ESTIMATOR_CONTENTION_SMOOTHING_H_

#include "estimator/contention/smoothing.h"

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>

#include "traces/base/strings.h"

namespace tiergym::contention {
namespace {

// Tukey's biweight: points further than kBiweightTuning robust standard deviations of the
// residuals from the fit get no weight (4.685: 95 % efficiency on normal noise); the
// scale is the median absolute residual times 1.4826, at least kRobustScaleFloor (a
// hundredth of a percent: a curve fitted exactly does not divide by zero).
constexpr double kBiweightTuning = 4.685;
constexpr double kMadToSigma = 1.4826;
constexpr double kRobustScaleFloor = 1e-4;
constexpr int kRobustIterations = 20;
// Fit::kAuto: a residual beyond this many robust standard deviations is an outlier.
constexpr double kOutlierZ = 3.5;

// Distinct interference levels of ascending points, with the mean performance of each.
std::vector<std::pair<double, double>> LevelMeans(const std::vector<CurvePoint>& points) {
  std::vector<std::pair<double, double>> levels;
  size_t i = 0;
  while (i < points.size()) {
    size_t j = i;
    double sum = 0;
    while (j < points.size() && points[j].interference_gbps == points[i].interference_gbps) {
      sum += points[j].normalized_perf;
      ++j;
    }
    levels.emplace_back(points[i].interference_gbps, sum / static_cast<double>(j - i));
    i = j;
  }
  return levels;
}

// Least-squares coefficients {a, b, c} of a + b x + c x^2 (degree 1 or 2) through the
// points. x is scaled by `scale` for the solve, which keeps the columns comparable.
// Fit::kRobust reweights the points by Tukey's biweight of their residuals (iteratively
// reweighted least squares, see smoothing.h).
std::array<double, 3> FitPolynomial(const std::vector<CurvePoint>& points, int degree, double scale,
                                    Fit fit) {
  const auto n = static_cast<Eigen::Index>(points.size());
  Eigen::MatrixXd a(n, degree + 1);
  Eigen::VectorXd y(n);
  for (Eigen::Index i = 0; i < n; ++i) {
    const double u = points[i].interference_gbps / scale;
    double power = 1;
    for (int k = 0; k <= degree; ++k) {
      a(i, k) = power;
      power *= u;
    }
    y(i) = points[i].normalized_perf;
  }
  Eigen::VectorXd solution = a.colPivHouseholderQr().solve(y);
  if ((fit == Fit::kRobust || fit == Fit::kAuto) && n > degree + 2) {
    const Eigen::VectorXd least_squares = solution;
    std::vector<double> abs_residual(n);
    Eigen::VectorXd w(n);
    double scale_r = kRobustScaleFloor;
    for (int it = 0; it < kRobustIterations; ++it) {
      const Eigen::VectorXd r = y - a * solution;
      for (Eigen::Index i = 0; i < n; ++i) abs_residual[i] = std::fabs(r(i));
      std::nth_element(abs_residual.begin(), abs_residual.begin() + n / 2, abs_residual.end());
      scale_r = std::max(kMadToSigma * abs_residual[n / 2], kRobustScaleFloor);
      const double c = kBiweightTuning * scale_r;
      Eigen::Index kept = 0;
      for (Eigen::Index i = 0; i < n; ++i) {
        const double z = r(i) / c;
        w(i) = std::fabs(z) < 1 ? (1 - z * z) * (1 - z * z) : 0.0;
        if (w(i) > 0) ++kept;
      }
      if (kept <= degree + 1) break;  // too few points left to fit: keep the last solution
      const Eigen::VectorXd sw = w.cwiseSqrt();
      solution = (sw.asDiagonal() * a).colPivHouseholderQr().solve(sw.asDiagonal() * y);
    }
    if (fit == Fit::kAuto) {
      // The robust fit's residuals tell whether the curve holds an outlier (a least-squares
      // fit would mask it by leaning towards it): keep the robust fit then, least squares
      // otherwise.
      const Eigen::VectorXd r = y - a * solution;
      double worst = 0;
      for (Eigen::Index i = 0; i < n; ++i) worst = std::max(worst, std::fabs(r(i)));
      if (!(worst > kOutlierZ * scale_r)) solution = least_squares;
    }
  }
  std::array<double, 3> c{};
  double factor = 1;
  for (int k = 0; k <= degree; ++k) {
    c[k] = solution(k) / factor;
    factor *= scale;
  }
  return c;
}

// The points ascending by interference, repeats in their given order.
std::vector<CurvePoint> Sorted(std::vector<CurvePoint> points) {
  std::stable_sort(points.begin(), points.end(), [](const CurvePoint& a, const CurvePoint& b) {
    return a.interference_gbps < b.interference_gbps;
  });
  return points;
}

}  // namespace

std::string_view SmoothingName(Smoothing s) {
  switch (s) {
    case Smoothing::kLinear:
      return "linear";
    case Smoothing::kPoly2:
      return "poly2";
    case Smoothing::kInterpolation:
      return "interpolation";
  }
  return "?";
}

std::string_view PointSetName(PointSet p) { return p == PointSet::kAll ? "all" : "sampled"; }

std::vector<CurvePoint> SampledPoints(const SensitivityCurve& curve) {
  if (curve.points.empty()) return {};
  const std::vector<CurvePoint> sorted = Sorted(curve.points);
  const std::vector<std::pair<double, double>> levels = LevelMeans(sorted);
  const double max_gbps = levels.back().first;
  std::vector<double> chosen;
  for (double fraction : {0.25, 0.5, 0.75, 1.0}) {
    const double target = fraction * max_gbps;
    double best = levels[0].first;
    for (const auto& [gbps, perf] : levels) {
      // Strictly nearer only: on a tie the lower level, met first, stays.
      if (std::fabs(gbps - target) < std::fabs(best - target)) best = gbps;
    }
    if (std::find(chosen.begin(), chosen.end(), best) == chosen.end()) chosen.push_back(best);
  }
  std::vector<CurvePoint> out;
  for (const CurvePoint& p : sorted) {
    if (std::find(chosen.begin(), chosen.end(), p.interference_gbps) != chosen.end()) {
      out.push_back(p);
    }
  }
  return out;
}

absl::StatusOr<SmoothedCurve> SmoothCurve(const SensitivityCurve& curve, Smoothing smoothing,
                                          PointSet point_set) {
  return SmoothCurve(curve, smoothing, point_set, Fit::kLeastSquares);
}

absl::StatusOr<SmoothedCurve> SmoothCurve(const SensitivityCurve& curve, Smoothing smoothing,
                                          PointSet point_set, Fit fit) {
  const std::vector<CurvePoint> points =
      point_set == PointSet::kAll ? Sorted(curve.points) : SampledPoints(curve);
  std::vector<std::pair<double, double>> levels = LevelMeans(points);
  const size_t needed = smoothing == Smoothing::kPoly2    ? 3
                        : smoothing == Smoothing::kLinear ? 2
                                                          : 1;
  if (levels.size() < needed) {
    return absl::FailedPreconditionError(
        StrCat("the ", curve.read_pct, " % read curve has ", levels.size(),
               " distinct interference level(s) among its ", PointSetName(point_set), " points; ",
               SmoothingName(smoothing), " smoothing needs ", needed));
  }
  SmoothedCurve out;
  out.smoothing_ = smoothing;
  out.read_pct_ = curve.read_pct;
  out.first_gbps_ = levels.front().first;
  out.max_gbps_ = levels.back().first;
  out.distinct_points_ = levels.size();
  if (smoothing == Smoothing::kInterpolation) {
    out.knots_ = std::move(levels);
  } else {
    out.coefficients_ =
        FitPolynomial(points, smoothing == Smoothing::kPoly2 ? 2 : 1, out.max_gbps_, fit);
  }
  return out;
}

double SmoothedCurve::Body(double gbps) const {
  if (smoothing_ != Smoothing::kInterpolation) {
    return coefficients_[0] + gbps * (coefficients_[1] + gbps * coefficients_[2]);
  }
  // REQUIRES: first_gbps_ <= gbps <= max_gbps_.
  auto hi =
      std::lower_bound(knots_.begin(), knots_.end(), gbps,
                       [](const std::pair<double, double>& k, double x) { return k.first < x; });
  if (hi == knots_.end()) return knots_.back().second;
  if (hi->first == gbps || hi == knots_.begin()) return hi->second;
  const auto lo = hi - 1;
  const double t = (gbps - lo->first) / (hi->first - lo->first);
  return lo->second + t * (hi->second - lo->second);
}

double SmoothedCurve::Evaluate(double gbps) const {
  if (!(gbps > 0)) return 1.0;
  const double x = std::min(gbps, max_gbps_);
  if (x < first_gbps_) return 1.0 + (Body(first_gbps_) - 1.0) * x / first_gbps_;
  return Body(x);
}

double SmoothedCurve::Envelope(double gbps) const {
  if (!(gbps > 0)) return 1.0;
  const double x = std::min(gbps, max_gbps_);
  // The minimum of a continuous function over [0, x] is at an end or at an interior
  // extremum: the ramp is a line (ends 0 and x0), the interpolation is linear between
  // knots, and a parabola has one vertex.
  double lowest = std::min(1.0, Evaluate(x));
  if (x >= first_gbps_) {
    lowest = std::min(lowest, Body(first_gbps_));
    for (const auto& [k, perf] : knots_) {
      if (k <= x) lowest = std::min(lowest, perf);
    }
    const double c = coefficients_[2];
    if (c > 0) {
      const double vertex = -coefficients_[1] / (2 * c);
      if (vertex > first_gbps_ && vertex < x) lowest = std::min(lowest, Body(vertex));
    }
  }
  return lowest;
}

}  // namespace tiergym::contention

// The contention estimator of the contention paper: predicts an application's normalized
// performance (solo runtime / runtime under interference) when co-runners put bandwidth
// on its memory, from the application's family of smoothed sensitivity curves.
//
// A Method picks the smoothing (smoothing.h), the points used, and which curve answers
// an interferer of read share r:
//   kRight      the curve measured at r; between two measured shares, the linear
//               interpolation (in r) of their two predictions; outside the measured
//               shares, the nearest curve
//   kStatic     the curve at static_read_pct (50, 75 or 100 in the seed), whatever r is
//   kEstimated  equation (3) from the 50 % and 100 % curves:
//               scale = clamp((r - 50) / 50, 0, 1), P = P50 (1 - scale) + P100 scale
// Method::Memgen() is the seed's baseline (section 4.3): the 75 % curve, its four
// sampled points, linear interpolation.
//
// Several co-runners on one memory act as one interferer whose bandwidth is the sum of
// their solo bandwidths and whose read share is the bandwidth-weighted mean of theirs:
// the memory controller sees their traffic together, and the seed measures both the
// curves' x-axis and an application's contentiousness as total CAS traffic (equations
// (1) and (2)). See CONTENTION.md, "Several co-runners", for why and for the limits.
//
// Typical use from the runtime estimator:
//   TG_ASSIGN_OR_RETURN(ContentionModel model, ContentionModel::Create(family, Method()));
//   double factor = model.Slowdown({{{12.0, 70.0}, {3.5, 95.0}}});  // two co-runners
//
// ContentionModel is an immutable value (it copies what it needs from the family);
// thread-safe.
#ifndef TIERGYM_ESTIMATOR_CONTENTION_CONTENTION_MODEL_H_
#define TIERGYM_ESTIMATOR_CONTENTION_CONTENTION_MODEL_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "estimator/contention/sensitivity_csv.h"
#include "estimator/contention/smoothing.h"

namespace tiergym::contention {

enum class CurveChoice { kRight, kStatic, kEstimated };

struct Method {
  Smoothing smoothing = Smoothing::kLinear;  // default: the seed's choice (section 3.5)
  PointSet points = PointSet::kAll;          // default: every measured point
  CurveChoice curve = CurveChoice::kRight;   // default: the interferer's own read share
  double static_read_pct = 75;               // used by kStatic only; default 75
  Fit fit = Fit::kLeastSquares;              // kLinear and kPoly2 only

  // Interpolation, sampled points, the static 75 % curve.
  static Method Memgen();
  bool IsMemgen() const;

  // Same smoothing, points and curve choice (static_read_pct counts for kStatic only).
  friend bool operator==(const Method& a, const Method& b) {
    return a.smoothing == b.smoothing && a.points == b.points && a.curve == b.curve &&
           a.fit == b.fit &&
           (a.curve != CurveChoice::kStatic || a.static_read_pct == b.static_read_pct);
  }
};

// The read-curve key of validate --json: "right", "50", "75", "100", "estimated", or
// "memgen" for Method::Memgen().
std::string CurveName(const Method& method);
// "SMOOTHING/POINTS/CURVE", e.g. "linear/all/right", "poly2/sampled/estimated",
// "interpolation/all/50"; "memgen" for Method::Memgen().
std::string MethodName(const Method& method);
// Inverse of MethodName; the POINTS part may be left out ("linear/right" = all points).
// InvalidArgument naming the bad part.
absl::StatusOr<Method> ParseMethod(std::string_view name);

struct CoRunner {
  double bandwidth_gbps = 0;  // solo bandwidth it puts on the target's memory, >= 0
  double read_pct = 100;      // share of that traffic that is reads, in [0, 100]
};

struct Interference {
  std::vector<CoRunner> co_runners;  // empty: no interference

  // Sum of the co-runners' bandwidths.
  double TotalBandwidthGbps() const;
  // Bandwidth-weighted mean read share; 100 when the total bandwidth is 0.
  double ReadPct() const;
};

// InvalidArgument unless every co-runner has a finite bandwidth >= 0 and a read share in
// [0, 100].
absl::Status CheckInterference(const Interference& interference);

class ContentionModel {
 public:
  // Smooths the curves of `family` that `method` uses. FailedPrecondition naming the app
  // when the family lacks a curve the method needs (kStatic: the curve at
  // static_read_pct; kEstimated: the 50 % and 100 % curves; kRight: any curve) or when
  // a curve has too few points for the smoothing (SmoothCurve).
  static absl::StatusOr<ContentionModel> Create(const SensitivityFamily& family,
                                                const Method& method);

  const std::string& app() const { return app_; }
  const Method& method() const { return method_; }

  // The seed's prediction: the chosen curves' smoothed value at the total bandwidth,
  // combined across read shares as the method says. 1.0 without interference. May exceed
  // 1.0 or rise with bandwidth where the smoothed curve does. REQUIRES:
  // CheckInterference(interference) is OK.
  double NormalizedPerf(const Interference& interference) const;

  // The factor by which the target's time under contention grows: 1 / the prediction
  // made from each curve's Envelope() instead of its value, floored at
  // kMinNormalizedPerf. Exactly 1.0 without interference, never below 1.0, and
  // non-decreasing when the co-runners' bandwidths grow at a fixed read share.
  // REQUIRES: CheckInterference(interference) is OK.
  double Slowdown(const Interference& interference) const;

  // The largest interference measured on the curves a prediction at this interference's
  // read share reads (combined across read shares like the prediction), GB/s. Beyond it a
  // curve holds its last value: the prediction is not extrapolated, and callers should say
  // so (`tiergym contention predict` does). REQUIRES: CheckInterference(interference).
  double MeasuredMaxGbps(const Interference& interference) const;

  // Profiling cost as the seed counts it (Tables 1-3): the distinct interference levels
  // of every curve the method uses, divided by 4 (one static curve of four points = 1).
  double ProfilingCost() const;

  static constexpr double kMinNormalizedPerf = 0.05;

 private:
  ContentionModel() = default;
  template <typename Eval>
  double Combine(double read_pct, Eval eval) const;

  std::string app_;
  Method method_;
  std::vector<SmoothedCurve> curves_;  // ascending read_pct
};

// One-shot conveniences (they smooth the family on every call; keep a ContentionModel
// for repeated queries). Errors as ContentionModel::Create and CheckInterference.
absl::StatusOr<double> PredictNormalizedPerf(const SensitivityFamily& family,
                                             const Interference& interference,
                                             const Method& method);
absl::StatusOr<double> PredictSlowdown(const SensitivityFamily& family,
                                       const Interference& interference, const Method& method);

}  // namespace tiergym::contention

#endif  // TIERGYM_ESTIMATOR_CONTENTION_CONTENTION_MODEL_H_

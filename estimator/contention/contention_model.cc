#include "estimator/contention/contention_model.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "traces/base/csv_table.h"
#include "traces/base/status_macros.h"
#include "traces/base/strings.h"

namespace tiergym::contention {

Method Method::Memgen() {
  Method m;
  m.smoothing = Smoothing::kInterpolation;
  m.points = PointSet::kSampled;
  m.curve = CurveChoice::kStatic;
  m.static_read_pct = 75;
  return m;
}

bool Method::IsMemgen() const { return *this == Memgen(); }

std::string CurveName(const Method& method) {
  if (method.IsMemgen()) return "memgen";
  switch (method.curve) {
    case CurveChoice::kRight:
      return "right";
    case CurveChoice::kEstimated:
      return "estimated";
    case CurveChoice::kStatic:
      return StrCat(method.static_read_pct);
  }
  return "?";
}

std::string MethodName(const Method& method) {
  if (method.IsMemgen()) return "memgen";
  return StrCat(SmoothingName(method.smoothing), "/", PointSetName(method.points), "/",
                CurveName(method),
                method.fit == Fit::kRobust ? "/robust"
                : method.fit == Fit::kAuto ? "/auto"
                                           : "");
}

absl::StatusOr<Method> ParseMethod(std::string_view name) {
  if (name == "memgen") return Method::Memgen();
  std::vector<std::string_view> parts;
  for (size_t start = 0;;) {
    const size_t slash = name.find('/', start);
    parts.push_back(name.substr(start, slash == std::string_view::npos ? slash : slash - start));
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
  const auto bad = [&](std::string_view why) {
    return absl::InvalidArgumentError(
        StrCat("method \"", name, "\": ", why,
               "; expected SMOOTHING/POINTS/CURVE (linear|poly2|interpolation / all|sampled / "
               "right|estimated|READ_PCT, then optionally /robust or /auto) or memgen, e.g. "
               "linear/all/right"));
  };
  Method m;
  if (parts.size() >= 3 && (parts.back() == "robust" || parts.back() == "auto")) {
    m.fit = parts.back() == "robust" ? Fit::kRobust : Fit::kAuto;
    parts.pop_back();
  }
  if (parts.size() != 2 && parts.size() != 3) return bad("wrong number of '/'-separated parts");
  if (parts[0] == "linear") {
    m.smoothing = Smoothing::kLinear;
  } else if (parts[0] == "poly2") {
    m.smoothing = Smoothing::kPoly2;
  } else if (parts[0] == "interpolation" || parts[0] == "none") {
    m.smoothing = Smoothing::kInterpolation;
  } else {
    return bad(StrCat("unknown smoothing \"", parts[0], "\""));
  }
  if (m.fit != Fit::kLeastSquares && m.smoothing == Smoothing::kInterpolation) {
    return bad("robust and auto apply to the linear and poly2 fits, not to interpolation");
  }
  if (parts.size() == 3) {
    if (parts[1] == "all") {
      m.points = PointSet::kAll;
    } else if (parts[1] == "sampled") {
      m.points = PointSet::kSampled;
    } else {
      return bad(StrCat("unknown point set \"", parts[1], "\""));
    }
  }
  const std::string_view curve = parts.back();
  if (curve == "right") {
    m.curve = CurveChoice::kRight;
  } else if (curve == "estimated") {
    m.curve = CurveChoice::kEstimated;
  } else {
    const std::optional<double> pct = ParseFiniteNumber(curve);
    if (!pct.has_value() || *pct < 0 || *pct > 100) {
      return bad(StrCat("curve \"", curve,
                        "\" is neither right, estimated nor a read share "
                        "in [0, 100]"));
    }
    m.curve = CurveChoice::kStatic;
    m.static_read_pct = *pct;
  }
  return m;
}

double Interference::TotalBandwidthGbps() const {
  double total = 0;
  for (const CoRunner& c : co_runners) total += c.bandwidth_gbps;
  return total;
}

double Interference::ReadPct() const {
  const double total = TotalBandwidthGbps();
  if (!(total > 0)) return 100;
  double reads = 0;
  for (const CoRunner& c : co_runners) reads += c.bandwidth_gbps * c.read_pct;
  return reads / total;
}

absl::Status CheckInterference(const Interference& interference) {
  for (size_t i = 0; i < interference.co_runners.size(); ++i) {
    const CoRunner& c = interference.co_runners[i];
    if (!std::isfinite(c.bandwidth_gbps) || c.bandwidth_gbps < 0) {
      return absl::InvalidArgumentError(StrCat("co-runner ", i, ": bandwidth_gbps ",
                                               c.bandwidth_gbps, " is not a finite value >= 0"));
    }
    if (!(c.read_pct >= 0 && c.read_pct <= 100)) {
      return absl::InvalidArgumentError(
          StrCat("co-runner ", i, ": read_pct ", c.read_pct, " is outside [0, 100]"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<ContentionModel> ContentionModel::Create(const SensitivityFamily& family,
                                                        const Method& method) {
  std::vector<const SensitivityCurve*> used;
  const auto need = [&](double read_pct) -> absl::Status {
    const SensitivityCurve* c = family.FindCurve(read_pct);
    if (c == nullptr) {
      return absl::FailedPreconditionError(StrCat("app \"", family.app, "\" has no ", read_pct,
                                                  " % read curve, which method ",
                                                  MethodName(method), " needs"));
    }
    used.push_back(c);
    return absl::OkStatus();
  };
  switch (method.curve) {
    case CurveChoice::kRight:
      if (family.curves.empty()) {
        return absl::FailedPreconditionError(
            StrCat("app \"", family.app, "\" has no sensitivity curve"));
      }
      for (const SensitivityCurve& c : family.curves) used.push_back(&c);
      break;
    case CurveChoice::kStatic:
      TG_RETURN_IF_ERROR(need(method.static_read_pct));
      break;
    case CurveChoice::kEstimated:
      TG_RETURN_IF_ERROR(need(50));
      TG_RETURN_IF_ERROR(need(100));
      break;
  }
  ContentionModel model;
  model.app_ = family.app;
  model.method_ = method;
  for (const SensitivityCurve* c : used) {
    absl::StatusOr<SmoothedCurve> s = SmoothCurve(*c, method.smoothing, method.points, method.fit);
    if (!s.ok()) {
      return absl::Status(s.status().code(),
                          StrCat("app \"", family.app, "\": ", s.status().message()));
    }
    model.curves_.push_back(*std::move(s));
  }
  return model;
}

template <typename Eval>
double ContentionModel::Combine(double read_pct, Eval eval) const {
  switch (method_.curve) {
    case CurveChoice::kStatic:
      return eval(curves_[0]);
    case CurveChoice::kEstimated: {
      const double scale = std::clamp((read_pct - 50.0) / (100.0 - 50.0), 0.0, 1.0);
      return eval(curves_[0]) * (1 - scale) + eval(curves_[1]) * scale;
    }
    case CurveChoice::kRight:
      break;
  }
  if (read_pct <= curves_.front().read_pct()) return eval(curves_.front());
  if (read_pct >= curves_.back().read_pct()) return eval(curves_.back());
  size_t hi = 1;
  while (curves_[hi].read_pct() < read_pct) ++hi;
  const SmoothedCurve& lo_curve = curves_[hi - 1];
  const SmoothedCurve& hi_curve = curves_[hi];
  if (hi_curve.read_pct() == read_pct) return eval(hi_curve);
  const double t = (read_pct - lo_curve.read_pct()) / (hi_curve.read_pct() - lo_curve.read_pct());
  return eval(lo_curve) * (1 - t) + eval(hi_curve) * t;
}

double ContentionModel::NormalizedPerf(const Interference& interference) const {
  const double gbps = interference.TotalBandwidthGbps();
  if (!(gbps > 0)) return 1.0;
  return Combine(interference.ReadPct(),
                 [gbps](const SmoothedCurve& c) { return c.Evaluate(gbps); });
}

double ContentionModel::Slowdown(const Interference& interference) const {
  const double gbps = interference.TotalBandwidthGbps();
  if (!(gbps > 0)) return 1.0;
  const double perf =
      Combine(interference.ReadPct(), [gbps](const SmoothedCurve& c) { return c.Envelope(gbps); });
  return 1.0 / std::max(perf, kMinNormalizedPerf);
}

double ContentionModel::MeasuredMaxGbps(const Interference& interference) const {
  return Combine(interference.ReadPct(), [](const SmoothedCurve& c) { return c.max_gbps(); });
}

double ContentionModel::ProfilingCost() const {
  double levels = 0;
  for (const SmoothedCurve& c : curves_) levels += static_cast<double>(c.distinct_points());
  return levels / 4.0;
}

absl::StatusOr<double> PredictNormalizedPerf(const SensitivityFamily& family,
                                             const Interference& interference,
                                             const Method& method) {
  TG_RETURN_IF_ERROR(CheckInterference(interference));
  TG_ASSIGN_OR_RETURN(ContentionModel model, ContentionModel::Create(family, method));
  return model.NormalizedPerf(interference);
}

absl::StatusOr<double> PredictSlowdown(const SensitivityFamily& family,
                                       const Interference& interference, const Method& method) {
  TG_RETURN_IF_ERROR(CheckInterference(interference));
  TG_ASSIGN_OR_RETURN(ContentionModel model, ContentionModel::Create(family, method));
  return model.Slowdown(interference);
}

}  // namespace tiergym::contention

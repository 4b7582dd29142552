#include "estimator/calibration.h"

#include <algorithm>
#include <cmath>

#include "traces/base/file.h"
#include "traces/base/json.h"
#include "traces/base/status_macros.h"
#include "traces/base/strings.h"

namespace tiergym {
namespace {

constexpr int kOverlapSteps = 10;  // candidates 0, 0.1, .., 1

struct Scores {
  double mean = 0, max = 0;
};

}  // namespace

double NormalQuantile(double p) {
  // Acklam's rational approximation (relative error below 1.2e-9).
  static const double a[] = {-3.969683028665376e+01, 2.209460984245205e+02,  -2.759285104469687e+02,
                             1.383577518672690e+02,  -3.066479806614716e+01, 2.506628277459239e+00};
  static const double b[] = {-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
                             6.680131188771972e+01, -1.328068155288572e+01};
  static const double c[] = {-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
                             -2.549732539343734e+00, 4.374664141464968e+00,  2.938163982698783e+00};
  static const double d[] = {7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
                             3.754408661907416e+00};
  p = std::clamp(p, 1e-12, 1 - 1e-12);
  if (p < 0.02425) {
    const double q = std::sqrt(-2 * std::log(p));
    return (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
           ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  }
  if (p > 1 - 0.02425) return -NormalQuantile(1 - p);
  const double q = p - 0.5, r = q * q;
  return (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
         (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
}

void ApplyCalibration(const Calibration& calibration, EstimatorOptions* options) {
  options->compute_overlap = calibration.compute_overlap;
}

std::pair<double, double> WidenInterval(const Calibration& calibration, double estimate_ns,
                                        double lo_ns, double hi_ns, double level) {
  const double noise = NormalQuantile(0.5 + level / 2) * calibration.relative_noise * estimate_ns;
  const double below = std::max(0.0, estimate_ns - lo_ns),
               above = std::max(0.0, hi_ns - estimate_ns);
  return {estimate_ns - std::hypot(below, noise), estimate_ns + std::hypot(above, noise)};
}

absl::StatusOr<Calibration> ParseCalibration(std::string_view text, std::string_view source) {
  TG_ASSIGN_OR_RETURN(json::Value doc, json::Parse(text, source));
  json::ObjectReader r(doc, std::string(source), "");
  TG_RETURN_IF_ERROR(r.CheckIsObject());
  TG_RETURN_IF_ERROR(r.OnlyKeys({"format", "version", "model", "compute_overlap", "relative_noise",
                                 "fitted_runs", "cross_validation"}));
  TG_ASSIGN_OR_RETURN(std::string format, r.RequiredString("format"));
  if (format != "tiergym-calibration") {
    return r.Error("format", nullptr,
                   StrCat("expected \"tiergym-calibration\", got \"", format, "\""));
  }
  TG_ASSIGN_OR_RETURN(double version, r.RequiredNumber("version"));
  if (version != 1) return r.Error("version", nullptr, "only version 1 is known");
  Calibration c;
  TG_ASSIGN_OR_RETURN(std::string model, r.RequiredString("model"));
  auto parsed = ParseModel(model);
  if (!parsed.ok()) return r.Error("model", nullptr, std::string(parsed.status().message()));
  c.model = *parsed;
  TG_ASSIGN_OR_RETURN(c.compute_overlap, r.RequiredNumber("compute_overlap"));
  if (!(c.compute_overlap >= 0 && c.compute_overlap <= 1)) {
    return r.Error("compute_overlap", nullptr, "must be in [0, 1]");
  }
  TG_ASSIGN_OR_RETURN(c.relative_noise, r.RequiredNumber("relative_noise"));
  if (!(c.relative_noise >= 0 && c.relative_noise <= 1)) {
    return r.Error("relative_noise", nullptr, "must be in [0, 1]");
  }
  TG_ASSIGN_OR_RETURN(uint64_t fitted, r.OptionalUint64("fitted_runs", 0));
  c.fitted_runs = static_cast<int>(std::min<uint64_t>(fitted, 1u << 30));
  TG_ASSIGN_OR_RETURN(const json::Value* cv, r.OptionalMember("cross_validation"));
  if (cv != nullptr) {
    json::ObjectReader v(*cv, std::string(source), "cross_validation");
    TG_RETURN_IF_ERROR(v.CheckIsObject());
    TG_RETURN_IF_ERROR(v.OnlyKeys({"folds", "mean_error_pct", "max_error_pct",
                                   "uncalibrated_mean_error_pct", "uncalibrated_max_error_pct"}));
    TG_ASSIGN_OR_RETURN(uint64_t folds, v.RequiredUint64("folds"));
    c.folds = static_cast<int>(std::min<uint64_t>(folds, 1u << 30));
    TG_ASSIGN_OR_RETURN(c.cv_mean_error_pct, v.RequiredNumber("mean_error_pct"));
    TG_ASSIGN_OR_RETURN(c.cv_max_error_pct, v.RequiredNumber("max_error_pct"));
    TG_ASSIGN_OR_RETURN(c.uncalibrated_mean_error_pct,
                        v.RequiredNumber("uncalibrated_mean_error_pct"));
    TG_ASSIGN_OR_RETURN(c.uncalibrated_max_error_pct,
                        v.RequiredNumber("uncalibrated_max_error_pct"));
  }
  return c;
}

absl::StatusOr<Calibration> ReadCalibration(const std::string& path) {
  TG_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  return ParseCalibration(text, path);
}

std::string FormatCalibration(const Calibration& c) {
  json::Writer w(2);
  w.BeginObject();
  w.Key("format");
  w.String("tiergym-calibration");
  w.Key("version");
  w.Int(1);
  w.Key("model");
  w.String(ModelName(c.model));
  w.Key("compute_overlap");
  w.Double(c.compute_overlap);
  w.Key("relative_noise");
  w.Double(c.relative_noise);
  w.Key("fitted_runs");
  w.Int(c.fitted_runs);
  if (c.folds > 0) {
    w.Key("cross_validation");
    w.BeginObject();
    w.Key("folds");
    w.Int(c.folds);
    w.Key("mean_error_pct");
    w.Double(c.cv_mean_error_pct);
    w.Key("max_error_pct");
    w.Double(c.cv_max_error_pct);
    w.Key("uncalibrated_mean_error_pct");
    w.Double(c.uncalibrated_mean_error_pct);
    w.Key("uncalibrated_max_error_pct");
    w.Double(c.uncalibrated_max_error_pct);
    w.EndObject();
  }
  w.EndObject();
  std::string text = w.Take();
  text.push_back('\n');
  return text;
}

absl::StatusOr<Calibration> Calibrate(const Profile& profile, const EstimatorOptions& base,
                                      const std::vector<std::pair<MeasuredRun, Placement>>& runs,
                                      const CalibrationOptions& options) {
  const size_t n = runs.size();
  if (options.folds < 2) return absl::InvalidArgumentError("calibration needs at least 2 folds");
  if (n < static_cast<size_t>(options.folds)) {
    return absl::InvalidArgumentError(StrCat("calibration with ", options.folds,
                                             " folds needs at least ", options.folds,
                                             " measured runs, got ", n));
  }
  // Relative residual (estimate / measured - 1) of every run under every candidate
  // overlap: [candidate][run].
  std::vector<std::vector<double>> residual(kOverlapSteps + 1, std::vector<double>(n));
  for (int c = 0; c <= kOverlapSteps; ++c) {
    EstimatorOptions o = base;
    o.compute_overlap = static_cast<double>(c) / kOverlapSteps;
    if (options.progress) {
      options.progress(StrCat("estimating ", n, " runs with compute overlap ",
                              FixedDecimal(o.compute_overlap, 1)));
    }
    TG_ASSIGN_OR_RETURN(auto estimator, Estimator::Create(profile, o));
    for (size_t i = 0; i < n; ++i) {
      auto est = estimator->EstimatePlacement(runs[i].second, options.model);
      if (!est.ok()) {
        return absl::Status(est.status().code(),
                            StrCat("run ", runs[i].first.name, ": ", est.status().message()));
      }
      residual[c][i] = est->runtime_ns / static_cast<double>(runs[i].first.runtime_ns) - 1;
    }
  }
  auto score = [&](int c, const std::vector<size_t>& which) {
    Scores s;
    for (size_t i : which) {
      const double e = 100 * std::fabs(residual[c][i]);
      s.mean += e / static_cast<double>(which.size());
      s.max = std::max(s.max, e);
    }
    return s;
  };
  auto fit = [&](const std::vector<size_t>& which) {
    int best = 0;
    double best_mean = score(0, which).mean;
    for (int c = 1; c <= kOverlapSteps; ++c) {
      const double m = score(c, which).mean;
      if (m < best_mean) {
        best_mean = m;
        best = c;
      }
    }
    return best;
  };
  const int prior = static_cast<int>(std::lround(base.compute_overlap * kOverlapSteps));
  Calibration out;
  out.model = options.model;
  out.folds = options.folds;
  std::vector<size_t> all(n);
  for (size_t i = 0; i < n; ++i) all[i] = i;
  // k-fold: run i is in fold i % k; scored with the overlap fitted on the other folds.
  std::vector<double> cv_error(n), prior_error(n);
  for (int f = 0; f < options.folds; ++f) {
    std::vector<size_t> train, test;
    for (size_t i = 0; i < n; ++i)
      (static_cast<int>(i % options.folds) == f ? test : train).push_back(i);
    const int c = fit(train);
    for (size_t i : test) {
      cv_error[i] = 100 * std::fabs(residual[c][i]);
      prior_error[i] = 100 * std::fabs(residual[prior][i]);
    }
  }
  for (size_t i = 0; i < n; ++i) {
    out.cv_mean_error_pct += cv_error[i] / static_cast<double>(n);
    out.cv_max_error_pct = std::max(out.cv_max_error_pct, cv_error[i]);
    out.uncalibrated_mean_error_pct += prior_error[i] / static_cast<double>(n);
    out.uncalibrated_max_error_pct = std::max(out.uncalibrated_max_error_pct, prior_error[i]);
  }
  // The final fit uses every run.
  const int c = fit(all);
  out.compute_overlap = static_cast<double>(c) / kOverlapSteps;
  // Root mean square of the relative residuals: what a prediction interval must cover
  // beyond the sampling (bias included).
  double squares = 0;
  for (size_t i = 0; i < n; ++i) squares += residual[c][i] * residual[c][i];
  out.relative_noise = std::sqrt(squares / static_cast<double>(n));
  out.fitted_runs = static_cast<int>(n);
  return out;
}

}  // namespace tiergym

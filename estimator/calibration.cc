#include "estimator/calibration.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>

#include "estimator/page_placement.h"
#include "traces/base/file.h"
#include "traces/base/json.h"
#include "traces/base/status_macros.h"
#include "traces/base/strings.h"

namespace tiergym {
namespace {

constexpr int kOverlapSteps = 10;  // compute overlap candidates 0, 0.1, .., 1
// Tier overlap candidates 1, 0.9, .., 0.4 (1 first: ties keep the tiers concurrent).
constexpr int kTierSteps = 7;
double TierOverlapCandidate(int j) { return 1.0 - 0.1 * j; }

// The candidate the runs `which` choose (the one-standard-error rule of Breiman, Friedman,
// Olshen and Stone, "Classification and Regression Trees"): among the candidates whose
// mean absolute residual is within one standard error of the lowest, the one nearest the
// prior (in grid steps; ties to the lower mean). With a few dozen noisy runs many
// candidates fit about as well; only a clear improvement moves a parameter from its prior.
size_t Fit(const std::vector<std::vector<double>>& residual, const std::vector<size_t>& which,
           size_t prior) {
  const size_t candidates = residual.size();
  std::vector<double> mean(candidates, 0.0);
  size_t best = 0;
  for (size_t c = 0; c < candidates; ++c) {
    for (size_t i : which) mean[c] += std::fabs(residual[c][i]);
    mean[c] /= static_cast<double>(std::max<size_t>(1, which.size()));
    if (mean[c] < mean[best] - 1e-12) best = c;
  }
  double var = 0;
  for (size_t i : which) {
    const double e = std::fabs(residual[best][i]) - mean[best];
    var += e * e;
  }
  const auto n = static_cast<double>(which.size());
  const double se = n > 1 ? std::sqrt(var / (n - 1) / n) : 0.0;
  auto steps = [&](size_t c) {
    const auto o = static_cast<int>(c / kTierSteps), j = static_cast<int>(c % kTierSteps);
    const auto po = static_cast<int>(prior / kTierSteps), pj = static_cast<int>(prior % kTierSteps);
    return std::abs(o - po) + std::abs(j - pj);
  };
  size_t chosen = best;
  for (size_t c = 0; c < candidates; ++c) {
    if (mean[c] > mean[best] + se) continue;
    if (steps(c) < steps(chosen) || (steps(c) == steps(chosen) && mean[c] < mean[chosen])) {
      chosen = c;
    }
  }
  return chosen;
}

// Splits `runs` (indices) into k folds by position: the i-th in fold i % k.
std::vector<std::vector<size_t>> Folds(const std::vector<size_t>& runs, int k) {
  std::vector<std::vector<size_t>> folds(k);
  for (size_t i = 0; i < runs.size(); ++i) folds[i % k].push_back(runs[i]);
  return folds;
}

}  // namespace

void ApplyCalibration(const Calibration& calibration, EstimatorOptions* options) {
  options->compute_overlap = calibration.compute_overlap;
  options->tier_overlap = calibration.tier_overlap;
}

PredictionInterval CalibratedInterval(const Calibration& calibration, double estimate_ns,
                                      double paper_ns, const SamplingInterval& sampling,
                                      double level, double mixing) {
  return ConformalInterval(calibration.interval_scores, calibration.prior, estimate_ns, paper_ns,
                           sampling, level, mixing);
}

absl::StatusOr<Calibration> ParseCalibration(std::string_view text, std::string_view source) {
  TG_ASSIGN_OR_RETURN(json::Value doc, json::Parse(text, source));
  json::ObjectReader r(doc, std::string(source), "");
  TG_RETURN_IF_ERROR(r.CheckIsObject());
  TG_RETURN_IF_ERROR(r.OnlyKeys({"format", "version", "model", "compute_overlap", "tier_overlap",
                                 "relative_noise", "interval", "fitted_runs", "cross_validation"}));
  TG_ASSIGN_OR_RETURN(std::string format, r.RequiredString("format"));
  if (format != "tiergym-calibration") {
    return r.Error("format", nullptr,
                   StrCat(R"(expected "tiergym-calibration", got ")", format, "\""));
  }
  TG_ASSIGN_OR_RETURN(double version, r.RequiredNumber("version"));
  if (version != 1 && version != 2 && version != 3)
    return r.Error("version", nullptr, "only versions 1, 2 and 3 are known");
  Calibration c;
  TG_ASSIGN_OR_RETURN(std::string model, r.RequiredString("model"));
  auto parsed = ParseModel(model);
  if (!parsed.ok()) return r.Error("model", nullptr, std::string(parsed.status().message()));
  c.model = *parsed;
  TG_ASSIGN_OR_RETURN(c.compute_overlap, r.RequiredNumber("compute_overlap"));
  if (!(c.compute_overlap >= 0 && c.compute_overlap <= 1)) {
    return r.Error("compute_overlap", nullptr, "must be in [0, 1]");
  }
  TG_ASSIGN_OR_RETURN(c.tier_overlap, r.OptionalNumber("tier_overlap", 1));
  if (!(c.tier_overlap >= 0 && c.tier_overlap <= 1)) {
    return r.Error("tier_overlap", nullptr, "must be in [0, 1]");
  }
  TG_ASSIGN_OR_RETURN(c.relative_noise, r.RequiredNumber("relative_noise"));
  if (!(c.relative_noise >= 0 && c.relative_noise <= 1)) {
    return r.Error("relative_noise", nullptr, "must be in [0, 1]");
  }
  TG_ASSIGN_OR_RETURN(const json::Value* interval, r.OptionalMember("interval"));
  if (interval != nullptr) {
    json::ObjectReader v(*interval, std::string(source), "interval");
    TG_RETURN_IF_ERROR(v.CheckIsObject());
    TG_RETURN_IF_ERROR(version >= 3 ? v.OnlyKeys({"noise", "model_error", "mix_error", "scores"})
                                    : v.OnlyKeys({"noise", "model_error", "scores"}));
    TG_ASSIGN_OR_RETURN(c.prior.noise, v.RequiredNumber("noise"));
    TG_ASSIGN_OR_RETURN(c.prior.model_error, v.RequiredNumber("model_error"));
    if (!(c.prior.noise > 0 && c.prior.noise <= 1)) {
      return v.Error("noise", nullptr, "must be in (0, 1]");
    }
    if (!(c.prior.model_error >= 0 && c.prior.model_error <= 10)) {
      return v.Error("model_error", nullptr, "must be in [0, 10]");
    }
    TG_ASSIGN_OR_RETURN(c.prior.mix_error, v.OptionalNumber("mix_error", 0));
    if (!(c.prior.mix_error >= 0 && c.prior.mix_error <= 10)) {
      return v.Error("mix_error", nullptr, "must be in [0, 10]");
    }
    TG_ASSIGN_OR_RETURN(const json::Value* scores, v.OptionalMember("scores"));
    if (scores != nullptr) {
      if (!scores->is_array()) return v.Error("scores", scores, "must be an array of numbers");
      for (const json::Value& x : scores->array()) {
        if (!x.is_number() || !(x.number() >= 0) || !std::isfinite(x.number())) {
          return v.Error("scores", &x, "every score must be a number >= 0");
        }
        c.interval_scores.push_back(x.number());
      }
      std::sort(c.interval_scores.begin(), c.interval_scores.end());
    }
  }
  TG_ASSIGN_OR_RETURN(uint64_t fitted, r.OptionalUint64("fitted_runs", 0));
  c.fitted_runs = static_cast<int>(std::min<uint64_t>(fitted, 1u << 30));
  TG_ASSIGN_OR_RETURN(const json::Value* cv, r.OptionalMember("cross_validation"));
  if (cv != nullptr) {
    json::ObjectReader v(*cv, std::string(source), "cross_validation");
    TG_RETURN_IF_ERROR(v.CheckIsObject());
    TG_RETURN_IF_ERROR(
        v.OnlyKeys({"folds", "mean_error_pct", "max_error_pct", "uncalibrated_mean_error_pct",
                    "uncalibrated_max_error_pct", "coverage"}));
    TG_ASSIGN_OR_RETURN(uint64_t folds, v.RequiredUint64("folds"));
    c.folds = static_cast<int>(std::min<uint64_t>(folds, 1u << 30));
    TG_ASSIGN_OR_RETURN(c.cv_mean_error_pct, v.RequiredNumber("mean_error_pct"));
    TG_ASSIGN_OR_RETURN(c.cv_max_error_pct, v.RequiredNumber("max_error_pct"));
    TG_ASSIGN_OR_RETURN(c.uncalibrated_mean_error_pct,
                        v.RequiredNumber("uncalibrated_mean_error_pct"));
    TG_ASSIGN_OR_RETURN(c.uncalibrated_max_error_pct,
                        v.RequiredNumber("uncalibrated_max_error_pct"));
    TG_ASSIGN_OR_RETURN(c.cv_coverage, v.OptionalNumber("coverage", -1));
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
  w.Int(3);
  w.Key("model");
  w.String(ModelName(c.model));
  w.Key("compute_overlap");
  w.Double(c.compute_overlap);
  w.Key("tier_overlap");
  w.Double(c.tier_overlap);
  w.Key("relative_noise");
  w.Double(c.relative_noise);
  w.Key("interval");
  w.BeginObject();
  w.Key("noise");
  w.Double(c.prior.noise);
  w.Key("model_error");
  w.Double(c.prior.model_error);
  w.Key("mix_error");
  w.Double(c.prior.mix_error);
  w.Key("scores");
  w.BeginArray();
  for (double s : c.interval_scores) w.Double(s);
  w.EndArray();
  w.EndObject();
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
    if (c.cv_coverage >= 0) {
      w.Key("coverage");
      w.Double(c.cv_coverage);
    }
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
  // Relative residual (estimate / measured - 1) of every run under every candidate:
  // [o * kTierSteps + j][run]; the paper model's estimates for the interval scale.
  const size_t candidates = static_cast<size_t>(kOverlapSteps + 1) * kTierSteps;
  std::vector<std::vector<double>> residual(candidates, std::vector<double>(n));
  std::vector<double> paper_ns(n), mixing(n), estimate_ns(n * candidates);
  auto measured = [&](size_t i) { return static_cast<double>(runs[i].first.runtime_ns); };
  for (int o = 0; o <= kOverlapSteps; ++o) {
    EstimatorOptions opts = base;
    opts.compute_overlap = static_cast<double>(o) / kOverlapSteps;
    if (options.progress) {
      options.progress(StrCat("estimating ", n, " runs with compute overlap ",
                              FixedDecimal(opts.compute_overlap, 1), " and ", kTierSteps,
                              " tier overlaps"));
    }
    TG_ASSIGN_OR_RETURN(auto estimator, Estimator::Create(profile, opts));
    // Per base device and tier overlap, the index copy.
    std::map<std::pair<std::string, int>, std::shared_ptr<const EstimatorIndex>> copies;
    for (size_t i = 0; i < n; ++i) {
      const Placement& placement = runs[i].second;
      auto fail = [&](const absl::Status& s) {
        return absl::Status(s.code(), StrCat("run ", runs[i].first.name, ": ", s.message()));
      };
      if (absl::Status s = CheckPlacementTiers(profile, placement); !s.ok()) return fail(s);
      auto index = estimator->IndexFor(placement.default_tier);
      if (!index.ok()) return fail(index.status());
      auto resolved = (*index)->Resolve(placement);
      if (!resolved.ok()) return fail(resolved.status());
      if (o == 0) {
        auto paper = (*index)->EstimateDetailed(*resolved, Model::kPaper);
        if (!paper.ok()) return fail(paper.status());
        paper_ns[i] = paper->runtime_ns;
        mixing[i] = Mixing(paper->access_share);
      }
      for (int j = 0; j < kTierSteps; ++j) {
        auto& copy = copies[{placement.default_tier, j}];
        if (copy == nullptr) copy = (*index)->WithTierOverlap(TierOverlapCandidate(j));
        auto est = copy->RuntimeNs(*resolved, options.model);
        if (!est.ok()) return fail(est.status());
        const size_t c = static_cast<size_t>(o) * kTierSteps + j;
        residual[c][i] = *est / measured(i) - 1;
        estimate_ns[c * n + i] = *est;
      }
    }
  }
  // The uncalibrated candidate: the base options' overlaps, rounded to the grid.
  const int prior_o = static_cast<int>(std::lround(base.compute_overlap * kOverlapSteps));
  int prior_j = static_cast<int>(std::lround((1.0 - base.tier_overlap) * 10));
  prior_j = std::clamp(prior_j, 0, kTierSteps - 1);
  const size_t prior = static_cast<size_t>(prior_o) * kTierSteps + prior_j;
  auto score = [&](size_t c, size_t i) {
    return std::fabs(residual[c][i]) /
           RelativeSd(options.prior, estimate_ns[c * n + i], paper_ns[i], mixing[i]);
  };
  Calibration out;
  out.model = options.model;
  out.folds = options.folds;
  out.prior = options.prior;
  std::vector<size_t> all(n);
  std::iota(all.begin(), all.end(), 0);
  // The scores of `runs`, each from a fit on the other folds of `runs` only.
  auto cv_scores = [&](const std::vector<size_t>& which) {
    std::vector<double> scores;
    const auto folds = Folds(which, options.folds);
    for (size_t f = 0; f < folds.size(); ++f) {
      std::vector<size_t> train;
      for (size_t g = 0; g < folds.size(); ++g) {
        if (g != f) train.insert(train.end(), folds[g].begin(), folds[g].end());
      }
      if (train.empty()) continue;
      const size_t c = Fit(residual, train, prior);
      for (size_t i : folds[f]) scores.push_back(score(c, i));
    }
    return scores;
  };
  // k-fold: run i is in fold i % k, scored with the candidate fitted on the other folds,
  // and its interval from the other folds' own cross-validated scores.
  out.cv_residual.assign(n, 0);
  out.cv_inside.assign(n, false);
  std::vector<double> cv_error(n), prior_error(n);
  size_t inside = 0;
  const auto folds = Folds(all, options.folds);
  for (size_t f = 0; f < folds.size(); ++f) {
    std::vector<size_t> train;
    for (size_t g = 0; g < folds.size(); ++g) {
      if (g != f) train.insert(train.end(), folds[g].begin(), folds[g].end());
    }
    const size_t c = Fit(residual, train, prior);
    const std::vector<double> scores = cv_scores(train);
    for (size_t i : folds[f]) {
      out.cv_residual[i] = residual[c][i];
      cv_error[i] = 100 * std::fabs(residual[c][i]);
      prior_error[i] = 100 * std::fabs(residual[prior][i]);
      const PredictionInterval interval =
          ConformalInterval(scores, options.prior, estimate_ns[c * n + i], paper_ns[i],
                            SamplingInterval{}, 0.9, mixing[i]);
      out.cv_inside[i] = Inside(interval, measured(i));
      inside += out.cv_inside[i];
    }
  }
  for (size_t i = 0; i < n; ++i) {
    out.cv_mean_error_pct += cv_error[i] / static_cast<double>(n);
    out.cv_max_error_pct = std::max(out.cv_max_error_pct, cv_error[i]);
    out.uncalibrated_mean_error_pct += prior_error[i] / static_cast<double>(n);
    out.uncalibrated_max_error_pct = std::max(out.uncalibrated_max_error_pct, prior_error[i]);
  }
  out.cv_coverage = static_cast<double>(inside) / static_cast<double>(n);
  // The final fit uses every run; its interval the cross-validated scores of all runs.
  const size_t c = Fit(residual, all, prior);
  const size_t overlap_step = c / kTierSteps;  // the compute overlap's grid step
  out.compute_overlap = static_cast<double>(overlap_step) / kOverlapSteps;
  out.tier_overlap = TierOverlapCandidate(static_cast<int>(c % kTierSteps));
  out.interval_scores = cv_scores(all);
  std::sort(out.interval_scores.begin(), out.interval_scores.end());
  // Root mean square of the relative residuals: what the estimate misses beyond sampling.
  double squares = 0;
  for (size_t i = 0; i < n; ++i) squares += residual[c][i] * residual[c][i];
  out.relative_noise = std::sqrt(squares / static_cast<double>(n));
  out.fitted_runs = static_cast<int>(n);
  return out;
}

}  // namespace tiergym

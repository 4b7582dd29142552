#include "estimator/calibration.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <optional>
#include <string>
#include <tuple>

#include "estimator/page_placement.h"
#include "traces/base/file.h"
#include "traces/base/json.h"
#include "traces/base/status_macros.h"
#include "traces/base/strings.h"
#include "traces/machine.h"

namespace tiergym {
namespace {

// Compute overlap candidates 0, 0.05, .., 1 where one overlap holds for every block; 0,
// 0.1, .., 1 (the even steps) where each block fits its own from the candidate on (the
// blocks move off it anyway).
constexpr int kOverlapSteps = 20;
// Tier overlap candidates 1, 0.95, 0.9, 0.8, .., 0.4 (1 first: ties keep the tiers
// concurrent; 1 is the uncalibrated prior IndexOptions::tier_overlap, and 0.95 was, which
// the calibrated figures of estimator/README.md were fitted with as a candidate).
constexpr std::array<double, 8> kTierOverlaps = {1.0, 0.95, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4};
constexpr int kTierSteps = static_cast<int>(kTierOverlaps.size());
double TierOverlapCandidate(int j) { return kTierOverlaps[j]; }
// The index of the candidate nearest `value` (ties to the earlier: the larger tier overlap,
// the smaller fit tolerance).
template <size_t N>
int NearestStep(const std::array<double, N>& candidates, double value) {
  int best = 0;
  for (int k = 1; k < static_cast<int>(N); ++k) {
    if (std::fabs(candidates[k] - value) < std::fabs(candidates[best] - value) - 1e-12) best = k;
  }
  return best;
}
// Queue strength candidates 0, 0.5, .., kMaxQueueStrength / 2.
constexpr int kQueueSteps = 4;
double QueueStrengthCandidate(int k) { return 0.5 * k; }

// Concurrency fit tolerance candidates (IndexOptions::fit_tolerance): 0 first, the
// uncalibrated prior.
constexpr std::array<double, 3> kTolerances = {0.0, 0.003, 0.01};
constexpr int kToleranceSteps = static_cast<int>(kTolerances.size());

// Limit smoothness candidates (IndexOptions::limit_smoothness) where CalibrationOptions::
// fit_smoothness is set: the hard maximum (0, the uncalibrated prior) and the p-norms 2
// and 4 (estimator/README.md, "A fitted limit smoothness").
constexpr std::array<double, 3> kSmoothness = {0.0, 2.0, 4.0};

// The smoothness candidates of a calibration from `base` (the prior): kSmoothness when
// fitted, with the prior's own value in order if it is not among them; else the prior's
// only. Sets *prior_step to the prior's index.
std::vector<double> SmoothnessCandidates(double base, bool fit, int* prior_step) {
  std::vector<double> out;
  if (fit) out.assign(kSmoothness.begin(), kSmoothness.end());
  if (std::find(out.begin(), out.end(), base) == out.end()) {
    out.insert(std::upper_bound(out.begin(), out.end(), base), base);
  }
  *prior_step = static_cast<int>(std::find(out.begin(), out.end(), base) - out.begin());
  return out;
}

// One candidate of the grid: per-block overlap fits b (1: on, IndexOptions::fit_overlap;
// 0: the overlap holds for every block), compute overlap step o, queue strength step q,
// tier overlap step j, concurrency fit tolerance step t, limit smoothness step p (of the
// calibration's SmoothnessCandidates).
struct Candidate {
  int b = 0, o = 0, q = 0, j = 0, t = 0, p = 0;
};

// Whether `model` fits each block to more runs of `profile` than its compute time and
// concurrency: the roofline model with three devices or more, where per-block overlap fits
// (IndexOptions::fit_overlap) and the fit tolerance (IndexOptions::fit_tolerance) act.
bool OverdeterminedRoofline(Model model, const Profile& profile) {
  return model == Model::kRoofline && profile.runs().size() >= 3;
}

// The estimator a candidate builds: its per-block fits, compute overlap, queue strength,
// fit tolerance and limit smoothness (which the blocks' fits assume).
using BuildKey = std::tuple<int, int, int, int, int>;
BuildKey KeyOf(const Candidate& c) { return {c.b, c.o, c.q, c.t, c.p}; }

// The relative residuals (estimate / measured - 1) and estimates of every run under the
// candidates of one (b, o, q, t, p): [j][run].
struct Table {
  std::vector<std::vector<double>> residual, estimate;
  std::vector<double> serialized;  // per run: the estimate with the tier overlap 0
};

// The candidate the runs `which` choose among `candidates` (the one-standard-error rule of
// Breiman, Friedman, Olshen and Stone, "Classification and Regression Trees"): among the
// candidates whose mean absolute residual is within one standard error of the lowest, the
// one nearest the prior (in grid steps; ties to the lower mean). With a few dozen noisy
// runs many candidates fit about as well; only a clear improvement moves a parameter from
// its prior.
Candidate Fit(const std::map<BuildKey, Table>& tables, const std::vector<Candidate>& candidates,
              const std::vector<size_t>& which, Candidate prior) {
  auto res = [&](const Candidate& c) -> const std::vector<double>& {
    return tables.at(KeyOf(c)).residual[c.j];
  };
  std::vector<double> mean(candidates.size(), 0.0);
  size_t best = 0;
  for (size_t c = 0; c < candidates.size(); ++c) {
    for (size_t i : which) mean[c] += std::fabs(res(candidates[c])[i]);
    mean[c] /= static_cast<double>(std::max<size_t>(1, which.size()));
    if (mean[c] < mean[best] - 1e-12) best = c;
  }
  double var = 0;
  for (size_t i : which) {
    const double e = std::fabs(res(candidates[best])[i]) - mean[best];
    var += e * e;
  }
  const auto n = static_cast<double>(which.size());
  const double se = n > 1 ? std::sqrt(var / (n - 1) / n) : 0.0;
  auto steps = [&](size_t c) {
    const Candidate& x = candidates[c];
    return std::abs(x.b - prior.b) + std::abs(x.o - prior.o) + std::abs(x.q - prior.q) +
           std::abs(x.j - prior.j) + std::abs(x.t - prior.t) + std::abs(x.p - prior.p);
  };
  size_t chosen = best;
  for (size_t c = 0; c < candidates.size(); ++c) {
    if (mean[c] > mean[best] + se) continue;
    if (steps(c) < steps(chosen) || (steps(c) == steps(chosen) && mean[c] < mean[chosen])) {
      chosen = c;
    }
  }
  return candidates[chosen];
}

// One option RecordedOptions names: its key, its value as the command line writes it, how
// to set it from such text (false for text the option does not take) and what it takes.
struct RecordedOption {
  std::string_view key;
  std::string (*get)(const EstimatorOptions&);
  bool (*set)(std::string_view, EstimatorOptions*);
  std::string_view rule;
  int since = 7;  // the file version that added it (older files leave the option as given)
};

std::string OnOff(bool on) { return on ? "on" : "off"; }

bool SetOnOff(std::string_view text, bool* out) {
  if (text != "on" && text != "off") return false;
  *out = text == "on";
  return true;
}

bool SetCount(std::string_view text, uint64_t least, uint64_t* out) {
  const std::optional<uint64_t> v = ParseDecimal<uint64_t>(text);
  if (!v || *v < least) return false;
  *out = *v;
  return true;
}

std::optional<double> ParseNumber(std::string_view text) {
  double v = 0;
  const auto r = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || r.ec != std::errc() || r.ptr != text.data() + text.size()) {
    return std::nullopt;
  }
  return v;
}

// A number in [lo, hi].
bool SetNumberIn(std::string_view text, double lo, double hi, double* out) {
  const std::optional<double> v = ParseNumber(text);
  if (!v || !(*v >= lo && *v <= hi)) return false;
  *out = *v;
  return true;
}

// Two words for an enum's two values.
template <typename E>
bool SetWord(std::string_view text, std::string_view a, E ea, std::string_view b, E eb, E* out) {
  if (text != a && text != b) return false;
  *out = text == a ? ea : eb;
  return true;
}

constexpr std::array<RecordedOption, 15> kRecordedOptions = {{
    {"window", [](const EstimatorOptions& o) { return StrCat(o.window_instructions); },
     [](std::string_view t, EstimatorOptions* o) {
       return SetCount(t, 1, &o->window_instructions);
     },
     "a positive integer"},
    {"phasemarks", [](const EstimatorOptions& o) { return OnOff(o.use_phasemarks); },
     [](std::string_view t, EstimatorOptions* o) { return SetOnOff(t, &o->use_phasemarks); },
     "on or off"},
    {"block-samples", [](const EstimatorOptions& o) { return StrCat(o.block_samples); },
     [](std::string_view t, EstimatorOptions* o) { return SetCount(t, 1, &o->block_samples); },
     "a positive integer"},
    {"shares",
     [](const EstimatorOptions& o) {
       return std::string(o.share_runs == ShareRuns::kBase ? "base" : "pooled");
     },
     [](std::string_view t, EstimatorOptions* o) {
       return SetWord(t, "pooled", ShareRuns::kPooled, "base", ShareRuns::kBase, &o->share_runs);
     },
     "pooled or base"},
    {"first-touch",
     [](const EstimatorOptions& o) {
       switch (o.first_touch) {
         case FirstTouchFootprint::kExtents:
           return std::string(o.join_sweeps ? "sweeps" : "extents");
         case FirstTouchFootprint::kExtended:
           return std::string("extended");
         case FirstTouchFootprint::kBase:
           return std::string("base");
       }
       return std::string("base");
     },
     [](std::string_view t, EstimatorOptions* o) {
       if (t != "sweeps" && t != "extents" && t != "extended" && t != "base") return false;
       o->first_touch = t == "extended" ? FirstTouchFootprint::kExtended
                        : t == "base"   ? FirstTouchFootprint::kBase
                                        : FirstTouchFootprint::kExtents;
       o->join_sweeps = t == "sweeps";
       return true;
     },
     "sweeps, extents, extended or base"},
    {"extent-gap", [](const EstimatorOptions& o) { return StrCat(o.extent_gap_pages); },
     [](std::string_view t, EstimatorOptions* o) { return SetCount(t, 0, &o->extent_gap_pages); },
     "an integer >= 0"},
    {"empty-windows",
     [](const EstimatorOptions& o) {
       return std::string(o.empty_windows == EmptyWindows::kBaseTime ? "base" : "segment");
     },
     [](std::string_view t, EstimatorOptions* o) {
       return SetWord(t, "segment", EmptyWindows::kSegmentShares, "base", EmptyWindows::kBaseTime,
                      &o->empty_windows);
     },
     "segment or base"},
    {"align",
     [](const EstimatorOptions& o) {
       return std::string(o.align == WindowAlignment::kSamples ? "samples" : "instructions");
     },
     [](std::string_view t, EstimatorOptions* o) {
       return SetWord(t, "samples", WindowAlignment::kSamples, "instructions",
                      WindowAlignment::kInstructions, &o->align);
     },
     "samples or instructions"},
    {"segment-tail",
     [](const EstimatorOptions& o) { return std::string(o.tail_window_apart ? "apart" : "block"); },
     [](std::string_view t, EstimatorOptions* o) {
       return SetWord(t, "apart", true, "block", false, &o->tail_window_apart);
     },
     "apart or block"},
    {"limit-smoothness", [](const EstimatorOptions& o) { return StrCat(o.limit_smoothness); },
     [](std::string_view t, EstimatorOptions* o) {
       const std::optional<double> p = ParseNumber(t);
       if (!p || !(*p == 0 || (*p >= 1 && *p <= 64))) return false;
       o->limit_smoothness = *p;
       return true;
     },
     "0 or a number in [1, 64]"},
    {"subset-fits", [](const EstimatorOptions& o) { return OnOff(o.subset_fits); },
     [](std::string_view t, EstimatorOptions* o) { return SetOnOff(t, &o->subset_fits); },
     "on or off"},
    {"fit-overlap", [](const EstimatorOptions& o) { return OnOff(o.fit_overlap); },
     [](std::string_view t, EstimatorOptions* o) { return SetOnOff(t, &o->fit_overlap); },
     "on or off"},
    {"fit-tolerance", [](const EstimatorOptions& o) { return StrCat(o.fit_tolerance); },
     [](std::string_view t, EstimatorOptions* o) {
       return SetNumberIn(t, 0, kMaxFitTolerance, &o->fit_tolerance);
     },
     "a number in [0, 0.1]", 8},
    {"share-bias",
     [](const EstimatorOptions& o) {
       return std::string(o.share_bias == ShareBias::kCorrect ? "correct" : "keep");
     },
     [](std::string_view t, EstimatorOptions* o) {
       return SetWord(t, "keep", ShareBias::kKeep, "correct", ShareBias::kCorrect, &o->share_bias);
     },
     "keep or correct"},
    {"read-pct", [](const EstimatorOptions& o) { return StrCat(o.read_pct); },
     [](std::string_view t, EstimatorOptions* o) { return SetNumberIn(t, 0, 100, &o->read_pct); },
     "a number in [0, 100]"},
}};

const RecordedOption* FindRecordedOption(std::string_view key) {
  for (const RecordedOption& r : kRecordedOptions) {
    if (r.key == key) return &r;
  }
  return nullptr;
}

}  // namespace

std::vector<std::pair<std::string, std::string>> RecordedOptions(const EstimatorOptions& options) {
  std::vector<std::pair<std::string, std::string>> out;
  out.reserve(kRecordedOptions.size());
  for (const RecordedOption& r : kRecordedOptions) {
    out.emplace_back(std::string(r.key), r.get(options));
  }
  return out;
}

std::vector<OptionConflict> ConflictingOptions(const Calibration& calibration,
                                               const EstimatorOptions& options) {
  std::vector<OptionConflict> out;
  if (const std::optional<uint64_t> span = calibration.fit_span_samples;
      span && *span != options.fit_span_samples) {
    out.push_back({"fit-span", StrCat(*span), StrCat(options.fit_span_samples)});
  }
  for (const auto& [key, value] : calibration.options) {
    const RecordedOption* r = FindRecordedOption(key);
    if (r == nullptr) continue;  // ParseCalibration refuses unknown keys
    std::string other = r->get(options);
    if (other != value) out.push_back({key, value, std::move(other)});
  }
  return out;
}

absl::Status CheckCalibrationMachine(const Calibration& calibration,
                                     const std::optional<Machine>& machine) {
  if (calibration.machine.empty() || (machine && machine->name == calibration.machine)) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      StrCat("fitted on machine '", calibration.machine, "', not ",
             machine ? StrCat("'", machine->name, "'") : std::string("without a machine"),
             ": its parameters hold on the machine whose runs they were fitted to; calibrate on "
             "this machine's runs"));
}

void ApplyCalibration(const Calibration& calibration, EstimatorOptions* options) {
  options->compute_overlap = calibration.compute_overlap;
  options->tier_overlap = calibration.tier_overlap;
  if (calibration.fit_span_samples) options->fit_span_samples = *calibration.fit_span_samples;
  for (const auto& [key, value] : calibration.options) {
    // ParseCalibration took only keys and values the table sets.
    if (const RecordedOption* r = FindRecordedOption(key)) r->set(value, options);
  }
  if (calibration.queue_shape) {
    // A fitted queue strength (0 too) supersedes the one read from the profile.
    options->queue_from_profile = false;
    const bool queues = calibration.queue_strength > 0;
    options->queue_like = queues ? calibration.queue_shape : std::nullopt;
    options->queue_strength = queues ? calibration.queue_strength : 1.0;
  }
}

PredictionInterval CalibratedInterval(const Calibration& calibration, double estimate_ns,
                                      double paper_ns, const SamplingInterval& sampling,
                                      double level, double mixing, double serialization) {
  return ConformalInterval(calibration.interval_scores, calibration.prior, estimate_ns, paper_ns,
                           sampling, level, mixing, serialization);
}

namespace {

// Version 4's queueing: "queue_strength" in [0, kMaxQueueStrength] and the curve
// "queue_like" (MACHINE:TIER) it scales, both or neither; older versions have neither.
absl::Status ParseQueueing(json::ObjectReader& r, double version, Calibration* c) {
  TG_ASSIGN_OR_RETURN(const json::Value* strength, r.OptionalMember("queue_strength"));
  TG_ASSIGN_OR_RETURN(const json::Value* like, r.OptionalMember("queue_like"));
  if (strength == nullptr && like == nullptr) return absl::OkStatus();
  if (version < 4) {
    return r.Error(strength != nullptr ? "queue_strength" : "queue_like", nullptr,
                   "is a version 4 key (this file says version " +
                       std::to_string(static_cast<int>(version)) + ")");
  }
  if (strength == nullptr || like == nullptr) {
    return r.Error(strength == nullptr ? "queue_strength" : "queue_like", nullptr,
                   "is required with the other (queue_strength scales queue_like's curve)");
  }
  TG_ASSIGN_OR_RETURN(c->queue_strength, r.RequiredNumber("queue_strength"));
  if (!(c->queue_strength >= 0 && c->queue_strength <= kMaxQueueStrength)) {
    return r.Error("queue_strength", strength, StrCat("must be in [0, ", kMaxQueueStrength, "]"));
  }
  TG_ASSIGN_OR_RETURN(c->queue_like, r.RequiredString("queue_like"));
  auto shape = LoadQueueShape(c->queue_like);
  if (!shape.ok()) return r.Error("queue_like", like, std::string(shape.status().message()));
  c->queue_shape = *shape;
  return absl::OkStatus();
}

// Version 7's "options": every key RecordedOptions names, each a value it takes.
absl::Status ParseRecordedOptions(json::ObjectReader& r, double version, Calibration* c) {
  TG_ASSIGN_OR_RETURN(const json::Value* options, r.OptionalMember("options"));
  if (options == nullptr) return absl::OkStatus();
  if (version < 7) {
    return r.Error(
        "options", options,
        StrCat("is a version 7 key (this file says version ", static_cast<int>(version), ")"));
  }
  json::ObjectReader o(*options, r.source(), r.MemberPath("options"));
  TG_RETURN_IF_ERROR(o.CheckIsObject());
  // A misspelt key is reported as such, before the key it was meant to be as missing.
  for (const auto& [key, value] : options->object()) {
    const RecordedOption* ro = FindRecordedOption(key);
    if (ro == nullptr) return o.Error(key, &value, "is not an option a calibration records");
    if (ro->since > version) {
      return o.Error(key, &value,
                     StrCat("is a version ", ro->since, " key (this file says version ",
                            static_cast<int>(version), ")"));
    }
  }
  EstimatorOptions checked;
  for (const RecordedOption& ro : kRecordedOptions) {
    if (ro.since > version) continue;  // the option as given
    TG_ASSIGN_OR_RETURN(std::string value, o.RequiredString(ro.key));
    if (!ro.set(value, &checked)) {
      return o.Error(ro.key, nullptr, StrCat("must be ", ro.rule, ", not \"", value, "\""));
    }
    c->options.emplace_back(std::string(ro.key), std::move(value));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Calibration> ParseCalibration(std::string_view text, std::string_view source) {
  TG_ASSIGN_OR_RETURN(json::Value doc, json::Parse(text, source));
  json::ObjectReader r(doc, std::string(source), "");
  TG_RETURN_IF_ERROR(r.CheckIsObject());
  TG_RETURN_IF_ERROR(r.OnlyKeys({"format", "version", "model", "compute_overlap", "tier_overlap",
                                 "fit_span", "machine", "options", "queue_strength", "queue_like",
                                 "relative_noise", "interval", "fitted_runs", "cross_validation"}));
  TG_ASSIGN_OR_RETURN(std::string format, r.RequiredString("format"));
  if (format != "tiergym-calibration") {
    return r.Error("format", nullptr,
                   StrCat(R"(expected "tiergym-calibration", got ")", format, "\""));
  }
  TG_ASSIGN_OR_RETURN(double version, r.RequiredNumber("version"));
  if (!(version >= 1 && version <= 8 && version == std::floor(version)))
    return r.Error("version", nullptr, "only versions 1 to 8 are known");
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
  TG_ASSIGN_OR_RETURN(const json::Value* span, r.OptionalMember("fit_span"));
  if (span != nullptr) {
    if (version < 6) {
      return r.Error(
          "fit_span", span,
          StrCat("is a version 6 key (this file says version ", static_cast<int>(version), ")"));
    }
    TG_ASSIGN_OR_RETURN(c.fit_span_samples, r.RequiredUint64("fit_span"));
  }
  TG_RETURN_IF_ERROR(ParseRecordedOptions(r, version, &c));
  TG_ASSIGN_OR_RETURN(const json::Value* machine, r.OptionalMember("machine"));
  if (machine != nullptr) {
    if (version < 7) {
      return r.Error(
          "machine", machine,
          StrCat("is a version 7 key (this file says version ", static_cast<int>(version), ")"));
    }
    TG_ASSIGN_OR_RETURN(c.machine, r.RequiredString("machine"));
    if (c.machine.empty()) return r.Error("machine", machine, "must name the machine");
  }
  TG_RETURN_IF_ERROR(ParseQueueing(r, version, &c));
  TG_ASSIGN_OR_RETURN(c.relative_noise, r.RequiredNumber("relative_noise"));
  if (!(c.relative_noise >= 0 && c.relative_noise <= 1)) {
    return r.Error("relative_noise", nullptr, "must be in [0, 1]");
  }
  TG_ASSIGN_OR_RETURN(const json::Value* interval, r.OptionalMember("interval"));
  if (interval != nullptr) {
    json::ObjectReader v(*interval, std::string(source), "interval");
    TG_RETURN_IF_ERROR(v.CheckIsObject());
    TG_RETURN_IF_ERROR(
        version >= 5 ? v.OnlyKeys({"noise", "model_error", "mix_error", "overlap_error", "scores"})
        : version >= 3 ? v.OnlyKeys({"noise", "model_error", "mix_error", "scores"})
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
    // Before version 5 the scores were relative to a scale without the serialization term.
    TG_ASSIGN_OR_RETURN(c.prior.overlap_error, v.OptionalNumber("overlap_error", 0));
    if (!(c.prior.overlap_error >= 0 && c.prior.overlap_error <= 10)) {
      return v.Error("overlap_error", nullptr, "must be in [0, 10]");
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
  w.Int(8);
  w.Key("model");
  w.String(ModelName(c.model));
  w.Key("compute_overlap");
  w.Double(c.compute_overlap);
  w.Key("tier_overlap");
  w.Double(c.tier_overlap);
  if (c.fit_span_samples) {
    w.Key("fit_span");
    w.Uint(*c.fit_span_samples);
  }
  if (!c.machine.empty()) {
    w.Key("machine");
    w.String(c.machine);
  }
  if (!c.options.empty()) {
    w.Key("options");
    w.BeginObject();
    for (const auto& [key, value] : c.options) {
      w.Key(key);
      w.String(value);
    }
    w.EndObject();
  }
  if (c.queue_shape) {
    w.Key("queue_strength");
    w.Double(c.queue_strength);
    w.Key("queue_like");
    w.String(c.queue_like);
  }
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
  w.Key("overlap_error");
  w.Double(c.prior.overlap_error);
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

namespace {

// The residual tables of a calibration, computed on first use: one estimator build per
// (per-block overlap fits, compute overlap, queue strength, fit tolerance, limit
// smoothness), the tier overlaps on copies of its indexes.
class Grid {
 public:
  Grid(const Profile& profile, const EstimatorOptions& base,
       const std::vector<std::pair<MeasuredRun, Placement>>& runs,
       const CalibrationOptions& options, std::optional<TierSpec> shape,
       std::vector<double> smoothness)
      : profile_(profile),
        base_(base),
        runs_(runs),
        options_(options),
        shape_(std::move(shape)),
        smoothness_(std::move(smoothness)),
        n_(runs.size()),
        paper_ns_(n_),
        mixing_(n_) {}

  // Computes the tables of (b, o, q, t, p) for every o of `os`, q of `qs`, t of `ts` and p
  // of `ps` not computed yet.
  absl::Status Ensure(int b, const std::vector<int>& os, const std::vector<int>& qs,
                      const std::vector<int>& ts, const std::vector<int>& ps) {
    for (int o : os) {
      for (int q : qs) {
        for (int t : ts) {
          for (int p : ps) {
            if (!tables_.contains({b, o, q, t, p})) TG_RETURN_IF_ERROR(Compute(b, o, q, t, p));
          }
        }
      }
    }
    return absl::OkStatus();
  }
  [[nodiscard]] int smoothness_steps() const { return static_cast<int>(smoothness_.size()); }
  [[nodiscard]] double smoothness(int p) const { return smoothness_[p]; }
  [[nodiscard]] const std::map<BuildKey, Table>& tables() const { return tables_; }
  [[nodiscard]] double residual(const Candidate& c, size_t i) const {
    return tables_.at(KeyOf(c)).residual[c.j][i];
  }
  [[nodiscard]] double estimate(const Candidate& c, size_t i) const {
    return tables_.at(KeyOf(c)).estimate[c.j][i];
  }
  // The serialization of candidate c's estimate of run i (prediction_interval.h).
  [[nodiscard]] double serialization(const Candidate& c, size_t i) const {
    return Serialization(estimate(c, i), tables_.at(KeyOf(c)).serialized[i]);
  }
  [[nodiscard]] double paper_ns(size_t i) const { return paper_ns_[i]; }
  [[nodiscard]] double mixing(size_t i) const { return mixing_[i]; }

 private:
  absl::Status Compute(int b, int o, int q, int k, int p) {
    EstimatorOptions opts = base_;
    opts.fit_overlap = b == 1;
    opts.fit_tolerance = kTolerances[k];
    opts.limit_smoothness = smoothness_[p];
    opts.compute_overlap = static_cast<double>(o) / kOverlapSteps;
    opts.queue_like = q > 0 ? shape_ : std::nullopt;
    opts.queue_strength = QueueStrengthCandidate(q);
    opts.queue_from_profile = false;  // the candidate's strength, not the profile's
    if (options_.progress) {
      options_.progress(StrCat(
          "estimating ", n_, " runs with compute overlap ", FixedDecimal(opts.compute_overlap, 2),
          b == 1 && OverdeterminedRoofline(options_.model, profile_) ? " (per-block fits from it)"
                                                                     : "",
          ", queue strength ", FixedDecimal(opts.queue_strength, 1),
          k > 0 ? StrCat(", fit tolerance ", opts.fit_tolerance) : std::string(),
          opts.limit_smoothness > 0 ? StrCat(", limit smoothness ", opts.limit_smoothness)
                                    : std::string(),
          " and ", kTierSteps, " tier overlaps"));
    }
    TG_ASSIGN_OR_RETURN(auto estimator, Estimator::Create(profile_, opts));
    Table& t = tables_[{b, o, q, k, p}];
    t.residual.assign(kTierSteps, std::vector<double>(n_));
    t.estimate.assign(kTierSteps, std::vector<double>(n_));
    t.serialized.assign(n_, 0);
    for (size_t i = 0; i < n_; ++i) {
      const Placement& placement = runs_[i].second;
      auto fail = [&](const absl::Status& s) {
        tables_.erase({b, o, q, k, p});
        return absl::Status(s.code(), StrCat("run ", runs_[i].first.name, ": ", s.message()));
      };
      if (absl::Status s = CheckPlacementTiers(profile_, placement); !s.ok()) return fail(s);
      auto index = estimator->IndexFor(placement.default_tier);
      if (!index.ok()) return fail(index.status());
      auto resolved = (*index)->Resolve(placement);
      if (!resolved.ok()) return fail(resolved.status());
      if (!have_paper_) {
        auto paper = (*index)->EstimateDetailed(*resolved, Model::kPaper);
        if (!paper.ok()) return fail(paper.status());
        paper_ns_[i] = paper->runtime_ns;
        mixing_[i] = Mixing(paper->access_share);
      }
      const auto measured = static_cast<double>(runs_[i].first.runtime_ns);
      for (int j = 0; j < kTierSteps; ++j) {
        auto est = (*index)->RuntimeNs(*resolved, options_.model, TierOverlapCandidate(j));
        if (!est.ok()) return fail(est.status());
        t.residual[j][i] = *est / measured - 1;
        t.estimate[j][i] = *est;
      }
      auto serialized = (*index)->RuntimeNs(*resolved, options_.model, /*tier_overlap=*/0);
      if (!serialized.ok()) return fail(serialized.status());
      t.serialized[i] = *serialized;
    }
    have_paper_ = true;
    return absl::OkStatus();
  }

  const Profile& profile_;
  const EstimatorOptions& base_;
  const std::vector<std::pair<MeasuredRun, Placement>>& runs_;
  const CalibrationOptions& options_;
  const std::optional<TierSpec> shape_;
  const std::vector<double> smoothness_;
  const size_t n_;
  std::vector<double> paper_ns_, mixing_;
  bool have_paper_ = false;
  std::map<BuildKey, Table> tables_;
};

std::vector<int> Steps(int count) {
  std::vector<int> out(count);
  std::iota(out.begin(), out.end(), 0);
  return out;
}

// The compute overlap candidates of per-block fits b around the prior's step: the even
// steps with per-block fits, every step without (kOverlapSteps), and the prior's own.
std::vector<int> OverlapSteps(int b, const Candidate& prior) {
  std::vector<int> out;
  for (int o = 0; o <= kOverlapSteps; ++o) {
    if (b == 0 || o % 2 == 0 || (b == prior.b && o == prior.o)) out.push_back(o);
  }
  return out;
}

// The candidate the runs `which` choose, in stages (a full grid over compute overlap, queue
// strength and tier overlap would build the estimator (11 + 21) * 5 times; these build it
// 36 times when the queue strength stays, 47 or 57 when every fold moves it alike and A
// chose per-block fits or not; without that choice, 15 and 26): (A) per-block fits (each
// of `modes`), compute and tier overlap at the prior queue strength and limit smoothness,
// the fit without queueing; (B) queue strength (with `fit_queueing`), limit smoothness (of
// the grid's candidates; 15 builds with both) and tier overlap at the prior's per-block
// fits and compute overlap; if B moves the queue strength or the smoothness, (C) compute
// and tier overlap again at B's, with A's per-block fits. Each stage by the
// one-standard-error rule towards the prior, at the prior's fit tolerance. With
// `fit_tolerance`, (D) the fit tolerance and tier overlap at the chosen per-block fits,
// compute overlap, queue strength and smoothness (kToleranceSteps - 1 builds more per
// choice).
absl::StatusOr<Candidate> StagedFit(Grid& grid, const std::vector<size_t>& which, Candidate prior,
                                    const std::vector<int>& modes, bool fit_queueing,
                                    bool fit_tolerance) {
  const int t = prior.t;
  auto over = [t](int b, const std::vector<int>& os, const std::vector<int>& qs, int p,
                  std::vector<Candidate>* out) {
    for (int o : os) {
      for (int q : qs) {
        for (int j = 0; j < kTierSteps; ++j) out->push_back({b, o, q, j, t, p});
      }
    }
  };
  auto overlaps_at = [&](const std::vector<int>& bs, int q,
                         int p) -> absl::StatusOr<std::vector<Candidate>> {
    std::vector<Candidate> out;
    for (int b : bs) {
      TG_RETURN_IF_ERROR(grid.Ensure(b, OverlapSteps(b, prior), {q}, {t}, {p}));
      over(b, OverlapSteps(b, prior), {q}, p, &out);
    }
    return out;
  };
  // Stages A to C.
  auto overlaps = [&]() -> absl::StatusOr<Candidate> {
    TG_ASSIGN_OR_RETURN(const std::vector<Candidate> stage_a, overlaps_at(modes, prior.q, prior.p));
    const Candidate a = Fit(grid.tables(), stage_a, which, prior);
    const std::vector<int> qs = fit_queueing ? Steps(kQueueSteps + 1) : std::vector{prior.q};
    const std::vector<int> ps = Steps(grid.smoothness_steps());
    if (qs.size() == 1 && ps.size() == 1) return a;
    TG_RETURN_IF_ERROR(grid.Ensure(prior.b, {prior.o}, qs, {t}, ps));
    std::vector<Candidate> stage_b;
    for (int p : ps) over(prior.b, {prior.o}, qs, p, &stage_b);
    const Candidate b = Fit(grid.tables(), stage_b, which, prior);
    if (b.q == prior.q && b.p == prior.p) return a;
    TG_ASSIGN_OR_RETURN(const std::vector<Candidate> stage_c, overlaps_at({a.b}, b.q, b.p));
    return Fit(grid.tables(), stage_c, which, {a.b, prior.o, b.q, prior.j, t, b.p});
  };
  TG_ASSIGN_OR_RETURN(const Candidate c, overlaps());
  if (!fit_tolerance) return c;
  const std::vector<int> all_t = Steps(kToleranceSteps);
  TG_RETURN_IF_ERROR(grid.Ensure(c.b, {c.o}, {c.q}, all_t, {c.p}));
  std::vector<Candidate> stage_d;
  for (int k : all_t) {
    for (int j = 0; j < kTierSteps; ++j) stage_d.push_back({c.b, c.o, c.q, j, k, c.p});
  }
  return Fit(grid.tables(), stage_d, which, c);
}

// CalibrationFolds with each run's kind (the tiers its placement names) counted: the runs
// `which` ordered by kind[run], then as given, the i-th in fold i % k.
std::vector<std::vector<size_t>> FoldsByKind(const std::vector<size_t>& kind,
                                             const std::vector<size_t>& which, int k) {
  std::vector<size_t> order = which;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return kind[a] < kind[b]; });
  std::vector<std::vector<size_t>> folds(std::max(k, 1));
  for (size_t i = 0; i < order.size(); ++i) folds[i % folds.size()].push_back(order[i]);
  return folds;
}

}  // namespace

std::vector<std::vector<size_t>> CalibrationFolds(const std::vector<Placement>& placements,
                                                  const std::vector<size_t>& which, int k) {
  std::vector<size_t> kind;  // the tiers each placement names
  kind.reserve(placements.size());
  for (const Placement& p : placements) kind.push_back(p.Tiers().size());
  return FoldsByKind(kind, which, k);
}

absl::StatusOr<Calibration> Calibrate(const Profile& profile, const EstimatorOptions& base,
                                      const std::vector<std::pair<MeasuredRun, Placement>>& runs,
                                      const CalibrationOptions& options) {
  const size_t n = runs.size();
  if (n < 2) {
    return absl::InvalidArgumentError(
        StrCat("calibration needs at least 2 measured runs to cross-validate, got ", n));
  }
  const int k = options.folds == 0 ? static_cast<int>(std::min<size_t>(n, kDefaultCalibrationFolds))
                                   : options.folds;
  if (k < 2) return absl::InvalidArgumentError("calibration needs at least 2 folds");
  if (n < static_cast<size_t>(k)) {
    return absl::InvalidArgumentError(
        StrCat("calibration with ", k, " folds needs at least ", k, " measured runs, got ", n));
  }
  std::vector<size_t> kind;  // of each run's placement: the tiers it names
  kind.reserve(n);
  for (const auto& run : runs) kind.push_back(run.second.Tiers().size());
  // The curve whose rise the queue strength scales: the base options' (then `queue_like`
  // must name it, for the file), else the one `queue_like` names; none: no queueing fit.
  std::optional<TierSpec> shape = base.queue_like;
  if (shape && options.queue_like.empty()) {
    return absl::InvalidArgumentError(
        "the base options load flat tiers along a curve (queue_like): name it as "
        "MACHINE:TIER in CalibrationOptions::queue_like, which the file records");
  }
  if (!shape && !options.queue_like.empty()) {
    auto loaded = LoadQueueShape(options.queue_like);
    if (!loaded.ok()) {
      return absl::InvalidArgumentError(StrCat("queue_like ", loaded.status().message()));
    }
    shape = *loaded;
  }
  // The uncalibrated candidate: the base options' parameters, rounded to the grid (the
  // queue strength: the base's with its queue_like, else 0).
  const double base_q = base.queue_like ? base.queue_strength : 0.0;
  Candidate prior;
  prior.b = base.fit_overlap ? 1 : 0;
  prior.o = static_cast<int>(std::lround(base.compute_overlap * kOverlapSteps));
  prior.j = NearestStep(kTierOverlaps, base.tier_overlap);
  prior.q =
      std::clamp(static_cast<int>(std::lround(base_q / QueueStrengthCandidate(1))), 0, kQueueSteps);
  prior.t = NearestStep(kTolerances, base.fit_tolerance);
  const bool fit_queueing = shape.has_value();
  // Per-block overlap fits, where the base options have them and they act (the roofline
  // model with three devices or more): with them and without, the fitted overlap then
  // holding for every block. Three runs seldom tell compute hidden under a tier's latency
  // from latency within their noise, and each block then takes whichever the grid favours
  // whatever the measured mixes say; elsewhere the blocks' own overlaps fit best (estimator/
  // README.md, "Compute hidden under latency").
  std::vector<int> modes = {prior.b};
  if (prior.b == 1 && OverdeterminedRoofline(options.model, profile)) modes.push_back(0);
  // The concurrency fit's tolerance, where three runs or more are fitted (with two, every
  // block's fit is exact): compute hidden under a tier's latency leaves the concurrency to
  // the runs' noise, which measured mixes can see (estimator/README.md, "A tolerance on the
  // concurrency fit").
  const bool fit_tolerance = OverdeterminedRoofline(options.model, profile);
  // The limit smoothness: the prior's, and with fit_smoothness the grid's candidates.
  std::vector<double> smoothness =
      SmoothnessCandidates(base.limit_smoothness, options.fit_smoothness, &prior.p);
  Grid grid(profile, base, runs, options, shape, std::move(smoothness));
  auto measured = [&](size_t i) { return static_cast<double>(runs[i].first.runtime_ns); };
  // The paper estimates first.
  TG_RETURN_IF_ERROR(grid.Ensure(prior.b, {prior.o}, {prior.q}, {prior.t}, {prior.p}));
  auto score = [&](const Candidate& c, size_t i) {
    return std::fabs(grid.residual(c, i)) / RelativeSd(options.prior, grid.estimate(c, i),
                                                       grid.paper_ns(i), grid.mixing(i),
                                                       grid.serialization(c, i));
  };
  Calibration out;
  out.model = options.model;
  out.folds = k;
  out.prior = options.prior;
  std::vector<size_t> all(n);
  std::iota(all.begin(), all.end(), 0);
  auto others = [](const std::vector<std::vector<size_t>>& folds, size_t f) {
    std::vector<size_t> train;
    for (size_t g = 0; g < folds.size(); ++g) {
      if (g != f) train.insert(train.end(), folds[g].begin(), folds[g].end());
    }
    return train;
  };
  // The scores of `which`, each from a fit on the other folds of `which` only.
  auto cv_scores = [&](const std::vector<size_t>& which) -> absl::StatusOr<std::vector<double>> {
    std::vector<double> scores;
    const auto folds = FoldsByKind(kind, which, k);
    for (size_t f = 0; f < folds.size(); ++f) {
      const std::vector<size_t> train = others(folds, f);
      if (train.empty()) continue;
      TG_ASSIGN_OR_RETURN(const Candidate c,
                          StagedFit(grid, train, prior, modes, fit_queueing, fit_tolerance));
      for (size_t i : folds[f]) scores.push_back(score(c, i));
    }
    return scores;
  };
  // What a fit chose, in the units of the file.
  auto parameters = [&](const Candidate& c) -> Calibration::Parameters {
    return {.fit_overlap = c.b == 1,
            .compute_overlap = static_cast<double>(c.o) / kOverlapSteps,
            .tier_overlap = TierOverlapCandidate(c.j),
            .queue_strength = fit_queueing ? QueueStrengthCandidate(c.q) : 0,
            .fit_tolerance = kTolerances[c.t],
            .limit_smoothness = grid.smoothness(c.p)};
  };
  // k-fold (CalibrationFolds): each run scored with the candidate fitted on the other folds,
  // and its interval from the other folds' own cross-validated scores.
  out.cv_residual.assign(n, 0);
  out.cv_inside.assign(n, false);
  out.cv_fold.assign(n, 0);
  std::vector<double> cv_error(n), prior_error(n);
  size_t inside = 0;
  const auto folds = FoldsByKind(kind, all, k);
  for (size_t f = 0; f < folds.size(); ++f) {
    const std::vector<size_t> train = others(folds, f);
    TG_ASSIGN_OR_RETURN(const Candidate c,
                        StagedFit(grid, train, prior, modes, fit_queueing, fit_tolerance));
    TG_ASSIGN_OR_RETURN(const std::vector<double> scores, cv_scores(train));
    out.fold_fits.push_back(parameters(c));
    for (size_t i : folds[f]) {
      out.cv_fold[i] = static_cast<int>(f);
      out.cv_residual[i] = grid.residual(c, i);
      cv_error[i] = 100 * std::fabs(grid.residual(c, i));
      prior_error[i] = 100 * std::fabs(grid.residual(prior, i));
      const PredictionInterval interval =
          ConformalInterval(scores, options.prior, grid.estimate(c, i), grid.paper_ns(i),
                            SamplingInterval{}, 0.9, grid.mixing(i), grid.serialization(c, i));
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
  TG_ASSIGN_OR_RETURN(const Candidate c,
                      StagedFit(grid, all, prior, modes, fit_queueing, fit_tolerance));
  const Calibration::Parameters chosen = parameters(c);
  out.compute_overlap = chosen.compute_overlap;
  out.tier_overlap = chosen.tier_overlap;
  out.fit_span_samples = base.fit_span_samples;
  // The file records whether the blocks fit their own overlaps (the options' fit-overlap).
  out.options = RecordedOptions([&] {
    EstimatorOptions fitted = base;
    fitted.fit_overlap = chosen.fit_overlap;
    fitted.fit_tolerance = chosen.fit_tolerance;
    fitted.limit_smoothness = chosen.limit_smoothness;
    return fitted;
  }());
  if (base.machine) out.machine = base.machine->name;
  if (fit_queueing) {
    out.queue_strength = chosen.queue_strength;
    out.queue_like = options.queue_like;
    out.queue_shape = shape;
  }
  TG_ASSIGN_OR_RETURN(out.interval_scores, cv_scores(all));
  std::sort(out.interval_scores.begin(), out.interval_scores.end());
  // Root mean square of the relative residuals: what the estimate misses beyond sampling.
  double squares = 0;
  for (size_t i = 0; i < n; ++i) squares += grid.residual(c, i) * grid.residual(c, i);
  out.relative_noise = std::sqrt(squares / static_cast<double>(n));
  out.fitted_runs = static_cast<int>(n);
  out.estimator_builds = static_cast<int>(grid.tables().size());
  return out;
}

}  // namespace tiergym

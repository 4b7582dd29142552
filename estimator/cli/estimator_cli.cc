#include "estimator/cli/estimator_cli.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <initializer_list>
#include <iostream>
#include <optional>
#include <string_view>

#include "estimator/calibration.h"
#include "estimator/cli/corun_cli.h"
#include "estimator/estimator.h"
#include "estimator/interference.h"
#include "estimator/placement_state.h"
#include "estimator/replay_estimator.h"
#include "traces/base/args.h"
#include "traces/base/exit_status.h"
#include "traces/base/file.h"
#include "traces/base/json.h"
#include "traces/base/script.h"
#include "traces/base/strings.h"
#include "traces/measured_runs.h"
#include "traces/trace_summary.h"

namespace tiergym {
namespace {

// The defaults of the options where calibrate's differ (kCalibrationFitSpan,
// kCalibrationComputeOverlap): --fit-span and --overlap.
struct EstimateDefaults {
  uint64_t fit_span = EstimatorOptions{}.fit_span_samples;
  double overlap = EstimatorOptions{}.compute_overlap;
};

void AddEstimateOptions(ArgParser& p, EstimateDefaults defaults = {}) {
  p.AddOption("profile", "DIR", "profile directory: one trace per device");
  p.AddOption("window", "INSTRUCTIONS", "window length in base-run instructions", "1000000");
  p.AddFlag("no-phasemarks", "treat the whole run as one phase (the paper's ablation)");
  p.AddOption("machine", "NAME|FILE",
              "machine description (knl, disagg or a JSON file): tier bandwidths for the "
              "concurrent model");
  p.AddOption("model", "paper|concurrent|roofline",
              "estimator model: the paper's weighted mean; with the overlap of "
              "bandwidth-bound work on different tiers; or per block a roofline of latency, "
              "bandwidth and compute fitted to the runs (the last two need --machine); "
              "default roofline with --machine, paper without");
  p.AddOption("shares", "pooled|base",
              "which runs' samples set a window's access shares: every run's, or the base "
              "run's only (the published algorithm)",
              "pooled");
  p.AddOption("first-touch", "sweeps|extents|extended|base",
              "first-touch order of fraction placements: address extents of the sampled "
              "pages (unsampled pages between them included) by first sample, joined where "
              "the first touches sweep up the addresses (sweeps) or not (extents); or the "
              "sampled pages by first sample, the base run's then those only other runs "
              "sampled (extended); or the base run's sampled pages only (base); "
              "estimator/README.md, \"Ablation\"",
              "sweeps");
  p.AddOption("extent-gap", "PAGES",
              "sweeps/extents: sampled pages at most this far apart belong to one extent", "64");
  p.AddOption("empty-windows", "segment|base",
              "windows without samples: weighted by their phase's shares, or at the base "
              "run's time",
              "segment");
  p.AddOption("align", "instructions|samples",
              "scale the other runs' windows by their instruction counts, or by the extents "
              "of their sampled work, up to their last samples (spinning at barriers then "
              "does not stretch them)",
              "samples");
  p.AddOption("segment-tail", "apart|block",
              "roofline model: a phase's last window, which holds its barrier wait, is the "
              "phase's tail (apart) or part of its last block's fit (block, the previous "
              "rule)",
              "apart");
  p.AddOption("calibration", "FILE",
              "calibration from `tiergym calibrate`: its compute and tier overlaps and queue "
              "strength, and its "
              "cross-validated residuals setting the interval (without one: the family's "
              "prior, estimator/README.md)");
  p.AddOption("level", "FRACTION",
              "probability that the interval holds the measured runtime (sampling, noise and "
              "the model's error)",
              "0.9");
  p.AddOption("replicates", "N", "bootstrap replicates of the sampling interval", "100");
  p.AddOption("seed", "N", "seed of the bootstrap", "1");
  p.AddOption("overlap", "FRACTION",
              "roofline model: share of the shorter of compute and memory time hidden under "
              "the longer",
              StrCat(defaults.overlap));
  p.AddOption("block-samples", "N",
              "concurrent and roofline models: samples (all runs) a block holds at least", "256");
  p.AddOption("fit-span", "N",
              "roofline model: samples (all runs) the span each block's compute time, "
              "concurrency and compute overlap are fitted over holds at least (the block and "
              "its neighbours in its phase); 0: the block alone, else at least --block-samples "
              "(a default below it is raised to it)",
              std::to_string(defaults.fit_span));
  p.AddOption("tier-overlap", "FRACTION",
              "roofline model: share of the shorter tiers' bandwidth-bound time that overlaps "
              "the longest (1, the default: the tiers transfer concurrently, the family of "
              "ground truths' leave-one-out choice)",
              StrCat(EstimatorOptions{}.tier_overlap));
  p.AddOption("limit-smoothness", "P",
              "roofline model: 0, latency- and bandwidth-bound time combine by a hard maximum; "
              "P >= 1, as the P-norm",
              "0");
  p.AddOption("queue-like", "MACHINE:TIER",
              "roofline model: tiers without measured curves load their latency along the "
              "curves of this machine's tier (e.g. xeonmax:ddr); default none (flat)");
  p.AddOption("queue-strength", "Q|auto|off",
              "roofline model: how much of --queue-like's latency rise the tiers without "
              "measured curves have, ratio 1 + Q (r - 1), Q in [0, 4] (calibrate fits it; "
              "0 or off: flat); auto: read from the profile: 0 unless its busiest blocks "
              "misfit flat tiers, else the least of 0.5, 1, 1.5, 2 that takes off 3/4 of that "
              "misfit, along --queue-like or xeonmax:ddr (estimator/README.md); default auto, "
              "with --queue-like 1",
              "auto");
  p.AddOption("subset-fits", "on|off",
              "roofline model with three or four devices: also fit each block over every "
              "subset of the devices, and price a mix by the fit of the devices it uses",
              "off");
  p.AddOption("fit-overlap", "on|off",
              "roofline model with three devices or more: fit the compute overlap per block", "on");
  p.AddOption("fit-tolerance", "FRACTION",
              "roofline model: each block takes the least concurrency (latency-bound time) "
              "whose fit misfits its runs by at most this relative root mean square more than "
              "the best fit, in [0, 0.1] (calibrate fits it; estimator/README.md, \"A "
              "tolerance on the concurrency fit\")",
              "0");
  p.AddOption("share-bias", "keep|correct",
              "roofline model: correct: take off the bias the sampling spread of a block's "
              "shares puts on the roofline of a mix (convex in the shares)",
              "keep");
  p.AddOption("read-pct", "PERCENT",
              "machines with measured curves: the share of reads in the application's memory "
              "traffic, which picks the curves (PEBS samples loads only)",
              "100");
  p.AddOption("engine", "index|replay",
              "index (default) or the per-sample replay as published (paper model only; "
              "slow, for checking)",
              "index");
  p.AddFlag("json", "print one JSON object on stdout");
}

struct CommonArgs {
  EstimatorOptions options;
  Model model = Model::kPaper;
  bool replay = false;
  std::optional<Calibration> calibration;
  double level = 0.9;  // of the interval
  int replicates = 100;
  uint64_t seed = 1;
};

// OK when option `name` holds one of `words`; else InvalidArgument "--NAME must be A, B or C,
// not 'VALUE'".
absl::Status OneOf(const ArgParser& p, std::string_view name,
                   std::initializer_list<std::string_view> words) {
  const std::string value = p.Get(name);
  if (std::find(words.begin(), words.end(), value) != words.end()) return absl::OkStatus();
  std::string list;
  for (size_t i = 0; i < words.size(); ++i) {
    if (i > 0) list += i + 1 == words.size() ? " or " : ", ";
    list += words.begin()[i];
  }
  return absl::InvalidArgumentError(StrCat("--", name, " must be ", list, ", not '", value, "'"));
}

// Parses the options both commands share plus the required option `required`;
// returns the exit code when the command should stop (--help, a usage error).
std::optional<int> ParseArgs(ArgParser& p, const std::vector<std::string>& args,
                             std::string_view required, CommonArgs* out) {
  if (std::optional<int> rc = p.ParseOrExit(args)) return rc;
  absl::Status s = p.Require("profile");
  if (s.ok()) s = p.Require(required);
  auto window = p.GetUint64("window");
  if (s.ok() && !window.ok()) s = window.status();
  if (s.ok() && *window == 0) s = absl::InvalidArgumentError("--window must be positive");
  auto model = p.Given("model")
                   ? ParseModel(p.Get("model"))
                   : absl::StatusOr<Model>(p.Given("machine") ? Model::kRoofline : Model::kPaper);
  auto level = p.GetDouble("level");
  if (s.ok() && !(level.ok() && *level > 0 && *level < 1)) {
    s = absl::InvalidArgumentError(
        StrCat("--level must be a number in (0, 1), not '", p.Get("level"), "'"));
  }
  auto replicates = p.GetUint64("replicates");
  if (s.ok() && !(replicates.ok() && *replicates >= 2 && *replicates <= 100000)) {
    s = absl::InvalidArgumentError(
        StrCat("--replicates must be an integer in [2, 100000], not '", p.Get("replicates"), "'"));
  }
  auto seed = p.GetUint64("seed");
  if (s.ok() && !seed.ok())
    s = absl::InvalidArgumentError(StrCat("--seed: ", seed.status().message()));
  if (s.ok() && !model.ok())
    s = absl::InvalidArgumentError(StrCat("--model: ", model.status().message()));
  const std::string engine = p.Get("engine");
  if (s.ok()) s = OneOf(p, "engine", {"index", "replay"});
  if (s.ok() && model.ok() && *model != Model::kPaper && !p.Given("machine")) {
    s = absl::InvalidArgumentError(StrCat("--model ", ModelName(*model),
                                          " needs --machine (the tier bandwidths and latencies)"));
  }
  const std::string shares = p.Get("shares"), first_touch = p.Get("first-touch"),
                    empty = p.Get("empty-windows");
  if (s.ok()) s = OneOf(p, "shares", {"pooled", "base"});
  if (s.ok()) s = OneOf(p, "first-touch", {"sweeps", "extents", "extended", "base"});
  const std::string align = p.Get("align");
  if (s.ok()) s = OneOf(p, "align", {"instructions", "samples"});
  auto gap = p.GetUint64("extent-gap");
  if (s.ok() && !gap.ok()) {
    s = absl::InvalidArgumentError(StrCat("--extent-gap: ", gap.status().message()));
  }
  if (s.ok()) s = OneOf(p, "empty-windows", {"segment", "base"});
  const std::string tail = p.Get("segment-tail");
  if (s.ok()) s = OneOf(p, "segment-tail", {"apart", "block"});
  auto overlap = p.GetDouble("overlap");
  if (s.ok() && !(overlap.ok() && *overlap >= 0 && *overlap <= 1)) {
    s = absl::InvalidArgumentError(
        StrCat("--overlap must be a number in [0, 1], not '", p.Get("overlap"), "'"));
  }
  auto block_samples = p.GetUint64("block-samples");
  if (s.ok() && !(block_samples.ok() && *block_samples >= 1)) {
    s = absl::InvalidArgumentError(
        StrCat("--block-samples must be a positive integer, not '", p.Get("block-samples"), "'"));
  }
  auto fit_span = p.GetUint64("fit-span");
  if (s.ok() && fit_span.ok() && *fit_span != 0 && !p.Given("fit-span")) {
    fit_span = std::max(*fit_span, *block_samples);  // a default span holds a block
  }
  if (s.ok() && !(fit_span.ok() && (*fit_span == 0 || *fit_span >= *block_samples))) {
    s = absl::InvalidArgumentError(
        StrCat("--fit-span must be 0 or an integer of at least --block-samples (",
               p.Get("block-samples"), "), not '", p.Get("fit-span"), "'"));
  }
  auto tier_overlap = p.GetDouble("tier-overlap");
  if (s.ok() && !(tier_overlap.ok() && *tier_overlap >= 0 && *tier_overlap <= 1)) {
    s = absl::InvalidArgumentError(
        StrCat("--tier-overlap must be a number in [0, 1], not '", p.Get("tier-overlap"), "'"));
  }
  auto smoothness = p.GetDouble("limit-smoothness");
  if (s.ok() &&
      !(smoothness.ok() && (*smoothness == 0 || (*smoothness >= 1 && *smoothness <= 64)))) {
    s = absl::InvalidArgumentError(
        StrCat("--limit-smoothness must be 0 or a number in [1, 64], not '",
               p.Get("limit-smoothness"), "'"));
  }
  const std::string subset_fits = p.Get("subset-fits");
  if (s.ok()) s = OneOf(p, "subset-fits", {"on", "off"});
  const std::string fit_overlap = p.Get("fit-overlap");
  if (s.ok()) s = OneOf(p, "fit-overlap", {"on", "off"});
  auto fit_tolerance = p.GetDouble("fit-tolerance");
  if (s.ok() &&
      !(fit_tolerance.ok() && *fit_tolerance >= 0 && *fit_tolerance <= kMaxFitTolerance)) {
    s = absl::InvalidArgumentError(StrCat("--fit-tolerance must be a number in [0, ",
                                          kMaxFitTolerance, "], not '", p.Get("fit-tolerance"),
                                          "'"));
  }
  const std::string share_bias = p.Get("share-bias");
  if (s.ok()) s = OneOf(p, "share-bias", {"keep", "correct"});
  // Not given: auto (the library's default), or 1 with --queue-like.
  const std::string strength_text = p.Given("queue-strength") ? p.Get("queue-strength")
                                    : p.Given("queue-like")   ? "1"
                                                              : "auto";
  const bool queue_auto = strength_text == "auto";
  const bool queue_off = strength_text == "off";
  // The text parsed, not the option's default ("auto"): --queue-like alone is 1.
  auto queue_strength = queue_auto                  ? absl::StatusOr<double>(1.0)
                        : queue_off                 ? absl::StatusOr<double>(0.0)
                        : p.Given("queue-strength") ? p.GetDouble("queue-strength")
                                                    : absl::StatusOr<double>(1.0);
  if (s.ok() &&
      !(queue_strength.ok() && *queue_strength >= 0 && *queue_strength <= kMaxQueueStrength)) {
    s = absl::InvalidArgumentError(StrCat("--queue-strength must be auto, off or a number in [0, ",
                                          kMaxQueueStrength, "], not '", p.Get("queue-strength"),
                                          "'"));
  }
  if (s.ok() && queue_off && p.Given("queue-like")) {
    s = absl::InvalidArgumentError(
        "--queue-strength off keeps the tiers flat: --queue-like has no curve to scale");
  }
  if (s.ok() && !queue_auto && *queue_strength > 0 && !p.Given("queue-like")) {
    s = absl::InvalidArgumentError(
        "--queue-strength scales the curve of --queue-like MACHINE:TIER; give both");
  }
  auto read_pct = p.GetDouble("read-pct");
  if (s.ok() && !(read_pct.ok() && *read_pct >= 0 && *read_pct <= 100)) {
    s = absl::InvalidArgumentError(
        StrCat("--read-pct must be a number in [0, 100], not '", p.Get("read-pct"), "'"));
  }
  if (s.ok() && engine == "replay" && model.ok() && *model != Model::kPaper) {
    s = absl::InvalidArgumentError("--engine replay computes the paper model only");
  }
  if (s.ok() && engine == "replay" &&
      ((p.Given("first-touch") && p.Get("first-touch") != "extended") ||
       (p.Given("shares") && p.Get("shares") != "pooled") ||
       (p.Given("empty-windows") && p.Get("empty-windows") != "segment"))) {
    s = absl::InvalidArgumentError(
        "--engine replay implements --first-touch extended, --shares pooled and "
        "--empty-windows segment only");
  }
  if (!s.ok()) {
    std::cerr << s.message() << "\n";
    return 2;
  }
  out->options.window_instructions = *window;
  out->options.use_phasemarks = !p.Flag("no-phasemarks");
  out->options.share_runs = shares == "base" ? ShareRuns::kBase : ShareRuns::kPooled;
  out->options.first_touch = first_touch == "base"       ? FirstTouchFootprint::kBase
                             : first_touch == "extended" ? FirstTouchFootprint::kExtended
                                                         : FirstTouchFootprint::kExtents;
  if (engine == "replay") out->options.first_touch = FirstTouchFootprint::kExtended;
  out->options.join_sweeps = first_touch == "sweeps";
  out->options.align =
      align == "samples" ? WindowAlignment::kSamples : WindowAlignment::kInstructions;
  out->options.extent_gap_pages = *gap;
  out->options.empty_windows =
      empty == "base" ? EmptyWindows::kBaseTime : EmptyWindows::kSegmentShares;
  out->options.compute_overlap = *overlap;
  out->options.tail_window_apart = tail == "apart";
  out->options.read_pct = *read_pct;
  out->options.tier_overlap = *tier_overlap;
  out->options.block_samples = *block_samples;
  out->options.fit_span_samples = *fit_span;
  out->options.limit_smoothness = *smoothness;
  out->options.fit_overlap = fit_overlap == "on";
  out->options.fit_tolerance = *fit_tolerance;
  out->options.subset_fits = subset_fits == "on";
  out->options.share_bias = share_bias == "correct" ? ShareBias::kCorrect : ShareBias::kKeep;
  out->options.queue_strength = *queue_strength;
  out->options.queue_from_profile = queue_auto;
  // Explicit auto names its curve, as --queue-like would; the default leaves it to the
  // library (the same curve: IndexOptions::queue_from_profile).
  if (p.Given("queue-like") || (queue_auto && p.Given("queue-strength"))) {
    auto tier = p.Given("queue-like") ? LoadQueueShape(p.Get("queue-like")) : DefaultQueueShape();
    if (!tier.ok()) {
      std::cerr << "--queue-like " << tier.status().message() << "\n";
      return 2;
    }
    out->options.queue_like = *tier;
  }
  out->model = *model;
  out->level = *level;
  out->replicates = static_cast<int>(*replicates);
  out->seed = *seed;
  out->replay = engine == "replay";
  return std::nullopt;
}

// Loads the profile and the machine and makes the estimator.
absl::StatusOr<std::unique_ptr<Estimator>> MakeEstimator(const ArgParser& p, CommonArgs& common) {
  auto profile = LoadProfile(p.Get("profile"));
  if (!profile.ok()) return profile.status();
  if (p.Given("calibration")) {
    auto calibration = ReadCalibration(p.Get("calibration"));
    if (!calibration.ok()) return calibration.status();
    common.calibration = *calibration;
    // The options the file records (the fit span since version 6, the others since 7) change
    // the blocks or their fits, so its residuals hold under its own: the file's unless given,
    // and refused when given otherwise.
    for (const OptionConflict& c : ConflictingOptions(*calibration, common.options)) {
      // Phasemarks are on unless --no-phasemarks, the one way to differ when given.
      const bool marks = c.key == "phasemarks";
      const std::string flag = marks ? "no-phasemarks" : c.key;
      if (!p.Given(flag)) continue;
      return absl::InvalidArgumentError(
          StrCat("--", flag, marks ? "" : StrCat(" ", c.other), ": ", p.Get("calibration"),
                 " was fitted with ", marks ? "phasemarks" : StrCat("--", c.key, " ", c.recorded),
                 ", which its estimates use; leave --", flag, " out, or calibrate with it"));
    }
    // A version 6 file records the span but not the block size, which must fit in it.
    const std::optional<uint64_t> span = calibration->fit_span_samples;
    if (span && calibration->options.empty() && *span != 0 &&
        *span < common.options.block_samples) {
      return absl::InvalidArgumentError(
          StrCat("--block-samples ", common.options.block_samples, ": ", p.Get("calibration"),
                 " was fitted with the fit span ", *span,
                 ", which must hold a block at least; give --block-samples of at most ", *span,
                 ", or calibrate with these options"));
    }
    ApplyCalibration(*calibration, &common.options);  // a fitted strength: not read
  }
  if (p.Given("machine")) {
    auto machine = LoadMachine(p.Get("machine"));
    if (!machine.ok()) return machine.status();
    common.options.machine = *machine;
  }
  if (common.calibration) {
    if (absl::Status s = CheckCalibrationMachine(*common.calibration, common.options.machine);
        !s.ok()) {
      return absl::InvalidArgumentError(
          StrCat("--calibration ", p.Get("calibration"), ": ", s.message(), " (--machine)"));
    }
  }
  return Estimator::Create(*std::move(profile), common.options);
}

// The interval of an estimate: the calibration's (conformal) with one, the family's prior
// without (prediction_interval.h).
PredictionInterval IntervalOf(const CommonArgs& common, double estimate_ns, double paper_ns,
                              const SamplingInterval& sampling, double mixing,
                              double serialization) {
  if (common.calibration) {
    return CalibratedInterval(*common.calibration, estimate_ns, paper_ns, sampling, common.level,
                              mixing, serialization);
  }
  return PriorInterval(IntervalPrior{}, estimate_ns, paper_ns, sampling, common.level, mixing,
                       serialization);
}

// The serialization of an estimate (prediction_interval.h): its runtime under the same
// options with the tier overlap 0, against it.
absl::StatusOr<double> SerializationOf(Estimator& estimator, const Placement& placement,
                                       Model model, double estimate_ns) {
  auto serialized = estimator.SerializedRuntimeNs(placement, model);
  if (!serialized.ok()) return serialized.status();
  return Serialization(estimate_ns, *serialized);
}

absl::StatusOr<Estimate> EstimateWith(Estimator& estimator, const CommonArgs& common,
                                      const Placement& placement, Model model) {
  if (common.replay) {
    return EstimateByReplay(
        estimator.profile(), placement,
        {.window_instructions = common.options.window_instructions,
         .use_phasemarks = common.options.use_phasemarks,
         .align_by_samples = common.options.align == WindowAlignment::kSamples});
  }
  return estimator.EstimatePlacement(placement, model);
}

void WriteDoubles(json::Writer& w, std::string_view key, const std::vector<double>& values) {
  w.Key(key);
  w.BeginArray();
  for (double v : values) w.Double(v);
  w.EndArray();
}

// Runs scripts/plot_validation.py with the validation JSON on its standard input.
absl::Status Plot(const std::string& json_text, const std::string& png, const std::string& title) {
  return RunScript("plot_validation.py", {"-", "--out", png, "--title", title}, json_text);
}

// Replaces the estimate's runtime and per-phase times by those under the schedule's
// interference (estimator/interference.h).
absl::Status ApplyInterference(Estimator& estimator, const Placement& placement, Model model,
                               const std::string& path, Estimate* est) {
  auto schedule = ReadInterferenceSchedule(path);
  if (!schedule.ok()) return schedule.status();
  auto composer = InterferenceComposer::Create(*schedule, estimator.profile().devices(),
                                               estimator.profile().app());
  if (!composer.ok())
    return {composer.status().code(), StrCat(path, ": ", composer.status().message())};
  auto index = estimator.IndexFor(placement.default_tier);
  if (!index.ok()) return index.status();
  auto resolved = (*index)->Resolve(placement);
  if (!resolved.ok()) return resolved.status();
  const PlacementState state(*index, *resolved, model);
  const EstimatorIndex& x = **index;
  est->runtime_ns = 0;
  for (size_t s = 0; s < x.num_segments() && s < est->phases.size(); ++s) {
    est->phases[s].estimated_ns =
        composer->IntervalNs(state, x.segment_begin(s), x.segment_begin(s + 1));
    est->runtime_ns += est->phases[s].estimated_ns;
  }
  return absl::OkStatus();
}

}  // namespace

std::string EstimatorCommandsHelp() {
  return "  estimate               estimate a profile's runtime under a placement\n"
         "  validate               compare estimates with measured runs (runs.csv) or co-runs\n"
         "                         (--corun coruns.csv)\n"
         "  calibrate              fit the estimator's compute and tier overlaps and its "
         "interval to measured runs\n";
}

int RunCalibrateCommand(const std::vector<std::string>& args) {
  ArgParser p("tiergym calibrate",
              "Fit the roofline model's compute overlap, tier overlap and queue strength, and "
              "the prediction "
              "interval's scores, to measured runs; report the k-fold cross-validated error "
              "and interval coverage (every run scored by a fit on the other folds) and write "
              "the calibration file that estimate and validate read with --calibration "
              "(format: estimator/calibration.h). The estimator options are those of "
              "validate; they set the prior, the uncalibrated estimate the fit stays nearest "
              "to, with the defaults of validate except --fit-span and --overlap, whose "
              "defaults here were chosen for calibrated estimates. The file records the span "
              "and the options that shape the blocks and their fits (--window, "
              "--block-samples, --first-touch, ..., estimator/README.md); estimates with it "
              "use them, and refuse others given with it.");
  AddEstimateOptions(p, {.fit_span = kCalibrationFitSpan, .overlap = kCalibrationComputeOverlap});
  p.AddOption("runs", "FILE", "measured runs CSV (name,placement,runtime_ns)");
  p.AddOption("out", "FILE", "where to write the calibration JSON");
  p.AddOption("folds", "K",
              "cross-validation folds, stratified by the number of tiers a placement names "
              "(default: 5, or one per run when there are fewer runs)");
  p.AddOption("queue-shape", "MACHINE:TIER|none",
              "the measured curve whose latency rise the fitted queue strength scales for "
              "tiers without curves (none: fit no queueing; --queue-like, when given, is the "
              "curve and --queue-strength the prior)",
              std::string(kDefaultQueueLike));
  p.AddOption("fit-smoothness", "on|off",
              "also fit the limit between latency- and bandwidth-bound time (--limit-smoothness: "
              "the hard maximum or the p-norms 2 and 4) with the queue strength; the file "
              "records it (estimator/README.md, \"A fitted limit smoothness\")",
              "off");
  p.AddFlag("quiet", "no progress on stderr");
  p.SetEpilog(
      "JSON output: {runs: [{name, measured_ns, cv_error_pct, cv_residual_pct (100 (estimate\n"
      "/ measured - 1), signed), cv_inside, fold (the fold it was held out in)}], fold_fits:\n"
      "[{fit_overlap, compute_overlap, tier_overlap, queue_strength, fit_tolerance,\n"
      "limit_smoothness} per fold: the fit on the other folds], fit_span, compute_overlap,\n"
      "tier_overlap, queue_strength (0 when not fitted), fit_tolerance, limit_smoothness,\n"
      "relative_noise, folds,\n"
      "cv_mean_error_pct, cv_max_error_pct, uncalibrated_mean_error_pct,\n"
      "uncalibrated_max_error_pct, cv_coverage}.");
  CommonArgs common;
  if (std::optional<int> rc = ParseArgs(p, args, "runs", &common)) return *rc;
  absl::Status s = p.Require("machine");
  if (s.ok()) s = p.Require("out");
  auto folds = p.Given("folds") ? p.GetUint64("folds") : absl::StatusOr<uint64_t>(0);
  if (s.ok() && p.Given("folds") && !(folds.ok() && *folds >= 2 && *folds <= 1000)) {
    s = absl::InvalidArgumentError(
        StrCat("--folds must be an integer in [2, 1000], not '", p.Get("folds"), "'"));
  }
  if (s.ok() && p.Given("calibration")) {
    s = absl::InvalidArgumentError("--calibration: calibrate fits one; it does not read one");
  }
  if (s.ok() && p.Given("queue-strength") && p.Get("queue-strength") == "auto") {
    s = absl::InvalidArgumentError(
        "--queue-strength auto reads the strength from the profile (estimate, validate); "
        "calibrate fits it on the runs: give the prior as a number, or leave it out");
  }
  if (s.ok() && p.Given("queue-shape") && p.Given("queue-like")) {
    s = absl::InvalidArgumentError(
        "--queue-shape: --queue-like is the curve the queue strength scales; give one of them");
  }
  if (s.ok() && p.Get("queue-shape") != "none") {
    if (auto shape = LoadQueueShape(p.Get("queue-shape")); !shape.ok()) {
      s = absl::InvalidArgumentError(StrCat("--queue-shape (or none) ", shape.status().message()));
    }
  }
  if (s.ok()) s = OneOf(p, "fit-smoothness", {"on", "off"});
  if (s.ok() && common.model != Model::kRoofline) {
    s = absl::InvalidArgumentError("calibrate fits the roofline model (--model roofline)");
  }
  if (!s.ok()) {
    std::cerr << s.message() << "\n";
    return 2;
  }
  auto profile = LoadProfile(p.Get("profile"));
  if (!profile.ok()) return Fail(profile.status());
  auto machine = LoadMachine(p.Get("machine"));
  if (!machine.ok()) return Fail(machine.status());
  common.options.machine = *machine;
  auto runs = ReadMeasuredRunsWithPlacements(p.Get("runs"));
  if (!runs.ok()) return Fail(runs.status());
  CalibrationOptions options;
  options.folds = static_cast<int>(*folds);
  options.fit_smoothness = p.Get("fit-smoothness") == "on";
  options.queue_like = p.Given("queue-like")            ? p.Get("queue-like")
                       : p.Get("queue-shape") == "none" ? ""
                                                        : p.Get("queue-shape");
  if (!p.Flag("quiet"))
    options.progress = [](const std::string& line) { std::cerr << line << "\n"; };
  auto calibration = Calibrate(*profile, common.options, *runs, options);
  if (!calibration.ok()) {
    return Fail(absl::Status(calibration.status().code(),
                             StrCat(p.Get("runs"), ": ", calibration.status().message())));
  }
  if (absl::Status w = WriteFileAtomically(p.Get("out"), FormatCalibration(*calibration));
      !w.ok()) {
    return Fail(w);
  }
  const Calibration& c = *calibration;
  // The options estimates with the file use: the fit may have chosen one compute overlap
  // for every block over per-block fits, and a tolerance of the concurrency fit.
  EstimatorOptions fitted = common.options;
  ApplyCalibration(c, &fitted);
  if (p.Flag("json")) {
    json::Writer w;
    auto numbers = [&w](const std::vector<std::pair<const char*, double>>& fields) {
      for (const auto& [key, value] : fields) {
        w.Key(key);
        w.Double(value);
      }
    };
    w.BeginObject();
    w.Key("runs");
    w.BeginArray();
    for (size_t i = 0; i < runs->size(); ++i) {
      w.BeginObject();
      w.Key("name");
      w.String((*runs)[i].first.name);
      w.Key("measured_ns");
      w.Uint((*runs)[i].first.runtime_ns);
      w.Key("cv_error_pct");
      w.Double(100 * std::fabs(c.cv_residual[i]));
      w.Key("cv_residual_pct");
      w.Double(100 * c.cv_residual[i]);
      w.Key("cv_inside");
      w.Bool(c.cv_inside[i]);
      w.Key("fold");
      w.Int(c.cv_fold[i]);
      w.EndObject();
    }
    w.EndArray();
    w.Key("fold_fits");
    w.BeginArray();
    for (const Calibration::Parameters& f : c.fold_fits) {
      w.BeginObject();
      w.Key("fit_overlap");
      w.Bool(f.fit_overlap);
      numbers({{"compute_overlap", f.compute_overlap},
               {"tier_overlap", f.tier_overlap},
               {"queue_strength", f.queue_strength},
               {"fit_tolerance", f.fit_tolerance},
               {"limit_smoothness", f.limit_smoothness}});
      w.EndObject();
    }
    w.EndArray();
    w.Key("fit_span");
    w.Uint(common.options.fit_span_samples);
    numbers({{"compute_overlap", c.compute_overlap},
             {"tier_overlap", c.tier_overlap},
             {"queue_strength", c.queue_strength},
             {"fit_tolerance", fitted.fit_tolerance},
             {"limit_smoothness", fitted.limit_smoothness},
             {"relative_noise", c.relative_noise},
             {"folds", c.folds},
             {"cv_mean_error_pct", c.cv_mean_error_pct},
             {"cv_max_error_pct", c.cv_max_error_pct},
             {"uncalibrated_mean_error_pct", c.uncalibrated_mean_error_pct},
             {"uncalibrated_max_error_pct", c.uncalibrated_max_error_pct},
             {"cv_coverage", c.cv_coverage}});
    w.EndObject();
    std::cout << w.Take() << "\n";
    return 0;
  }
  std::printf(
      "%d runs, fit span %s, %d-fold cross-validation (each run scored by a fit on the "
      "others):\n"
      "  uncalibrated (compute overlap %g, tier overlap %g): mean error %.2f %%, max error "
      "%.2f %%\n"
      "  calibrated: mean error %.2f %%, max error %.2f %%; measured runtime inside the 90 %% "
      "interval in %.0f %% of the runs\n"
      "fitted on all runs: compute overlap %g%s, tier overlap %g, queue "
      "strength %.1f%s, fit tolerance %g, limit smoothness %g, relative noise %.2f %%; wrote "
      "%s\n",
      c.fitted_runs, std::to_string(common.options.fit_span_samples).c_str(), c.folds,
      common.options.compute_overlap, common.options.tier_overlap, c.uncalibrated_mean_error_pct,
      c.uncalibrated_max_error_pct, c.cv_mean_error_pct, c.cv_max_error_pct, 100 * c.cv_coverage,
      c.compute_overlap, fitted.fit_overlap ? "" : " for every block", c.tier_overlap,
      c.queue_strength, c.queue_shape ? StrCat(" (", c.queue_like, ")").c_str() : " (not fitted)",
      fitted.fit_tolerance, fitted.limit_smoothness, 100 * c.relative_noise, p.Get("out").c_str());
  return 0;
}

int RunEstimateCommand(const std::vector<std::string>& args) {
  ArgParser p("tiergym estimate",
              "Estimate the runtime of an application under a placement from its profile "
              "(one sampled run per device), with the differential-trace estimator.");
  AddEstimateOptions(p);
  p.AddOption("placement", "FILE", "placement JSON (ranges or fractions)");
  p.AddOption("interference", "FILE",
              "interference schedule JSON: co-runners per tier and part of the run, and the "
              "target's sensitivity curves (estimator/README.md, \"Interference\")");
  p.SetEpilog(
      "JSON output: {runtime_ns, model, devices: [..], device_runtime_ns: [..],\n"
      "access_share: [..], time_share: [..], phases: [{phase, estimated_ns, measured_ns: [..],\n"
      "windows}]}; per-device lists follow `devices`. With --interference also\n"
      "runtime_without_interference_ns; runtime_ns and the phases include the slowdowns.");
  CommonArgs common;
  if (std::optional<int> rc = ParseArgs(p, args, "placement", &common)) return *rc;
  auto estimator = MakeEstimator(p, common);
  if (!estimator.ok()) return Fail(estimator.status());
  auto placement = ReadPlacement(p.Get("placement"));
  if (!placement.ok()) return Fail(placement.status());
  auto est = EstimateWith(**estimator, common, *placement, common.model);
  if (!est.ok()) return Fail(est.status());
  const double without_interference = est->runtime_ns;
  // The interval (not with the replay, nor with interference, whose slowdowns it does not
  // cover): sampling, noise and the model's own error.
  std::optional<SamplingInterval> spread;
  std::optional<PredictionInterval> interval;
  double serialization = 0;
  if (!common.replay && !p.Given("interference")) {
    auto sp = (*estimator)
                  ->SamplingSpread(*placement, common.model, common.replicates, common.seed,
                                   common.level);
    if (!sp.ok()) return Fail(sp.status());
    spread = *sp;
    auto paper = (*estimator)->EstimatePlacement(*placement, Model::kPaper);
    if (!paper.ok()) return Fail(paper.status());
    auto serial = SerializationOf(**estimator, *placement, common.model, est->runtime_ns);
    if (!serial.ok()) return Fail(serial.status());
    serialization = *serial;
    interval = IntervalOf(common, est->runtime_ns, paper->runtime_ns, *spread,
                          Mixing(est->access_share), serialization);
  }
  if (p.Given("interference")) {
    if (common.replay)
      return Fail(absl::InvalidArgumentError("--interference needs --engine index"));
    if (absl::Status s =
            ApplyInterference(**estimator, *placement, common.model, p.Get("interference"), &*est);
        !s.ok()) {
      return Fail(s);
    }
  }
  if (p.Flag("json")) {
    json::Writer w;
    w.BeginObject();
    w.Key("runtime_ns");
    w.Double(std::round(est->runtime_ns));
    if (p.Given("interference")) {
      w.Key("runtime_without_interference_ns");
      w.Double(std::round(without_interference));
    }
    w.Key("model");
    w.String(ModelName(common.model));
    if (spread && interval) {
      w.Key("interval");
      w.BeginObject();
      w.Key("lo_ns");
      w.Double(std::round(interval->lo_ns));
      w.Key("hi_ns");
      w.Double(std::round(interval->hi_ns));
      w.Key("level");
      w.Double(interval->level);
      w.Key("calibrated");
      w.Bool(common.calibration.has_value());
      w.Key("serialization");
      w.Double(serialization);
      w.Key("sampling_lo_ns");
      w.Double(std::round(spread->lo_ns));
      w.Key("sampling_hi_ns");
      w.Double(std::round(spread->hi_ns));
      w.Key("stddev_ns");
      w.Double(std::round(spread->stddev_ns));
      w.Key("replicates");
      w.Int(spread->replicates);
      w.EndObject();
    }
    w.Key("devices");
    w.BeginArray();
    for (const auto& d : est->devices) w.String(d);
    w.EndArray();
    w.Key("device_runtime_ns");
    w.BeginArray();
    for (uint64_t v : est->device_runtime_ns) w.Uint(v);
    w.EndArray();
    WriteDoubles(w, "access_share", est->access_share);
    WriteDoubles(w, "time_share", est->time_share);
    w.Key("phases");
    w.BeginArray();
    for (const PhaseEstimate& ph : est->phases) {
      w.BeginObject();
      w.Key("phase");
      w.Uint(ph.phase);
      w.Key("estimated_ns");
      w.Double(std::round(ph.estimated_ns));
      w.Key("measured_ns");
      w.BeginArray();
      for (uint64_t v : ph.measured_ns) w.Uint(v);
      w.EndArray();
      w.Key("windows");
      w.Uint(ph.windows);
      w.EndObject();
    }
    w.EndArray();
    w.EndObject();
    std::cout << w.Take() << "\n";
    return 0;
  }
  std::cout << "estimated runtime " << FormatDuration(static_cast<uint64_t>(est->runtime_ns))
            << " for " << p.Get("placement") << " (" << ModelName(common.model) << " model)\n";
  if (spread && interval) {
    std::cout << "  " << FixedDecimal(100 * interval->level, 0) << " % interval "
              << FormatDuration(static_cast<uint64_t>(interval->lo_ns)) << " .. "
              << FormatDuration(static_cast<uint64_t>(interval->hi_ns))
              << (common.calibration ? " (calibrated" : " (the family's prior")
              << "; sampling alone " << FormatDuration(static_cast<uint64_t>(spread->lo_ns))
              << " .. " << FormatDuration(static_cast<uint64_t>(spread->hi_ns)) << ", "
              << spread->replicates << " bootstrap replicates)\n";
  }
  if (p.Given("interference")) {
    std::cout << "  with the co-runners of " << p.Get("interference") << "; without them "
              << FormatDuration(static_cast<uint64_t>(without_interference)) << "\n";
  }
  for (size_t d = 0; d < est->devices.size(); ++d) {
    char line[200];
    std::snprintf(line, sizeof line,
                  "  %-8s all-on-device run %12s   accesses %5.1f %%   time %5.1f %%\n",
                  est->devices[d].c_str(), FormatDuration(est->device_runtime_ns[d]).c_str(),
                  100 * est->access_share[d], 100 * est->time_share[d]);
    std::cout << line;
  }
  const size_t shown = std::min<size_t>(est->phases.size(), 12);
  std::cout << "  per phase (estimated; measured on each device):\n";
  for (size_t i = 0; i < shown; ++i) {
    const PhaseEstimate& ph = est->phases[i];
    std::string measured;
    for (size_t d = 0; d < ph.measured_ns.size(); ++d) {
      StrAppend(&measured, d ? ", " : "", est->devices[d], " ", FormatDuration(ph.measured_ns[d]));
    }
    std::cout << "    phase " << ph.phase << ": "
              << FormatDuration(static_cast<uint64_t>(ph.estimated_ns)) << " (" << measured
              << ")\n";
  }
  if (shown < est->phases.size()) {
    std::cout << "    ... " << est->phases.size() - shown << " more phases (see --json)\n";
  }
  return 0;
}

int RunValidateCommand(const std::vector<std::string>& args) {
  // `validate --corun FILE`: the co-run variant, with its own options.
  for (const std::string& a : args) {
    if (a == "--corun" || a.starts_with("--corun=")) return RunCorunValidateCommand(args);
  }
  ArgParser p("tiergym validate",
              "Estimate every measured run of runs.csv from the profile and report the error "
              "of each estimate against the measured runtime. With --machine, both models are "
              "reported; --model picks the one in estimated_ns / error_pct.");
  AddEstimateOptions(p);
  p.AddOption("runs", "FILE", "measured runs CSV (name,placement,runtime_ns)");
  p.AddOption("plot", "FILE.png",
              "also draw measured vs estimated runtime per run (needs python3-matplotlib)");
  p.SetEpilog(
      "JSON output: {\"runs\": [{name, measured_ns, estimated_ns, error_pct, interval_lo_ns,\n"
      "interval_hi_ns, inside, serialization, access_share: [..] (per device), models:\n"
      "{paper: {estimated_ns, error_pct}, concurrent: {..}}}], \"mean_error_pct\",\n"
      "\"max_error_pct\", \"model\", queue_strength and queue_misfit (with --queue-like,\n"
      "--queue-strength auto, or a strength read above 0), \"models\": {paper:\n"
      "{mean_error_pct, max_error_pct}, concurrent: {..}}}; error_pct = 100 * |estimated -\n"
      "measured| / measured; the concurrent entries appear with --machine.\n"
      "With --corun coruns.csv: the co-run variant (tiergym validate --corun X --help).");
  CommonArgs common;
  if (std::optional<int> rc = ParseArgs(p, args, "runs", &common)) return *rc;
  auto estimator = MakeEstimator(p, common);
  if (!estimator.ok()) return Fail(estimator.status());
  auto runs = ReadMeasuredRunsWithPlacements(p.Get("runs"));
  if (!runs.ok()) return Fail(runs.status());
  std::vector<Model> models = {Model::kPaper};
  if ((*estimator)->has_machine() && !common.replay) {
    models.push_back(Model::kConcurrent);
    models.push_back(Model::kRoofline);
  }

  struct Row {
    std::string name;
    uint64_t measured_ns;
    std::vector<double> estimated_ns;          // per model
    std::optional<PredictionInterval> spread;  // the chosen model's interval
    std::vector<double> access_share;          // per device (the estimate's)
    double serialization = 0;                  // the chosen model's (prediction_interval.h)
    [[nodiscard]] bool inside() const {
      return spread && Inside(*spread, static_cast<double>(measured_ns));
    }
  };
  std::vector<Row> rows;
  for (const auto& [run, placement] : *runs) {
    Row row{run.name, run.runtime_ns, {}, std::nullopt, {}, 0};
    for (Model m : models) {
      auto est = EstimateWith(**estimator, common, placement, m);
      if (!est.ok()) {
        return Fail(absl::Status(est.status().code(),
                                 StrCat(p.Get("runs"), ": run ", run.name, " (", run.placement_path,
                                        "): ", est.status().message())));
      }
      row.estimated_ns.push_back(est->runtime_ns);
      if (m == common.model && !common.replay) {
        auto sp = (*estimator)
                      ->SamplingSpread(placement, m, common.replicates, common.seed, common.level);
        if (!sp.ok()) return Fail(sp.status());
        // models[0] is the paper model, estimated first.
        row.access_share = est->access_share;
        auto serial = SerializationOf(**estimator, placement, m, est->runtime_ns);
        if (!serial.ok()) return Fail(serial.status());
        row.serialization = *serial;
        row.spread = IntervalOf(common, est->runtime_ns, row.estimated_ns.front(), *sp,
                                Mixing(est->access_share), row.serialization);
      }
    }
    rows.push_back(std::move(row));
  }
  auto error_pct = [](double estimated, uint64_t measured) {
    return 100.0 * std::fabs(estimated - static_cast<double>(measured)) /
           static_cast<double>(measured);
  };
  const size_t chosen =
      static_cast<size_t>(std::find(models.begin(), models.end(), common.model) - models.begin());
  size_t inside = 0, with_interval = 0;
  for (const Row& r : rows) {
    with_interval += r.spread.has_value();
    inside += r.inside();
  }
  const double coverage =
      with_interval ? static_cast<double>(inside) / static_cast<double>(with_interval) : 0.0;
  std::vector<double> mean(models.size(), 0.0), max(models.size(), 0.0);
  for (const Row& r : rows) {
    for (size_t m = 0; m < models.size(); ++m) {
      const double e = error_pct(r.estimated_ns[m], r.measured_ns);
      mean[m] += e / static_cast<double>(rows.size());
      max[m] = std::max(max[m], e);
    }
  }

  // The queue strength the roofline priced at (the base tier's index), with
  // --queue-strength auto what the profile showed: reported with a curve named
  // (--queue-like, --queue-strength auto), and by default when the profile showed
  // queueing (otherwise the estimates are the flat ones and so is the report).
  std::shared_ptr<const EstimatorIndex> queued;
  if ((common.options.queue_like || common.options.queue_from_profile) &&
      (*estimator)->has_machine() && !common.replay && !runs->empty()) {
    auto index = (*estimator)->IndexFor(runs->front().second.default_tier);
    if (!index.ok()) return Fail(index.status());
    if (common.options.queue_like || (*index)->queue_strength() > 0) queued = *index;
  }

  json::Writer w;
  w.BeginObject();
  w.Key("runs");
  w.BeginArray();
  for (const Row& r : rows) {
    w.BeginObject();
    w.Key("name");
    w.String(r.name);
    w.Key("measured_ns");
    w.Uint(r.measured_ns);
    w.Key("estimated_ns");
    w.Double(std::round(r.estimated_ns[chosen]));
    w.Key("error_pct");
    w.Double(error_pct(r.estimated_ns[chosen], r.measured_ns));
    if (r.spread) {
      w.Key("interval_lo_ns");
      w.Double(std::round(r.spread->lo_ns));
      w.Key("interval_hi_ns");
      w.Double(std::round(r.spread->hi_ns));
      w.Key("inside");
      w.Bool(r.inside());
      w.Key("serialization");
      w.Double(r.serialization);
    }
    if (!r.access_share.empty()) WriteDoubles(w, "access_share", r.access_share);
    w.Key("models");
    w.BeginObject();
    for (size_t m = 0; m < models.size(); ++m) {
      w.Key(ModelName(models[m]));
      w.BeginObject();
      w.Key("estimated_ns");
      w.Double(std::round(r.estimated_ns[m]));
      w.Key("error_pct");
      w.Double(error_pct(r.estimated_ns[m], r.measured_ns));
      w.EndObject();
    }
    w.EndObject();
    w.EndObject();
  }
  w.EndArray();
  w.Key("mean_error_pct");
  w.Double(mean[chosen]);
  w.Key("max_error_pct");
  w.Double(max[chosen]);
  w.Key("model");
  w.String(ModelName(common.model));
  if (queued) {
    w.Key("queue_strength");
    w.Double(queued->queue_strength());
    if (!queued->queue_misfit().empty()) WriteDoubles(w, "queue_misfit", queued->queue_misfit());
  }
  if (with_interval) {
    w.Key("interval_level");
    w.Double(common.level);
    w.Key("coverage");
    w.Double(coverage);
  }
  w.Key("models");
  w.BeginObject();
  for (size_t m = 0; m < models.size(); ++m) {
    w.Key(ModelName(models[m]));
    w.BeginObject();
    w.Key("mean_error_pct");
    w.Double(mean[m]);
    w.Key("max_error_pct");
    w.Double(max[m]);
    w.EndObject();
  }
  w.EndObject();
  w.EndObject();
  const std::string json_text = w.Take();

  if (p.Flag("json")) {
    std::cout << json_text << "\n";
  } else {
    std::printf("%-36s %12s", "run", "measured");
    for (Model m : models) {
      std::printf(" %12s %8s", std::string(ModelName(m)).c_str(), "error");
    }
    std::printf("\n");
    for (const Row& r : rows) {
      std::printf("%-36s %12s", r.name.c_str(), FormatDuration(r.measured_ns).c_str());
      for (size_t m = 0; m < models.size(); ++m) {
        std::printf(" %12s %7.2f%%",
                    FormatDuration(static_cast<uint64_t>(r.estimated_ns[m])).c_str(),
                    error_pct(r.estimated_ns[m], r.measured_ns));
      }
      std::printf("\n");
    }
    for (size_t m = 0; m < models.size(); ++m) {
      std::printf("%zu runs, %s model: mean error %.2f %%, max error %.2f %%\n", rows.size(),
                  std::string(ModelName(models[m])).c_str(), mean[m], max[m]);
    }
    if (queued) {
      std::printf(
          "roofline model: queue strength %.2f%s\n", queued->queue_strength(),
          queued->queue_misfit().empty()
              ? ""
              : StrCat(" (read from the profile: median misfit of its busiest blocks ",
                       FixedDecimal(100 * queued->queue_misfit()[0], 2), " % with flat tiers)")
                    .c_str());
    }
    if (with_interval) {
      std::printf(
          "%s model: measured runtime inside the %.0f %% interval (%s) in %zu of %zu "
          "runs (coverage %.0f %%)\n",
          std::string(ModelName(common.model)).c_str(), 100 * common.level,
          common.calibration ? "calibrated" : "the family's prior", inside, with_interval,
          100 * coverage);
    }
  }
  if (p.Given("plot")) {
    const std::string title = StrCat(
        (*estimator)->profile().app().empty() ? p.Get("profile") : (*estimator)->profile().app(),
        ": measured vs estimated runtime");
    if (absl::Status s = Plot(json_text, p.Get("plot"), title); !s.ok()) return Fail(s);
    std::cerr << "wrote " << p.Get("plot") << "\n";
  }
  return 0;
}

}  // namespace tiergym

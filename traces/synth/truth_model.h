// How the synthetic hardware behaves beyond its spec sheet: the ground-truth model of the
// generator's time model (time_model.h), one member of a documented family
// (traces/SYNTH.md, section 10, "A family of ground truths").
//
// A machine (traces/machine.h) gives what a spec sheet or a characterisation gives: each
// tier's bandwidth and latency, or measured bandwidth-latency curves. How a real memory
// system combines them is not on the sheet, and a runtime estimator that is only ever
// checked against one way of combining them may have learnt that way rather than memory.
// A TruthModel picks among the alternatives:
//   - tier_overlap: how much of two tiers' bandwidth-bound time overlaps (1: the tiers
//     transfer concurrently, the longest counts; 0: one after the other, they add up);
//   - limit_smoothness: the latency- and bandwidth-bound times combine by a hard maximum
//     (0) or smoothly, as the p-norm (T_l^p + T_b^p)^(1/p) with p = limit_smoothness;
//   - compute_overlap: how much compute hides memory time, replacing every phase's own
//     `overlap` (unset: the phases' own);
//   - queueing_like: tiers without measured curves queue along a measured curve: their
//     latency rises with their utilisation as that of another machine's tier (its curve
//     at the phase's read share, relative to its idle latency and peak); tiers with
//     curves follow their own;
//   - instruction_drift: per tier, extra instructions per instruction retired while the
//     misses go to that tier (spin-polling, replays: counts that differ per device), which
//     take compute time and no misses. Tiers a machine lacks are ignored, so that one
//     member serves every machine.
// The default (TruthModel{}) is the spec model the generator has always used: a tier's
// bandwidth times overlap fully, hard limits, the phases' overlaps, no queueing beyond the
// measured curves, no drift. Bit for bit: every profile it made before stays the same.
//
// A TruthModel is a plain value; safe to share const instances between threads.
#ifndef TIERGYM_TRACES_SYNTH_TRUTH_MODEL_H_
#define TIERGYM_TRACES_SYNTH_TRUTH_MODEL_H_

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "traces/machine.h"

namespace tiergym::synth {

struct TruthModel {
  std::string name = "spec";
  std::string description;
  double tier_overlap = 1;                // [0, 1]
  double limit_smoothness = 0;            // 0 (hard) or in [1, 64]
  std::optional<double> compute_overlap;  // [0, 1]
  // The tier whose measured curves flat tiers queue along, and where it came from
  // ("xeonmax", "ddr"); unset: flat tiers do not queue.
  std::optional<TierSpec> queueing_like;
  std::string queueing_machine;
  // (tier name, drift): drift in [-0.5, 1]; tiers not listed drift 0.
  std::vector<std::pair<std::string, double>> instruction_drift;

  // The drift of the machine's tier `tier`, 0 when not listed.
  double DriftOf(std::string_view tier) const;
  // How the tiers' memory times combine (traces/machine.h).
  MemoryCombination memory() const { return {tier_overlap, limit_smoothness}; }
};

// Sets truth.queueing_like to the tier `tier_name` of the machine `machine_name` (a bundled
// preset or a JSON file, LoadMachine). Fails like LoadMachine, or InvalidArgument when the
// machine lacks the tier or the tier has no measured curves.
absl::Status SetQueueingLike(TruthModel& truth, std::string_view machine_name,
                             std::string_view tier_name);

// Parses a truth model; `source` names the text in errors ("SOURCE:LINE:COL: PATH: RULE",
// e.g. "t.json:3:19: tier_overlap: must be in [0, 1]"). Unknown keys are errors.
// InvalidArgument.
absl::StatusOr<TruthModel> ParseTruthModel(std::string_view json_text, std::string_view source);

// The bundled members of the family, "spec" (TruthModel{} with a description) first.
const std::vector<TruthModel>& BundledTruths();
// Their names.
std::vector<std::string> BundledTruthNames();

// A bundled member by name ("spec", "overlap", ...) or a JSON file. NotFound names the
// bundled members when `name_or_path` is neither.
absl::StatusOr<TruthModel> LoadTruthModel(std::string_view name_or_path);

// The truth as indented JSON in the format ParseTruthModel reads.
std::string TruthModelToJson(const TruthModel& truth);

// The loaded-latency curve of a tier at `read_pct` under `truth`: the tier's own
// (TierSpec::CurveAt), or for a tier without curves its idle latency and peak with the
// latency ratio of truth.queueing_like at that read share.
LoadCurve TruthCurveAt(const TruthModel& truth, const TierSpec& tier, double read_pct);

}  // namespace tiergym::synth

#endif  // TIERGYM_TRACES_SYNTH_TRUTH_MODEL_H_

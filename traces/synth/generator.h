// The synthetic profile generator: sampled runs and measured runs from a model.
//
// GenerateProfile() runs an application model (app_model.h) on a machine model
// (traces/machine.h) through the TimeModel (time_model.h): one PEBS-like sampled run per
// tier of the machine (everything placed on that tier), and, unless disabled, a set of
// "measured" runs under mixed placements whose runtimes are the model's ground truth.
// WriteSynthProfile() writes them in the layout of traces/SYNTH.md ("Output layout"):
//   DIR/<app>/profile/<tier>.csv|.tgt, DIR/<app>/runs/runs.csv,
//   DIR/<app>/runs/placements/<run>.json, DIR/<app>/model.json.
// Output is a pure function of (app, machine, options): the same seed gives byte-
// identical files. Thread-safe: no shared state (the progress callback runs on the
// calling thread).
#ifndef TIERGYM_TRACES_SYNTH_GENERATOR_H_
#define TIERGYM_TRACES_SYNTH_GENERATOR_H_

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "traces/machine.h"
#include "traces/placement.h"
#include "traces/synth/app_model.h"
#include "traces/synth/time_model.h"
#include "traces/synth/truth_model.h"
#include "traces/trace.h"
#include "traces/trace_file.h"

namespace tiergym::synth {

inline constexpr uint64_t kDefaultTargetSamples = 200000;

struct SynthOptions {
  uint64_t seed = 1;
  // Misses per sample. 0 (default): derived from target_samples so that a run on the
  // default tier holds about target_samples samples.
  uint64_t pebs_reset = 0;
  uint64_t target_samples = kDefaultTargetSamples;
  int chunks_per_phase = TimeModel::kDefaultChunksPerPhase;  // >= 1
  bool measured_runs = true;  // also compute the standard measured runs
  // How the machine combines its tiers, limits and compute (truth_model.h; SYNTH.md
  // section 10). Default: the spec model.
  TruthModel truth;
  // Called with one line of progress text per step; may be empty.
  std::function<void(const std::string&)> progress;
};

struct SynthRun {
  std::string name;  // e.g. "hbm30", "range-A_vals"; also the placement file's stem
  Placement placement;
  uint64_t runtime_ns = 0;  // ground truth from the TimeModel, with the run's noise
};

struct SynthProfile {
  AppModel app;
  Machine machine;
  SynthOptions options;
  uint64_t pebs_reset = 0;    // the value used (options.pebs_reset or derived)
  std::vector<Trace> traces;  // one per machine tier, in the machine's tier order
  std::vector<SynthRun> runs;
};

// The pebs_reset that gives about `target_samples` samples on the default tier.
uint64_t DerivePebsReset(const AppModel& app, uint64_t target_samples);

// One sampled run with everything on tier `tier` (index into machine.tiers), under
// `truth` (default: the spec model). Samples come from stream "samples/profile/<tier>",
// time noise from "time/profile/<tier>" (rng.h). REQUIRES: pebs_reset >= 1.
absl::StatusOr<Trace> GenerateTierTrace(const AppModel& app, const Machine& machine, int tier,
                                        uint64_t seed, uint64_t pebs_reset, int chunks_per_phase,
                                        const TruthModel& truth = {});

// Ground-truth runtime of a run named `run_name` under `placement`: the TimeModel's
// runtime under `truth` with the noise of stream "time/run/<run_name>". Fails like
// ResolvePlacement.
absl::StatusOr<uint64_t> GroundTruthRuntimeNs(const AppModel& app, const Machine& machine,
                                              const Placement& placement, uint64_t seed,
                                              std::string_view run_name, int chunks_per_phase,
                                              const TruthModel& truth = {});

// The standard set of measured runs for the app on the machine (SYNTH.md, "Measured
// runs"): fractions 10..90 % on tiers[1], address-range placements of hot arrays and
// parts of arrays, and three-tier mixes when the machine has three tiers or more.
// Placements that exceed a tier's capacity are left out. Empty for one-tier machines.
std::vector<std::pair<std::string, Placement>> StandardRuns(const AppModel& app,
                                                            const Machine& machine);

// Everything at once. InvalidArgument for bad options.
absl::StatusOr<SynthProfile> GenerateProfile(const AppModel& app, const Machine& machine,
                                             const SynthOptions& options);

// Writes the profile under out_dir/<app>/ (directories are created; files of this
// profile written earlier are replaced atomically).
absl::Status WriteSynthProfile(const SynthProfile& profile, const std::string& out_dir,
                               TraceFormat format);

// The content of runs.csv.
std::string FormatRunsCsv(const std::vector<SynthRun>& runs);

}  // namespace tiergym::synth

#endif  // TIERGYM_TRACES_SYNTH_GENERATOR_H_

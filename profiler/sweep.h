// `tiergym-prof sweep`: a target application's family of sensitivity curves (Zacarias
// et al., "Contention-aware Application Performance Prediction for Disaggregated Memory
// Systems", section 3.3), written as curves.csv (estimator/contention/SENSITIVITY_CSV.md).
//
// The target runs solo `solo_repeats` times (its mean runtime is the reference), then
// once per point (or `repeats` times) while the interference generator (interference_generator.h)
// streams at one of `levels` bandwidths from 10 % to 100 % of its maximum and one of the
// read shares. The generator runs for the whole target run (it is started before the
// target and stopped after it ends). The x value written is the bandwidth the generator
// holds when alone: the requested level, which it holds within a few percent (its test
// measures that); its maximum per read share is measured alone first (calibration) unless
// given. normalized_perf = solo mean runtime / runtime under interference.
//
// Resumable: every measurement is appended to curves.csv as soon as it is made, and the
// solo runtimes and calibrated maxima are kept in `<curves.csv>.state.json`; a second
// invocation with the same app and command skips the points that already have their rows.
// Extra columns written: runtime_ns, solo_runtime_ns (readers ignore extra columns).
//
// Not thread-safe: one sweep per process.
#ifndef TIERGYM_PROFILER_SWEEP_H_
#define TIERGYM_PROFILER_SWEEP_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "profiler/interference_generator.h"

namespace tiergym::prof {

struct SweepOptions {
  std::vector<std::string> command;  // the target; required
  std::string app;                   // the curves' app; default: the command's file name
  std::string output;                // curves.csv; required
  int levels = 16;                   // bandwidth levels per read share
  std::vector<int> read_pcts;        // default 50, 55, ..., 100
  int solo_repeats = 3;
  int repeats = 1;      // measurements per point
  double max_gbps = 0;  // 0 (default): calibrate per read share
  double calibrate_seconds = 1.0;
  InterferenceOptions interferer;   // threads, cpus/cpu_node, mem_node, buffer
  int target_mem_node = -1;         // bind the target's memory (-1: no binding)
  int target_cpu_node = -1;         // run the target on this node's CPUs (-1: anywhere)
  std::vector<int> target_cpus;     // or on these CPUs
  bool show_target_output = false;  // default: the target's stdout goes to /dev/null
  bool progress = true;             // progress bar on stderr
};

struct SweepResult {
  double solo_mean_ns = 0;
  uint64_t points_measured = 0;  // rows appended by this invocation
  uint64_t points_skipped = 0;   // rows found from an earlier invocation
};

// The levels of one curve: `levels` values from 10 % to 100 % of `max_gbps`.
std::vector<double> SweepLevels(double max_gbps, int levels);

absl::StatusOr<SweepResult> RunSweep(const SweepOptions& options);

}  // namespace tiergym::prof

#endif  // TIERGYM_PROFILER_SWEEP_H_

// Projection: the per-tier traces of a target machine from one recorded trace.
//
// A recording made on whatever machine (a laptop's DDR, a VM) is one sampled run of the
// program on one memory; the estimator and the environment need one run per tier of the
// machine the agent places data on. ProjectTrace keeps everything the program decided
// (addresses, threads, phases, instructions) and recomputes only the times, window by
// window, with the time model of traces/SYNTH.md section 4 read backwards: each window's
// recorded duration is split into compute and memory time (the memory time of its misses
// on the recorded tier: latency-bound by outstanding misses, or bandwidth-bound), and the
// memory part is replaced by what the same misses cost on the target tier. The model, its
// parameters and its measured error are documented in traces/PROJECTION.md.
//
// Thread-safety: pure functions.
#ifndef TIERGYM_TRACES_PROJECTION_H_
#define TIERGYM_TRACES_PROJECTION_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "traces/machine.h"
#include "traces/trace.h"

namespace tiergym {

struct ProjectionOptions {
  // The tier of the target machine whose memory the recording ran on (its times are kept
  // as recorded for that tier). Default "": the trace's device if the machine has such a
  // tier, else tiers[0].
  std::string recorded_tier;
  // LLC misses one sample stands for. Default 0: the trace's pebs_reset, else 1.
  double misses_per_sample = 0;
  // When > 0, a sample stands for this much wall time spent waiting on memory instead (a
  // timer-backend sample: its CPU-time period over the program's threads): a window's
  // memory time on the recorded tier is its samples times this (at most the window), and
  // its misses follow from the tier's cost per miss. Default 0: for a timer recording
  // (header backend=timer) its sample_period over the threads, else misses_per_sample.
  double memory_ns_per_sample = 0;
  // Outstanding misses per thread (memory-level parallelism). Default 12 (calibrated on
  // three synthetic profiles, traces/PROJECTION.md).
  double mlp = 12;
  // Threads of the program. Default 0: the number of distinct tids in the trace, at most
  // the machine's cores.
  int threads = 0;
  // How much compute and memory time overlap, in [0, 1] (section 4's `overlap`). 0.7.
  double overlap = 0.7;
  // Samples per window; a phase's time is projected window by window. Default 64.
  uint32_t samples_per_window = 64;
};

// One trace per tier of `machine`, in tier order (the recorded tier's times unchanged up
// to rounding). Each keeps the recording's samples, marks and instructions; its header
// says `device=<tier>`, `projected_from=<the recording's device>`,
// `projection_machine=<machine>`, `projection_model=v1`. InvalidArgument when the
// machine has one tier, the recording has no samples, `recorded_tier` is not a tier or an
// option is out of range.
absl::StatusOr<std::vector<Trace>> ProjectTrace(const Trace& recorded, const Machine& machine,
                                                const ProjectionOptions& options = {});

}  // namespace tiergym

#endif  // TIERGYM_TRACES_PROJECTION_H_

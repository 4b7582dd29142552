// Projection: the per-tier traces of a target machine from one recorded trace.
//
// A recording made on whatever machine (a laptop's DDR, a VM) is one sampled run of the
// program on one memory; the estimator and the environment need one run per tier of the
// machine the agent places data on. ProjectTrace keeps everything the program decided
// (addresses, threads, phases, instructions) and recomputes only the times, window by
// window, with the time model of traces/SYNTH.md section 4 read backwards. What one
// recording cannot tell (how many misses a window keeps in flight, how much of its time
// is compute, how much of that hides memory time) is averaged over a prior, weighted by
// how well each candidate reproduces the recorded window (model v3: the posterior mean).
// The model, its prior and its measured error are documented in traces/PROJECTION.md.
//
// Thread-safety: pure functions.
#ifndef TIERGYM_TRACES_PROJECTION_H_
#define TIERGYM_TRACES_PROJECTION_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "traces/machine.h"
#include "traces/trace.h"

namespace tiergym {

// What a window of a program is assumed to look like before its recording is read
// (traces/PROJECTION.md, "The prior"). v2's part set on the bundled synthetic
// applications at seeds 1 to 3, v3's keys at seed 1; the error is reported on seeds 5 to 7
// and on procedural applications.
struct ProjectionPrior {
  // Memory-level parallelism (outstanding misses per thread): log-normal around a centre,
  // with `mlp_spread` the standard deviation of its logarithm, clamped to [mlp_min,
  // mlp_max]. The centre mixes two kinds of misses by the window's streaming share `s`
  // (how much of its sampled data each thread has to itself, read from the addresses:
  // traces/PROJECTION.md): prefetched streams keep `stream_mlp` in flight, other misses
  // (gathers, irregular accesses) `other_mlp`; the centre lies between them on a log
  // scale, log centre = s log stream_mlp + (1 - s) log other_mlp. A window whose share
  // cannot be read (one thread) takes `mlp_unknown`.
  double stream_mlp = 14;
  double other_mlp = 3;
  double mlp_min = 1;
  double mlp_max = 16;
  double mlp_spread = 0.5;
  double mlp_unknown = 8;
  // When > 0 (and the trace counts instructions), a window's misses per kilo-instruction
  // raise its streaming share: to at least ln(4 mpki / stream_mpki) / ln 4 (0 at a quarter
  // of stream_mpki, 1 at stream_mpki and above).
  double stream_mpki = 100;
  // Overlap of compute and memory time (SYNTH.md section 4): candidates evenly spread on
  // [min, max], weighted by overlap_spread below (uniform when it is 0).
  double overlap_min = 0.3;
  double overlap_max = 0.8;
  // When > 0, the overlap is tied to the MLP: normal with this standard deviation around a
  // centre rising with ln MLP from overlap_min (at mlp_min) to overlap_max (at mlp_max).
  double overlap_spread = 0.1;
  // Compute rate (instructions per ns per thread when not stalled): log-uniform on
  // [compute_low, compute_high] times the recording's reference rate (the fastest
  // instruction rate per thread among its windows of at least 8 samples).
  double compute_low = 0.5;
  double compute_high = 2.5;
  // How far (standard deviation of the log ratio) a candidate's time on the recorded tier
  // may miss the recorded window's time.
  double time_tolerance = 0.05;
};

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
  // Outstanding misses per thread. Default 0: the prior's (averaged over); > 0 fixes it.
  double mlp = 0;
  // Overlap of compute and memory time in [0, 1]. Default -1: the prior's; else fixed.
  double overlap = -1;
  // Threads of the program. Default 0: the trace's working threads (its tids holding at
  // least a tenth of an even share of the samples; a real program's helper threads take a
  // handful), at most the machine's cores.
  int threads = 0;
  // Samples per window; a phase's time is projected window by window. Default 64.
  uint32_t samples_per_window = 64;
  // A phase's time after its sampled work (a barrier wait: no samples) is projected with
  // the phase's work instead of counting as its last window's. Default true.
  bool separate_tails = true;
  // A timer recording (header backend=timer, CPU time in the instructions column) is
  // projected from its threads' CPU time: each phase is first shortened to the CPU time its
  // working threads ran in it (the rest is time they waited for a CPU on a busy recording
  // machine), its samples' offsets scaled alike; the header then says
  // `projection_time=cpu (N % of the recording's wall time removed)`. false keeps the
  // recording's wall-clock times.
  bool cpu_time = true;
  ProjectionPrior prior;
};

// Reads "key=value,key=value" into `prior` (keys: the field names above). InvalidArgument
// naming the key for an unknown key or a value that is not a number.
absl::Status ParseProjectionPrior(std::string_view text, ProjectionPrior* prior);

// One trace per tier of `machine`, in tier order (the recorded tier's times unchanged up
// to rounding). Each keeps the recording's samples, marks and instructions; its header
// says `device=<tier>`, `projected_from=<the recording's device>`,
// `projection_machine=<machine>`, `projection_model=v3`. InvalidArgument when the
// machine has one tier, the recording has no samples, `recorded_tier` is not a tier or an
// option is out of range.
absl::StatusOr<std::vector<Trace>> ProjectTrace(const Trace& recorded, const Machine& machine,
                                                const ProjectionOptions& options = {});

}  // namespace tiergym

#endif  // TIERGYM_TRACES_PROJECTION_H_

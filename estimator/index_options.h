// The options of an estimator index (estimator_index.h): the design decisions of the
// estimate, each switchable (estimator/README.md, "Ablation"), with their defaults.
#ifndef TIERGYM_ESTIMATOR_INDEX_OPTIONS_H_
#define TIERGYM_ESTIMATOR_INDEX_OPTIONS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "traces/machine.h"

namespace tiergym {

// Which runs' samples count a window's accesses per page (the shares).
enum class ShareRuns {
  kPooled,  // every run's samples (weighted by PEBS reset); no sample is lost
  kBase,    // the base run's samples only (the algorithm as published)
};
// Which pages the first-touch order of `fractions` placements holds.
enum class FirstTouchFootprint {
  kExtended,  // the base run's pages, then pages seen only in other runs
  kBase,      // the base run's pages only (others stay on the default tier)
  // Address extents: sampled pages (any run) closer than extent_gap_pages merge into one
  // extent that includes the unsampled pages between them; extents are ordered by their
  // first sample (base run first), pages ascending within an extent. Estimates the pages
  // the samples missed and the order in which an initialisation sweep touches arrays.
  kExtents,
};
// What windows without samples cost.
enum class EmptyWindows {
  kSegmentShares,  // each run's time weighted by the segment's shares
  kBaseTime,       // the base run's time, whatever the placement
};

// How the other runs' windows are scaled to the base run's.
enum class WindowAlignment {
  kInstructions,  // by the ratio of the segments' instruction counts (the paper)
  kSamples,       // by the ratio of the sampled work's extents (run_segments.h)
};

// What the roofline model does about the sampling bias of a block's shares
// (estimator/README.md, "Held out on a family of ground truths"): the roofline of a mix is
// convex in the block's shares, so shares drawn from a few hundred samples overestimate it
// on average (Jensen's inequality).
enum class ShareBias {
  kKeep,     // price the mix at the block's sampled shares
  kCorrect,  // subtract the bias the shares' multinomial spread puts on the mix (bootstrap)
};

// The largest IndexOptions::queue_strength: four times a measured curve's latency rise.
inline constexpr double kMaxQueueStrength = 4;
// IndexOptions::fit_tolerance's largest value: a misfit of 10 % (relative root mean
// square) is no longer a fit.
inline constexpr double kMaxFitTolerance = 0.1;

// IndexOptions::queue_from_profile (estimator/README.md, "Queueing read from the profile,
// uncalibrated"): the candidate strengths, k / 2 for k < kQueueCandidates (0, 0.5, .., 2,
// the calibration's grid); the utilisation of a block's busiest run from which it counts
// (below it a measured curve hardly rises); how many such blocks are fitted at most; and
// the median relative misfit of their flat fits from which the profile shows queueing
// (the blocks of the members that do not queue misfit by 0.2-0.7 %: their runs' noise);
// and the share of that misfit a strength must take off to be chosen.
inline constexpr size_t kQueueCandidates = 5;
inline constexpr double QueueCandidate(size_t k) { return 0.5 * static_cast<double>(k); }
inline constexpr double kQueueSignalUtilisation = 0.4;
inline constexpr size_t kQueueSignalBlocks = 128;
inline constexpr double kQueueSignalMisfit = 0.01;
inline constexpr double kQueueSignalShare = 0.75;
// The curve IndexOptions::queue_from_profile scales without a queue_like: the measured
// DDR5 of the bundled machine xeonmax (traces/synth/models/machine_xeonmax.json).
inline constexpr std::string_view kDefaultQueueLike = "xeonmax:ddr";
// The tier "MACHINE:TIER" names (a bundled machine or a file), which must have measured
// curves (the curve IndexOptions::queue_like scales). InvalidArgument otherwise, saying
// which.
absl::StatusOr<TierSpec> LoadQueueShape(std::string_view spec);
// LoadQueueShape(kDefaultQueueLike), loaded once.
absl::StatusOr<TierSpec> DefaultQueueShape();

struct IndexOptions {
  // Window length in base-run instructions (see EstimateOptions). Default 1,000,000.
  uint64_t window_instructions = 1'000'000;
  // Synchronise the runs at phasemarks; false: the whole run is one segment. Default true.
  bool use_phasemarks = true;
  // The base run: the device placements default to. Required.
  std::string base_device;
  // Tier bandwidths and cache-line size for Model::kConcurrent, matched to the profile's
  // devices by tier name. Default none: kConcurrent is refused.
  std::optional<Machine> machine;
  // Minimum number of samples (all runs) per block of the concurrency model. Default 256.
  uint64_t block_samples = 256;
  // Model::kRoofline: samples (all runs) the span a block's roofline is fitted over holds
  // at least: the block and its neighbours of the segment on both sides in turn; the
  // block takes the span's compute per instruction, misses per outstanding miss and
  // compute overlap, its shares stay its own (estimator/README.md, "Fitted over a longer
  // span"). 0: each block's own (the block alone); otherwise at least block_samples.
  // Default 0.
  uint64_t fit_span_samples = 0;
  // Design decisions of the estimate (estimator/README.md, "Ablation").
  ShareRuns share_runs = ShareRuns::kPooled;
  WindowAlignment align = WindowAlignment::kSamples;
  FirstTouchFootprint first_touch = FirstTouchFootprint::kExtents;
  EmptyWindows empty_windows = EmptyWindows::kSegmentShares;
  // FirstTouchFootprint::kExtents: sampled pages at most this many pages apart belong to
  // one extent. Default 64 (256 KiB of 4 KiB pages).
  uint64_t extent_gap_pages = 64;
  // FirstTouchFootprint::kExtents: join address-adjacent extents whose first touches
  // increase with the address. Default true.
  bool join_sweeps = true;
  // Model::kRoofline: the share of the shorter of compute and memory time that hides
  // under the longer (0: none, 1: all). Default 0.5; a calibration fits it.
  double compute_overlap = 0.5;
  // Model::kRoofline: how the tiers' memory times combine (traces/machine.h,
  // MemoryCombination): the share of the shorter tiers' bandwidth-bound time that overlaps
  // the longest (default 1, they transfer concurrently: the family of ground truths'
  // leave-one-out choice, estimator/README.md "The wait after a phase's last sample"; 0.95
  // before it) and the smoothness of the limit between latency- and bandwidth-bound time
  // (default 0: a hard maximum).
  double tier_overlap = 1;
  double limit_smoothness = 0;
  // Model::kRoofline with three or four devices: besides the fit over every device's run,
  // fit each block over every subset of two devices or more, and price a block whose hits
  // lie on a subset by that subset's fit (a run the mix does not use cannot bend it).
  // Default false: not yet scored on the family of ground truths (estimator/README.md,
  // "Options not yet the default").
  bool subset_fits = false;
  // Model::kRoofline with a machine: tiers without measured curves load their latency
  // along this tier's curves (its latency ratio at the read share; TierSpec::CurveAt).
  // Default none: such tiers have a flat latency.
  std::optional<TierSpec> queue_like;
  // With queue_like: how much of that curve's latency rise such tiers have, their latency
  // ratio 1 + queue_strength * (ratio(u) - 1) (0: flat, 1: the curve's own). In [0, 4];
  // default 1. A calibration fits it (estimator/calibration.h).
  double queue_strength = 1;
  // With a machine: read the queue strength from the profile (queue_strength is ignored),
  // along queue_like's curve, or without one along kDefaultQueueLike's (DefaultQueueShape).
  // The blocks whose runs use a tier's bandwidth most are fitted on the single-tier runs
  // under each candidate strength: when their flat fits misfit by kQueueSignalMisfit or
  // more (median), the smallest candidate that takes off kQueueSignalShare of that, else 0
  // (EstimatorIndex::queue_strength). Needs three runs or more (two runs fit any strength
  // exactly). Tiers with measured curves are not moved by it. Default true (estimator/
  // README.md, "Queueing read from the profile, uncalibrated": chosen held out on every
  // member of the family of ground truths); false: queue_strength along queue_like's
  // curve, or flat tiers without one (a calibration that fitted the strength sets it so).
  bool queue_from_profile = true;
  // Model::kRoofline: a segment's last window (which runs to the segment's end and holds
  // its barrier wait) is left out of the last block's fit and counted as the segment's
  // tail. false: the last block spans to the segment's end (the previous rule). Default
  // true.
  bool tail_window_apart = true;
  // Machines with measured curves: the share of reads in the application's traffic, which
  // picks the curves the models load their latencies along (PEBS samples loads and cannot
  // tell). Default 100 (all reads), in [0, 100].
  double read_pct = 100;
  // Model::kRoofline with three runs or more: fit the overlap per block (grid 0, 0.1, ..,
  // 1; compute_overlap stays unless another value halves the residual). Default true.
  bool fit_overlap = true;
  // Model::kRoofline: each block's fit takes the least concurrency (misses per outstanding
  // miss) whose misfit to the runs exceeds the best fit's by at most this relative root
  // mean square (internal::FitRoofline), its compute time refitted; the compute overlap is
  // chosen as before. Where compute hides a tier's latency the runs allow a wide range of
  // concurrencies within their noise (estimator/README.md, "A tolerance on the concurrency
  // fit"). In [0, kMaxFitTolerance]; default 0: the best fit. A calibration fits it.
  double fit_tolerance = 0;
  // Model::kRoofline: the sampling bias of the blocks' shares. Default kKeep.
  ShareBias share_bias = ShareBias::kKeep;
};

}  // namespace tiergym

#endif  // TIERGYM_ESTIMATOR_INDEX_OPTIONS_H_

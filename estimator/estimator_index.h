// The differential-trace estimator, indexed: everything the per-sample replay
// (replay_estimator.h) computes from the samples is computed once, at load time, so that
// estimating a new placement costs microseconds instead of a pass over millions of samples.
//
// What the index holds (built for one base run, the run on the placements' default tier,
// because the base run's instructions cut the windows):
//   - the footprint: the sorted pages seen in any run, with dense ids, and their
//     first-touch order (for `fractions` placements);
//   - per page and device, the time the page accounts for when placed on that device
//     (prefix sums over sorted pages). The paper's estimate is linear in the placement:
//     a window's estimate is sum_d (hits_d / hits) * t_d with hits, the window's sampled
//     accesses, independent of the placement, so it sums to one cost per (page, device).
//     A range placement is then O(ranges * log pages), whatever the number of samples;
//   - per non-empty window, its sparse page counts and per-device times (for estimates of
//     a part of the run); per segment (phase), the time of its windows without samples;
//   - blocks: runs of consecutive non-empty windows of one segment holding at least
//     `block_samples` samples, with sparse page counts and what the runtime models
//     (models/runtime_model.h: paper, concurrent, roofline) read of them (BlockTable).
// Semantics match EstimateByReplay exactly for Model::kPaper (tested): windows without
// samples take their segment's shares, segments without samples run at the base run's time.
// The other models subtract one correction per block from that estimate.
//
// Build() takes its steps in a private Builder (internal/index_builder.h). An
// EstimatorIndex is immutable and thread-safe; share it as shared_ptr<const>.
// PlacementState (placement_state.h) is the environment's mutable view of one placement,
// GroupCostModel (group_cost_model.h) the paper model's interval costs per group of pages,
// SamplingSpread (sampling_spread.h) the interval sampling puts on an estimate.
#ifndef TIERGYM_ESTIMATOR_ESTIMATOR_INDEX_H_
#define TIERGYM_ESTIMATOR_ESTIMATOR_INDEX_H_

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "estimator/index_options.h"
#include "estimator/models/block_table.h"
#include "estimator/models/runtime_model.h"
#include "estimator/replay_estimator.h"
#include "traces/machine.h"
#include "traces/placement.h"
#include "traces/profile.h"

namespace tiergym {

struct SamplingInterval;  // sampling_spread.h

// A placement resolved against an index: sorted, disjoint ranges of page ids (the index's
// dense footprint page numbering) that are not on the default tier. Pages outside the
// footprint have no samples and cost nothing, so they do not appear.
struct ResolvedPlacement {
  struct IdRange {
    uint32_t begin = 0, end = 0;  // page ids [begin, end)
    int tier = 0;                 // device index (profile.runs() order)
  };
  int default_tier = 0;
  std::vector<IdRange> ranges;
};

class EstimatorIndex {
 public:
  // InvalidArgument for an unknown base device, a zero window or block size, a machine
  // that lacks one of the profile's devices, or a footprint beyond 2^32 pages.
  static absl::StatusOr<std::shared_ptr<const EstimatorIndex>> Build(const Profile& profile,
                                                                     const IndexOptions& options);

  // InvalidArgument when the placement names a tier the profile has no run for, or
  // defaults to another tier than this index's base device.
  absl::StatusOr<ResolvedPlacement> Resolve(const Placement& placement) const;

  // The estimated runtime. A linear model (paper): O(ranges); the others: O(block
  // non-zeros + pages). InvalidArgument for a model that needs a machine, without one.
  absl::StatusOr<double> RuntimeNs(const ResolvedPlacement& placement, Model model) const;

  // The estimate with its breakdown per phase and device (O(non-zeros + pages)).
  absl::StatusOr<Estimate> EstimateDetailed(const ResolvedPlacement& placement, Model model) const;

  // RuntimeNs with the roofline's mixes combining the tiers' bandwidth-bound times by
  // `tier_overlap` instead of the index's (IndexOptions::tier_overlap; the blocks' fits do
  // not depend on it; the other models do not read it): what a calibration tries, and an
  // estimate's serialization, on this index, neither rebuilt nor copied. REQUIRES:
  // tier_overlap in [0, 1].
  absl::StatusOr<double> RuntimeNs(const ResolvedPlacement& placement, Model model,
                                   double tier_overlap) const;

  const std::vector<std::string>& devices() const { return devices_; }
  int base() const { return base_; }
  int page_shift() const { return page_shift_; }
  bool has_machine() const { return has_machine_; }
  // The queue strength the roofline's flat tiers load their latency at (IndexOptions::
  // queue_like, queue_strength): 0 without queue_like; with queue_from_profile, the one
  // read from the profile (0 when every tier has measured curves, which it does not move).
  double queue_strength() const { return queue_strength_; }
  // With queue_from_profile: per candidate strength QueueCandidate(c) tried, the median
  // relative misfit of the busy blocks' fits (index_options.h); the candidates are tried
  // in order until one is chosen, and only the flat one (c = 0) when it is below
  // kQueueSignalMisfit. Empty otherwise, and when every tier has measured curves (which
  // the strength does not move).
  const std::vector<double>& queue_misfit() const { return queue_misfit_; }
  // Footprint pages (sorted page numbers); a page id is an index into this vector.
  const std::vector<uint64_t>& pages() const { return pages_; }
  // The ids of the pages [first, last) (page numbers): [begin, end) ids.
  std::pair<uint32_t, uint32_t> IdsOfPages(uint64_t first_page, uint64_t last_page) const;
  // Base-run instructions of the whole run (the position axis of PlacementState).
  uint64_t total_instructions() const { return total_instructions_; }
  size_t num_segments() const { return seg_begin_pos_.size() - 1; }
  // Base-run position of segment s's start; segment_begin(num_segments()) is the total.
  uint64_t segment_begin(size_t s) const { return seg_begin_pos_[s]; }

  // Weighted sampled accesses (all runs) in base-run positions [from, to), summed per
  // group: group_of_page[id] in [0, num_groups) for every page id. Partial windows count
  // pro rata. Independent of any placement. Cost: the interval's windows.
  std::vector<double> AccessesPerGroup(uint64_t from, uint64_t to,
                                       const std::vector<uint32_t>& group_of_page,
                                       size_t num_groups) const;
  // AccessesPerGroup with each window's accesses weighted by its load: its block's
  // weighted sampled accesses (all runs) per ns of the base run's time there, the
  // application's memory traffic while it runs. Over AccessesPerGroup, a group's mean load
  // per access: high where the group is accessed while the application streams memory
  // (bandwidth-bound), low where it is accessed alone (latency-bound). A deployed sampler
  // knows it (its samples' timestamps). Cost: the interval's windows.
  std::vector<double> LoadWeightedAccessesPerGroup(uint64_t from, uint64_t to,
                                                   const std::vector<uint32_t>& group_of_page,
                                                   size_t num_groups) const;
  size_t num_nonempty_windows() const { return win_index_.size(); }
  uint64_t num_windows() const { return num_windows_; }
  size_t num_blocks() const { return blk_first_win_.size() - 1; }
  // What the runtime models read of the blocks (their fits; tests and diagnostics).
  const BlockTable& blocks() const { return blocks_; }
  uint64_t num_samples() const { return num_samples_; }
  // Bytes the index occupies.
  size_t MemoryBytes() const;

 private:
  friend class PlacementState;
  friend class GroupCostModel;
  friend absl::StatusOr<SamplingInterval> SamplingSpread(const EstimatorIndex& index,
                                                         const ResolvedPlacement& placement,
                                                         Model model, int replicates, uint64_t seed,
                                                         double level);
  class Builder;  // Build's steps (internal/index_builder.h)
  EstimatorIndex() = default;

  // Estimated time of segment-local base positions [a, b) of segment s, given the tier of
  // every page (`tier`) and the segment's current hits per device (`seg_hits`, size N),
  // without the concurrency correction.
  // `factor` (size N, or null for all 1) scales each device's time (interference).
  double PaperIntervalNs(size_t s, double a, double b, const uint8_t* tier,
                         const uint64_t* seg_hits, const double* factor = nullptr) const;
  // Time of run d at segment-local base position x of segment s (ns since segment start).
  double RunTimeAt(size_t s, size_t d, double x) const;
  // The correction of block k under `model` given its hits per device (runtime_model.h).
  double Correction(size_t k, const uint64_t* hits, const RuntimeModel& model,
                    const double* factor = nullptr) const {
    return model.Correction(blocks_, k, hits, factor);
  }
  // Where block k's correction belongs in its segment under `model`.
  RuntimeModel::Span CorrectionSpan(size_t k, const RuntimeModel& model) const {
    return model.CorrectionSpan(blocks_, k,
                                {WinLo(blk_first_win_[k]), WinHi(blk_first_win_[k + 1] - 1)});
  }
  // RuntimeNs under the model itself.
  absl::StatusOr<double> RuntimeNsUnder(const ResolvedPlacement& placement,
                                        const RuntimeModel& model) const;
  // InvalidArgument when `model` needs a machine and this index has none.
  absl::Status CheckModel(const RuntimeModel& model) const;
  // Sums f * win_count_ * weight(i) per group over the windows of [from, to) (f: the
  // window's fraction inside): AccessesPerGroup's loop.
  template <typename Weight>
  std::vector<double> PerGroup(uint64_t from, uint64_t to,
                               const std::vector<uint32_t>& group_of_page, size_t num_groups,
                               Weight weight) const;
  // Base position range [lo, hi) (segment-local) of non-empty window i.
  double WinLo(size_t i) const;
  double WinHi(size_t i) const;
  // The first non-empty window of segment s that ends after segment-local position a.
  size_t FirstWindowEndingAfter(size_t s, double a) const;
  // Calls visit(s, a, b) for every segment s that run positions [from, to) touch, with
  // [a, b) the segment-local part (a segment without instructions belongs to the interval
  // holding its position, the one ending the run for one at the run's end; it is passed
  // whole as [0, 1)). Clamps as PlacementState::IntervalNs documents.
  template <typename Visit>
  void ForEachSegment(uint64_t from, uint64_t to, Visit visit) const;
  std::vector<uint8_t> TierArray(const ResolvedPlacement& placement) const;

  size_t n_ = 0;  // devices
  int base_ = 0;
  int page_shift_ = 12;
  bool has_machine_ = false;
  double queue_strength_ = 0;
  std::vector<double> queue_misfit_;
  uint64_t window_instructions_ = 0;
  uint64_t total_instructions_ = 0;
  uint64_t num_windows_ = 0;
  uint64_t num_samples_ = 0;
  std::vector<std::string> devices_;
  std::vector<uint64_t> device_runtime_ns_;

  // Footprint.
  std::vector<uint64_t> pages_;
  std::vector<uint32_t> first_touch_;  // page ids in first-touch order
  std::vector<double> lin_prefix_;     // [d * (P + 1) + i]: sum of cost[d] of ids < i
  double constant_ns_ = 0;             // segments without samples (base run's time)

  // Segments (S + 1 entries for the offsets).
  std::vector<uint64_t> seg_begin_pos_;  // base position of the segment start (run-wide)
  std::vector<uint64_t> seg_instr_;      // base-run instructions
  std::vector<uint64_t> seg_windows_;    // windows of the segment
  std::vector<uint32_t> seg_first_win_;  // first non-empty window; S + 1 entries
  std::vector<uint32_t> seg_first_blk_;  // first block; S + 1 entries
  std::vector<uint64_t> seg_total_;      // weighted hits of all runs
  std::vector<double> seg_duration_;     // [s * N + d]
  std::vector<double> seg_empty_;        // [s * N + d]: time of windows without samples

  // Non-empty windows (W entries; offsets W + 1).
  std::vector<uint32_t> win_index_;  // window number within its segment
  std::vector<uint32_t> win_segment_;
  std::vector<uint32_t> win_total_;  // weighted hits
  std::vector<double> win_time_;     // [i * N + d]
  std::vector<double> win_cum_;      // [i * N + d]: run d's time at the window start
  std::vector<uint64_t> win_offset_;
  std::vector<uint32_t> win_page_;
  std::vector<uint32_t> win_count_;

  // Blocks (B entries; offsets B + 1). What the runtime models read of them is in
  // blocks_: their totals, bandwidth floors and roofline fits.
  std::vector<uint32_t> blk_first_win_;  // first non-empty window; B + 1 entries
  std::vector<uint32_t> blk_segment_;
  BlockTable blocks_;
  bool empty_base_ = false;
  uint32_t num_base_pages_ = 0;  // pages the base run samples (ranks < this)
  FirstTouchFootprint first_touch_mode_ = FirstTouchFootprint::kExtended;
  // kExtents: page-number extents [start, end) in first-touch order, and their total pages.
  std::vector<std::pair<uint64_t, uint64_t>> extents_;
  uint64_t extent_pages_ = 0;
  std::vector<uint64_t> blk_offset_;
  std::vector<uint32_t> blk_page_;
  std::vector<uint32_t> blk_count_;
  // Transposed: per page id, its blocks.
  std::vector<uint64_t> pb_offset_;
  std::vector<uint32_t> pb_block_;
  std::vector<uint32_t> pb_count_;
};

template <typename Visit>
void EstimatorIndex::ForEachSegment(uint64_t from, uint64_t to, Visit visit) const {
  const uint64_t total = total_instructions_;
  from = from < total ? from : total;
  to = to < total ? to : total;
  if (from > to || (from == to && total > 0)) return;
  const size_t segs = seg_total_.size();
  // The first segment that overlaps [from, to) or starts at `from`.
  size_t s = static_cast<size_t>(
      std::lower_bound(seg_begin_pos_.begin(), seg_begin_pos_.begin() + segs, from) -
      seg_begin_pos_.begin());
  if (s > 0 && seg_begin_pos_[s - 1] + seg_instr_[s - 1] > from) --s;
  for (; s < segs; ++s) {
    const uint64_t begin = seg_begin_pos_[s];
    const uint64_t len = seg_instr_[s];
    if (begin > to || (begin == to && !(len == 0 && to == total))) break;
    double a = 0, b = 1;
    if (len > 0) {
      a = static_cast<double>((from > begin ? from : begin) - begin);
      b = static_cast<double>((to < begin + len ? to : begin + len) - begin);
    }
    visit(s, a, b);
  }
}

}  // namespace tiergym

#endif  // TIERGYM_ESTIMATOR_ESTIMATOR_INDEX_H_

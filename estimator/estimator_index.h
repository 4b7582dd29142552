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
//     `block_samples` samples, with sparse page counts and, per device, how much of their
//     time the bandwidth floor of their sampled misses explains (the concurrency model).
// Semantics match EstimateByReplay exactly for Model::kPaper (tested): windows without
// samples take their segment's shares, segments without samples run at the base run's time.
//
// Model::kConcurrent ("beyond the paper") corrects, per block, for tiers serving requests
// concurrently: with s_d the block's access share on device d, t_d its time in run d and
// b_d = min(t_d, misses_d * cache_line_bytes / bandwidth_d) the part of t_d its misses
// need at device d's peak bandwidth, the block takes
//     sum_d s_d (t_d - b_d) + max_d s_d b_d        instead of    sum_d s_d t_d,
// that is, the bandwidth-bound parts overlap instead of adding up. One tier alone gives the
// paper's estimate. It needs the machine's tier bandwidths (IndexOptions::machine).
//
// An EstimatorIndex is immutable and thread-safe; share it as shared_ptr<const>.
// PlacementState (below) is the environment's mutable view: one placement, moved range by
// range, with the estimate kept current at a cost proportional to what the move touches.
#ifndef TIERGYM_ESTIMATOR_ESTIMATOR_INDEX_H_
#define TIERGYM_ESTIMATOR_ESTIMATOR_INDEX_H_

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "estimator/replay_estimator.h"
#include "traces/machine.h"
#include "traces/placement.h"
#include "traces/profile.h"

namespace tiergym {

enum class Model {
  kPaper,       // the weighted mean of Denoyelle et al. (N tiers: the weighted model)
  kConcurrent,  // plus the overlap of bandwidth-bound work on different tiers
  kRoofline,    // per block: latency and bandwidth bounds per tier, compute overlap
};
// "paper" / "concurrent" / "roofline".
std::string_view ModelName(Model model);
absl::StatusOr<Model> ParseModel(std::string_view name);

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
  kSamples,       // by the ratio of the mean sample positions (run_segments.h)
};

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
};

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

  // The estimated runtime. kPaper: O(ranges); kConcurrent: O(block non-zeros + pages).
  // InvalidArgument for kConcurrent without a machine.
  absl::StatusOr<double> RuntimeNs(const ResolvedPlacement& placement, Model model) const;

  // The estimate with its breakdown per phase and device (O(non-zeros + pages)).
  absl::StatusOr<Estimate> EstimateDetailed(const ResolvedPlacement& placement, Model model) const;

  // The uncertainty an estimate owes to sampling: a parametric bootstrap. Each replicate
  // redraws every non-empty window's sampled accesses per device from a multinomial with
  // the window's observed shares under the placement (PEBS samples a window's misses
  // independently), then estimates as usual (the windows' shares, the empty windows'
  // segment shares and, for kConcurrent/kRoofline, the blocks' corrections all follow the
  // redrawn counts). Window times and the roofline fits stay as measured. Seeded: the
  // same arguments give the same interval. Cost: replicates * (non-empty windows *
  // devices + blocks). InvalidArgument for replicates < 2 or a level outside (0, 1).
  struct Spread {
    double lo_ns = 0, hi_ns = 0;  // the central `level` interval of the replicates
    double stddev_ns = 0;
    int replicates = 0;
    double level = 0;
  };
  absl::StatusOr<Spread> SamplingSpread(const ResolvedPlacement& placement, Model model,
                                        int replicates = 200, uint64_t seed = 1,
                                        double level = 0.9) const;

  const std::vector<std::string>& devices() const { return devices_; }
  int base() const { return base_; }
  int page_shift() const { return page_shift_; }
  bool has_machine() const { return has_machine_; }
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
  size_t num_nonempty_windows() const { return win_index_.size(); }
  uint64_t num_windows() const { return num_windows_; }
  size_t num_blocks() const { return blk_first_win_.size() - 1; }
  uint64_t num_samples() const { return num_samples_; }
  // Bytes the index occupies.
  size_t MemoryBytes() const;

 private:
  friend class PlacementState;
  friend class GroupCostModel;
  class Builder;  // Build's steps (estimator_index.cc)
  EstimatorIndex() = default;

  // Estimated time of segment-local base positions [a, b) of segment s, given the tier of
  // every page (`tier`) and the segment's current hits per device (`seg_hits`, size N),
  // without the concurrency correction.
  // `factor` (size N, or null for all 1) scales each device's time (interference).
  double PaperIntervalNs(size_t s, double a, double b, const uint8_t* tier,
                         const uint64_t* seg_hits, const double* factor = nullptr) const;
  // Time of run d at segment-local base position x of segment s (ns since segment start).
  double RunTimeAt(size_t s, size_t d, double x) const;
  // Concurrency correction of block k (>= 0) given its hits per device.
  double Correction(size_t k, const uint64_t* hits, Model model,
                    const double* factor = nullptr) const;
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
  // [d]: device d's loaded-latency curve at all reads (flat for a tier without measured
  // curves); PEBS samples loads, so the estimate reads the tiers' all-reads curves.
  std::vector<LoadCurve> curves_;
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

  // Blocks (B entries; offsets B + 1).
  std::vector<uint32_t> blk_first_win_;  // first non-empty window; B + 1 entries
  std::vector<uint32_t> blk_segment_;
  std::vector<uint64_t> blk_total_;
  std::vector<double> blk_bw_;  // [k * N + d]: b_d
  // Model::kRoofline, per block: the fitted compute time and, per device, the latency-
  // and bandwidth-bound memory times of all the block's misses on that device.
  std::vector<double> blk_compute_;      // [k]
  std::vector<double> blk_overlap_;      // [k]: compute overlap (fitted, or the prior)
  std::vector<double> blk_lo_, blk_hi_;  // [k]: segment-local base positions it spans
  std::vector<double> blk_scale_;        // [k]: 1 + the segment's tail / busy time
  std::vector<double> blk_busy_;         // while building: [k * N + d]
  std::vector<double> blk_lat_;          // [k * N + d]
  std::vector<double> blk_band_;         // [k * N + d]
  double overlap_ = 0.5;
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

// One placement of an index, changed range by range (the environment's state).
// Not thread-safe; the index must outlive it (held by shared_ptr).
class PlacementState {
 public:
  // REQUIRES: `placement` was resolved by `index`.
  PlacementState(std::shared_ptr<const EstimatorIndex> index, const ResolvedPlacement& placement,
                 Model model);

  // Moves the pages whose first byte lies in [start, end) to device `tier`. Cost: the
  // range's footprint pages and their blocks. InvalidArgument for an unknown tier or
  // start > end.
  absl::Status Move(uint64_t start_address, uint64_t end_address, int tier);

  // The estimate of the whole run under the current placement. O(1).
  double runtime_ns() const { return paper_ns_ - correction_ns_; }

  // Estimated time of base-run instruction positions [from, to) (counted from the run
  // start, clamped to [0, total_instructions]); partial windows count pro rata.
  // IntervalNs(0, total_instructions()) == runtime_ns(). Cost: the interval's windows.
  double IntervalNs(uint64_t from, uint64_t to) const { return IntervalNs(from, to, {}); }
  // The same with each device's time multiplied by device_factor[d] (>= 1: the slowdown
  // co-runners cause on that device's memory during the interval; empty: all 1). Under
  // the concurrent model the bandwidth floors scale alike. Cost: the interval's windows
  // and blocks (the cached block corrections are not used when factors are given).
  double IntervalNs(uint64_t from, uint64_t to, const std::vector<double>& device_factor) const;

  // Weighted sampled accesses per device in [from, to) under the current placement.
  std::vector<double> AccessesPerDevice(uint64_t from, uint64_t to) const;

  int TierOfPageId(uint32_t id) const { return tier_[id]; }
  const EstimatorIndex& index() const { return *index_; }
  Model model() const { return model_; }

 private:
  std::shared_ptr<const EstimatorIndex> index_;
  Model model_;
  std::vector<uint8_t> tier_;       // per page id
  std::vector<uint64_t> blk_hits_;  // [k * N + d]
  std::vector<uint64_t> seg_hits_;  // [s * N + d]
  std::vector<double> blk_corr_;    // per block (kConcurrent)
  double paper_ns_ = 0;
  double correction_ns_ = 0;
};

// The paper model's interval estimate as a linear function of the tiers of fixed groups of
// pages (the environment's regions). Under Model::kPaper a window's time is
// sum_d (hits_d / hits) * t_d and the time of its segment's windows without samples is
// shared by the segment's hits per device: both are linear in the page-to-device
// assignment, so for any placement that puts every page of group g on one device d_g,
//     PlacementState::IntervalNs(from, to, factor)
//         == costs.constant_ns + sum_g costs.cost[g * N + d_g]      (to rounding)
// with costs = IntervalCosts(from, to, factor). A caller whose intervals are fixed (an
// environment's decision intervals) computes the costs once and then prices any group
// placement in O(groups), without moving pages. Model::kConcurrent is not linear (the
// overlap is a max per block) and has no such decomposition.
//
// Immutable and thread-safe after construction; holds the index by shared_ptr.
class GroupCostModel {
 public:
  struct Costs {
    double constant_ns = 0;    // time no placement changes (segments without samples)
    std::vector<double> cost;  // [g * N + d]: group g's share of the time if on device d
    // Adds `other` (same groups and devices) to this.
    void Add(const Costs& other);
  };

  // REQUIRES: group_of_page has one entry per page id of `index`, each < num_groups.
  GroupCostModel(std::shared_ptr<const EstimatorIndex> index, std::vector<uint32_t> group_of_page,
                 size_t num_groups);

  // The decomposition of base-run positions [from, to) (clamped as IntervalNs clamps).
  // device_factor: as for PlacementState::IntervalNs (empty: all 1). Cost: the
  // interval's windows' non-zeros, plus groups * devices per segment it touches.
  Costs IntervalCosts(uint64_t from, uint64_t to,
                      const std::vector<double>& device_factor = {}) const;

  size_t num_groups() const { return num_groups_; }
  const EstimatorIndex& index() const { return *index_; }

 private:
  void AddSegment(size_t s, double a, double b, const double* factor, Costs& out) const;

  std::shared_ptr<const EstimatorIndex> index_;
  std::vector<uint32_t> group_of_page_;
  size_t num_groups_ = 0;
  // Per segment, its weighted hits per group, sparse: groups and counts at
  // [seg_offset_[s], seg_offset_[s + 1]).
  std::vector<uint64_t> seg_offset_;
  std::vector<uint32_t> seg_group_;
  std::vector<uint64_t> seg_count_;
};

}  // namespace tiergym

#endif  // TIERGYM_ESTIMATOR_ESTIMATOR_INDEX_H_

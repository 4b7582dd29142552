// Internal to estimator/: EstimatorIndex::Build's steps (estimator/README.md, "The
// index"), in the order Run() takes them; each fills its part of the index. Used once per
// Build, on the building thread.
#ifndef TIERGYM_ESTIMATOR_INTERNAL_INDEX_BUILDER_H_
#define TIERGYM_ESTIMATOR_INTERNAL_INDEX_BUILDER_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "estimator/estimator_index.h"
#include "estimator/internal/run_segments.h"
#include "traces/base/status_macros.h"

namespace tiergym {

class EstimatorIndex::Builder {
 public:
  // Devices up to which the roofline fits every subset of them (2^N - N - 2 extra fits).
  static constexpr size_t kMaxSubsetDevices = 4;

  Builder(const Profile& profile, const IndexOptions& options, EstimatorIndex& x)
      : profile_(profile), runs_(profile.runs()), options_(options), x_(x) {}

  absl::Status Run() {
    TG_RETURN_IF_ERROR(ReadRuns());
    TG_RETURN_IF_ERROR(ReadMachine());
    TG_RETURN_IF_ERROR(NumberPages());
    weight_ = internal::SampleWeights(profile_);
    for (const Trace& t : runs_)
      segments_.push_back(internal::Segments(t, options_.use_phasemarks));
    cost_.assign(n_ * x_.pages_.size(), 0.0);
    for (size_t s = 0; s < segments_[base_].size(); ++s) IndexSegment(s);
    ReadQueueStrength();
    for (const std::vector<FitInput>& inputs : pending_) FitBlocks(inputs);
    std::vector<std::vector<FitInput>>().swap(pending_);
    x_.total_instructions_ = position_;
    ScaleBlocksByTail();
    Finish();
    return absl::OkStatus();
  }

 private:
  // A block under construction: non-empty windows [first_win, end_win) of its segment.
  struct Block {
    size_t first_win = 0, end_win = 0;
    bool last = false;         // the segment's last block
    std::vector<double> time;  // per run: the time of its windows
    double misses = 0;         // reset-weighted sampled misses of the runs counted
    double counted = 0;        // runs counted
  };

  // The devices, the base run, the page size and the runs' totals. InvalidArgument for
  // a zero window or block size or an unknown base device.
  absl::Status ReadRuns();
  // Per device, what the machine says about its tier (the concurrent and roofline
  // models). InvalidArgument for a machine that lacks a device or an overlap outside
  // [0, 1].
  absl::Status ReadMachine();
  // The footprint: page ids in address order, the first-touch order (and its extents),
  // and every sample's page id.
  absl::Status NumberPages();
  // FirstTouchFootprint::kExtents: extents of the sorted pages, joined along sweeps, in
  // first-touch order. sorted_ids[i]: the first-touch rank of page id i.
  void FindExtents(const std::vector<uint32_t>& sorted_ids);
  // Segment s: its windows, their paper costs and its blocks.
  void IndexSegment(size_t s);
  // The non-empty windows of segment s with their sparse page counts and per-run times;
  // returns the segment's weighted hits.
  uint64_t IndexWindows(size_t s, const internal::WindowGrid& grid,
                        const std::vector<internal::TimeAt>& time_at);
  // Adds the non-empty windows' paper costs to cost_.
  void AddWindowCosts(size_t first_win, size_t end_win);
  // The blocks of segment s (non-empty windows [first_win, end_win)).
  void IndexBlocks(size_t s, const internal::WindowGrid& grid,
                   const std::vector<internal::TimeAt>& time_at, size_t first_win, size_t end_win,
                   uint64_t seg_total);
  // A block's merged page counts; charges its share of the segment's empty windows.
  void AddBlockPages(size_t s, const Block& block, uint64_t seg_total);
  // Per run, the block's time and the part of it its misses need at peak bandwidth
  // (blk_bw_, the concurrent model); counts the block's misses.
  void AddBandwidthFloors(size_t first_win, Block& block);
  // Model::kRoofline: what the fit reads of a block (its runs' times over the positions
  // it spans, its misses) and its span [lo, hi) in blocks_. busy: per run, the time until
  // the end of the segment's last block.
  struct FitInput {
    std::vector<double> time;  // per run
    double misses = 0;         // the runs' mean
    double length = 0;         // base-run instructions spanned
    uint64_t samples = 0;      // samples of all runs
  };
  FitInput BlockFitInput(size_t s, const internal::WindowGrid& grid,
                         const std::vector<internal::TimeAt>& time_at, size_t b, size_t first_win,
                         const Block& block, std::vector<double>& busy);
  // The blocks [a, b) of a segment whose fit block k takes (IndexOptions::fit_span_samples).
  std::pair<size_t, size_t> FitSpan(const std::vector<FitInput>& inputs, size_t k) const;
  // What the fit of block k reads: its span's times per run and bandwidth-bound times
  // (all the span's misses at each device's peak), and the block's shares of the span's
  // instructions and misses (1 when the block is its span).
  struct SpanInput {
    std::vector<double> time, band;
    double compute_share = 1, miss_share = 1;
    bool alone = true;
  };
  SpanInput SpanOf(const std::vector<FitInput>& inputs, size_t k) const;
  // A span's roofline fit under `curves`: the concurrency x and compute time of
  // internal::FitRoofline, the compute overlap (the prior, or with fit_overlap_ the best of
  // a grid that halves the residual) and the squared residual.
  struct SpanFit {
    double concurrency = 0, compute = 0, overlap = 0, residual = 0;
  };
  SpanFit FitSpanRoofline(const std::vector<double>& time, const std::vector<double>& span_band,
                          const std::vector<LoadCurve>& curves) const;
  // Model::kRoofline: fits the roofline of each of a segment's blocks over its span.
  void FitBlocks(const std::vector<FitInput>& inputs);
  // IndexOptions::queue_from_profile: the blocks (segment, block of pending_) whose
  // busiest run uses its tier's bandwidth beyond kQueueSignalUtilisation, at most
  // kQueueSignalBlocks of them spread evenly.
  std::vector<std::pair<size_t, size_t>> BusyBlocks() const;
  // The queue strength the blocks are fitted and priced at (EstimatorIndex::
  // queue_strength): the options', or with IndexOptions::queue_from_profile the one read
  // from the busy blocks' fits (EstimatorIndex::queue_misfit); sets the blocks' curves.
  void ReadQueueStrength();
  // Model::kRoofline with subset fits: the fits over each subset of the devices of a span,
  // scaled to its block (its shares of the span's instructions and misses).
  void FitSubsets(const std::vector<double>& block_time, const std::vector<double>& band,
                  double compute_share, double miss_share);
  // Model::kRoofline: each block's corrections scale with its segment's tail.
  void ScaleBlocksByTail();
  // Sentinel offsets, the linear costs' prefix sums, the pages' blocks, and no slack.
  void Finish();

  // One past the last page entry of non-empty window i.
  [[nodiscard]] size_t WinEntriesEnd(size_t i) const {
    return i + 1 < x_.win_offset_.size() ? x_.win_offset_[i + 1] : x_.win_page_.size();
  }

  const Profile& profile_;
  const std::vector<Trace>& runs_;
  const IndexOptions& options_;
  EstimatorIndex& x_;
  size_t n_ = 0;
  int base_ = 0;
  bool base_shares_ = false;
  bool fit_overlap_ = false;
  double overlap_ = 0.5;                        // the roofline's compute overlap prior
  std::vector<std::vector<FitInput>> pending_;  // per segment: its blocks, fitted last
  std::vector<double> busy_;  // [k * N + d]: per run, the time until the block's end
  // Per device: ns per sample of the bandwidth floor (reset * line / bandwidth), the
  // tier's latency and bandwidth (bytes per ns), and its PEBS reset.
  std::vector<double> ns_per_sample_, latency_ns_, bytes_per_ns_, reset_of_;
  double line_bytes_ = 64;
  std::vector<std::vector<uint32_t>> sample_page_;        // [d][i]: page id of run d's sample i
  std::vector<uint32_t> weight_;                          // per run: what a sample counts for
  std::vector<std::vector<internal::Segment>> segments_;  // [d][s]
  // Linear costs accumulate per (device, page id).
  std::vector<double> cost_;
  uint64_t position_ = 0;  // base position of the current segment's start
  struct Entry {
    uint64_t key;  // window << 32 | page id
    uint32_t run;
  };
  std::vector<Entry> entries_;
  std::vector<uint64_t> win_samples_;  // [i * N + d]: unweighted samples, this segment
  std::vector<std::pair<uint32_t, uint32_t>> merged_;
};

}  // namespace tiergym

#endif  // TIERGYM_ESTIMATOR_INTERNAL_INDEX_BUILDER_H_

#include "estimator/estimator_index.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <limits>
#include <random>
#include <span>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_join.h"
#include "estimator/internal/run_segments.h"
#include "estimator/page_placement.h"
#include "traces/base/status_macros.h"
#include "traces/base/strings.h"

namespace tiergym {
namespace {

using internal::Segment;
using internal::TimeAt;
using internal::WindowGrid;

// Devices whose loaded curves a block's correction combines without allocating (a
// machine has a handful of tiers; beyond this the flat rule applies).
constexpr size_t kMaxCurveDevices = 16;

template <typename T>
size_t Bytes(const std::vector<T>& v) {
  return v.capacity() * sizeof(T);
}

// Fraction of [lo, hi) inside [a, b); a zero-length span counts when it lies in [a, b).
double Overlap(double lo, double hi, double a, double b) {
  if (hi <= lo) return (lo >= a && lo < b) ? 1.0 : 0.0;
  const double x = std::max(lo, a), y = std::min(hi, b);
  return y > x ? (y - x) / (hi - lo) : 0.0;
}

// The roofline time of work with compute time `compute_ns` and memory time `memory_ns`:
// the longer, plus the part of the shorter that does not overlap it.
double RoofTime(double compute_ns, double memory_ns, double overlap) {
  return compute_ns + memory_ns - overlap * std::min(compute_ns, memory_ns);
}

// The memory time of a block's misses on one device: max(latency time, band time) with a
// flat curve, the loaded-latency fixed point of LoadedMemoryTimeNs with a measured one.
double DeviceMemoryNs(double latency_time, double band_time, const LoadCurve* curve) {
  if (curve == nullptr || curve->flat()) return std::max(latency_time, band_time);
  return LoadedMemoryTimeNs(std::span<const double>(&latency_time, 1),
                            std::span<const double>(&band_time, 1),
                            std::span<const LoadCurve* const>(&curve, 1));
}

// Fits a block's roofline to its measured time on every device: the memory time of its
// misses on device d is max(latency_d * x, band[d]) (x = misses / outstanding misses,
// Little's law; band[d] = bytes / bandwidth_d), with the latency loaded along the device's
// measured curve when it has one (DeviceMemoryNs), and t[d] = RoofTime(compute, memory_d).
// Returns {x, compute} minimising the squared residuals: a log grid over x, refined, with
// the compute time by golden section for each x (the residual is unimodal in it).
std::pair<double, double> FitRoofline(const std::vector<double>& t, const std::vector<double>& band,
                                      const std::vector<double>& latency, double overlap,
                                      const std::vector<LoadCurve>& curves, double* residual_out) {
  *residual_out = 0;
  const size_t n = t.size();
  double lo = std::numeric_limits<double>::infinity(), hi = 0, t_max = 0;
  for (size_t d = 0; d < n; ++d) {
    lo = std::min(lo, band[d] / latency[d]);
    hi = std::max(hi, band[d] / latency[d]);
    t_max = std::max(t_max, t[d]);
  }
  if (!(hi > 0) || t_max <= 0) return {0.0, t_max};
  // The largest x that could explain the slowest run: latency alone.
  double x_max = 0;
  for (size_t d = 0; d < n; ++d) x_max = std::max(x_max, t[d] / latency[d]);
  lo *= 1e-2;
  x_max = std::max(x_max, lo * 2);
  // For a given x the residual is piecewise quadratic in the compute time c (each
  // RoofTime is linear in c below and above its memory time): minimise it exactly on
  // every piece.
  std::vector<double> memory(n), knots;
  auto best_compute = [&](double x, double* cost) {
    knots.assign(1, 0.0);
    for (size_t d = 0; d < n; ++d) {
      memory[d] = DeviceMemoryNs(latency[d] * x, band[d], curves.empty() ? nullptr : &curves[d]);
      if (memory[d] < t_max) knots.push_back(memory[d]);
    }
    knots.push_back(t_max);
    std::sort(knots.begin(), knots.end());
    auto residual = [&](double c) {
      double r = 0;
      for (size_t d = 0; d < n; ++d) {
        const double e = t[d] - RoofTime(c, memory[d], overlap);
        r += e * e;
      }
      return r;
    };
    double best_c = 0, best_r = residual(0);
    for (size_t j = 0; j + 1 < knots.size(); ++j) {
      const double lo_c = knots[j], hi_c = knots[j + 1];
      if (hi_c <= lo_c) continue;
      const double mid = 0.5 * (lo_c + hi_c);
      // RoofTime(c, m) = slope * c + offset on this piece.
      double saa = 0, sab = 0;
      for (size_t d = 0; d < n; ++d) {
        const bool below = mid < memory[d];
        const double slope = below ? 1.0 - overlap : 1.0;
        const double offset = below ? memory[d] : (1.0 - overlap) * memory[d];
        saa += slope * slope;
        sab += slope * (t[d] - offset);
      }
      const double c = saa > 0 ? std::clamp(sab / saa, lo_c, hi_c) : lo_c;
      const double r = residual(c);
      if (r < best_r) {
        best_r = r;
        best_c = c;
      }
    }
    *cost = best_r;
    return best_c;
  };
  constexpr int kGrid = 48;
  const double ratio = std::log(x_max / lo);
  double best_x = lo, best_c = 0, best = std::numeric_limits<double>::infinity();
  int best_i = 0;
  const double tol = 1e-10 * t_max * t_max;
  for (int i = 0; i <= kGrid; ++i) {
    const double x = lo * std::exp(ratio * i / kGrid);
    double cost;
    const double c = best_compute(x, &cost);
    if (cost < best - tol) {  // ties keep the smallest x
      best = cost;
      best_x = x;
      best_c = c;
      best_i = i;
    }
  }
  // Golden refinement between the grid neighbours of the best point (log x).
  double a = ratio * std::max(0, best_i - 1) / kGrid,
         b = ratio * std::min(kGrid, best_i + 1) / kGrid;
  for (int it = 0; it < 24; ++it) {
    const double u1 = a + (b - a) * 0.381966, u2 = a + (b - a) * 0.618034;
    double c1, c2;
    best_compute(lo * std::exp(u1), &c1);
    best_compute(lo * std::exp(u2), &c2);
    if (c1 <= c2) {
      b = u2;
    } else {
      a = u1;
    }
  }
  double cost;
  const double x = lo * std::exp(0.5 * (a + b));
  const double c = best_compute(x, &cost);
  if (cost < best - tol) {
    *residual_out = cost;
    return {x, c};
  }
  *residual_out = best;
  return {best_x, best_c};
}

}  // namespace

std::string_view ModelName(Model model) {
  switch (model) {
    case Model::kPaper:
      return "paper";
    case Model::kConcurrent:
      return "concurrent";
    case Model::kRoofline:
      return "roofline";
  }
  return "paper";
}

absl::StatusOr<Model> ParseModel(std::string_view name) {
  if (name == "paper") return Model::kPaper;
  if (name == "concurrent") return Model::kConcurrent;
  if (name == "roofline") return Model::kRoofline;
  return absl::InvalidArgumentError(
      StrCat("unknown estimator model '", name, "' (known: paper, concurrent, roofline)"));
}

// Build's steps, in the order Run() takes them; each fills its part of the index.
class EstimatorIndex::Builder {
 public:
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
  uint64_t IndexWindows(size_t s, const WindowGrid& grid, const std::vector<TimeAt>& time_at);
  // Adds the non-empty windows' paper costs to cost_.
  void AddWindowCosts(size_t first_win, size_t end_win);
  // The blocks of segment s (non-empty windows [first_win, end_win)).
  void IndexBlocks(size_t s, const WindowGrid& grid, const std::vector<TimeAt>& time_at,
                   size_t first_win, size_t end_win, uint64_t seg_total);
  // A block's merged page counts; charges its share of the segment's empty windows.
  void AddBlockPages(size_t s, const Block& block, uint64_t seg_total);
  // Per run, the block's time and the part of it its misses need at peak bandwidth
  // (blk_bw_, the concurrent model); counts the block's misses.
  void AddBandwidthFloors(size_t first_win, Block& block);
  // Model::kRoofline: fits the block's roofline. busy: per run, the time until the end
  // of the segment's last block.
  void FitBlock(size_t s, const WindowGrid& grid, const std::vector<TimeAt>& time_at, size_t b,
                size_t first_win, Block& block, std::vector<double>& busy);
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
  // Per device: ns per sample of the bandwidth floor (reset * line / bandwidth), the
  // tier's latency and bandwidth (bytes per ns), and its PEBS reset.
  std::vector<double> ns_per_sample_, latency_ns_, bytes_per_ns_, reset_of_;
  double line_bytes_ = 64;
  std::vector<std::vector<uint32_t>> sample_page_;  // [d][i]: page id of run d's sample i
  std::vector<uint32_t> weight_;                    // per run: what a sample counts for
  std::vector<std::vector<Segment>> segments_;      // [d][s]
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

absl::Status EstimatorIndex::Builder::ReadRuns() {
  if (options_.window_instructions == 0) {
    return absl::InvalidArgumentError("window_instructions must be positive");
  }
  if (options_.block_samples == 0) {
    return absl::InvalidArgumentError("block_samples must be positive");
  }
  x_.n_ = runs_.size();
  x_.devices_ = profile_.devices();
  x_.base_ = DeviceIndex(profile_, options_.base_device);
  if (x_.base_ < 0) {
    return absl::InvalidArgumentError(StrCat("base device '", options_.base_device,
                                             "' has no run in profile ", profile_.name(),
                                             " (devices: ", absl::StrJoin(x_.devices_, ", "), ")"));
  }
  x_.page_shift_ = std::countr_zero(runs_.front().metadata().page_size);
  x_.window_instructions_ = options_.window_instructions;
  for (const Trace& t : runs_) {
    x_.device_runtime_ns_.push_back(t.runtime_ns());
    x_.num_samples_ += t.num_samples();
  }
  n_ = x_.n_;
  base_ = x_.base_;
  return absl::OkStatus();
}

absl::Status EstimatorIndex::Builder::ReadMachine() {
  const size_t n = n_;
  ns_per_sample_.assign(n, 0.0);
  latency_ns_.assign(n, 0.0);
  bytes_per_ns_.assign(n, 0.0);
  reset_of_.assign(n, 0.0);
  if (options_.machine) {
    const Machine& m = *options_.machine;
    for (size_t d = 0; d < n; ++d) {
      const TierSpec* spec = m.Find(x_.devices_[d]);
      if (spec == nullptr) {
        return absl::InvalidArgumentError(StrCat("machine ", m.name, " has no tier '",
                                                 x_.devices_[d], "' (profile ", profile_.name(),
                                                 " has a run for it)"));
      }
      const std::optional<uint64_t> reset = runs_[d].metadata().pebs_reset;
      ns_per_sample_[d] = static_cast<double>(reset.value_or(0)) *
                          static_cast<double>(m.cache_line_bytes) / spec->bandwidth_gbps;
      latency_ns_[d] = spec->latency_ns;
      bytes_per_ns_[d] = spec->bandwidth_gbps;
      x_.curves_.push_back(spec->CurveAt(options_.read_pct));
      reset_of_[d] = static_cast<double>(reset.value_or(1));
    }
    line_bytes_ = m.cache_line_bytes;
    x_.has_machine_ = true;
  }
  if (!(options_.read_pct >= 0 && options_.read_pct <= 100)) {
    return absl::InvalidArgumentError("read_pct must be in [0, 100]");
  }
  if (!(options_.compute_overlap >= 0 && options_.compute_overlap <= 1)) {
    return absl::InvalidArgumentError("compute_overlap must be in [0, 1]");
  }
  x_.overlap_ = options_.compute_overlap;
  x_.empty_base_ = options_.empty_windows == EmptyWindows::kBaseTime;
  x_.first_touch_mode_ = options_.first_touch;
  base_shares_ = options_.share_runs == ShareRuns::kBase;
  fit_overlap_ = options_.fit_overlap && n >= 3;
  return absl::OkStatus();
}

absl::Status EstimatorIndex::Builder::NumberPages() {
  const size_t n = n_;
  const int base = base_;
  EstimatorIndex& x = x_;
  // Provisional ids in first-touch order (base run first), then sorted.
  sample_page_.assign(n, {});
  std::vector<uint64_t> by_touch;
  {
    absl::flat_hash_map<uint64_t, uint32_t> rank;
    std::vector<size_t> order = {static_cast<size_t>(base)};
    for (size_t d = 0; d < n; ++d) {
      if (static_cast<int>(d) != base) order.push_back(d);
    }
    for (size_t d : order) {
      if (static_cast<int>(d) != base && x.num_base_pages_ == 0) {
        x.num_base_pages_ = static_cast<uint32_t>(by_touch.size());
      }
      sample_page_[d].reserve(runs_[d].num_samples());
      for (uint64_t a : runs_[d].address()) {
        auto [it, inserted] = rank.try_emplace(a >> x.page_shift_, by_touch.size());
        if (inserted) {
          if (by_touch.size() == std::numeric_limits<uint32_t>::max()) {
            return absl::InvalidArgumentError(
                StrCat("profile ", profile_.name(), " touches more than 2^32 pages"));
          }
          by_touch.push_back(a >> x.page_shift_);
        }
        sample_page_[d].push_back(it->second);
      }
    }
  }
  if (n == 1) x.num_base_pages_ = static_cast<uint32_t>(by_touch.size());
  const size_t num_pages = by_touch.size();
  std::vector<uint32_t> sorted_ids(num_pages);
  for (uint32_t i = 0; i < num_pages; ++i) sorted_ids[i] = i;
  std::sort(sorted_ids.begin(), sorted_ids.end(),
            [&](uint32_t a, uint32_t b) { return by_touch[a] < by_touch[b]; });
  std::vector<uint32_t> final_id(num_pages);
  x.pages_.resize(num_pages);
  for (uint32_t i = 0; i < num_pages; ++i) {
    final_id[sorted_ids[i]] = i;
    x.pages_[i] = by_touch[sorted_ids[i]];
  }
  if (options_.first_touch == FirstTouchFootprint::kExtents && num_pages > 0) {
    FindExtents(sorted_ids);
  }
  x.first_touch_ = std::move(final_id);  // rank -> id
  for (auto& ids : sample_page_) {
    for (uint32_t& id : ids) id = x.first_touch_[id];
  }
  return absl::OkStatus();
}

void EstimatorIndex::Builder::FindExtents(const std::vector<uint32_t>& sorted_ids) {
  EstimatorIndex& x = x_;
  const size_t num_pages = sorted_ids.size();
  // Extents: sorted pages closer than the gap, each with its earliest first-touch rank.
  struct Extent {
    uint32_t rank;
    uint64_t start, end;
  };
  std::vector<Extent> extents;  // address order
  for (uint32_t i = 0; i < num_pages;) {
    uint32_t j = i, rank = sorted_ids[i];
    while (j + 1 < num_pages && x.pages_[j + 1] - x.pages_[j] <= options_.extent_gap_pages) {
      ++j;
      rank = std::min(rank, sorted_ids[j]);
    }
    extents.push_back({rank, x.pages_[i], x.pages_[j] + 1});
    i = j + 1;
  }
  // Sweeps: when the next first touch (in rank order) lies above the previous one in
  // the address space and every extent between them was touched later still, a sweep
  // went from one to the other: join them with everything between (the sweep touched
  // the unsampled pages between in address order too). Never across more than
  // kMaxSweepHolePages (a sweep does not jump from the heap to the mmap area).
  constexpr uint64_t kMaxSweepHolePages = uint64_t{1} << 20;
  constexpr size_t kMaxSweepSpan = 256;            // extents between two consecutive touches
  std::vector<uint8_t> joined(extents.size(), 0);  // joined[i]: i and i + 1 are one
  if (options_.join_sweeps) {
    std::vector<uint32_t> by_rank(extents.size());
    for (uint32_t i = 0; i < by_rank.size(); ++i) by_rank[i] = i;
    std::sort(by_rank.begin(), by_rank.end(),
              [&](uint32_t a, uint32_t b) { return extents[a].rank < extents[b].rank; });
    for (size_t k = 0; k + 1 < by_rank.size(); ++k) {
      const uint32_t from = by_rank[k], to = by_rank[k + 1];
      if (to <= from || to - from > kMaxSweepSpan ||
          extents[to].start - extents[from].end > kMaxSweepHolePages) {
        continue;
      }
      bool later = true;
      for (uint32_t i = from + 1; i < to && later; ++i) later = extents[i].rank > extents[to].rank;
      if (!later) continue;
      for (uint32_t i = from; i < to; ++i) joined[i] = 1;
    }
  }
  std::vector<Extent> chains;
  for (size_t i = 0; i < extents.size(); ++i) {
    if (i > 0 && joined[i - 1]) {
      chains.back().end = extents[i].end;
      chains.back().rank = std::min(chains.back().rank, extents[i].rank);
    } else {
      chains.push_back(extents[i]);
    }
  }
  std::sort(chains.begin(), chains.end(),
            [](const Extent& a, const Extent& b) { return a.rank < b.rank; });
  for (const Extent& e : chains) {
    x.extents_.emplace_back(e.start, e.end);
    x.extent_pages_ += e.end - e.start;
  }
}

void EstimatorIndex::Builder::IndexSegment(size_t s) {
  const size_t n = n_;
  const int base = base_;
  EstimatorIndex& x = x_;
  std::vector<const Segment*> of_run;
  for (size_t d = 0; d < n; ++d) of_run.push_back(&segments_[d][s]);
  const WindowGrid grid(of_run, base, options_.window_instructions,
                        options_.align == WindowAlignment::kSamples);
  std::vector<TimeAt> time_at;
  for (size_t d = 0; d < n; ++d) time_at.emplace_back(runs_[d], segments_[d][s]);

  x.seg_begin_pos_.push_back(position_);
  x.seg_instr_.push_back(segments_[base][s].instructions);
  x.seg_windows_.push_back(grid.windows);
  x.seg_first_win_.push_back(static_cast<uint32_t>(x.win_index_.size()));
  x.seg_first_blk_.push_back(static_cast<uint32_t>(x.blk_segment_.size()));
  position_ += segments_[base][s].instructions;
  x.num_windows_ += grid.windows;
  for (size_t d = 0; d < n; ++d) {
    x.seg_duration_.push_back(
        static_cast<double>(segments_[d][s].end_ns - segments_[d][s].start_ns));
  }

  const size_t first_win = x.win_index_.size();
  const uint64_t seg_total = IndexWindows(s, grid, time_at);
  const size_t end_win = x.win_index_.size();
  AddWindowCosts(first_win, end_win);
  IndexBlocks(s, grid, time_at, first_win, end_win, seg_total);
}

uint64_t EstimatorIndex::Builder::IndexWindows(size_t s, const WindowGrid& grid,
                                               const std::vector<TimeAt>& time_at) {
  const size_t n = n_;
  const int base = base_;
  EstimatorIndex& x = x_;
  const std::vector<uint32_t>& weight = weight_;
  entries_.clear();
  for (size_t d = 0; d < n; ++d) {
    if (base_shares_ && static_cast<int>(d) != base) continue;
    const Segment& seg = segments_[d][s];
    for (size_t i = seg.begin; i < seg.end; ++i) {
      const uint64_t w = grid.WindowOf(d, seg.position[i - seg.begin]);
      entries_.push_back({w << 32 | sample_page_[d][i], static_cast<uint32_t>(d)});
    }
  }
  std::sort(entries_.begin(), entries_.end(),
            [](const Entry& a, const Entry& b) { return a.key < b.key; });

  // Non-empty windows with their sparse page counts.
  win_samples_.clear();
  uint64_t seg_total = 0;
  std::vector<double> nonempty_time(n, 0.0);
  for (size_t i = 0; i < entries_.size();) {
    const uint64_t w = entries_[i].key >> 32;
    x.win_index_.push_back(static_cast<uint32_t>(w));
    x.win_segment_.push_back(static_cast<uint32_t>(s));
    x.win_offset_.push_back(x.win_page_.size());
    win_samples_.resize(win_samples_.size() + n, 0);
    uint64_t total = 0;
    while (i < entries_.size() && (entries_[i].key >> 32) == w) {
      const auto id = static_cast<uint32_t>(entries_[i].key);
      uint32_t count = 0;
      while (i < entries_.size() && entries_[i].key == (w << 32 | id)) {
        count += weight[entries_[i].run];
        ++win_samples_[win_samples_.size() - n + entries_[i].run];
        ++i;
      }
      x.win_page_.push_back(id);
      x.win_count_.push_back(count);
      total += count;
    }
    x.win_total_.push_back(static_cast<uint32_t>(total));
    seg_total += total;
    for (size_t d = 0; d < n; ++d) {
      const double lo = time_at[d](grid.Boundary(d, w));
      const double hi = time_at[d](grid.Boundary(d, w + 1));
      x.win_cum_.push_back(lo);
      x.win_time_.push_back(hi - lo);
      nonempty_time[d] += hi - lo;
    }
  }
  x.seg_total_.push_back(seg_total);
  for (size_t d = 0; d < n; ++d) {
    x.seg_empty_.push_back(std::max(0.0, x.seg_duration_[s * n + d] - nonempty_time[d]));
  }
  if (seg_total == 0) {
    x.constant_ns_ += x.seg_duration_[s * n + base];
  } else if (x.empty_base_) {
    x.constant_ns_ += x.seg_empty_[s * n + base];
  }
  return seg_total;
}

void EstimatorIndex::Builder::AddWindowCosts(size_t first_win, size_t end_win) {
  const size_t n = n_;
  const size_t num_pages = x_.pages_.size();
  EstimatorIndex& x = x_;
  for (size_t i = first_win; i < end_win; ++i) {
    const auto h = static_cast<double>(x.win_total_[i]);
    for (size_t e = x.win_offset_[i]; e < WinEntriesEnd(i); ++e) {
      const double c = x.win_count_[e] / h;
      for (size_t d = 0; d < n; ++d) {
        cost_[d * num_pages + x.win_page_[e]] += c * x.win_time_[i * n + d];
      }
    }
  }
}

void EstimatorIndex::Builder::IndexBlocks(size_t s, const WindowGrid& grid,
                                          const std::vector<TimeAt>& time_at, size_t first_win,
                                          size_t end_win, uint64_t seg_total) {
  const size_t n = n_;
  // Blocks: consecutive non-empty windows with at least block_samples samples; a short
  // remainder at the segment end joins the block before it.
  std::vector<size_t> starts;
  std::vector<double> busy(n, 0.0);  // per run: time until the end of the last block
  uint64_t acc = 0;
  for (size_t i = first_win; i < end_win; ++i) {
    if (acc == 0) starts.push_back(i);
    for (size_t d = 0; d < n; ++d) acc += win_samples_[(i - first_win) * n + d];
    if (acc >= options_.block_samples) acc = 0;
  }
  if (acc != 0 && starts.size() > 1) starts.pop_back();
  for (size_t b = 0; b < starts.size(); ++b) {
    Block block;
    block.first_win = starts[b];
    block.end_win = b + 1 < starts.size() ? starts[b + 1] : end_win;
    block.last = b + 1 == starts.size();
    AddBlockPages(s, block, seg_total);
    AddBandwidthFloors(first_win, block);
    if (x_.has_machine_) FitBlock(s, grid, time_at, b, first_win, block, busy);
  }
}

void EstimatorIndex::Builder::AddBlockPages(size_t s, const Block& block, uint64_t seg_total) {
  const size_t n = n_;
  const size_t num_pages = x_.pages_.size();
  EstimatorIndex& x = x_;
  const size_t w0 = block.first_win, w1 = block.end_win;
  x.blk_first_win_.push_back(static_cast<uint32_t>(w0));
  x.blk_segment_.push_back(static_cast<uint32_t>(s));
  x.blk_offset_.push_back(x.blk_page_.size());
  merged_.clear();
  uint64_t total = 0;
  for (size_t i = w0; i < w1; ++i) {
    for (size_t e = x.win_offset_[i]; e < WinEntriesEnd(i); ++e) {
      merged_.emplace_back(x.win_page_[e], x.win_count_[e]);
    }
    total += x.win_total_[i];
  }
  std::sort(merged_.begin(), merged_.end());
  for (size_t e = 0; e < merged_.size();) {
    uint64_t c = 0;
    const uint32_t id = merged_[e].first;
    while (e < merged_.size() && merged_[e].first == id) c += merged_[e++].second;
    x.blk_page_.push_back(id);
    x.blk_count_.push_back(static_cast<uint32_t>(c));
    // Windows without samples take the segment's shares: charge them per page.
    const double share = static_cast<double>(c) / static_cast<double>(seg_total);
    for (size_t d = 0; d < n && !x.empty_base_; ++d) {
      cost_[d * num_pages + id] += share * x.seg_empty_[s * n + d];
    }
  }
  x.blk_total_.push_back(total);
}

void EstimatorIndex::Builder::AddBandwidthFloors(size_t first_win, Block& block) {
  const size_t n = n_;
  EstimatorIndex& x = x_;
  block.time.assign(n, 0.0);
  for (size_t d = 0; d < n; ++d) {
    double t = 0, samples = 0;
    for (size_t i = block.first_win; i < block.end_win; ++i) {
      t += x.win_time_[i * n + d];
      samples += static_cast<double>(win_samples_[(i - first_win) * n + d]);
    }
    x.blk_bw_.push_back(std::min(t, samples * ns_per_sample_[d]));
    block.time[d] = t;
    if (!base_shares_ || static_cast<int>(d) == base_) {
      block.misses += samples * reset_of_[d];
      block.counted += 1;
    }
  }
}

void EstimatorIndex::Builder::FitBlock(size_t s, const WindowGrid& grid,
                                       const std::vector<TimeAt>& time_at, size_t b,
                                       size_t first_win, Block& block, std::vector<double>& busy) {
  const size_t n = n_;
  const int base = base_;
  EstimatorIndex& x = x_;
  const size_t w0 = block.first_win, w1 = block.end_win;
  const bool last = block.last;
  std::vector<double>& block_time = block.time;
  double misses = block.misses;
  std::vector<double> band(n);
  // The roofline block spans from its first window to the next block's (from the
  // segment start for the first, to the end of its last window for the last one):
  // windows without samples between them are work of the same kind. The segment's
  // tail after its last sample (a barrier wait, typically) is not: it scales with
  // the segment's time (blk_scale_ below).
  const uint64_t wlo = b == 0 ? 0 : x.win_index_[w0];
  uint64_t whi = last ? x.win_index_[w1 - 1] + 1 : x.win_index_[w1];
  // The segment's last window runs to its end, barrier wait included: time without
  // samples that is not the block's work (a latency-bound fit would take the wait
  // for misses). When the block holds more than that window, it stops before it;
  // the window and the wait are the segment's tail (blk_scale_ below).
  size_t w_end = w1;
  if (last && whi >= grid.windows && options_.tail_window_apart && w1 - 1 > w0) {
    whi = x.win_index_[w1 - 1];
    w_end = w1 - 1;
  }
  const bool to_end = whi >= grid.windows;
  if (w_end != w1) {
    // Misses of the windows the block spans only.
    misses = 0;
    for (size_t d = 0; d < n; ++d) {
      if (base_shares_ && static_cast<int>(d) != base) continue;
      double samples = 0;
      for (size_t i = w0; i < w_end; ++i) {
        samples += static_cast<double>(win_samples_[(i - first_win) * n + d]);
      }
      misses += samples * reset_of_[d];
    }
  }
  x.blk_lo_.push_back(static_cast<double>(wlo * options_.window_instructions));
  x.blk_hi_.push_back(to_end ? static_cast<double>(x.seg_instr_[s])
                             : static_cast<double>(whi * options_.window_instructions));
  for (size_t d = 0; d < n; ++d) {
    const double t0 = time_at[d](grid.Boundary(d, wlo));
    const double t1 = to_end ? x.seg_duration_[s * n + d] : time_at[d](grid.Boundary(d, whi));
    block_time[d] = std::max(0.0, t1 - t0);
    if (last) busy[d] = t1;
  }
  // The same instructions miss alike on every device: the runs' mean miss count.
  misses /= std::max(1.0, block.counted);
  for (size_t d = 0; d < n; ++d) band[d] = misses * line_bytes_ / bytes_per_ns_[d];
  double residual = 0;
  auto [xs, compute] = FitRoofline(block_time, band, latency_ns_, x.overlap_, x.curves_, &residual);
  double overlap = x.overlap_;
  if (fit_overlap_) {
    // Three runs or more determine the overlap too: the best of a grid, the prior
    // kept unless another fits clearly better.
    for (int i = 0; i <= 10; ++i) {
      const double o = i / 10.0;
      double r = 0;
      const auto fit = FitRoofline(block_time, band, latency_ns_, o, x.curves_, &r);
      if (r < 0.5 * residual) {
        residual = r;
        xs = fit.first;
        compute = fit.second;
        overlap = o;
      }
    }
  }
  x.blk_overlap_.push_back(overlap);
  for (size_t d = 0; d < n; ++d) x.blk_busy_.push_back(last ? busy[d] : 0.0);
  x.blk_compute_.push_back(compute);
  for (size_t d = 0; d < n; ++d) {
    x.blk_lat_.push_back(latency_ns_[d] * xs);
    x.blk_band_.push_back(band[d]);
  }
}

void EstimatorIndex::Builder::ScaleBlocksByTail() {
  const size_t n = n_;
  EstimatorIndex& x = x_;
  const size_t num_segments = x.seg_first_blk_.size();
  x.blk_scale_.assign(x.blk_segment_.size(), 1.0);
  if (x.has_machine_) {
    for (size_t s = 0; s < num_segments; ++s) {
      const size_t k0 = x.seg_first_blk_[s],
                   k1 = s + 1 < num_segments ? x.seg_first_blk_[s + 1] : x.blk_segment_.size();
      if (k0 == k1) continue;
      // The segment's tail after its last block, relative to the time until then (the
      // runs' mean): the roofline's corrections of the segment scale by 1 + that.
      double ratio = 0;
      for (size_t d = 0; d < n; ++d) {
        const double busy = x.blk_busy_[(k1 - 1) * n + d];
        const double tail = x.seg_duration_[s * n + d] - busy;
        if (busy > 0) ratio += std::max(0.0, tail) / busy / static_cast<double>(n);
      }
      for (size_t k = k0; k < k1; ++k) x.blk_scale_[k] = 1.0 + ratio;
    }
  }
  std::vector<double>().swap(x.blk_busy_);
}

void EstimatorIndex::Builder::Finish() {
  const size_t n = n_;
  const size_t num_pages = x_.pages_.size();
  EstimatorIndex& x = x_;
  x.seg_begin_pos_.push_back(position_);
  x.seg_first_win_.push_back(static_cast<uint32_t>(x.win_index_.size()));
  x.seg_first_blk_.push_back(static_cast<uint32_t>(x.blk_segment_.size()));
  x.win_offset_.push_back(x.win_page_.size());
  x.blk_first_win_.push_back(static_cast<uint32_t>(x.win_index_.size()));
  x.blk_offset_.push_back(x.blk_page_.size());

  x.lin_prefix_.assign(n * (num_pages + 1), 0.0);
  for (size_t d = 0; d < n; ++d) {
    double* prefix = &x.lin_prefix_[d * (num_pages + 1)];
    for (size_t i = 0; i < num_pages; ++i) prefix[i + 1] = prefix[i] + cost_[d * num_pages + i];
  }

  // Transpose the blocks' page counts: per page id, its (block, count) entries.
  x.pb_offset_.assign(num_pages + 1, 0);
  for (uint32_t id : x.blk_page_) ++x.pb_offset_[id + 1];
  for (size_t i = 0; i < num_pages; ++i) x.pb_offset_[i + 1] += x.pb_offset_[i];
  x.pb_block_.resize(x.blk_page_.size());
  x.pb_count_.resize(x.blk_page_.size());
  std::vector<uint64_t> fill(x.pb_offset_.begin(), x.pb_offset_.end() - 1);
  for (size_t k = 0; k + 1 < x.blk_offset_.size(); ++k) {
    for (size_t e = x.blk_offset_[k]; e < x.blk_offset_[k + 1]; ++e) {
      const uint64_t at = fill[x.blk_page_[e]]++;
      x.pb_block_[at] = static_cast<uint32_t>(k);
      x.pb_count_[at] = x.blk_count_[e];
    }
  }
  for (auto* v : {&x.seg_begin_pos_, &x.seg_instr_, &x.seg_windows_, &x.seg_total_, &x.win_offset_,
                  &x.blk_total_, &x.blk_offset_, &x.pb_offset_}) {
    v->shrink_to_fit();
  }
  for (auto* v : {&x.seg_first_win_, &x.seg_first_blk_, &x.win_index_, &x.win_segment_,
                  &x.win_total_, &x.win_page_, &x.win_count_, &x.blk_first_win_, &x.blk_segment_,
                  &x.blk_page_, &x.blk_count_, &x.first_touch_}) {
    v->shrink_to_fit();
  }
  for (auto* v : {&x.seg_duration_, &x.seg_empty_, &x.win_time_, &x.win_cum_, &x.blk_bw_}) {
    v->shrink_to_fit();
  }
}

absl::StatusOr<std::shared_ptr<const EstimatorIndex>> EstimatorIndex::Build(
    const Profile& profile, const IndexOptions& options) {
  auto index = std::shared_ptr<EstimatorIndex>(new EstimatorIndex());
  TG_RETURN_IF_ERROR(Builder(profile, options, *index).Run());
  return std::shared_ptr<const EstimatorIndex>(std::move(index));
}

std::pair<uint32_t, uint32_t> EstimatorIndex::IdsOfPages(uint64_t first_page,
                                                         uint64_t last_page) const {
  const auto lo = std::lower_bound(pages_.begin(), pages_.end(), first_page);
  const auto hi = std::lower_bound(lo, pages_.end(), last_page);
  return {static_cast<uint32_t>(lo - pages_.begin()), static_cast<uint32_t>(hi - pages_.begin())};
}

absl::StatusOr<ResolvedPlacement> EstimatorIndex::Resolve(const Placement& placement) const {
  auto index_of = [&](const std::string& tier) {
    for (size_t d = 0; d < n_; ++d) {
      if (devices_[d] == tier) return static_cast<int>(d);
    }
    return -1;
  };
  for (const std::string& tier : placement.Tiers()) {
    if (index_of(tier) < 0) {
      return absl::InvalidArgumentError(
          StrCat("placement names tier '", tier,
                 "' but the profile has runs only for: ", absl::StrJoin(devices_, ", ")));
    }
  }
  ResolvedPlacement out;
  out.default_tier = index_of(placement.default_tier);
  if (out.default_tier != base_) {
    return absl::InvalidArgumentError(StrCat("placement defaults to '", placement.default_tier,
                                             "' but this index was built ", "with base run '",
                                             devices_[base_], "'"));
  }
  if (!placement.uses_fractions()) {
    for (const PlacementRange& r : placement.ranges) {
      const auto [first, last] = PagesOfRange(r.start, r.end, page_shift_);
      const auto [begin, end] = IdsOfPages(first, last);
      const int tier = index_of(r.tier);
      if (begin < end && tier != base_) out.ranges.push_back({begin, end, tier});
    }
    return out;
  }
  std::vector<std::pair<int, double>> fractions;
  for (const auto& [tier, fraction] : placement.fractions) {
    fractions.emplace_back(index_of(tier), fraction);
  }
  // first_touch_ maps first-touch rank to page id; ranks below num_base_pages_ are the
  // base run's pages.
  if (first_touch_mode_ == FirstTouchFootprint::kExtents) {
    // Tiers take round(fraction * extent pages) pages in turn, extent by extent.
    size_t e = 0;
    uint64_t used = 0;  // pages of extents_[e] already taken
    for (const auto& [tier, fraction] : fractions) {
      auto quota =
          static_cast<uint64_t>(std::llround(fraction * static_cast<double>(extent_pages_)));
      while (quota > 0 && e < extents_.size()) {
        const auto [first, last] = extents_[e];
        const uint64_t take = std::min(quota, last - first - used);
        const auto [begin, end] = IdsOfPages(first + used, first + used + take);
        if (begin < end && tier != base_) out.ranges.push_back({begin, end, tier});
        quota -= take;
        used += take;
        if (used == last - first) {
          ++e;
          used = 0;
        }
      }
    }
    std::sort(out.ranges.begin(), out.ranges.end(),
              [](const ResolvedPlacement::IdRange& a, const ResolvedPlacement::IdRange& b) {
                return a.begin < b.begin;
              });
    return out;
  }
  const size_t ranks =
      first_touch_mode_ == FirstTouchFootprint::kBase ? num_base_pages_ : first_touch_.size();
  const std::vector<uint64_t> keys(first_touch_.begin(),
                                   first_touch_.begin() + static_cast<std::ptrdiff_t>(ranks));
  for (const PagePlacement::Interval& iv : AssignFractions(keys, fractions)) {
    if (iv.tier != base_) {
      out.ranges.push_back(
          {static_cast<uint32_t>(iv.start_page), static_cast<uint32_t>(iv.end_page), iv.tier});
    }
  }
  return out;
}

std::vector<uint8_t> EstimatorIndex::TierArray(const ResolvedPlacement& placement) const {
  std::vector<uint8_t> tier(pages_.size(), static_cast<uint8_t>(placement.default_tier));
  for (const ResolvedPlacement::IdRange& r : placement.ranges) {
    std::fill(tier.begin() + r.begin, tier.begin() + r.end, static_cast<uint8_t>(r.tier));
  }
  return tier;
}

double EstimatorIndex::Correction(size_t k, const uint64_t* hits, Model model,
                                  const double* factor) const {
  const auto total = static_cast<double>(blk_total_[k]);
  if (total == 0 || model == Model::kPaper) return 0;
  if (model == Model::kRoofline) {
    // sum_d s_d roof(m_d) - roof(m_mix): the paper's weighted mean of the fitted
    // rooflines minus the roofline of the mix, whose misses share the miss slots
    // (latencies add) and transfer concurrently (bandwidth times overlap).
    const double compute = blk_compute_[k];
    double weighted = 0;
    bool loaded = false;
    std::array<double, kMaxCurveDevices> lat{}, band{};
    std::array<const LoadCurve*, kMaxCurveDevices> curve{};
    const size_t m = std::min(n_, kMaxCurveDevices);
    for (size_t d = 0; d < n_; ++d) {
      if (hits[d] == 0) continue;
      const double s = static_cast<double>(hits[d]) / total;
      const double f = factor ? factor[d] : 1.0;
      const double l = blk_lat_[k * n_ + d] * f, b = blk_band_[k * n_ + d] * f;
      const LoadCurve* c = curves_.empty() ? nullptr : &curves_[d];
      weighted += s * RoofTime(compute, DeviceMemoryNs(l, b, c), blk_overlap_[k]);
      if (d < m) {
        lat[d] = s * l;
        band[d] = s * b;
        curve[d] = c;
        loaded = loaded || (c != nullptr && !c->flat());
      }
    }
    double mix = 0;
    if (loaded && n_ <= kMaxCurveDevices) {
      // The mix's misses share the miss slots and transfer concurrently, each device's
      // latency loaded by its own share of the bandwidth.
      mix = LoadedMemoryTimeNs(std::span<const double>(lat.data(), m),
                               std::span<const double>(band.data(), m),
                               std::span<const LoadCurve* const>(curve.data(), m));
    } else {
      double latency = 0, bw = 0;
      for (size_t d = 0; d < m; ++d) {
        latency += lat[d];
        bw = std::max(bw, band[d]);
      }
      for (size_t d = m; d < n_; ++d) {
        if (hits[d] == 0) continue;
        const double s = static_cast<double>(hits[d]) / total;
        const double f = factor ? factor[d] : 1.0;
        latency += s * blk_lat_[k * n_ + d] * f;
        bw = std::max(bw, s * blk_band_[k * n_ + d] * f);
      }
      mix = std::max(latency, bw);
    }
    return blk_scale_[k] * (weighted - RoofTime(compute, mix, blk_overlap_[k]));
  }
  double sum = 0, max = 0;
  for (size_t d = 0; d < n_; ++d) {
    const double part =
        static_cast<double>(hits[d]) / total * blk_bw_[k * n_ + d] * (factor ? factor[d] : 1.0);
    sum += part;
    max = std::max(max, part);
  }
  return sum - max;
}

absl::StatusOr<double> EstimatorIndex::RuntimeNs(const ResolvedPlacement& placement,
                                                 Model model) const {
  const size_t stride = pages_.size() + 1;
  const double* def = &lin_prefix_[placement.default_tier * stride];
  double total = constant_ns_ + def[pages_.size()];
  for (const ResolvedPlacement::IdRange& r : placement.ranges) {
    const double* to = &lin_prefix_[r.tier * stride];
    total += (to[r.end] - to[r.begin]) - (def[r.end] - def[r.begin]);
  }
  if (model == Model::kPaper) return total;
  if (!has_machine_) {
    return absl::InvalidArgumentError(
        "the concurrent and roofline models need the machine's tier bandwidths and latencies "
        "(give a machine)");
  }
  const std::vector<uint8_t> tier = TierArray(placement);
  std::vector<uint64_t> hits(n_);
  for (size_t k = 0; k + 1 < blk_offset_.size(); ++k) {
    std::fill(hits.begin(), hits.end(), 0);
    for (size_t e = blk_offset_[k]; e < blk_offset_[k + 1]; ++e) {
      hits[tier[blk_page_[e]]] += blk_count_[e];
    }
    total -= Correction(k, hits.data(), model);
  }
  return total;
}

absl::StatusOr<Estimate> EstimatorIndex::EstimateDetailed(const ResolvedPlacement& placement,
                                                          Model model) const {
  if (model != Model::kPaper && !has_machine_) {
    return absl::InvalidArgumentError(
        "the concurrent and roofline models need the machine's tier bandwidths and latencies "
        "(give a machine)");
  }
  const std::vector<uint8_t> tier = TierArray(placement);
  const size_t n = n_;
  Estimate est;
  est.devices = devices_;
  est.device_runtime_ns = device_runtime_ns_;
  est.access_share.assign(n, 0.0);
  est.time_share.assign(n, 0.0);
  std::vector<uint64_t> hits(n), seg_hits(n), all_hits(n, 0);
  for (size_t s = 0; s + 1 < seg_begin_pos_.size(); ++s) {
    PhaseEstimate pe;
    pe.phase = static_cast<uint32_t>(s);
    pe.windows = seg_windows_[s];
    for (size_t d = 0; d < n; ++d) {
      pe.measured_ns.push_back(static_cast<uint64_t>(seg_duration_[s * n + d]));
    }
    std::fill(seg_hits.begin(), seg_hits.end(), 0);
    for (size_t k = seg_first_blk_[s]; k < seg_first_blk_[s + 1]; ++k) {
      std::fill(hits.begin(), hits.end(), 0);
      for (size_t e = blk_offset_[k]; e < blk_offset_[k + 1]; ++e) {
        hits[tier[blk_page_[e]]] += blk_count_[e];
      }
      for (size_t d = 0; d < n; ++d) seg_hits[d] += hits[d];
      if (model != Model::kPaper) pe.estimated_ns -= Correction(k, hits.data(), model);
    }
    if (seg_total_[s] == 0) {
      pe.estimated_ns += seg_duration_[s * n + base_];
      est.time_share[base_] += seg_duration_[s * n + base_];
    } else {
      for (size_t i = seg_first_win_[s]; i < seg_first_win_[s + 1]; ++i) {
        std::fill(hits.begin(), hits.end(), 0);
        for (size_t e = win_offset_[i]; e < win_offset_[i + 1]; ++e) {
          hits[tier[win_page_[e]]] += win_count_[e];
        }
        const auto h = static_cast<double>(win_total_[i]);
        for (size_t d = 0; d < n; ++d) {
          const double t = static_cast<double>(hits[d]) / h * win_time_[i * n + d];
          pe.estimated_ns += t;
          est.time_share[d] += t;
        }
      }
      const auto h = static_cast<double>(seg_total_[s]);
      for (size_t d = 0; d < n; ++d) {
        const double t = empty_base_ ? (static_cast<int>(d) == base_ ? seg_empty_[s * n + d] : 0)
                                     : static_cast<double>(seg_hits[d]) / h * seg_empty_[s * n + d];
        pe.estimated_ns += t;
        est.time_share[d] += t;
        all_hits[d] += seg_hits[d];
      }
    }
    est.runtime_ns += pe.estimated_ns;
    est.phases.push_back(std::move(pe));
  }
  double total_hits = 0, weighted = 0;
  for (size_t d = 0; d < n; ++d) {
    total_hits += static_cast<double>(all_hits[d]);
    weighted += est.time_share[d];
  }
  for (size_t d = 0; d < n; ++d) {
    est.access_share[d] = total_hits > 0 ? static_cast<double>(all_hits[d]) / total_hits
                                         : (static_cast<int>(d) == base_);
    est.time_share[d] = weighted > 0 ? est.time_share[d] / weighted : 0.0;
  }
  return est;
}

double EstimatorIndex::WinLo(size_t i) const {
  return static_cast<double>(uint64_t{win_index_[i]} * window_instructions_);
}

double EstimatorIndex::WinHi(size_t i) const {
  const size_t s = win_segment_[i];
  if (win_index_[i] + 1 >= seg_windows_[s]) return static_cast<double>(seg_instr_[s]);
  return static_cast<double>((uint64_t{win_index_[i]} + 1) * window_instructions_);
}

size_t EstimatorIndex::FirstWindowEndingAfter(size_t s, double a) const {
  size_t lo = seg_first_win_[s], hi = seg_first_win_[s + 1];
  while (lo < hi) {
    const size_t mid = (lo + hi) / 2;
    if (WinHi(mid) <= a) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

double EstimatorIndex::RunTimeAt(size_t s, size_t d, double x) const {
  const auto len = static_cast<double>(seg_instr_[s]);
  const double duration = seg_duration_[s * n_ + d];
  if (x <= 0) return 0;
  if (x >= len) return duration;
  // The last non-empty window starting at or before x.
  size_t lo = seg_first_win_[s], hi = seg_first_win_[s + 1];
  while (lo < hi) {
    const size_t mid = (lo + hi) / 2;
    if (WinLo(mid) <= x) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  double x0 = 0, y0 = 0;  // the point before x
  if (lo > seg_first_win_[s]) {
    const size_t i = lo - 1;
    const double wlo = WinLo(i), whi = WinHi(i);
    const double c = win_cum_[i * n_ + d], t = win_time_[i * n_ + d];
    if (x < whi) return c + t * (x - wlo) / (whi - wlo);
    x0 = whi;
    y0 = c + t;
  }
  double x1 = len, y1 = duration;  // the point after x
  if (lo < seg_first_win_[s + 1]) {
    x1 = WinLo(lo);
    y1 = win_cum_[lo * n_ + d];
  }
  return x1 > x0 ? y0 + (y1 - y0) * (x - x0) / (x1 - x0) : y0;
}

double EstimatorIndex::PaperIntervalNs(size_t s, double a, double b, const uint8_t* tier,
                                       const uint64_t* seg_hits, const double* factor) const {
  const size_t n = n_;
  auto f_of = [&](size_t d) { return factor ? factor[d] : 1.0; };
  if (seg_total_[s] == 0) return f_of(base_) * (RunTimeAt(s, base_, b) - RunTimeAt(s, base_, a));
  double total = 0;
  std::vector<double> nonempty(n, 0.0);
  std::vector<uint64_t> hits(n);
  // Non-empty windows that overlap [a, b).
  for (size_t i = FirstWindowEndingAfter(s, a); i < seg_first_win_[s + 1] && WinLo(i) < b; ++i) {
    const double f = Overlap(WinLo(i), WinHi(i), a, b);
    if (f == 0) continue;
    std::fill(hits.begin(), hits.end(), 0);
    for (size_t e = win_offset_[i]; e < win_offset_[i + 1]; ++e) {
      hits[tier[win_page_[e]]] += win_count_[e];
    }
    const auto h = static_cast<double>(win_total_[i]);
    for (size_t d = 0; d < n; ++d) {
      total += f * static_cast<double>(hits[d]) / h * win_time_[i * n + d] * f_of(d);
      nonempty[d] += f * win_time_[i * n + d];
    }
  }
  const auto h = static_cast<double>(seg_total_[s]);
  for (size_t d = 0; d < n; ++d) {
    if (empty_base_ ? static_cast<int>(d) != base_ : seg_hits[d] == 0) continue;
    const double empty = std::max(0.0, RunTimeAt(s, d, b) - RunTimeAt(s, d, a) - nonempty[d]);
    total += (empty_base_ ? 1.0 : static_cast<double>(seg_hits[d]) / h) * empty * f_of(d);
  }
  return total;
}

size_t EstimatorIndex::MemoryBytes() const {
  return sizeof(*this) + Bytes(device_runtime_ns_) + Bytes(pages_) + Bytes(first_touch_) +
         Bytes(lin_prefix_) + Bytes(seg_begin_pos_) + Bytes(seg_instr_) + Bytes(seg_windows_) +
         Bytes(seg_first_win_) + Bytes(seg_first_blk_) + Bytes(seg_total_) + Bytes(seg_duration_) +
         Bytes(seg_empty_) + Bytes(win_index_) + Bytes(win_segment_) + Bytes(win_total_) +
         Bytes(win_time_) + Bytes(win_cum_) + Bytes(win_offset_) + Bytes(win_page_) +
         Bytes(win_count_) + Bytes(blk_first_win_) + Bytes(blk_segment_) + Bytes(blk_total_) +
         Bytes(blk_bw_) + Bytes(blk_compute_) + Bytes(blk_overlap_) + Bytes(blk_scale_) +
         Bytes(blk_lo_) + Bytes(blk_hi_) + Bytes(blk_lat_) + Bytes(blk_band_) + Bytes(blk_offset_) +
         Bytes(blk_page_) + Bytes(blk_count_) + Bytes(pb_offset_) + Bytes(pb_block_) +
         Bytes(pb_count_);
}

PlacementState::PlacementState(std::shared_ptr<const EstimatorIndex> index,
                               const ResolvedPlacement& placement, Model model)
    : index_(std::move(index)), model_(model) {
  const EstimatorIndex& x = *index_;
  const size_t n = x.n_;
  tier_ = x.TierArray(placement);
  const size_t blocks = x.blk_segment_.size();
  blk_hits_.assign(blocks * n, 0);
  seg_hits_.assign(x.seg_total_.size() * n, 0);
  blk_corr_.assign(blocks, 0.0);
  for (size_t k = 0; k < blocks; ++k) {
    for (size_t e = x.blk_offset_[k]; e < x.blk_offset_[k + 1]; ++e) {
      blk_hits_[k * n + tier_[x.blk_page_[e]]] += x.blk_count_[e];
    }
    for (size_t d = 0; d < n; ++d) seg_hits_[x.blk_segment_[k] * n + d] += blk_hits_[k * n + d];
    if (model_ != Model::kPaper) {
      blk_corr_[k] = x.Correction(k, &blk_hits_[k * n], model_);
      correction_ns_ += blk_corr_[k];
    }
  }
  paper_ns_ = *x.RuntimeNs(placement, Model::kPaper);
}

absl::Status PlacementState::Move(uint64_t start_address, uint64_t end_address, int tier) {
  const EstimatorIndex& x = *index_;
  const size_t n = x.n_;
  if (tier < 0 || static_cast<size_t>(tier) >= n) {
    return absl::InvalidArgumentError(
        StrCat("tier index ", tier, " out of range: the profile has ", n, " devices"));
  }
  if (start_address > end_address) {
    return absl::InvalidArgumentError(
        StrCat("range start ", start_address, " is after its end ", end_address));
  }
  const auto [first, last] = PagesOfRange(start_address, end_address, x.page_shift_);
  const auto [begin, end] = x.IdsOfPages(first, last);
  const size_t stride = x.pages_.size() + 1;
  std::vector<uint32_t> dirty;
  for (uint32_t id = begin; id < end; ++id) {
    const int old = tier_[id];
    if (old == tier) continue;
    const double* to = &x.lin_prefix_[tier * stride];
    const double* from = &x.lin_prefix_[old * stride];
    paper_ns_ += (to[id + 1] - to[id]) - (from[id + 1] - from[id]);
    tier_[id] = static_cast<uint8_t>(tier);
    for (size_t e = x.pb_offset_[id]; e < x.pb_offset_[id + 1]; ++e) {
      const uint32_t k = x.pb_block_[e];
      const uint32_t c = x.pb_count_[e];
      blk_hits_[k * n + old] -= c;
      blk_hits_[k * n + tier] += c;
      seg_hits_[x.blk_segment_[k] * n + old] -= c;
      seg_hits_[x.blk_segment_[k] * n + tier] += c;
      if (model_ != Model::kPaper) dirty.push_back(k);
    }
  }
  if (!dirty.empty()) {
    std::sort(dirty.begin(), dirty.end());
    dirty.erase(std::unique(dirty.begin(), dirty.end()), dirty.end());
    for (uint32_t k : dirty) {
      const double c = x.Correction(k, &blk_hits_[k * n], model_);
      correction_ns_ += c - blk_corr_[k];
      blk_corr_[k] = c;
    }
  }
  return absl::OkStatus();
}

double PlacementState::IntervalNs(uint64_t from, uint64_t to,
                                  const std::vector<double>& device_factor) const {
  const EstimatorIndex& x = *index_;
  const size_t n = x.n_;
  const double* factor = device_factor.empty() ? nullptr : device_factor.data();
  double sum = 0;
  x.ForEachSegment(from, to, [&](size_t s, double a, double b) {
    sum += x.PaperIntervalNs(s, a, b, tier_.data(), &seg_hits_[s * n], factor);
    if (model_ == Model::kPaper) return;
    for (size_t k = x.seg_first_blk_[s]; k < x.seg_first_blk_[s + 1]; ++k) {
      const double lo = model_ == Model::kRoofline ? x.blk_lo_[k] : x.WinLo(x.blk_first_win_[k]);
      const double hi =
          model_ == Model::kRoofline ? x.blk_hi_[k] : x.WinHi(x.blk_first_win_[k + 1] - 1);
      const double overlap = Overlap(lo, hi, a, b);
      if (overlap == 0) continue;
      const double c = factor ? x.Correction(k, &blk_hits_[k * n], model_, factor) : blk_corr_[k];
      sum -= c * overlap;
    }
  });
  return sum;
}

std::vector<double> EstimatorIndex::AccessesPerGroup(uint64_t from, uint64_t to,
                                                     const std::vector<uint32_t>& group_of_page,
                                                     size_t num_groups) const {
  std::vector<double> out(num_groups, 0.0);
  from = std::min(from, total_instructions_);
  to = std::min(to, total_instructions_);
  if (from >= to) return out;
  // Segments overlapping [from, to), then their non-empty windows.
  size_t s = std::upper_bound(seg_begin_pos_.begin(), seg_begin_pos_.end() - 1, from) -
             seg_begin_pos_.begin();
  s = s == 0 ? 0 : s - 1;
  const size_t segs = seg_begin_pos_.size() - 1;
  for (; s < segs && seg_begin_pos_[s] < to; ++s) {
    const auto begin = static_cast<double>(seg_begin_pos_[s]);
    const double a = static_cast<double>(from) - begin, b = static_cast<double>(to) - begin;
    for (size_t i = seg_first_win_[s]; i < seg_first_win_[s + 1]; ++i) {
      if (WinLo(i) >= b) break;
      const double f = Overlap(WinLo(i), WinHi(i), a, b);
      if (f == 0) continue;
      for (size_t e = win_offset_[i]; e < win_offset_[i + 1]; ++e) {
        out[group_of_page[win_page_[e]]] += f * win_count_[e];
      }
    }
  }
  return out;
}

std::vector<double> PlacementState::AccessesPerDevice(uint64_t from, uint64_t to) const {
  const EstimatorIndex& x = *index_;
  std::vector<uint32_t> tiers(tier_.begin(), tier_.end());
  return x.AccessesPerGroup(from, to, tiers, x.n_);
}

// --- GroupCostModel ------------------------------------------------------------------------

void GroupCostModel::Costs::Add(const Costs& other) {
  constant_ns += other.constant_ns;
  if (cost.size() < other.cost.size()) cost.resize(other.cost.size(), 0.0);
  for (size_t i = 0; i < other.cost.size(); ++i) cost[i] += other.cost[i];
}

GroupCostModel::GroupCostModel(std::shared_ptr<const EstimatorIndex> index,
                               std::vector<uint32_t> group_of_page, size_t num_groups)
    : index_(std::move(index)), group_of_page_(std::move(group_of_page)), num_groups_(num_groups) {
  const EstimatorIndex& x = *index_;
  const size_t segs = x.seg_total_.size();
  std::vector<uint64_t> dense(num_groups_, 0);
  std::vector<uint32_t> touched;
  seg_offset_.push_back(0);
  for (size_t s = 0; s < segs; ++s) {
    for (size_t i = x.seg_first_win_[s]; i < x.seg_first_win_[s + 1]; ++i) {
      for (size_t e = x.win_offset_[i]; e < x.win_offset_[i + 1]; ++e) {
        const uint32_t g = group_of_page_[x.win_page_[e]];
        if (dense[g] == 0) touched.push_back(g);
        dense[g] += x.win_count_[e];
      }
    }
    std::sort(touched.begin(), touched.end());
    for (uint32_t g : touched) {
      seg_group_.push_back(g);
      seg_count_.push_back(dense[g]);
      dense[g] = 0;
    }
    touched.clear();
    seg_offset_.push_back(seg_group_.size());
  }
}

GroupCostModel::Costs GroupCostModel::IntervalCosts(
    uint64_t from, uint64_t to, const std::vector<double>& device_factor) const {
  Costs out;
  out.cost.assign(num_groups_ * index_->n_, 0.0);
  const double* factor = device_factor.empty() ? nullptr : device_factor.data();
  // The segments PlacementState::IntervalNs visits.
  index_->ForEachSegment(from, to,
                         [&](size_t s, double a, double b) { AddSegment(s, a, b, factor, out); });
  return out;
}

// EstimatorIndex::PaperIntervalNs, with each page's hits credited to its group.
void GroupCostModel::AddSegment(size_t s, double a, double b, const double* factor,
                                Costs& out) const {
  const EstimatorIndex& x = *index_;
  const size_t n = x.n_;
  auto f_of = [&](size_t d) { return factor ? factor[d] : 1.0; };
  if (x.seg_total_[s] == 0) {
    out.constant_ns += f_of(x.base_) * (x.RunTimeAt(s, x.base_, b) - x.RunTimeAt(s, x.base_, a));
    return;
  }
  std::vector<double> nonempty(n, 0.0), weight(n);
  for (size_t i = x.FirstWindowEndingAfter(s, a); i < x.seg_first_win_[s + 1] && x.WinLo(i) < b;
       ++i) {
    const double f = Overlap(x.WinLo(i), x.WinHi(i), a, b);
    if (f == 0) continue;
    const auto h = static_cast<double>(x.win_total_[i]);
    for (size_t d = 0; d < n; ++d) {
      weight[d] = f / h * x.win_time_[i * n + d] * f_of(d);
      nonempty[d] += f * x.win_time_[i * n + d];
    }
    for (size_t e = x.win_offset_[i]; e < x.win_offset_[i + 1]; ++e) {
      double* c = &out.cost[group_of_page_[x.win_page_[e]] * n];
      const auto count = static_cast<double>(x.win_count_[e]);
      for (size_t d = 0; d < n; ++d) c[d] += count * weight[d];
    }
  }
  const auto h = static_cast<double>(x.seg_total_[s]);
  for (size_t d = 0; d < n; ++d) {
    const double empty =
        std::max(0.0, x.RunTimeAt(s, d, b) - x.RunTimeAt(s, d, a) - nonempty[d]) * f_of(d);
    if (empty == 0) continue;
    if (x.empty_base_) {
      if (static_cast<int>(d) == x.base_) out.constant_ns += empty;
      continue;
    }
    for (size_t e = seg_offset_[s]; e < seg_offset_[s + 1]; ++e) {
      out.cost[seg_group_[e] * n + d] += static_cast<double>(seg_count_[e]) / h * empty;
    }
  }
}

}  // namespace tiergym

namespace tiergym {

absl::StatusOr<EstimatorIndex::Spread> EstimatorIndex::SamplingSpread(
    const ResolvedPlacement& placement, Model model, int replicates, uint64_t seed,
    double level) const {
  if (replicates < 2) return absl::InvalidArgumentError("replicates must be at least 2");
  if (!(level > 0 && level < 1)) return absl::InvalidArgumentError("level must be in (0, 1)");
  if (model != Model::kPaper && !has_machine_) {
    return absl::InvalidArgumentError(
        "the concurrent and roofline models need the machine's tier bandwidths and latencies "
        "(give a machine)");
  }
  const size_t n = n_;
  const std::vector<uint8_t> tier = TierArray(placement);
  // Observed hits per device of every non-empty window under the placement.
  const size_t windows = win_index_.size();
  std::vector<uint64_t> observed(windows * n, 0);
  std::vector<uint8_t> mixed(windows, 0);  // hits on two devices or more: counts vary
  for (size_t i = 0; i < windows; ++i) {
    for (size_t e = win_offset_[i]; e < win_offset_[i + 1]; ++e) {
      observed[i * n + tier[win_page_[e]]] += win_count_[e];
    }
    int devices = 0;
    for (size_t d = 0; d < n; ++d) devices += observed[i * n + d] > 0;
    mixed[i] = devices > 1;
  }
  std::mt19937_64 rng(seed);
  std::vector<double> values;
  values.reserve(replicates);
  std::vector<uint64_t> drawn(n), seg_hits(n), blk_hits(n);
  for (int r = 0; r < replicates; ++r) {
    double total = constant_ns_;
    for (size_t s = 0; s + 1 < seg_begin_pos_.size(); ++s) {
      if (seg_total_[s] == 0) continue;
      std::fill(seg_hits.begin(), seg_hits.end(), 0);
      size_t k = seg_first_blk_[s];
      std::fill(blk_hits.begin(), blk_hits.end(), 0);
      for (size_t i = seg_first_win_[s]; i < seg_first_win_[s + 1]; ++i) {
        // Blocks partition the segment's non-empty windows: close the block before i.
        if (model != Model::kPaper && k + 1 < seg_first_blk_[s + 1] && i == blk_first_win_[k + 1]) {
          total -= Correction(k, blk_hits.data(), model);
          std::fill(blk_hits.begin(), blk_hits.end(), 0);
          ++k;
        }
        // Multinomial by conditional binomials.
        uint64_t left = win_total_[i];
        double p_left = 1.0;
        for (size_t d = 0; d < n && !mixed[i]; ++d) drawn[d] = observed[i * n + d];
        for (size_t d = 0; d < n && mixed[i]; ++d) {
          const double p = static_cast<double>(observed[i * n + d]) / win_total_[i];
          uint64_t x = 0;
          if (d + 1 == n || p_left <= 0) {
            x = left;
          } else if (p > 0 && left > 0) {
            std::binomial_distribution<uint64_t> b(left, std::min(1.0, p / p_left));
            x = b(rng);
          }
          drawn[d] = x;
          left -= x;
          p_left -= p;
        }
        const auto h = static_cast<double>(win_total_[i]);
        for (size_t d = 0; d < n; ++d) {
          total += static_cast<double>(drawn[d]) / h * win_time_[i * n + d];
          seg_hits[d] += drawn[d];
          blk_hits[d] += drawn[d];
        }
      }
      if (model != Model::kPaper && k < seg_first_blk_[s + 1]) {
        total -= Correction(k, blk_hits.data(), model);
      }
      const auto h = static_cast<double>(seg_total_[s]);
      for (size_t d = 0; d < n; ++d) {
        total += empty_base_ ? (static_cast<int>(d) == base_ ? seg_empty_[s * n + d] : 0.0)
                             : static_cast<double>(seg_hits[d]) / h * seg_empty_[s * n + d];
      }
    }
    values.push_back(total);
  }
  std::sort(values.begin(), values.end());
  auto quantile = [&](double q) {
    const double at = q * static_cast<double>(values.size() - 1);
    const auto i = static_cast<size_t>(at);
    const double f = at - static_cast<double>(i);
    return i + 1 < values.size() ? values[i] * (1 - f) + values[i + 1] * f : values[i];
  };
  double mean = 0;
  for (double v : values) mean += v / static_cast<double>(values.size());
  double var = 0;
  for (double v : values) var += (v - mean) * (v - mean) / static_cast<double>(values.size() - 1);
  Spread out;
  out.lo_ns = quantile((1 - level) / 2);
  out.hi_ns = quantile((1 + level) / 2);
  out.stddev_ns = std::sqrt(var);
  out.replicates = replicates;
  out.level = level;
  return out;
}

}  // namespace tiergym

#include "estimator/internal/index_builder.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <limits>
#include <tuple>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_join.h"
#include "estimator/internal/roofline_fit.h"
#include "estimator/models/roofline_model.h"
#include "estimator/page_placement.h"
#include "traces/base/strings.h"

namespace tiergym {

using internal::Segment;
using internal::TimeAt;
using internal::WindowGrid;

absl::Status EstimatorIndex::Builder::ReadRuns() {
  if (options_.window_instructions == 0) {
    return absl::InvalidArgumentError("window_instructions must be positive");
  }
  if (options_.block_samples == 0) {
    return absl::InvalidArgumentError("block_samples must be positive");
  }
  if (options_.fit_span_samples != 0 && options_.fit_span_samples < options_.block_samples) {
    return absl::InvalidArgumentError(
        StrCat("fit_span_samples must be 0 (each block's fit its own) or at least block_samples (",
               options_.block_samples, "), not ", options_.fit_span_samples));
  }
  if (!(options_.fit_tolerance >= 0 && options_.fit_tolerance <= kMaxFitTolerance)) {
    return absl::InvalidArgumentError(StrCat("fit_tolerance must be in [0, ", kMaxFitTolerance,
                                             "] (a relative misfit), not ",
                                             options_.fit_tolerance));
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
  x_.blocks_.devices = n_;
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
      x_.blocks_.curves.push_back(QueueingCurve(*spec, options_));
      reset_of_[d] = static_cast<double>(reset.value_or(1));
    }
    line_bytes_ = m.cache_line_bytes;
    x_.has_machine_ = true;
  }
  if (!(options_.queue_strength >= 0 && options_.queue_strength <= kMaxQueueStrength)) {
    return absl::InvalidArgumentError(StrCat("queue_strength must be in [0, ", kMaxQueueStrength,
                                             "], not ", options_.queue_strength));
  }
  if (options_.queue_from_profile && !options_.queue_like && x_.has_machine_) {
    // The strength is read along the default curve.
    TG_ASSIGN_OR_RETURN(TierSpec shape, DefaultQueueShape());
    queue_shape_ = std::move(shape);
  } else {
    queue_shape_ = options_.queue_like;
  }
  if (!(options_.read_pct >= 0 && options_.read_pct <= 100)) {
    return absl::InvalidArgumentError("read_pct must be in [0, 100]");
  }
  if (!(options_.compute_overlap >= 0 && options_.compute_overlap <= 1)) {
    return absl::InvalidArgumentError("compute_overlap must be in [0, 1]");
  }
  overlap_ = options_.compute_overlap;
  if (!(options_.tier_overlap >= 0 && options_.tier_overlap <= 1)) {
    return absl::InvalidArgumentError("tier_overlap must be in [0, 1]");
  }
  if (!(options_.limit_smoothness == 0 ||
        (options_.limit_smoothness >= 1 && options_.limit_smoothness <= 64))) {
    return absl::InvalidArgumentError("limit_smoothness must be 0 (hard) or in [1, 64]");
  }
  x_.blocks_.memory = {options_.tier_overlap, options_.limit_smoothness};
  x_.blocks_.share_bias = options_.share_bias;
  // Subset fits: every subset of two devices or more but the full set gets a slot.
  if (options_.subset_fits && x_.has_machine_ && n >= 3 && n <= kMaxSubsetDevices) {
    BlockTable& b = x_.blocks_;
    b.idle_latency = latency_ns_;
    b.slot_of_mask.assign(size_t{1} << n, -1);
    const size_t full = (size_t{1} << n) - 1;
    for (size_t mask = 0; mask < full; ++mask) {
      if (std::popcount(mask) >= 2) b.slot_of_mask[mask] = static_cast<int>(b.subset_slots++);
    }
  }
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
  std::vector<FitInput> inputs;
  for (size_t b = 0; b < starts.size(); ++b) {
    Block block;
    block.first_win = starts[b];
    block.end_win = b + 1 < starts.size() ? starts[b + 1] : end_win;
    block.last = b + 1 == starts.size();
    AddBlockPages(s, block, seg_total);
    uint64_t samples = 0;
    double sum = 0, squares = 0;
    for (size_t i = block.first_win; i < block.end_win; ++i) {
      for (size_t d = 0; d < n; ++d) {
        const uint64_t c = win_samples_[(i - first_win) * n + d];
        samples += c;
        sum += static_cast<double>(c) * weight_[d];
        squares += static_cast<double>(c) * weight_[d] * weight_[d];
      }
    }
    if (options_.share_bias == ShareBias::kCorrect) {
      // The block's shares are a sample of its misses: their effective size, (sum of
      // weights)^2 / sum of squared weights, sets their spread (the model's bias
      // correction).
      x_.blocks_.effective_samples.push_back(squares > 0 ? sum * sum / squares : 0.0);
    }
    AddBandwidthFloors(first_win, block);
    if (x_.has_machine_) {
      inputs.push_back(BlockFitInput(s, grid, time_at, b, first_win, block, busy));
      inputs.back().samples = samples;
    }
  }
  if (x_.has_machine_) pending_.push_back(std::move(inputs));
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
  x.blocks_.total.push_back(total);
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
    x.blocks_.bandwidth_floor.push_back(std::min(t, samples * ns_per_sample_[d]));
    block.time[d] = t;
    if (!base_shares_ || static_cast<int>(d) == base_) {
      block.misses += samples * reset_of_[d];
      block.counted += 1;
    }
  }
}

EstimatorIndex::Builder::FitInput EstimatorIndex::Builder::BlockFitInput(
    size_t s, const WindowGrid& grid, const std::vector<TimeAt>& time_at, size_t b,
    size_t first_win, const Block& block, std::vector<double>& busy) {
  const size_t n = n_;
  const int base = base_;
  EstimatorIndex& x = x_;
  const size_t w0 = block.first_win, w1 = block.end_win;
  const bool last = block.last;
  FitInput in;
  in.misses = block.misses;
  in.time.assign(n, 0.0);
  // The roofline block spans from its first window to the next block's (from the
  // segment start for the first, to the end of its last window for the last one):
  // windows without samples between them are work of the same kind. The segment's
  // tail after its last sample (a barrier wait, typically) is not: it scales with
  // the segment's time (blocks_.scale below).
  const uint64_t wlo = b == 0 ? 0 : x.win_index_[w0];
  uint64_t whi = last ? x.win_index_[w1 - 1] + 1 : x.win_index_[w1];
  // The segment's last window runs to its end, barrier wait included: time without
  // samples that is not the block's work (a latency-bound fit would take the wait
  // for misses). When the block holds more than that window, it stops before it;
  // the window and the wait are the segment's tail (blocks_.scale below).
  size_t w_end = w1;
  if (last && whi >= grid.windows && options_.tail_window_apart && w1 - 1 > w0) {
    whi = x.win_index_[w1 - 1];
    w_end = w1 - 1;
  }
  const bool to_end = whi >= grid.windows;
  if (w_end != w1) {
    // Misses of the windows the block spans only.
    in.misses = 0;
    for (size_t d = 0; d < n; ++d) {
      if (base_shares_ && static_cast<int>(d) != base) continue;
      double samples = 0;
      for (size_t i = w0; i < w_end; ++i) {
        samples += static_cast<double>(win_samples_[(i - first_win) * n + d]);
      }
      in.misses += samples * reset_of_[d];
    }
  }
  const auto lo = static_cast<double>(wlo * options_.window_instructions);
  const double hi = to_end ? static_cast<double>(x.seg_instr_[s])
                           : static_cast<double>(whi * options_.window_instructions);
  x.blocks_.lo.push_back(lo);
  x.blocks_.hi.push_back(hi);
  in.length = hi - lo;
  for (size_t d = 0; d < n; ++d) {
    const double t0 = time_at[d](grid.Boundary(d, wlo));
    const double t1 = to_end ? x.seg_duration_[s * n + d] : time_at[d](grid.Boundary(d, whi));
    in.time[d] = std::max(0.0, t1 - t0);
    if (last) busy[d] = t1;
  }
  for (size_t d = 0; d < n; ++d) busy_.push_back(last ? busy[d] : 0.0);
  // The same instructions miss alike on every device: the runs' mean miss count.
  in.misses /= std::max(1.0, block.counted);
  return in;
}

std::pair<size_t, size_t> EstimatorIndex::Builder::FitSpan(const std::vector<FitInput>& inputs,
                                                           size_t k) const {
  size_t a = k, b = k + 1;
  uint64_t samples = inputs[k].samples;
  // Neighbours on both sides in turn (the later first), within the segment, until the
  // span holds fit_span_samples samples.
  for (bool right = true; samples < options_.fit_span_samples && (a > 0 || b < inputs.size());
       right = !right) {
    if (right && b < inputs.size()) {
      samples += inputs[b++].samples;
    } else if (!right && a > 0) {
      samples += inputs[--a].samples;
    }
  }
  return {a, b};
}

EstimatorIndex::Builder::SpanFit EstimatorIndex::Builder::FitSpanRoofline(
    const std::vector<double>& time, const std::vector<double>& span_band,
    const std::vector<LoadCurve>& curves) const {
  SpanFit f;
  f.overlap = overlap_;
  std::tie(f.concurrency, f.compute) = internal::FitRoofline(
      time, span_band, latency_ns_, overlap_, curves, &f.residual, x_.blocks_.memory);
  if (fit_overlap_) {
    // Three runs or more determine the overlap too: the best of a grid, the prior
    // kept unless another fits clearly better.
    for (int i = 0; i <= 10; ++i) {
      const double o = i / 10.0;
      double r = 0;
      const auto fit =
          internal::FitRoofline(time, span_band, latency_ns_, o, curves, &r, x_.blocks_.memory);
      if (r < 0.5 * f.residual) {
        f = {fit.first, fit.second, o, r};
      }
    }
  }
  if (options_.fit_tolerance > 0) {
    // The least concurrency the runs allow at the chosen overlap (IndexOptions::
    // fit_tolerance); the residual stays the best fit's.
    double r = 0;
    std::tie(f.concurrency, f.compute) =
        internal::FitRoofline(time, span_band, latency_ns_, f.overlap, curves, &r,
                              x_.blocks_.memory, options_.fit_tolerance);
  }
  return f;
}

EstimatorIndex::Builder::SpanInput EstimatorIndex::Builder::SpanOf(
    const std::vector<FitInput>& inputs, size_t k) const {
  const size_t n = n_;
  SpanInput span;
  // The span the fit reads (IndexOptions::fit_span_samples): the block, or it and its
  // neighbours, whose times and misses add up to the span's.
  const auto [a, b] = FitSpan(inputs, k);
  double misses = 0, length = 0;
  span.time.assign(n, 0.0);
  for (size_t j = a; j < b; ++j) {
    for (size_t d = 0; d < n; ++d) span.time[d] += inputs[j].time[d];
    misses += inputs[j].misses;
    length += inputs[j].length;
  }
  span.band.resize(n);
  for (size_t d = 0; d < n; ++d) span.band[d] = misses * line_bytes_ / bytes_per_ns_[d];
  // The span's compute time per instruction and its misses per outstanding miss hold
  // for the block: its share of the span's instructions and of its misses.
  span.alone = b - a == 1;
  span.compute_share = span.alone || !(length > 0) ? 1.0 : inputs[k].length / length;
  span.miss_share = span.alone || !(misses > 0) ? span.compute_share : inputs[k].misses / misses;
  return span;
}

void EstimatorIndex::Builder::FitBlocks(const std::vector<FitInput>& inputs) {
  const size_t n = n_;
  EstimatorIndex& x = x_;
  for (size_t k = 0; k < inputs.size(); ++k) {
    const SpanInput span = SpanOf(inputs, k);
    const auto [xs, compute, overlap, residual] =
        FitSpanRoofline(span.time, span.band, x.blocks_.curves);
    x.blocks_.overlap.push_back(overlap);
    FitSubsets(span.time, span.band, span.compute_share, span.miss_share);
    x.blocks_.compute.push_back(span.alone ? compute : compute * span.compute_share);
    for (size_t d = 0; d < n; ++d) {
      x.blocks_.latency.push_back(latency_ns_[d] * (span.alone ? xs : xs * span.miss_share));
      x.blocks_.band.push_back(inputs[k].misses * line_bytes_ / bytes_per_ns_[d]);
    }
  }
}

std::vector<std::pair<size_t, size_t>> EstimatorIndex::Builder::BusyBlocks() const {
  const size_t n = n_;
  std::vector<std::pair<size_t, size_t>> busy;
  for (size_t s = 0; s < pending_.size(); ++s) {
    for (size_t k = 0; k < pending_[s].size(); ++k) {
      const FitInput& in = pending_[s][k];
      double u = 0;
      for (size_t d = 0; d < n; ++d) {
        const double band = in.misses * line_bytes_ / bytes_per_ns_[d];
        if (in.time[d] > 0) u = std::max(u, band / in.time[d]);
      }
      if (u >= kQueueSignalUtilisation) busy.emplace_back(s, k);
    }
  }
  // At most kQueueSignalBlocks of them, evenly spread over the run.
  if (busy.size() > kQueueSignalBlocks) {
    std::vector<std::pair<size_t, size_t>> some;
    for (size_t i = 0; i < kQueueSignalBlocks; ++i) {
      some.push_back(busy[(2 * i + 1) * busy.size() / (2 * kQueueSignalBlocks)]);
    }
    busy.swap(some);
  }
  return busy;
}

void EstimatorIndex::Builder::ReadQueueStrength() {
  EstimatorIndex& x = x_;
  const bool read = options_.queue_from_profile && queue_shape_ && x.has_machine_;
  x.queue_strength_ = options_.queue_like && !read ? options_.queue_strength : 0.0;
  if (!read) return;
  const size_t n = n_;
  bool flat = false;  // some tier without measured curves, which the strength moves
  for (size_t d = 0; d < n; ++d)
    flat = flat || options_.machine->Find(x.devices_[d])->curves.empty();
  if (!flat) return;  // the curves are the measured ones, whatever the strength
  std::vector<SpanInput> spans;
  for (const auto& [s, k] : BusyBlocks()) spans.push_back(SpanOf(pending_[s], k));
  // The median over the busy blocks of the relative misfit of their fits under the
  // candidate's curves (tiers with measured curves keep theirs).
  IndexOptions at = options_;
  at.queue_like = queue_shape_;
  std::vector<std::vector<LoadCurve>> curves(kQueueCandidates);
  auto misfit = [&](size_t c) {
    at.queue_strength = QueueCandidate(c);
    for (size_t d = 0; d < n; ++d) {
      curves[c].push_back(QueueingCurve(*options_.machine->Find(x.devices_[d]), at));
    }
    std::vector<double> rel;
    for (const SpanInput& span : spans) {
      double squares = 0;
      for (double t : span.time) squares += t * t;
      if (!(squares > 0)) continue;
      rel.push_back(std::sqrt(FitSpanRoofline(span.time, span.band, curves[c]).residual / squares));
    }
    if (rel.empty()) return 0.0;
    const auto middle = rel.begin() + static_cast<std::ptrdiff_t>(rel.size() / 2);
    std::nth_element(rel.begin(), middle, rel.end());
    return *middle;
  };
  x.queue_misfit_.push_back(misfit(0));
  size_t chosen = 0;
  // Below kQueueSignalMisfit the flat fit is as good as the runs' noise: the tiers do not
  // queue (or not in a way the profile shows). Above, the smallest strength that takes
  // off kQueueSignalShare of the misfit: a larger one may fit the single-tier runs a
  // little better by standing in for something else (a smooth limit) that a mix does not
  // follow.
  if (x.queue_misfit_[0] >= kQueueSignalMisfit) {
    for (size_t c = 1; c < kQueueCandidates && chosen == 0; ++c) {
      x.queue_misfit_.push_back(misfit(c));
      if (x.queue_misfit_[c] <= (1 - kQueueSignalShare) * x.queue_misfit_[0]) chosen = c;
    }
  }
  x.queue_strength_ = QueueCandidate(chosen);
  x.blocks_.curves = curves[chosen];
}

void EstimatorIndex::Builder::FitSubsets(const std::vector<double>& block_time,
                                         const std::vector<double>& band, double compute_share,
                                         double miss_share) {
  BlockTable& b = x_.blocks_;
  std::vector<double> t, bd, lat;
  std::vector<LoadCurve> curves;
  for (size_t mask = 0; mask < b.slot_of_mask.size(); ++mask) {
    if (b.slot_of_mask[mask] < 0) continue;
    t.clear();
    bd.clear();
    lat.clear();
    curves.clear();
    for (size_t d = 0; d < n_; ++d) {
      if ((mask >> d & 1) == 0) continue;
      t.push_back(block_time[d]);
      bd.push_back(band[d]);
      lat.push_back(latency_ns_[d]);
      if (!b.curves.empty()) curves.push_back(b.curves[d]);
    }
    double residual = 0;
    auto [xs, compute] = internal::FitRoofline(t, bd, lat, overlap_, curves, &residual, b.memory);
    double overlap = overlap_;
    if (fit_overlap_ && t.size() >= 3) {
      for (int i = 0; i <= 10; ++i) {
        double r = 0;
        const auto fit = internal::FitRoofline(t, bd, lat, i / 10.0, curves, &r, b.memory);
        if (r < 0.5 * residual) {
          residual = r;
          xs = fit.first;
          compute = fit.second;
          overlap = i / 10.0;
        }
      }
    }
    if (options_.fit_tolerance > 0) {
      std::tie(xs, compute) = internal::FitRoofline(t, bd, lat, overlap, curves, &residual,
                                                    b.memory, options_.fit_tolerance);
    }
    b.subset_compute.push_back(compute_share == 1 ? compute : compute * compute_share);
    b.subset_overlap.push_back(overlap);
    b.subset_concurrency.push_back(miss_share == 1 ? xs : xs * miss_share);
  }
}

void EstimatorIndex::Builder::ScaleBlocksByTail() {
  const size_t n = n_;
  EstimatorIndex& x = x_;
  const size_t num_segments = x.seg_first_blk_.size();
  x.blocks_.scale.assign(x.blk_segment_.size(), 1.0);
  if (x.has_machine_) {
    for (size_t s = 0; s < num_segments; ++s) {
      const size_t k0 = x.seg_first_blk_[s],
                   k1 = s + 1 < num_segments ? x.seg_first_blk_[s + 1] : x.blk_segment_.size();
      if (k0 == k1) continue;
      // The segment's tail after its last block, relative to the time until then (the
      // runs' mean): the roofline's corrections of the segment scale by 1 + that.
      double ratio = 0;
      for (size_t d = 0; d < n; ++d) {
        const double busy = busy_[(k1 - 1) * n + d];
        const double tail = x.seg_duration_[s * n + d] - busy;
        if (busy > 0) ratio += std::max(0.0, tail) / busy / static_cast<double>(n);
      }
      for (size_t k = k0; k < k1; ++k) x.blocks_.scale[k] = 1.0 + ratio;
    }
  }
  std::vector<double>().swap(busy_);
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
                  &x.blocks_.total, &x.blk_offset_, &x.pb_offset_}) {
    v->shrink_to_fit();
  }
  for (auto* v : {&x.seg_first_win_, &x.seg_first_blk_, &x.win_index_, &x.win_segment_,
                  &x.win_total_, &x.win_page_, &x.win_count_, &x.blk_first_win_, &x.blk_segment_,
                  &x.blk_page_, &x.blk_count_, &x.first_touch_}) {
    v->shrink_to_fit();
  }
  for (auto* v :
       {&x.seg_duration_, &x.seg_empty_, &x.win_time_, &x.win_cum_, &x.blocks_.bandwidth_floor}) {
    v->shrink_to_fit();
  }
}

}  // namespace tiergym

#include "traces/synth/time_model.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "traces/base/strings.h"
#include "traces/synth/rng.h"

namespace tiergym::synth {
namespace {

uint64_t PageCount(uint64_t bytes) { return (bytes + kSynthPageBytes - 1) / kSynthPageBytes; }

// The tiers of one array as segments of its extent, in fractions of the array's size.
class ArrayTiers {
 public:
  ArrayTiers(const ArraySpec& array, const TierMap& map) {
    const auto size = static_cast<double>(array.size_bytes);
    uint64_t cursor = array.start_address;
    const uint64_t end = array.end_address();
    for (const TierRange& r : map.ranges) {
      if (r.end <= cursor || r.start >= end) continue;
      if (r.start > cursor) Push(cursor, r.start, map.default_tier, array, size);
      const uint64_t hi = std::min(r.end, end);
      Push(std::max(r.start, cursor), hi, r.tier, array, size);
      cursor = hi;
    }
    if (cursor < end) Push(cursor, end, map.default_tier, array, size);
  }

  // Adds `weight` spread uniformly over the array fraction [lo, hi) to out[tier].
  void Add(double lo, double hi, double weight, double* out) const {
    if (weight == 0) return;
    if (hi - lo <= 1e-15) {
      for (const Segment& s : segments_) {
        if (lo < s.hi || &s == &segments_.back()) {
          out[s.tier] += weight;
          return;
        }
      }
      return;
    }
    const double scale = weight / (hi - lo);
    for (const Segment& s : segments_) {
      const double a = std::max(lo, s.lo), b = std::min(hi, s.hi);
      if (b > a) out[s.tier] += (b - a) * scale;
    }
  }

  // Adds `weight` over the positions [from, to) of a sweep that wraps around the
  // array (position 1.3 is fraction 0.3 of the array on its second pass). With
  // `slices` > 1 the sweep runs in every one of `slices` equal slices of the array at
  // once (one per thread).
  void AddSweep(double from, double to, double weight, int slices, double* out) const {
    const double length = to - from;
    if (length <= 0) {
      AddSliced(from - std::floor(from), from - std::floor(from), weight, slices, out);
      return;
    }
    const double full = std::floor(length);
    if (full > 0) AddSliced(0, 1, weight * full / length, slices, out);
    const double rest = length - full;
    if (rest <= 0) return;
    const double a = from - std::floor(from);
    if (a + rest <= 1) {
      AddSliced(a, a + rest, weight * rest / length, slices, out);
    } else {
      AddSliced(a, 1, weight * (1 - a) / length, slices, out);
      AddSliced(0, a + rest - 1, weight * (a + rest - 1) / length, slices, out);
    }
  }

 private:
  struct Segment {
    double lo, hi;
    int tier;
  };

  void Push(uint64_t a, uint64_t b, int tier, const ArraySpec& array, double size) {
    segments_.push_back({static_cast<double>(a - array.start_address) / size,
                         static_cast<double>(b - array.start_address) / size, tier});
  }

  void AddSliced(double lo, double hi, double weight, int slices, double* out) const {
    if (slices <= 1) {
      Add(lo, hi, weight, out);
      return;
    }
    const double w = weight / slices;
    for (int t = 0; t < slices; ++t) Add((t + lo) / slices, (t + hi) / slices, w, out);
  }

  std::vector<Segment> segments_;
};

}  // namespace

TierMap WholeTier(int tier) {
  TierMap m;
  m.default_tier = tier;
  return m;
}

std::vector<uint64_t> TierBytes(const AppModel& app, const Machine& machine, const TierMap& map) {
  std::vector<uint64_t> used(machine.tiers.size(), 0);
  for (const ArraySpec& a : app.arrays) {
    const uint64_t end = a.start_address + PageCount(a.size_bytes) * kSynthPageBytes;
    uint64_t covered = 0;
    for (const TierRange& r : map.ranges) {
      const uint64_t lo = std::max(r.start, a.start_address), hi = std::min(r.end, end);
      if (hi > lo) {
        used[r.tier] += hi - lo;
        covered += hi - lo;
      }
    }
    used[map.default_tier] += (end - a.start_address) - covered;
  }
  return used;
}

absl::StatusOr<TierMap> ResolvePlacement(const AppModel& app, const Machine& machine,
                                         const Placement& p) {
  TierMap map;
  map.default_tier = machine.IndexOf(p.default_tier);
  if (map.default_tier < 0) {
    return absl::InvalidArgumentError(
        StrCat("placement: default: unknown tier \"", p.default_tier, "\""));
  }
  if (!p.ranges.empty() && !p.fractions.empty()) {
    return absl::InvalidArgumentError("placement: ranges and fractions may not both appear");
  }
  for (size_t i = 0; i < p.ranges.size(); ++i) {
    const PlacementRange& r = p.ranges[i];
    const int tier = machine.IndexOf(r.tier);
    if (tier < 0) {
      return absl::InvalidArgumentError(
          StrCat("placement: ranges[", i, "]: unknown tier \"", r.tier, "\""));
    }
    if (r.start >= r.end) {
      return absl::InvalidArgumentError(
          StrCat("placement: ranges[", i, "]: start must be below end"));
    }
    map.ranges.push_back({r.start, r.end, tier});
  }
  if (!p.fractions.empty()) {
    double sum = 0;
    for (const auto& [tier, f] : p.fractions) {
      if (machine.IndexOf(tier) < 0) {
        return absl::InvalidArgumentError(
            StrCat("placement: fractions: unknown tier \"", tier, "\""));
      }
      if (!(f >= 0 && f <= 1)) {
        return absl::InvalidArgumentError(
            StrCat("placement: fractions: ", tier, ": must be in [0, 1]"));
      }
      sum += f;
    }
    if (sum > 1 + 1e-9) {
      return absl::InvalidArgumentError("placement: fractions sum above 1");
    }
    uint64_t total_pages = 0;
    for (const ArraySpec& a : app.arrays) total_pages += PageCount(a.size_bytes);
    size_t array = 0;
    uint64_t page = 0;  // next untaken page of `array`
    for (const auto& [tier_name, f] : p.fractions) {
      const int tier = machine.IndexOf(tier_name);
      auto quota = static_cast<uint64_t>(std::floor(f * static_cast<double>(total_pages) + 0.5));
      while (quota > 0 && array < app.arrays.size()) {
        const ArraySpec& a = app.arrays[array];
        const uint64_t pages = PageCount(a.size_bytes);
        const uint64_t take = std::min(quota, pages - page);
        map.ranges.push_back({a.start_address + page * kSynthPageBytes,
                              a.start_address + (page + take) * kSynthPageBytes, tier});
        quota -= take;
        page += take;
        if (page == pages) {
          ++array;
          page = 0;
        }
      }
    }
  }
  std::sort(map.ranges.begin(), map.ranges.end(),
            [](const TierRange& a, const TierRange& b) { return a.start < b.start; });
  for (size_t i = 1; i < map.ranges.size(); ++i) {
    if (map.ranges[i].start < map.ranges[i - 1].end) {
      return absl::InvalidArgumentError(
          StrCat("placement: ranges overlap: [", Hex(map.ranges[i - 1].start), ", ",
                 Hex(map.ranges[i - 1].end), ") and [", Hex(map.ranges[i].start), ", ",
                 Hex(map.ranges[i].end), ")"));
    }
  }
  // Capacity: the model's pages on each tier.
  const std::vector<uint64_t> used = TierBytes(app, machine, map);
  for (size_t t = 0; t < machine.tiers.size(); ++t) {
    if (used[t] > machine.tiers[t].capacity_bytes) {
      return absl::ResourceExhaustedError(StrCat("placement puts ", used[t], " bytes on tier ",
                                                 machine.tiers[t].name, " whose capacity is ",
                                                 machine.tiers[t].capacity_bytes, " bytes"));
    }
  }
  return map;
}

const TruthModel& TimeModel::Spec() {
  static const TruthModel spec;
  return spec;
}

TimeModel::TimeModel(const AppModel& app, const Machine& machine, int chunks_per_phase)
    : TimeModel(app, machine, Spec(), chunks_per_phase) {}

TimeModel::TimeModel(const AppModel& app, const Machine& machine, const TruthModel& truth,
                     int chunks_per_phase)
    : app_(app), machine_(machine), truth_(truth), chunks_(std::max(1, chunks_per_phase)) {}

double TimeModel::ChunkTimeNs(const PhaseSpec& phase, const Machine& machine, int threads,
                              double instructions, std::span<const double> tier_shares) {
  return ChunkTimeNs(phase, machine, Spec(), threads, instructions, tier_shares, {});
}

double TimeModel::ChunkTimeNs(const PhaseSpec& phase, const Machine& machine, int threads,
                              double instructions, std::span<const double> tier_shares,
                              std::span<const TierLoad> loads) {
  return ChunkTimeNs(phase, machine, Spec(), threads, instructions, tier_shares, loads);
}

double TimeModel::RetiredPerInstruction(const PhaseSpec& phase, const Machine& machine,
                                        const TruthModel& truth,
                                        std::span<const double> tier_shares) {
  if (truth.instruction_drift.empty() || phase.mpki <= 0 || phase.accesses.empty()) return 1;
  double drift = 0;
  const size_t n = std::min(machine.tiers.size(), tier_shares.size());
  for (size_t t = 0; t < n; ++t) drift += tier_shares[t] * truth.DriftOf(machine.tiers[t].name);
  return 1 + drift;
}

double TimeModel::ChunkTimeNs(const PhaseSpec& phase, const Machine& machine,
                              const TruthModel& truth, int threads, double instructions,
                              std::span<const double> tier_shares,
                              std::span<const TierLoad> loads) {
  // Drifted instructions retire at the compute rate and take no misses.
  const double compute_ns =
      instructions * RetiredPerInstruction(phase, machine, truth, tier_shares) / phase.compute_gips;
  const double misses = instructions * phase.mpki / 1000.0;
  const double concurrency = phase.mlp * std::min(threads, machine.cores);
  // Per tier: the latency time of its misses at the idle latency (all tiers share the
  // outstanding-miss slots, Little's law) and their transfer time at the peak bandwidth
  // (tiers transfer in parallel); with measured curves the latency rises with the load.
  const size_t n = std::min(machine.tiers.size(), tier_shares.size());
  std::vector<double> latency_time(n, 0.0), band_time(n, 0.0);
  std::vector<LoadCurve> curves(n);
  std::vector<const LoadCurve*> curve_of(n, nullptr);
  for (size_t t = 0; t < n; ++t) {
    const double misses_t = misses * tier_shares[t];
    if (misses_t <= 0) continue;
    curves[t] = TruthCurveAt(truth, machine.tiers[t], phase.read_pct);
    if (t < loads.size()) {
      curves[t].peak_gbps *= loads[t].bandwidth_factor;
      curves[t].idle_latency_ns *= loads[t].latency_factor;
    }
    curve_of[t] = &curves[t];
    latency_time[t] = misses_t * curves[t].idle_latency_ns / concurrency;
    band_time[t] = misses_t * machine.cache_line_bytes / curves[t].peak_gbps;
  }
  const double memory_ns = LoadedMemoryTimeNs(latency_time, band_time, curve_of, truth.memory());
  const double overlap = truth.compute_overlap.value_or(phase.overlap);
  return std::max(compute_ns, memory_ns) + (1.0 - overlap) * std::min(compute_ns, memory_ns);
}

std::vector<double> TimeModel::ChunkTierShares(int phase, int chunk, const TierMap& map) const {
  const PhaseSpec& ph = app_.phases[phase];
  const size_t tiers = machine_.tiers.size();
  std::vector<double> shares(tiers, 0.0);
  if (ph.accesses.empty()) {
    shares[map.default_tier] = 1;
    return shares;
  }
  const double x0 = static_cast<double>(chunk) / chunks_;
  const double x1 = static_cast<double>(chunk + 1) / chunks_;
  double total_weight = 0;
  for (const ArrayAccess& a : ph.accesses) total_weight += a.weight;
  double cumulative = 0;
  for (const ArrayAccess& a : ph.accesses) {
    const ArrayTiers at(app_.arrays[a.array], map);
    const double share = a.weight / total_weight;
    // The part of the chunk this access is active in, as local progress [l0, l1).
    double weight = share, l0 = x0, l1 = x1;
    if (ph.serial) {
      const double c0 = cumulative, c1 = cumulative + share;
      cumulative = c1;
      const double a0 = std::max(x0, c0), a1 = std::min(x1, c1);
      if (a1 <= a0) continue;
      weight = (a1 - a0) / (x1 - x0);
      l0 = (a0 - c0) / share;
      l1 = (a1 - c0) / share;
    }
    switch (a.pattern) {
      case AccessPattern::kUniform:
        at.Add(0, 1, weight, shares.data());
        break;
      case AccessPattern::kSkewed: {
        at.Add(a.hot_offset, a.hot_offset + a.hot_fraction, weight * a.hot_share, shares.data());
        const double cold = 1 - a.hot_fraction;
        if (cold > 1e-12) {
          const double w = weight * (1 - a.hot_share);
          if (a.hot_offset > 0) at.Add(0, a.hot_offset, w * a.hot_offset / cold, shares.data());
          const double tail_lo = a.hot_offset + a.hot_fraction;
          if (tail_lo < 1) at.Add(tail_lo, 1, w * (1 - tail_lo) / cold, shares.data());
        }
        break;
      }
      case AccessPattern::kSequential:
        at.AddSweep(l0 * a.passes, l1 * a.passes, weight, ph.serial ? 1 : app_.threads,
                    shares.data());
        break;
    }
  }
  // Normalise away rounding.
  double sum = 0;
  for (double s : shares) sum += s;
  if (sum > 0) {
    for (double& s : shares) s /= sum;
  } else {
    shares[map.default_tier] = 1;
  }
  return shares;
}

std::vector<double> TimeModel::ChunkTimesNs(int phase, const TierMap& map) const {
  const PhaseSpec& ph = app_.phases[phase];
  const double instructions = static_cast<double>(ph.instructions) / chunks_;
  std::vector<double> times(chunks_);
  for (int k = 0; k < chunks_; ++k) {
    const std::vector<double> shares = ChunkTierShares(phase, k, map);
    times[k] = ChunkTimeNs(ph, machine_, truth_, app_.threads, instructions, shares, {});
  }
  return times;
}

double TimeModel::PhaseTimeNs(int phase, const TierMap& map) const {
  double sum = 0;
  for (double t : ChunkTimesNs(phase, map)) sum += t;
  return sum * (1.0 + app_.phases[phase].imbalance);
}

double TimeModel::RuntimeNs(const TierMap& map) const {
  std::vector<double> per_phase(app_.phases.size());
  for (size_t p = 0; p < per_phase.size(); ++p)
    per_phase[p] = PhaseTimeNs(static_cast<int>(p), map);
  double total = 0;
  for (int p : app_.schedule) total += per_phase[p];
  return total;
}

RunRealisation MakeRealisation(const AppModel& app, uint64_t seed, std::string_view run) {
  std::mt19937_64 g(StreamSeed(seed, app.name, StrCat("time/", run)));
  RunRealisation r;
  const double run_factor = std::max(0.5, 1.0 + app.noise * StandardNoise(g));
  r.instruction_factor.reserve(app.schedule.size());
  r.time_factor.reserve(app.schedule.size());
  for (size_t i = 0; i < app.schedule.size(); ++i) {
    r.instruction_factor.push_back(std::max(0.5, 1.0 + app.instruction_jitter * StandardNoise(g)));
    r.time_factor.push_back(run_factor * std::max(0.5, 1.0 + app.noise * StandardNoise(g)));
  }
  return r;
}

}  // namespace tiergym::synth

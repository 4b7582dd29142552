#include "estimator/models/roofline_model.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <numbers>
#include <random>
#include <span>

#include "estimator/internal/roofline_fit.h"
#include "traces/base/strings.h"

namespace tiergym {

absl::StatusOr<TierSpec> LoadQueueShape(std::string_view spec) {
  const size_t colon = spec.rfind(':');
  const std::string why =
      StrCat("must be MACHINE:TIER naming a tier with measured curves (e.g. xeonmax:ddr), not '",
             spec, "'");
  if (colon == std::string_view::npos) return absl::InvalidArgumentError(why);
  auto machine = LoadMachine(spec.substr(0, colon));
  if (!machine.ok()) {
    return absl::InvalidArgumentError(StrCat(why, " (", machine.status().message(), ")"));
  }
  const TierSpec* tier = machine->Find(spec.substr(colon + 1));
  if (tier == nullptr || tier->curves.empty()) return absl::InvalidArgumentError(why);
  return *tier;
}

absl::StatusOr<TierSpec> DefaultQueueShape() {
  static const auto* shape = new absl::StatusOr<TierSpec>(LoadQueueShape(kDefaultQueueLike));
  return *shape;
}

LoadCurve QueueingCurve(const TierSpec& tier, const IndexOptions& options) {
  const bool queues = options.queue_like.has_value() && options.queue_strength > 0;
  LoadCurve c = tier.CurveAt(options.read_pct, queues ? &*options.queue_like : nullptr);
  if (queues && tier.curves.empty()) {
    for (auto& [u, ratio] : c.ratio) ratio = 1 + options.queue_strength * (ratio - 1);
  }
  return c;
}

namespace {

// Devices whose loaded curves a block's correction combines without allocating (a
// machine has a handful of tiers; beyond this the flat rule applies).
constexpr size_t kMaxCurveDevices = 16;

// ShareBias::kCorrect: the shares' spread is sampled at this many fixed standard normal
// points per device, in antithetic pairs (z and -z), so that whatever is linear in the
// shares has no bias and no spread.
constexpr size_t kSpreadPoints = 64;

// The fixed points: Box-Muller over std::mt19937_64, whose sequence the standard fixes,
// so every platform prices a mix alike. [j * kMaxCurveDevices + d].
const std::array<double, kSpreadPoints * kMaxCurveDevices>& SpreadPoints() {
  static const auto* points = [] {
    auto* z = new std::array<double, kSpreadPoints * kMaxCurveDevices>();
    std::mt19937_64 rng(20261127);
    auto uniform = [&] { return (static_cast<double>(rng() >> 11) + 0.5) * 0x1p-53; };
    for (size_t j = 0; j < kSpreadPoints; j += 2) {
      for (size_t d = 0; d < kMaxCurveDevices; ++d) {
        const double r = std::sqrt(-2 * std::log(uniform()));
        const double v = r * std::cos(2 * std::numbers::pi * uniform());
        (*z)[j * kMaxCurveDevices + d] = v;
        (*z)[(j + 1) * kMaxCurveDevices + d] = -v;
      }
    }
    return z;
  }();
  return *points;
}

// One block's devices as the mix sees them (the devices its hits lie on).
struct MixDevices {
  size_t count = 0;
  std::array<double, kMaxCurveDevices> lat{}, band{};
  std::array<const LoadCurve*, kMaxCurveDevices> curve{};
  bool loaded = false;  // some device has a measured (not flat) curve
};

// The memory time of the block's misses split by `share` over the devices: they share the
// miss slots (latency-bound times add up) and transfer concurrently (bandwidth-bound times
// overlap), each device's latency loaded by its own share of the bandwidth, under the
// index's combination of tiers and limits (traces/machine.h).
double MixMemoryNs(const MixDevices& dev, const double* share, const MemoryCombination& memory) {
  std::array<double, kMaxCurveDevices> lat{}, band{};
  for (size_t d = 0; d < dev.count; ++d) {
    lat[d] = share[d] * dev.lat[d];
    band[d] = share[d] * dev.band[d];
  }
  const auto l = std::span<const double>(lat.data(), dev.count);
  const auto b = std::span<const double>(band.data(), dev.count);
  const auto c = std::span<const LoadCurve* const>(dev.curve.data(), dev.count);
  if (!memory.spec()) return LoadedMemoryTimeNs(l, b, c, memory);
  if (dev.loaded) return LoadedMemoryTimeNs(l, b, c);
  double latency = 0, bw = 0;
  for (size_t d = 0; d < dev.count; ++d) {
    latency += lat[d];
    bw = std::max(bw, band[d]);
  }
  return std::max(latency, bw);
}

// The mean memory time of the mix over the spread of shares drawn from `samples` misses
// (a multinomial, in its normal approximation: s'_d = s_d + (sqrt(s_d) z_d - s_d sum_e
// sqrt(s_e) z_e) / sqrt(samples), clipped at 0 and renormalised), roofed.
double MeanRoofOverSpread(const MixDevices& dev, const double* share, double samples,
                          double compute, double overlap, const MemoryCombination& memory) {
  const auto& z = SpreadPoints();
  std::array<double, kMaxCurveDevices> root{}, drawn{};
  for (size_t d = 0; d < dev.count; ++d) root[d] = std::sqrt(share[d]);
  const double scale = 1 / std::sqrt(samples);
  double mean = 0;
  for (size_t j = 0; j < kSpreadPoints; ++j) {
    const double* zj = &z[j * kMaxCurveDevices];
    double common = 0;
    for (size_t d = 0; d < dev.count; ++d) common += root[d] * zj[d];
    double sum = 0;
    for (size_t d = 0; d < dev.count; ++d) {
      drawn[d] = std::max(0.0, share[d] + (root[d] * zj[d] - share[d] * common) * scale);
      sum += drawn[d];
    }
    for (size_t d = 0; d < dev.count; ++d) drawn[d] /= sum;
    mean += internal::RoofTime(compute, MixMemoryNs(dev, drawn.data(), memory), overlap);
  }
  return mean / kSpreadPoints;
}

}  // namespace

double RooflineModel::Correction(const BlockTable& blocks, size_t k, const uint64_t* hits,
                                 const double* factor) const {
  const auto total = static_cast<double>(blocks.total[k]);
  if (total == 0) return 0;
  const size_t n = blocks.devices;
  MemoryCombination memory = blocks.memory;
  if (tier_overlap_) memory.tier_overlap = *tier_overlap_;
  // sum_d s_d roof(m_d) - roof(m_mix): the paper's weighted mean of the fitted rooflines
  // minus the roofline of the mix, whose misses share the miss slots (latencies add) and
  // transfer concurrently (bandwidth times overlap).
  // The fit of the devices the block's hits lie on, when the index has one.
  int slot = -1;
  if (!blocks.slot_of_mask.empty()) {
    size_t mask = 0;
    for (size_t d = 0; d < n; ++d) mask |= hits[d] > 0 ? size_t{1} << d : 0;
    slot = blocks.slot_of_mask[mask];
  }
  const size_t at = slot < 0 ? 0 : k * blocks.subset_slots + static_cast<size_t>(slot);
  const double compute = slot < 0 ? blocks.compute[k] : blocks.subset_compute[at];
  const double overlap = slot < 0 ? blocks.overlap[k] : blocks.subset_overlap[at];
  auto latency_of = [&](size_t d) {
    return slot < 0 ? blocks.latency[k * n + d]
                    : blocks.idle_latency[d] * blocks.subset_concurrency[at];
  };
  double weighted = 0;
  MixDevices dev;
  std::array<double, kMaxCurveDevices> share{};
  double latency = 0, bw = 0;  // the flat rule's sums, beyond kMaxCurveDevices devices
  for (size_t d = 0; d < n; ++d) {
    if (hits[d] == 0) continue;
    const double s = static_cast<double>(hits[d]) / total;
    const double f = factor ? factor[d] : 1.0;
    const double l = latency_of(d) * f, b = blocks.band[k * n + d] * f;
    const LoadCurve* c = blocks.curves.empty() ? nullptr : &blocks.curves[d];
    weighted += s * internal::RoofTime(compute, internal::DeviceMemoryNs(l, b, c, memory), overlap);
    latency += s * l;
    bw = std::max(bw, s * b);
    if (dev.count < kMaxCurveDevices) {
      share[dev.count] = s;
      dev.lat[dev.count] = l;
      dev.band[dev.count] = b;
      dev.curve[dev.count] = c;
      dev.loaded = dev.loaded || (c != nullptr && !c->flat());
      ++dev.count;
    }
  }
  const bool fits = n <= kMaxCurveDevices;
  const double mix = fits ? MixMemoryNs(dev, share.data(), memory) : std::max(latency, bw);
  double roof = internal::RoofTime(compute, mix, overlap);
  if (blocks.share_bias == ShareBias::kCorrect && fits && dev.count > 1 &&
      blocks.effective_samples[k] > 1) {
    // The roofline of the mix is convex in the shares: the sampled shares overestimate it
    // by about what the spread of shares around them adds (the bootstrap's bias
    // estimate), which is taken off.
    roof -= MeanRoofOverSpread(dev, share.data(), blocks.effective_samples[k], compute, overlap,
                               memory) -
            roof;
  }
  return blocks.scale[k] * (weighted - roof);
}

}  // namespace tiergym

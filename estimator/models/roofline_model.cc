#include "estimator/models/roofline_model.h"

#include <algorithm>
#include <array>
#include <span>

#include "estimator/internal/roofline_fit.h"

namespace tiergym {
namespace {

// Devices whose loaded curves a block's correction combines without allocating (a
// machine has a handful of tiers; beyond this the flat rule applies).
constexpr size_t kMaxCurveDevices = 16;

}  // namespace

double RooflineModel::Correction(const BlockTable& blocks, size_t k, const uint64_t* hits,
                                 const double* factor) const {
  const auto total = static_cast<double>(blocks.total[k]);
  if (total == 0) return 0;
  const size_t n = blocks.devices;
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
  bool loaded = false;
  std::array<double, kMaxCurveDevices> lat{}, band{};
  std::array<const LoadCurve*, kMaxCurveDevices> curve{};
  const size_t m = std::min(n, kMaxCurveDevices);
  for (size_t d = 0; d < n; ++d) {
    if (hits[d] == 0) continue;
    const double s = static_cast<double>(hits[d]) / total;
    const double f = factor ? factor[d] : 1.0;
    const double l = latency_of(d) * f, b = blocks.band[k * n + d] * f;
    const LoadCurve* c = blocks.curves.empty() ? nullptr : &blocks.curves[d];
    weighted +=
        s * internal::RoofTime(compute, internal::DeviceMemoryNs(l, b, c, blocks.memory), overlap);
    if (d < m) {
      lat[d] = s * l;
      band[d] = s * b;
      curve[d] = c;
      loaded = loaded || (c != nullptr && !c->flat());
    }
  }
  double mix = 0;
  if (!blocks.memory.spec() && n <= kMaxCurveDevices) {
    // The mix under the index's combination of tiers and limits (traces/machine.h).
    mix = LoadedMemoryTimeNs(std::span<const double>(lat.data(), m),
                             std::span<const double>(band.data(), m),
                             std::span<const LoadCurve* const>(curve.data(), m), blocks.memory);
  } else if (loaded && n <= kMaxCurveDevices) {
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
    for (size_t d = m; d < n; ++d) {
      if (hits[d] == 0) continue;
      const double s = static_cast<double>(hits[d]) / total;
      const double f = factor ? factor[d] : 1.0;
      latency += s * latency_of(d) * f;
      bw = std::max(bw, s * blocks.band[k * n + d] * f);
    }
    mix = std::max(latency, bw);
  }
  return blocks.scale[k] * (weighted - internal::RoofTime(compute, mix, overlap));
}

}  // namespace tiergym

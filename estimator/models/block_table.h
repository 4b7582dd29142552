// What the runtime models (runtime_model.h) know of an index's blocks: runs of consecutive
// non-empty windows of one segment holding at least IndexOptions::block_samples samples
// (estimator/README.md, "The index"). Filled block by block by the index builder
// (estimator/internal/index_builder.h) and immutable afterwards; the index owns it.
// Arrays are indexed [k] per block or [k * devices + d] per block and device.
#ifndef TIERGYM_ESTIMATOR_MODELS_BLOCK_TABLE_H_
#define TIERGYM_ESTIMATOR_MODELS_BLOCK_TABLE_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "estimator/index_options.h"
#include "traces/machine.h"

namespace tiergym {

struct BlockTable {
  size_t devices = 0;
  // [d]: device d's loaded-latency curve at the traffic's read share (flat for a tier
  // without measured curves); empty when the index has no machine.
  std::vector<LoadCurve> curves;
  // [k]: weighted sampled accesses of all runs.
  std::vector<uint64_t> total;
  // [k * N + d]: the concurrent model's bandwidth floor b_d, the part of the block's time
  // on device d that its sampled misses need at d's peak bandwidth.
  std::vector<double> bandwidth_floor;
  // The roofline model (only with a machine), per block: the fitted compute time, the
  // compute overlap (fitted, or the prior), the segment-local base positions [lo, hi) it
  // was fitted over, the scale of its correction (1 + the segment's tail / busy time), and
  // per device the latency- and bandwidth-bound memory times of all its misses.
  std::vector<double> compute;  // [k]
  std::vector<double> overlap;  // [k]
  std::vector<double> lo, hi;   // [k]
  std::vector<double> scale;    // [k]
  std::vector<double> latency;  // [k * N + d]
  std::vector<double> band;     // [k * N + d]
  // Fits over subsets of the devices (IndexOptions::subset_fits; three or four devices): a
  // block whose hits lie on the devices of mask m only reads fit slot_of_mask[m] (-1: the
  // full fit above), so that the run of a device the mix does not use cannot bend it.
  // Per block and slot [k * subset_slots + j]: compute time, compute overlap and the
  // concurrency x (the latency-bound time of all misses on device d is
  // idle_latency[d] * x).
  size_t subset_slots = 0;
  std::vector<int> slot_of_mask;
  std::vector<double> idle_latency;  // [d]
  std::vector<double> subset_compute, subset_overlap, subset_concurrency;
  // How the roofline combines the tiers' latency- and bandwidth-bound times
  // (IndexOptions::tier_overlap, limit_smoothness).
  MemoryCombination memory;
  // IndexOptions::share_bias, and with ShareBias::kCorrect per block [k] the effective
  // number of samples its shares were drawn from.
  ShareBias share_bias = ShareBias::kKeep;
  std::vector<double> effective_samples;

  // Bytes the arrays occupy.
  size_t MemoryBytes() const {
    auto bytes = [](const auto& v) { return v.capacity() * sizeof(v[0]); };
    return bytes(total) + bytes(bandwidth_floor) + bytes(compute) + bytes(overlap) + bytes(lo) +
           bytes(hi) + bytes(scale) + bytes(latency) + bytes(band) + bytes(subset_compute) +
           bytes(subset_overlap) + bytes(subset_concurrency) + bytes(effective_samples);
  }
};

}  // namespace tiergym

#endif  // TIERGYM_ESTIMATOR_MODELS_BLOCK_TABLE_H_

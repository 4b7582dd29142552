// Internal to estimator/: the roofline of a block (estimator/README.md, "Beyond the paper:
// the roofline model"), shared by the index builder, which fits it to the runs, and the
// roofline model (models/roofline_model.h), which prices mixes with it.
#ifndef TIERGYM_ESTIMATOR_INTERNAL_ROOFLINE_FIT_H_
#define TIERGYM_ESTIMATOR_INTERNAL_ROOFLINE_FIT_H_

#include <algorithm>
#include <utility>
#include <vector>

#include "traces/machine.h"

namespace tiergym::internal {

// The roofline time of work with compute time `compute_ns` and memory time `memory_ns`:
// the longer, plus the part of the shorter that does not overlap it.
inline double RoofTime(double compute_ns, double memory_ns, double overlap) {
  return compute_ns + memory_ns - overlap * std::min(compute_ns, memory_ns);
}

// The memory time of a block's misses on one device: max(latency time, band time) with a
// flat curve (or none), the loaded-latency fixed point of LoadedMemoryTimeNs with a
// measured one; `how` combines the latency- and bandwidth-bound times (traces/machine.h).
double DeviceMemoryNs(double latency_time, double band_time, const LoadCurve* curve,
                      const MemoryCombination& how = {});

// Fits a block's roofline to its measured time on every device: the memory time of its
// misses on device d is max(latency_d * x, band[d]) (x = misses / outstanding misses,
// Little's law; band[d] = bytes / bandwidth_d), with the latency loaded along the device's
// measured curve when it has one (DeviceMemoryNs, curves[d]; `curves` may be empty), and
// t[d] = RoofTime(compute, memory_d, overlap), memory_d = DeviceMemoryNs(.., how).
// Returns {x, compute} minimising the squared residuals, whose least goes to
// *residual_out: a log grid over x, refined by golden section, with the compute time exact
// for each x (the residual is piecewise quadratic in it).
// With `tolerance` > 0, the least x whose fit's squared residuals exceed the least by at
// most tolerance^2 * sum_d t[d]^2 (a relative root-mean-square misfit of `tolerance` per
// run, spread over the runs), with its compute time: where compute hides a tier's latency,
// the runs tell x only to within their noise, and the least latency among the fits they
// allow is the one a mix's price is least biased by (estimator/README.md, "A tolerance on
// the concurrency fit").
// REQUIRES: t, band and latency have one entry per device, latency > 0.
std::pair<double, double> FitRoofline(const std::vector<double>& t, const std::vector<double>& band,
                                      const std::vector<double>& latency, double overlap,
                                      const std::vector<LoadCurve>& curves, double* residual_out,
                                      const MemoryCombination& how = {}, double tolerance = 0);

}  // namespace tiergym::internal

#endif  // TIERGYM_ESTIMATOR_INTERNAL_ROOFLINE_FIT_H_

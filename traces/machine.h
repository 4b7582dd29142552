// Machine descriptions: the memory tiers of a heterogeneous-memory node.
//
// A Machine names its tiers (ddr, hbm, remote, ...) with capacity, bandwidth, latency and
// page-migration throughput, and the number of cores applications run on. A tier's
// bandwidth and latency are either two numbers or measured bandwidth-latency curves, one
// per read share (the format of published memory characterisations such as the Mess
// benchmark's), from which the loaded latency at any bandwidth follows (LoadCurve). The synthetic
// profile generator uses it as its performance model, the estimator and the environment
// use it for tier names, capacities and migration costs, and the profiler uses the NUMA
// node of each tier to bind memory. The JSON format is documented in traces/SYNTH.md
// ("Machine JSON"); presets are bundled (traces/synth/models/machine_*.json) and can be
// loaded by name ("knl", "disagg").
//
// A Machine is a plain value; it is safe to share const instances between threads.
#ifndef TIERGYM_TRACES_MACHINE_H_
#define TIERGYM_TRACES_MACHINE_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace tiergym {

// One measured bandwidth-latency curve of a tier: the loaded latency of a miss while the
// tier serves a given bandwidth, with a given share of reads in its traffic.
struct BandwidthLatencyCurve {
  double read_pct = 100;  // share of reads in the traffic, [0, 100]
  // (bandwidth GB/s, latency ns) in order of load: bandwidth strictly increasing,
  // latency non-decreasing, both > 0; at least two points.
  std::vector<std::pair<double, double>> points;

  friend bool operator==(const BandwidthLatencyCurve&, const BandwidthLatencyCurve&) = default;
};

// A tier's loaded latency at one read share, normalised: at utilisation u = bandwidth /
// peak_gbps the latency is idle_latency_ns * Ratio(u). Ratio is 1 at u = 0, non-decreasing,
// and holds its last value beyond the last point (the tier serves no more than its peak).
// A tier without curves has a flat curve: Ratio = 1, the two-number model.
struct LoadCurve {
  double idle_latency_ns = 0;
  double peak_gbps = 0;
  std::vector<std::pair<double, double>> ratio;  // (u, latency / idle), u ascending

  double Ratio(double u) const;
  bool flat() const { return ratio.empty(); }
};

struct TierSpec {
  std::string name;             // e.g. "ddr", "hbm", "remote"; unique within a machine
  uint64_t capacity_bytes = 0;  // > 0
  // Sustained bandwidth, GB/s (= bytes/ns), > 0. With curves: the all-reads (highest read
  // share) curve's last bandwidth.
  double bandwidth_gbps = 0;
  // Idle load-to-use latency of an LLC miss, > 0. With curves: that curve's first latency.
  double latency_ns = 0;
  double migration_gbps = 0;  // page migration throughput into this tier, GB/s, > 0
  int numa_node = -1;         // NUMA node backing the tier, -1 = none
  // Measured curves, read_pct ascending; empty: bandwidth_gbps and latency_ns only.
  std::vector<BandwidthLatencyCurve> curves;

  // The tier's loaded-latency curve at `read_pct` (clamped to the measured shares): each
  // curve is normalised by its own peak and idle latency; between two measured shares,
  // peak, idle latency and ratio are interpolated linearly in the read share.
  LoadCurve CurveAt(double read_pct) const;
  // CurveAt(read_pct), or for a tier without curves its own idle latency and peak with
  // the latency ratio of `shape`'s curve at read_pct: a flat tier queueing the way a
  // measured one does (traces/synth/truth_model.h; IndexOptions::queue_like). `shape`
  // may be null (the flat curve).
  LoadCurve CurveAt(double read_pct, const TierSpec* shape) const;

  friend bool operator==(const TierSpec&, const TierSpec&) = default;
};

// The memory time of work whose misses several tiers serve at once, with loaded latencies.
// For each tier t: latency_time[t] = its misses' latency time at the idle latency (misses *
// idle latency / outstanding misses, Little's law) and band_time[t] = its bytes / peak
// bandwidth. The result is the smallest m >= max_t band_time[t] with
//     m >= sum_t latency_time[t] * curve[t].Ratio(band_time[t] / m)
// (the tiers' bandwidths at time m set their latencies, which set the time). With flat
// curves it is max(sum latency_time, max band_time), the two-number model exactly.
// Entries with latency_time 0 and band_time 0 do not count. `curves` may hold nullptrs
// (flat).
double LoadedMemoryTimeNs(std::span<const double> latency_time, std::span<const double> band_time,
                          std::span<const LoadCurve* const> curves);

// How tiers' memory times combine beyond the model above, which is MemoryCombination{}:
// the alternatives the synthetic ground truths may follow (traces/synth/truth_model.h) and
// the roofline estimate may assume (estimator/models/roofline_model.h).
struct MemoryCombination {
  // Share of the shorter tiers' bandwidth-bound times that overlaps the longest: the
  // bandwidth-bound time is T_b = max_t b_t + (1 - tier_overlap) (sum_t b_t - max_t b_t).
  // 1: the tiers transfer concurrently; 0: one after the other. In [0, 1].
  double tier_overlap = 1;
  // 0: the latency- and bandwidth-bound times combine by a hard maximum; p >= 1: as the
  // p-norm (T_l^p + T_b^p)^(1/p).
  double limit_smoothness = 0;

  bool spec() const { return tier_overlap == 1 && limit_smoothness == 0; }
};

// LoadedMemoryTimeNs under `how`: the smallest m >= T_b with m >= T_l(m) (hard), or the m
// with m = (T_l(m)^p + T_b^p)^(1/p) (smooth), where T_l(m) = sum_t latency_time[t] *
// ratio_t(band_time[t] / m). Exactly the function above when how.spec().
double LoadedMemoryTimeNs(std::span<const double> latency_time, std::span<const double> band_time,
                          std::span<const LoadCurve* const> curves, const MemoryCombination& how);

struct Machine {
  std::string name;
  std::string description;       // free text, may be empty
  std::vector<TierSpec> tiers;   // tiers[0] is the default tier; at least one
  int cores = 1;                 // cores applications run on, >= 1
  double cache_line_bytes = 64;  // bytes moved per LLC miss
  // PEBS event written into the header of sampled traces.
  std::string pebs_event = "MEM_UOPS_RETIRED:L2_MISS_LOADS";

  // The tier named `name`, or nullptr.
  const TierSpec* Find(std::string_view name) const;
  // Index of the tier named `name` in `tiers`, or -1.
  int IndexOf(std::string_view name) const;

  friend bool operator==(const Machine&, const Machine&) = default;
};

// Parses a machine description. `source` names the text in errors, which read
// "SOURCE:LINE:COL: PATH: RULE", e.g. "m.json:7:22: tiers[1].latency_ns: must be > 0" or
// "m.json:12:30: tiers[0].curves[1].points[3]: bandwidth 80 is not above the previous
// point's 92 (bandwidth must increase along a curve)".
// Unknown keys are errors. Fails with InvalidArgument.
absl::StatusOr<Machine> ParseMachine(std::string_view json_text, std::string_view source);

// Loads a bundled preset by name ("knl", "disagg", or the full bundled name
// "machine_knl") or else a JSON file path. NotFound names the bundled presets when
// `name_or_path` is neither.
absl::StatusOr<Machine> LoadMachine(std::string_view name_or_path);

// Names of the bundled machine presets ("knl", "disagg", ...).
std::vector<std::string> BundledMachineNames();

// The machine as indented JSON in the format ParseMachine reads.
std::string MachineToJson(const Machine& machine);

}  // namespace tiergym

#endif  // TIERGYM_TRACES_MACHINE_H_

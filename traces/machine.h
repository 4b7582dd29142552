// Machine descriptions: the memory tiers of a heterogeneous-memory node.
//
// A Machine names its tiers (ddr, hbm, remote, ...) with capacity, bandwidth, latency and
// page-migration throughput, and the number of cores applications run on. The synthetic
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
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace tiergym {

struct TierSpec {
  std::string name;             // e.g. "ddr", "hbm", "remote"; unique within a machine
  uint64_t capacity_bytes = 0;  // > 0
  double bandwidth_gbps = 0;    // sustained bandwidth, GB/s (= bytes/ns), > 0
  double latency_ns = 0;        // idle load-to-use latency of an LLC miss, > 0
  double migration_gbps = 0;    // page migration throughput into this tier, GB/s, > 0
  int numa_node = -1;           // NUMA node backing the tier, -1 = none

  friend bool operator==(const TierSpec&, const TierSpec&) = default;
};

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
// "SOURCE:LINE:COL: PATH: RULE", e.g. "m.json:7:22: tiers[1].latency_ns: must be > 0".
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

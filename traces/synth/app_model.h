// Application models for the synthetic profile generator.
//
// An AppModel describes what an application does to memory, independently of any
// machine: its arrays (address ranges with sizes), its phases (instruction count, LLC
// misses per kilo-instruction, compute rate, memory-level parallelism, barrier imbalance
// and an access mix over the arrays) and a schedule that repeats phases. The JSON format,
// the address layout and the meaning of every key are documented in traces/SYNTH.md.
// Models are loaded from a file or by the name of a bundled model (minife, lulesh,
// nekbone, lammps, hotset).
//
// An AppModel is a plain value, safe to share const between threads.
#ifndef TIERGYM_TRACES_SYNTH_APP_MODEL_H_
#define TIERGYM_TRACES_SYNTH_APP_MODEL_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "traces/base/json.h"

namespace tiergym::synth {

inline constexpr uint64_t kSynthPageBytes = 4096;
// Where the layout puts arrays: mmap-like regions grow up from kMmapBase, heap-like ones
// up from kHeapBase (see SYNTH.md, "Address layout").
inline constexpr uint64_t kMmapBase = 0x7f0000000000ull;
inline constexpr uint64_t kHeapBase = 0x01000000ull;

enum class AccessPattern { kSequential, kUniform, kSkewed };

struct ArraySpec {
  std::string name;
  uint64_t size_bytes = 0;  // > 0
  bool heap = false;        // "region": "heap" (default "mmap")
  // Filled by the layout: [start_address, start_address + size_bytes), page aligned.
  uint64_t start_address = 0;
  uint64_t end_address() const { return start_address + size_bytes; }
};

struct ArrayAccess {
  int array = 0;  // index into AppModel::arrays
  AccessPattern pattern = AccessPattern::kUniform;
  double weight = 1;          // relative share of the phase's LLC misses, > 0
  double hot_fraction = 0.1;  // skewed: size of the hot region as a fraction of the array
  double hot_share = 0.9;     // skewed: share of this access's misses in the hot region
  double hot_offset = 0;      // skewed: start of the hot region as a fraction of the array
  double passes = 1;          // sequential: sweeps over the array per phase instance
};

struct PhaseSpec {
  std::string name;
  uint64_t instructions = 0;  // per phase instance, all threads together, > 0
  double mpki = 0;            // LLC misses per 1000 instructions, >= 0
  double compute_gips = 0;    // instructions per ns of all threads when not stalled, > 0
  double mlp = 1;             // outstanding misses per core, > 0
  double imbalance = 0;       // barrier wait: phase time is multiplied by (1 + imbalance)
  double overlap = 0.5;       // fraction of the shorter of compute/memory time hidden
  // Share of reads in the phase's memory traffic, [0, 100]: which of a tier's measured
  // bandwidth-latency curves apply (machines with curves only).
  double read_pct = 100;
  bool serial = false;  // accesses run one after another in listed order
  std::vector<ArrayAccess> accesses;
};

struct AppModel {
  std::string name;
  std::string description;
  int threads = 1;                    // sampled tids are 0..threads-1
  double noise = 0.005;               // run-to-run runtime variation (relative std dev)
  double instruction_jitter = 0.002;  // per-run, per-phase-instance instruction deviation
  // Instructions per ns that threads waiting at a phase's barrier retire (spin-wait
  // polling): they count in the phase's instructions but take no misses, so a run on a
  // faster tier, waiting less, retires fewer. Default 0.
  double barrier_spin_gips = 0;
  std::vector<ArraySpec> arrays;  // in first-touch order
  std::vector<PhaseSpec> phases;
  std::vector<int> schedule;  // expanded: phase index of every phase instance
  json::Value json;           // the parsed document, written back into model.json

  int ArrayIndex(std::string_view name) const;  // -1 when absent
  uint64_t FootprintBytes() const;              // sum of page-rounded array sizes
};

// Parses a model and lays out its arrays. Errors read "SOURCE:LINE:COL: PATH: RULE",
// e.g. "app.json:12:18: phases[1].accesses[0].array: unknown array \"x\"". Unknown keys
// are errors. Fails with InvalidArgument.
absl::StatusOr<AppModel> ParseAppModel(std::string_view json_text, std::string_view source);

// A bundled model by name ("minife"), a procedural one ("procedural:SEED", procedural.h)
// or else a JSON file. NotFound lists the bundled models when `name_or_path` is none of
// them.
absl::StatusOr<AppModel> LoadAppModel(std::string_view name_or_path);

// Names of the bundled application models.
std::vector<std::string> BundledAppNames();

// The JSON text of a bundled model (application or machine, e.g. "minife", "knl",
// "machine_knl") or of a procedural one ("procedural:SEED"), or NotFound.
absl::StatusOr<std::string> BundledModelText(std::string_view name);

// Writes `value` through `writer` (used to copy models into model.json).
void WriteJsonValue(const json::Value& value, json::Writer& writer);

}  // namespace tiergym::synth

#endif  // TIERGYM_TRACES_SYNTH_APP_MODEL_H_

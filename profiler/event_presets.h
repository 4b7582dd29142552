// PEBS events by CPU model, named as libpfm4 names them and encoded by libpfm4.
//
// The recorder samples last-level-cache misses with their data address (Denoyelle
// et al., section 4.1). The event differs by microarchitecture; each preset below is the libpfm4
// name of the PEBS event that samples loads missing the last cache level of that model:
//   knl  Knights Landing        MEM_UOPS_RETIRED:L2_MISS_LOADS      (raw 0x0404)
//   skx  Skylake-SP             MEM_LOAD_RETIRED:L3_MISS            (raw 0x20d1)
//   clx  Cascade Lake           MEM_LOAD_RETIRED:L3_MISS            (raw 0x20d1)
//   icx  Ice Lake-SP            MEM_LOAD_RETIRED:L3_MISS            (raw 0x20d1)
//   spr  Sapphire Rapids        MEM_TRANS_RETIRED:LOAD_LATENCY:ldlat=N (raw 0x01cd,
//                               config1 = N: loads slower than N cycles)
// (codes from libpfm4's lib/events/intel_knl_events.h, intel_skl_events.h used by skx/clx,
// intel_icl_events.h, intel_spr_events.h). libpfm4 picks the core PMU from CPUID; the
// environment variable LIBPFM_FORCE_PMU=<pmu> overrides it (tests use it to encode the
// presets of every model on any machine). libpfm4 is private to this module and the
// contentiousness module: no libpfm4 header appears in a public header.
//
// Thread-safety: the functions serialise their use of libpfm4 internally.
#ifndef TIERGYM_PROFILER_EVENT_PRESETS_H_
#define TIERGYM_PROFILER_EVENT_PRESETS_H_

#include <linux/perf_event.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tiergym::prof {

struct EventPreset {
  std::string pmu;            // libpfm4 core PMU name: "knl", "skx", "clx", "icx", "spr"
  std::string model;          // "Knights Landing", ...
  std::string event;          // libpfm4 event name without the latency threshold
  bool load_latency = false;  // takes a ldlat threshold (appended as ":ldlat=N")
};

// Every preset, in the order of the table above.
const std::vector<EventPreset>& EventPresets();

// "knl MEM_UOPS_RETIRED:L2_MISS_LOADS (Knights Landing), skx ...": for error messages.
std::string DescribePresets();

// (Re)initialises libpfm4; call again after changing LIBPFM_FORCE_PMU. Internal error
// when libpfm4 cannot initialise.
absl::Status InitializeLibpfm(bool reinitialize = false);

// The libpfm4 name of the detected (or forced) core PMU, e.g. "skx"; NotFound when
// libpfm4 knows no core PMU of this CPU (a VM often exposes none, or an AMD CPU).
absl::StatusOr<std::string> ActiveCorePmu();

// The preset of the active core PMU. NotFound naming the PMU and listing the presets.
absl::StatusOr<EventPreset> PresetForThisCpu();

// The full event name a preset is recorded with (":ldlat=N" added for load latency).
std::string PresetEventName(const EventPreset& preset, uint32_t ldlat_cycles);

struct EncodedEvent {
  perf_event_attr attr{};  // type, config, config1 (and exclude_* for user level)
  std::string
      fully_qualified;  // libpfm4's canonical form, e.g. "skx::MEM_LOAD_RETIRED:L3_MISS:..."
};

// Encodes `name` for perf_event_open with pfm_get_os_event_encoding (user level only) and
// sets precise_ip. NotFound "event NAME is unknown for this CPU (core PMU X)" with the
// presets listed; InvalidArgument for a bad attribute.
absl::StatusOr<EncodedEvent> EncodeEvent(const std::string& name, int precise_ip);

}  // namespace tiergym::prof

#endif  // TIERGYM_PROFILER_EVENT_PRESETS_H_

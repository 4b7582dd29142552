#include "profiler/event_presets.h"

#include <perfmon/pfmlib_perf_event.h>
#include <strings.h>

#include <cstdlib>
#include <cstring>
#include <mutex>

#include "traces/base/strings.h"

namespace tiergym::prof {
namespace {

std::mutex& LibpfmMutex() {
  static std::mutex m;
  return m;
}

bool g_initialized = false;

absl::Status InitLocked(bool reinitialize) {
  if (g_initialized && !reinitialize) return absl::OkStatus();
  if (g_initialized) pfm_terminate();
  g_initialized = false;
  const int r = pfm_initialize();
  if (r != PFM_SUCCESS) {
    return absl::InternalError(StrCat("libpfm4 initialisation failed: ", pfm_strerror(r)));
  }
  g_initialized = true;
  return absl::OkStatus();
}

absl::StatusOr<std::string> ActiveCorePmuLocked() {
  // A forced PMU comes first: libpfm4 keeps PMUs of an earlier initialisation flagged
  // present after pfm_terminate(), so after re-initialising with another forced PMU the
  // first present one may be stale.
  const char* forced = std::getenv("LIBPFM_FORCE_PMU");
  pfm_pmu_info_t info;
  for (int pass = forced != nullptr ? 0 : 1; pass < 2; ++pass) {
    for (int p = PFM_PMU_NONE + 1; p < PFM_PMU_MAX; ++p) {
      std::memset(&info, 0, sizeof info);
      info.size = sizeof info;
      if (pfm_get_pmu_info(static_cast<pfm_pmu_t>(p), &info) != PFM_SUCCESS) continue;
      if (!info.is_present || info.type != PFM_PMU_TYPE_CORE) continue;
      if (pass == 0 && strcasecmp(info.name, forced) != 0) continue;
      return std::string(info.name);
    }
  }
  return absl::NotFoundError(
      "libpfm4 finds no core PMU on this CPU (virtual machines often expose none)");
}

}  // namespace

const std::vector<EventPreset>& EventPresets() {
  static const std::vector<EventPreset> kPresets = {
      {"knl", "Knights Landing", "MEM_UOPS_RETIRED:L2_MISS_LOADS", false},
      {"skx", "Skylake-SP", "MEM_LOAD_RETIRED:L3_MISS", false},
      {"clx", "Cascade Lake", "MEM_LOAD_RETIRED:L3_MISS", false},
      {"icx", "Ice Lake-SP", "MEM_LOAD_RETIRED:L3_MISS", false},
      {"spr", "Sapphire Rapids", "MEM_TRANS_RETIRED:LOAD_LATENCY", true},
  };
  return kPresets;
}

std::string DescribePresets() {
  std::string out;
  for (const EventPreset& p : EventPresets()) {
    StrAppend(&out, out.empty() ? "" : ", ", p.pmu, " ", p.event, p.load_latency ? ":ldlat=N" : "",
              " (", p.model, ")");
  }
  return out;
}

absl::Status InitializeLibpfm(bool reinitialize) {
  std::lock_guard<std::mutex> lock(LibpfmMutex());
  return InitLocked(reinitialize);
}

absl::StatusOr<std::string> ActiveCorePmu() {
  std::lock_guard<std::mutex> lock(LibpfmMutex());
  absl::Status s = InitLocked(false);
  if (!s.ok()) return s;
  return ActiveCorePmuLocked();
}

absl::StatusOr<EventPreset> PresetForThisCpu() {
  auto pmu = ActiveCorePmu();
  if (!pmu.ok()) {
    return absl::NotFoundError(
        StrCat(pmu.status().message(), "; presets exist for ", DescribePresets()));
  }
  for (const EventPreset& p : EventPresets()) {
    if (p.pmu == *pmu) return p;
  }
  return absl::NotFoundError(StrCat("no PEBS preset for the core PMU '", *pmu,
                                    "' of this CPU; give --event NAME (a libpfm4 PEBS event "
                                    "with data addresses). Presets: ",
                                    DescribePresets()));
}

std::string PresetEventName(const EventPreset& preset, uint32_t ldlat_cycles) {
  if (!preset.load_latency) return preset.event;
  return StrCat(preset.event, ":ldlat=", ldlat_cycles);
}

absl::StatusOr<EncodedEvent> EncodeEvent(const std::string& name, int precise_ip) {
  std::lock_guard<std::mutex> lock(LibpfmMutex());
  absl::Status s = InitLocked(false);
  if (!s.ok()) return s;
  EncodedEvent out;
  pfm_perf_encode_arg_t arg;
  std::memset(&arg, 0, sizeof arg);
  arg.size = sizeof arg;
  arg.attr = &out.attr;
  char* fstr = nullptr;
  arg.fstr = &fstr;
  // An unqualified name is looked up on the core PMU first (libpfm4 would otherwise take
  // the first active PMU that knows it, which need not be the core's).
  int r = PFM_ERR_NOTFOUND;
  auto core = ActiveCorePmuLocked();
  if (core.ok() && name.find("::") == std::string::npos) {
    const std::string qualified = *core + "::" + name;
    r = pfm_get_os_event_encoding(qualified.c_str(), PFM_PLM3, PFM_OS_PERF_EVENT_EXT, &arg);
  }
  if (r == PFM_ERR_NOTFOUND) {
    std::memset(&out.attr, 0, sizeof out.attr);
    r = pfm_get_os_event_encoding(name.c_str(), PFM_PLM3, PFM_OS_PERF_EVENT_EXT, &arg);
  }
  if (r != PFM_SUCCESS) {
    auto pmu = ActiveCorePmuLocked();
    const std::string on = pmu.ok() ? StrCat("core PMU ", *pmu) : std::string("no core PMU");
    if (r == PFM_ERR_NOTFOUND) {
      return absl::NotFoundError(StrCat("event '", name, "' is unknown for this CPU (", on,
                                        "). Presets: ", DescribePresets()));
    }
    return absl::InvalidArgumentError(
        StrCat("event '", name, "' cannot be encoded (", on, "): ", pfm_strerror(r)));
  }
  if (fstr != nullptr) {
    out.fully_qualified = fstr;
    free(fstr);
  }
  out.attr.size = sizeof(perf_event_attr);
  if (precise_ip > 0 && out.attr.precise_ip == 0) out.attr.precise_ip = precise_ip & 3;
  return out;
}

}  // namespace tiergym::prof

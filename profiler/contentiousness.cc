#include "profiler/contentiousness.h"

// linux/perf_event.h first: libpfm4's copy of the ABI then steps aside.
#include <linux/perf_event.h>
#include <perfmon/pfmlib_perf_event.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>

#include "profiler/event_presets.h"
#include "profiler/perf_session.h"
#include "traces/base/file.h"
#include "traces/base/status_macros.h"
#include "traces/base/strings.h"

namespace tiergym::prof {
namespace {

namespace fs = std::filesystem;

constexpr char kAppsHeader[] = "app,read_gbps,write_gbps";

uint64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

struct OpenCounter {
  int fd = -1;
  bool read = false;
  bool mcdram = false;
};

// Whether libpfm4 reports the PMU named `name` as present on this machine.
bool PmuPresent(const std::string& name) {
  pfm_pmu_info_t info;
  for (int p = PFM_PMU_NONE + 1; p < PFM_PMU_MAX; ++p) {
    std::memset(&info, 0, sizeof info);
    info.size = sizeof info;
    if (pfm_get_pmu_info(static_cast<pfm_pmu_t>(p), &info) != PFM_SUCCESS) continue;
    if (info.is_present && name == info.name) return true;
  }
  return false;
}

}  // namespace

const std::vector<CasCounterSet>& CasCounterSets() {
  static const std::vector<CasCounterSet> kSets = {
      {"knl_unc_imc", 6, "UNC_M_CAS_COUNT:RD", "UNC_M_CAS_COUNT:WR", "DDR"},
      {"knl_unc_edc_eclk", 8, "UNC_E_RPQ_INSERTS", "UNC_E_WPQ_INSERTS", "MCDRAM"},
      {"skx_unc_imc", 6, "UNC_M_CAS_COUNT:RD", "UNC_M_CAS_COUNT:WR", "DDR"},
      {"icx_unc_imc", 12, "UNC_M_CAS_COUNT:RD", "UNC_M_CAS_COUNT:WR", "DDR"},
      {"spr_unc_imc", 12, "UNC_M_CAS_COUNT:RD", "UNC_M_CAS_COUNT:WR", "DDR"},
  };
  return kSets;
}

double ContentiousnessResult::read_gbps() const {
  return runtime_ns > 0 ? 64.0 * static_cast<double>(read_cas) / static_cast<double>(runtime_ns)
                        : 0;
}

double ContentiousnessResult::write_gbps() const {
  return runtime_ns > 0 ? 64.0 * static_cast<double>(write_cas) / static_cast<double>(runtime_ns)
                        : 0;
}

absl::StatusOr<uint64_t> EncodeRawEvent(const std::string& name) {
  TG_RETURN_IF_ERROR(InitializeLibpfm());
  pfm_pmu_encode_arg_t arg;
  std::memset(&arg, 0, sizeof arg);
  arg.size = sizeof arg;
  const int r = pfm_get_os_event_encoding(name.c_str(), PFM_PLM0 | PFM_PLM3, PFM_OS_NONE, &arg);
  if (r != PFM_SUCCESS) {
    return absl::NotFoundError(StrCat("libpfm4 cannot encode '", name, "': ", pfm_strerror(r)));
  }
  const uint64_t code = arg.count > 0 ? arg.codes[0] : 0;
  free(arg.codes);
  return code;
}

absl::StatusOr<ContentiousnessResult> MeasureContentiousness(const LaunchOptions& launch) {
  TG_RETURN_IF_ERROR(InitializeLibpfm());
  ContentiousnessResult result;
  std::vector<OpenCounter> counters;
  auto close_all = [&] {
    for (const OpenCounter& c : counters) ::close(c.fd);
  };
  std::string looked_for;
  for (const CasCounterSet& set : CasCounterSets()) {
    StrAppend(&looked_for, looked_for.empty() ? "" : ", ", set.pmu_prefix, "0..", set.boxes - 1);
    for (int box = 0; box < set.boxes; ++box) {
      const std::string pmu = StrCat(set.pmu_prefix, box);
      if (!PmuPresent(pmu)) continue;
      for (bool is_read : {true, false}) {
        const std::string name = StrCat(pmu, "::", is_read ? set.read_event : set.write_event);
        perf_event_attr attr;
        std::memset(&attr, 0, sizeof attr);
        pfm_perf_encode_arg_t arg;
        std::memset(&arg, 0, sizeof arg);
        arg.size = sizeof arg;
        arg.attr = &attr;
        const int r =
            pfm_get_os_event_encoding(name.c_str(), PFM_PLM0 | PFM_PLM3, PFM_OS_PERF_EVENT, &arg);
        if (r != PFM_SUCCESS) {
          close_all();
          return absl::InternalError(StrCat("libpfm4 cannot encode ", name, ": ", pfm_strerror(r)));
        }
        attr.size = sizeof attr;
        attr.disabled = 1;
        attr.exclude_kernel = 0;
        attr.exclude_user = 0;
        // The PMU's socket representatives: its sysfs cpumask ("0,28").
        std::vector<int> cpus = {0};
        for (const std::string& sysfs :
             {StrCat("uncore_imc_", box), StrCat("uncore_edc_eclk_", box)}) {
          auto mask = ReadFile(StrCat("/sys/bus/event_source/devices/", sysfs, "/cpumask"));
          if (!mask.ok()) continue;
          std::string text = *mask;
          while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
          auto parsed = ParseCpuList(text);
          if (parsed.ok()) cpus = *parsed;
          break;
        }
        for (int cpu : cpus) {
          const int fd = static_cast<int>(
              ::syscall(SYS_perf_event_open, &attr, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC));
          if (fd < 0) {
            const int err = errno;
            close_all();
            if (err == EACCES || err == EPERM) {
              return absl::PermissionDeniedError(
                  StrCat("cannot count ", name, " on cpu ", cpu,
                         ": uncore counters are CPU-wide and "
                         "need root or `sudo sysctl -w kernel.perf_event_paranoid=0` (now ",
                         PerfEventParanoid(), ")"));
            }
            return ErrnoStatus(err, StrCat("perf_event_open(", name, ", cpu ", cpu, ")"));
          }
          counters.push_back(OpenCounter{fd, is_read, set.memory == "MCDRAM"});
        }
      }
      result.boxes.push_back(pmu);
    }
  }
  if (counters.empty()) {
    auto core = ActiveCorePmu();
    return absl::UnimplementedError(StrCat(
        "no uncore memory-controller PMU on this machine (libpfm4 finds none of ", looked_for,
        "; core PMU ", core.ok() ? *core : std::string("none"),
        "). Virtual machines rarely expose uncore counters: measure on the HPC node itself"));
  }
  TG_ASSIGN_OR_RETURN(StoppedChild child, StoppedChild::Spawn(launch));
  for (const OpenCounter& c : counters) ::ioctl(c.fd, PERF_EVENT_IOC_ENABLE, 0);
  const uint64_t start = NowNs();
  absl::Status released = child.Release();
  absl::StatusOr<int> status = released.ok() ? child.Wait() : absl::StatusOr<int>(released);
  const uint64_t end = NowNs();
  for (const OpenCounter& c : counters) {
    ::ioctl(c.fd, PERF_EVENT_IOC_DISABLE, 0);
    uint64_t value = 0;
    if (::read(c.fd, &value, sizeof value) == static_cast<ssize_t>(sizeof value)) {
      (c.read ? result.read_cas : result.write_cas) += value;
      if (c.mcdram) (c.read ? result.mcdram_read : result.mcdram_write) += value;
    }
  }
  close_all();
  if (!status.ok()) return status.status();
  result.wait_status = *status;
  result.runtime_ns = end - start;
  return result;
}

absl::Status AppendAppsCsv(const std::string& path, const std::string& app, double read_gbps,
                           double write_gbps) {
  if (app.empty() || app.find_first_of(",\n\r\"") != std::string::npos) {
    return absl::InvalidArgumentError(
        StrCat("app name '", app, "' is empty or holds a comma, quote or line break"));
  }
  std::string text;
  if (fs::exists(path)) {
    TG_ASSIGN_OR_RETURN(text, ReadFile(path));
    const std::string first = text.substr(0, text.find('\n'));
    std::string header = first;
    if (!header.empty() && header.back() == '\r') header.pop_back();
    if (header.rfind(kAppsHeader, 0) != 0) {
      return absl::InvalidArgumentError(
          StrCat(path, ":1: column-line: expected ", kAppsHeader, ", found '", header, "'"));
    }
    if (!text.empty() && text.back() != '\n') text += '\n';
  } else {
    text = StrCat(kAppsHeader, "\n");
  }
  StrAppend(&text, app, ",", FixedDecimal(read_gbps, 4), ",", FixedDecimal(write_gbps, 4), "\n");
  return WriteFileAtomically(path, text);
}

}  // namespace tiergym::prof

// `tiergym-prof contentiousness`: what an application puts on the memory when it runs
// solo (Zacarias et al., section 3.4), from the memory controllers' uncore CAS counters.
//
// Read and write bandwidth = 64 bytes x CAS count / runtime, summed over every memory
// controller channel (and, on Knights Landing, over the MCDRAM EDC read/write queue
// inserts, also 64-byte transfers). The counters are named as libpfm4 names them and
// encoded by libpfm4 (no libpfm4 header in this file):
//   knl   knl_unc_imc0..5::UNC_M_CAS_COUNT:RD / :WR         (raw 0x0103 / 0x0203)
//         knl_unc_edc_eclk0..7::UNC_E_RPQ_INSERTS / UNC_E_WPQ_INSERTS (0x0101 / 0x0102)
//   skx, clx  skx_unc_imc0..5::UNC_M_CAS_COUNT:RD / :WR    (raw 0x0304 / 0x0c04)
//   icx   icx_unc_imc0..11::UNC_M_CAS_COUNT:RD / :WR       (libpfm4 newer than 4.13)
//   spr   spr_unc_imc0..11::UNC_M_CAS_COUNT:RD / :WR       (libpfm4 newer than 4.13)
// Uncore counters are per socket: each is opened CPU-wide (pid -1) on the CPUs of the
// PMU's sysfs cpumask, which needs root or kernel.perf_event_paranoid <= 0. They count
// everything on the node, so the measurement is meaningful on an otherwise idle machine.
//
// Thread-safety: uses libpfm4 without the lock of event_presets.h; call from one thread
// (the command line does).
#ifndef TIERGYM_PROFILER_CONTENTIOUSNESS_H_
#define TIERGYM_PROFILER_CONTENTIOUSNESS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "profiler/launcher.h"

namespace tiergym::prof {

// One kind of uncore box and its read/write CAS (or equivalent) events.
struct CasCounterSet {
  std::string pmu_prefix;  // libpfm4 PMU name without the box number, e.g. "skx_unc_imc"
  int boxes = 0;           // box numbers 0..boxes-1
  std::string read_event;  // e.g. "UNC_M_CAS_COUNT:RD"
  std::string write_event;
  std::string memory;  // what it measures: "DDR" or "MCDRAM"
};

// Every counter set known, all models.
const std::vector<CasCounterSet>& CasCounterSets();

// The libpfm4 raw code of an event (PFM_OS_NONE), e.g. 0x0304 for
// "skx_unc_imc0::UNC_M_CAS_COUNT:RD". For tests: with LIBPFM_ENCODE_INACTIVE=1 (read when
// libpfm4 initialises) it encodes events of PMUs this machine lacks.
absl::StatusOr<uint64_t> EncodeRawEvent(const std::string& name);

struct ContentiousnessResult {
  uint64_t runtime_ns = 0;
  int wait_status = 0;
  uint64_t read_cas = 0, write_cas = 0;        // summed over boxes and sockets
  uint64_t mcdram_read = 0, mcdram_write = 0;  // KNL EDC, included in the above
  double read_gbps() const;                    // 64 B x read_cas / runtime
  double write_gbps() const;
  std::vector<std::string> boxes;  // the PMUs counted, e.g. "skx_unc_imc0"
};

// Runs the command (memory binding etc. from `launch`) with the uncore counters of this
// machine counting. Unimplemented naming what was looked for when the machine exposes no
// uncore memory-controller PMU (a VM usually exposes none); PermissionDenied with the
// sysctl when CPU-wide counting is not allowed.
absl::StatusOr<ContentiousnessResult> MeasureContentiousness(const LaunchOptions& launch);

// Appends `app,read_gbps,write_gbps` (4 decimals) to an apps.csv
// (estimator/contention/SENSITIVITY_CSV.md), writing the column line first when the file is
// new. InvalidArgument when an existing file has another column line or the app name
// holds a comma.
absl::Status AppendAppsCsv(const std::string& path, const std::string& app, double read_gbps,
                           double write_gbps);

}  // namespace tiergym::prof

#endif  // TIERGYM_PROFILER_CONTENTIOUSNESS_H_

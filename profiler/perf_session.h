// The perf events of one recorded run: per CPU, one group that follows every thread of
// the process (inherit), and the ring buffer it writes into.
//
// For each CPU c the session opens, on the process `pid` (before it execs):
//   leader   the counter read with every sample (PERF_FORMAT_GROUP): retired
//            instructions under PEBS, the software stand-in otherwise; disabled until
//            exec (enable_on_exec), pinned when it is a hardware counter; optionally
//            sampling itself every leader_tick_period counts (ids in leader_ids());
//   sampler  the memory sampling event (PEBS load event with precise_ip, or the software
//            page-fault event), with the MMAP/COMM/TASK side records;
//   probes   one uprobe event per phasemark probe (PMU `uprobe`, config1 = file path,
//            config2 = file offset);
// the group with inherit, sample_id_all and use_clockid CLOCK_MONOTONIC. The probes'
// output is redirected (PERF_EVENT_IOC_SET_OUTPUT) into the sampler's ring, so samples
// and marks of one CPU arrive in one time-ordered stream. Probes cannot be inherited (the
// kernel re-reads the probe's path pointer in the forking application when a thread is
// created, and clone() then fails with EFAULT), so with inherit they are CPU-wide events
// (pid -1) outside the group: a mark does not read the leader, and marks of other
// processes hitting the same probe must be filtered out by pid (the assembler does).
// Without inherit (cpus = {-1}) the probes join the group. Per-CPU rings are required: the kernel
// refuses to mmap an inherited per-task event (cpu == -1). PERF_SAMPLE_READ on inherited
// events needs Linux 6.12 or later (per-thread counts).
//
// Failures to open are explained: perf_event_paranoid too high (PermissionDenied, with the
// sysctl to change), precise_ip refused (Unimplemented: PEBS absent, use the software
// backend), no hardware PMU, no uprobe PMU, inherit + PERF_SAMPLE_READ refused by an
// older kernel (FailedPrecondition), too many open files (ResourceExhausted).
//
// Thread-safety: DrainRing(i) may run in one thread while another thread only reads the
// ids; the session is otherwise owned by one thread. Destruction closes every event.
#ifndef TIERGYM_PROFILER_PERF_SESSION_H_
#define TIERGYM_PROFILER_PERF_SESSION_H_

#include <linux/perf_event.h>
#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "profiler/perf_records.h"

namespace tiergym::prof {

// A uprobe at the entry of a function: file path and byte offset in the file.
struct ProbeSpec {
  std::string path;
  uint64_t offset = 0;
  std::string label;  // e.g. "phasemark" or "libfoo.so:solve", for messages
};

struct SessionOptions {
  pid_t pid = -1;
  // CPUs to open a group on. Empty (default): every online CPU, with inherit. {-1}: one
  // group on the thread `pid` only, without inherit (for kernels older than 6.12, which
  // refuse PERF_SAMPLE_READ with inherit); threads it creates are not followed.
  std::vector<int> cpus;
  // type/config (config1 for extra encodings) of the leader and the sampler. The session
  // sets the sampling, format and inheritance fields itself.
  perf_event_attr leader{};
  std::string leader_name;
  perf_event_attr sampler{};
  std::string sampler_name;
  uint64_t sample_period = 1;  // of the sampler; probes always sample every hit
  // When > 0 the leader samples itself every this many counts ("ticks": records that
  // only carry the counter, so that a mark of a CPU-wide probe finds its thread's counter
  // close to the mark). Default 0: the leader only counts.
  uint64_t leader_tick_period = 0;
  // Extra sample_type bits for the sampler and probes (e.g. PERF_SAMPLE_WEIGHT).
  uint64_t extra_sample_type = 0;
  // When not 0, every event also samples these user registers (PERF_SAMPLE_REGS_USER;
  // bits of enum perf_event_x86_regs), as the timer backend's decoding needs.
  uint64_t sample_regs_user = 0;
  std::vector<ProbeSpec> probes;
  // Data pages of each ring, a power of two. Default 512 (2 MiB with 4 KiB pages).
  size_t ring_data_pages = 512;
};

class PerfSession {
 public:
  static absl::StatusOr<std::unique_ptr<PerfSession>> Open(const SessionOptions& options);
  ~PerfSession();

  const RecordLayout& layout() const { return layout_; }
  size_t num_rings() const { return rings_.size(); }
  int ring_fd(size_t i) const { return rings_[i].fd; }
  int ring_cpu(size_t i) const { return rings_[i].cpu; }

  // Passes the unread records of ring i to `fn` and frees their space. Returns the bytes
  // consumed. On DataLoss (a corrupt record) the rest of the unread data is skipped so
  // that the ring keeps flowing; the error is returned.
  absl::StatusOr<uint64_t> DrainRing(size_t i, const RecordFn& fn);

  const absl::flat_hash_set<uint64_t>& sample_ids() const { return sample_ids_; }
  const absl::flat_hash_set<uint64_t>& mark_ids() const { return mark_ids_; }
  const absl::flat_hash_set<uint64_t>& leader_ids() const { return leader_ids_; }

  // The leader's total count summed over CPUs (read(2) of each group), e.g. the process's
  // retired instructions. 0 when it cannot be read.
  uint64_t ReadLeaderTotal() const;

 private:
  struct Ring {
    int fd = -1;  // the sampler's fd, which owns the mapping
    int cpu = -1;
    void* base = nullptr;
    size_t map_bytes = 0;
    size_t data_bytes = 0;
  };

  PerfSession() = default;

  RecordLayout layout_;
  std::vector<int> fds_;  // every fd opened, closed at destruction
  std::vector<int> leader_fds_;
  std::vector<Ring> rings_;
  absl::flat_hash_set<uint64_t> sample_ids_, mark_ids_, leader_ids_;
};

// The CPUs the kernel lists as online (/sys/devices/system/cpu/online).
absl::StatusOr<std::vector<int>> OnlineCpus();

// The dynamic PMU type of the `uprobe` PMU (/sys/bus/event_source/devices/uprobe/type).
// Unimplemented when the kernel has none (CONFIG_UPROBE_EVENTS off).
absl::StatusOr<uint32_t> UprobePmuType();

// kernel.perf_event_paranoid, or 99 when unreadable.
int PerfEventParanoid();

}  // namespace tiergym::prof

#endif  // TIERGYM_PROFILER_PERF_SESSION_H_

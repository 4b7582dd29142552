#include "profiler/perf_session.h"

#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>

#include "profiler/launcher.h"
#include "traces/base/file.h"
#include "traces/base/status_macros.h"
#include "traces/base/strings.h"

namespace tiergym::prof {
namespace {

constexpr uint64_t kSampleType = PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_IP | PERF_SAMPLE_TID |
                                 PERF_SAMPLE_TIME | PERF_SAMPLE_ADDR | PERF_SAMPLE_CPU |
                                 PERF_SAMPLE_READ;
constexpr uint64_t kReadFormat = PERF_FORMAT_GROUP | PERF_FORMAT_ID;

int PerfEventOpen(perf_event_attr* attr, pid_t pid, int cpu, int group_fd) {
  return static_cast<int>(
      ::syscall(SYS_perf_event_open, attr, pid, cpu, group_fd, PERF_FLAG_FD_CLOEXEC));
}

std::string ReadSysctl(const char* path) {
  auto text = ReadFile(path);
  if (!text.ok()) return "?";
  std::string s = *text;
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

bool IsHardware(const perf_event_attr& a) {
  return a.type == PERF_TYPE_HARDWARE || a.type == PERF_TYPE_RAW || a.type == PERF_TYPE_HW_CACHE;
}

// Tries `attr` alone (no group) on pid/cpu; true when the kernel accepts it.
bool Accepts(perf_event_attr attr, pid_t pid, int cpu) {
  attr.disabled = 1;
  attr.enable_on_exec = 0;
  const int fd = PerfEventOpen(&attr, pid, cpu, -1);
  if (fd < 0) return false;
  ::close(fd);
  return true;
}

// Explains why perf_event_open(`attr`) failed with `err`, in terms of what to do.
absl::Status ExplainOpenFailure(const perf_event_attr& attr, const std::string& name, int err,
                                pid_t pid, int cpu, uint32_t uprobe_type) {
  const std::string what = StrCat("perf_event_open(", name, ", cpu ", cpu, ")");
  const int paranoid = PerfEventParanoid();
  if (err == EACCES || err == EPERM) {
    if (attr.type == uprobe_type && uprobe_type != 0) {
      return absl::PermissionDeniedError(StrCat(
          what, " refused (", std::strerror(err),
          "): uprobe events (the phasemark probes) need root or CAP_PERFMON; "
          "kernel.perf_event_paranoid is ",
          paranoid,
          ". Run tiergym-prof as root, or record without phasemarks (--phasemark-lib none)"));
    }
    return absl::PermissionDeniedError(StrCat(
        what, " refused (", std::strerror(err), "): kernel.perf_event_paranoid is ", paranoid,
        ". Run as root, or allow user-space sampling of your own processes with "
        "`sudo sysctl -w kernel.perf_event_paranoid=1` (values above 2 forbid it entirely)"));
  }
  if (err == EMFILE || err == ENFILE) {
    return absl::ResourceExhaustedError(
        StrCat(what, ": too many open files (one group of events per CPU); raise `ulimit -n`"));
  }
  if (err == EBUSY) {
    return absl::UnavailableError(
        StrCat(what,
               ": the PMU is busy (another perf session or the NMI watchdog holds the "
               "counters); stop it or `sysctl -w kernel.nmi_watchdog=0`"));
  }
  if (attr.precise_ip > 0 && (err == EOPNOTSUPP || err == EINVAL || err == ENOENT)) {
    perf_event_attr imprecise = attr;
    imprecise.precise_ip = 0;
    imprecise.inherit = 0;
    imprecise.sample_type &= ~static_cast<uint64_t>(PERF_SAMPLE_READ);
    imprecise.read_format = 0;
    if (Accepts(imprecise, pid, cpu)) {
      return absl::UnimplementedError(
          StrCat(what, ": precise_ip=", attr.precise_ip, " refused (", std::strerror(err),
                 "), so PEBS is absent or not exposed (virtual machines rarely expose it). Record "
                 "with --backend software, or run on a host where PEBS is available"));
    }
  }
  if (IsHardware(attr) && (err == ENOENT || err == ENODEV || err == EOPNOTSUPP)) {
    return absl::UnimplementedError(
        StrCat(what, " refused (", std::strerror(err),
               "): this machine exposes no hardware PMU for it (a VM without a virtual PMU?). "
               "Record with --backend software"));
  }
  if (err == EINVAL && attr.inherit && (attr.sample_type & PERF_SAMPLE_READ)) {
    perf_event_attr no_read = attr;
    no_read.sample_type &= ~static_cast<uint64_t>(PERF_SAMPLE_READ);
    no_read.read_format = 0;
    if (Accepts(no_read, pid, cpu)) {
      return absl::FailedPreconditionError(
          StrCat(what,
                 ": this kernel refuses PERF_SAMPLE_READ on inherited events (Linux 6.12 "
                 "added it), so the counter cannot be read with each sample of every thread. "
                 "Use --no-inherit to follow the first thread only, or a newer kernel"));
    }
  }
  if (err == EINVAL && attr.use_clockid) {
    perf_event_attr no_clock = attr;
    no_clock.use_clockid = 0;
    if (Accepts(no_clock, pid, cpu)) {
      return absl::FailedPreconditionError(
          StrCat(what, ": this kernel refuses use_clockid CLOCK_MONOTONIC (Linux 4.1+)"));
    }
  }
  return absl::InternalError(StrCat(what, " failed: ", std::strerror(err), " (type ", attr.type,
                                    ", config ", Hex(attr.config), ")"));
}

void CommonFields(perf_event_attr& a, bool inherit) {
  a.size = sizeof(perf_event_attr);
  a.inherit = inherit ? 1 : 0;
  a.read_format = kReadFormat;
  a.exclude_kernel = 1;
  a.exclude_hv = 1;
  a.use_clockid = 1;
  a.clockid = CLOCK_MONOTONIC;
}

}  // namespace

int PerfEventParanoid() {
  auto text = ReadFile("/proc/sys/kernel/perf_event_paranoid");
  if (!text.ok()) return 99;
  return std::atoi(text->c_str());
}

absl::StatusOr<std::vector<int>> OnlineCpus() {
  TG_ASSIGN_OR_RETURN(std::string text, ReadFile("/sys/devices/system/cpu/online"));
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return ParseCpuList(text);
}

absl::StatusOr<uint32_t> UprobePmuType() {
  auto text = ReadFile("/sys/bus/event_source/devices/uprobe/type");
  if (!text.ok()) {
    return absl::UnimplementedError(
        "this kernel has no uprobe PMU (/sys/bus/event_source/devices/uprobe/type is "
        "missing; CONFIG_UPROBE_EVENTS), so phasemarks cannot be recorded");
  }
  return static_cast<uint32_t>(std::strtoul(text->c_str(), nullptr, 10));
}

absl::StatusOr<std::unique_ptr<PerfSession>> PerfSession::Open(const SessionOptions& options) {
  if (options.pid <= 0) return absl::InvalidArgumentError("no process to record");
  const size_t pages = options.ring_data_pages;
  if (pages == 0 || (pages & (pages - 1)) != 0) {
    return absl::InvalidArgumentError(
        StrCat("ring size of ", pages, " pages is not a power of two"));
  }
  std::vector<int> cpus = options.cpus;
  if (cpus.empty()) {
    TG_ASSIGN_OR_RETURN(cpus, OnlineCpus());
  }
  uint32_t uprobe_type = 0;
  if (!options.probes.empty()) {
    TG_ASSIGN_OR_RETURN(uprobe_type, UprobePmuType());
  }
  const bool inherit = !(cpus.size() == 1 && cpus[0] == -1);
  std::unique_ptr<PerfSession> s(new PerfSession());
  s->layout_.sample_type = kSampleType | options.extra_sample_type;
  s->layout_.read_format = kReadFormat;
  s->layout_.sample_id_all = true;
  if (options.sample_regs_user != 0) {
    s->layout_.sample_type |= PERF_SAMPLE_REGS_USER;
    s->layout_.sample_regs_user = options.sample_regs_user;
  }
  TG_RETURN_IF_ERROR(ValidateLayout(s->layout_));
  const size_t page_bytes = static_cast<size_t>(::sysconf(_SC_PAGESIZE));

  for (int cpu : cpus) {
    perf_event_attr leader = options.leader;
    CommonFields(leader, inherit);
    leader.disabled = 1;
    leader.enable_on_exec = 1;
    leader.pinned = IsHardware(leader) ? 1 : 0;
    leader.sample_period = options.leader_tick_period;
    leader.sample_type = options.leader_tick_period > 0 ? s->layout_.sample_type : 0;
    leader.sample_regs_user = options.leader_tick_period > 0 ? s->layout_.sample_regs_user : 0;
    leader.sample_id_all = options.leader_tick_period > 0 ? 1 : 0;
    const int leader_fd = PerfEventOpen(&leader, options.pid, cpu, -1);
    if (leader_fd < 0) {
      return ExplainOpenFailure(leader, options.leader_name, errno, options.pid, cpu, uprobe_type);
    }
    s->fds_.push_back(leader_fd);
    s->leader_fds_.push_back(leader_fd);
    uint64_t id = 0;
    if (::ioctl(leader_fd, PERF_EVENT_IOC_ID, &id) != 0) {
      return ErrnoStatus(errno, "PERF_EVENT_IOC_ID");
    }
    s->leader_ids_.insert(id);

    perf_event_attr sampler = options.sampler;
    CommonFields(sampler, inherit);
    sampler.sample_period = options.sample_period;
    sampler.sample_type = s->layout_.sample_type;
    sampler.sample_regs_user = s->layout_.sample_regs_user;
    sampler.sample_id_all = 1;
    sampler.mmap = 1;
    sampler.mmap_data = 1;
    sampler.mmap2 = 1;
    sampler.comm = 1;
    sampler.task = 1;
    sampler.watermark = 1;
    sampler.wakeup_watermark = static_cast<uint32_t>(pages * page_bytes / 4);
    const int sampler_fd = PerfEventOpen(&sampler, options.pid, cpu, leader_fd);
    if (sampler_fd < 0) {
      return ExplainOpenFailure(sampler, options.sampler_name, errno, options.pid, cpu,
                                uprobe_type);
    }
    s->fds_.push_back(sampler_fd);
    if (::ioctl(sampler_fd, PERF_EVENT_IOC_ID, &id) != 0)
      return ErrnoStatus(errno, "PERF_EVENT_IOC_ID");
    s->sample_ids_.insert(id);

    Ring ring;
    ring.fd = sampler_fd;
    ring.cpu = cpu;
    ring.map_bytes = (pages + 1) * page_bytes;
    ring.data_bytes = pages * page_bytes;
    ring.base = ::mmap(nullptr, ring.map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, sampler_fd, 0);
    if (ring.base == MAP_FAILED) {
      const int err = errno;
      if (err == EPERM || err == ENOMEM) {
        return absl::ResourceExhaustedError(
            StrCat("cannot map a ring of ", ring.map_bytes / 1024, " KiB for cpu ", cpu, " (",
                   std::strerror(err), "): the locked-memory budget kernel.perf_event_mlock_kb is ",
                   ReadSysctl("/proc/sys/kernel/perf_event_mlock_kb"),
                   " KiB per user; use a smaller --mmap-pages or run as root"));
      }
      return ErrnoStatus(err, "mmap of the perf ring");
    }
    s->rings_.push_back(ring);
    if (options.leader_tick_period > 0 &&
        ::ioctl(leader_fd, PERF_EVENT_IOC_SET_OUTPUT, sampler_fd) != 0) {
      return ErrnoStatus(errno, "PERF_EVENT_IOC_SET_OUTPUT of the leader");
    }

    for (const ProbeSpec& probe : options.probes) {
      // An inherited uprobe event cannot exist: when the process creates a thread, the
      // kernel initialises the inherited copy by reading the probe path (config1) again
      // as a user pointer, now in the application's memory, and clone() fails with
      // EFAULT. So with inherit the probes are CPU-wide events (every process hitting the
      // probe on this CPU; the assembler keeps the recorded process's), outside the
      // group, writing into this CPU's ring; without inherit they join the group.
      perf_event_attr p{};
      CommonFields(p, /*inherit=*/false);
      p.type = uprobe_type;
      p.config = 0;  // entry probe (bit 0 set would be a return probe)
      p.config1 = reinterpret_cast<uint64_t>(probe.path.c_str());
      p.config2 = probe.offset;
      p.sample_period = 1;
      p.sample_type = s->layout_.sample_type;
      p.sample_regs_user = s->layout_.sample_regs_user;
      p.sample_id_all = 1;
      p.exclude_kernel = 0;  // a uprobe fires in user space; the flag does not apply
      const pid_t probe_pid = inherit ? -1 : options.pid;
      const int probe_group = inherit ? -1 : leader_fd;
      const int probe_fd = PerfEventOpen(&p, probe_pid, cpu, probe_group);
      if (probe_fd < 0) {
        const int err = errno;
        if (err == ENOENT || err == EINVAL) {
          return absl::InvalidArgumentError(StrCat("cannot attach the uprobe ", probe.label, " (",
                                                   probe.path, " + ", Hex(probe.offset),
                                                   "): ", std::strerror(err)));
        }
        return ExplainOpenFailure(p, StrCat("uprobe ", probe.label), err, probe_pid, cpu,
                                  uprobe_type);
      }
      s->fds_.push_back(probe_fd);
      if (::ioctl(probe_fd, PERF_EVENT_IOC_SET_OUTPUT, sampler_fd) != 0) {
        return ErrnoStatus(errno, "PERF_EVENT_IOC_SET_OUTPUT of a uprobe");
      }
      if (::ioctl(probe_fd, PERF_EVENT_IOC_ID, &id) != 0) {
        return ErrnoStatus(errno, "PERF_EVENT_IOC_ID");
      }
      s->mark_ids_.insert(id);
      if (inherit && ::ioctl(probe_fd, PERF_EVENT_IOC_ENABLE, 0) != 0) {
        return ErrnoStatus(errno, "PERF_EVENT_IOC_ENABLE of a uprobe");
      }
    }
  }
  return s;
}

PerfSession::~PerfSession() {
  for (Ring& r : rings_) {
    if (r.base != nullptr && r.base != MAP_FAILED) ::munmap(r.base, r.map_bytes);
  }
  for (int fd : fds_) ::close(fd);
}

absl::StatusOr<uint64_t> PerfSession::DrainRing(size_t i, const RecordFn& fn) {
  Ring& r = rings_[i];
  auto* page = static_cast<perf_event_mmap_page*>(r.base);
  const uint64_t head = __atomic_load_n(&page->data_head, __ATOMIC_ACQUIRE);
  const uint64_t tail = page->data_tail;
  if (head == tail) return 0;
  const uint64_t data_offset =
      page->data_offset != 0 ? page->data_offset : r.map_bytes - r.data_bytes;
  std::span<const uint8_t> data(static_cast<const uint8_t*>(r.base) + data_offset, r.data_bytes);
  auto walked = ForEachRingRecord(data, tail, head, fn);
  const uint64_t new_tail = walked.ok() ? *walked : head;
  __atomic_store_n(&page->data_tail, new_tail, __ATOMIC_RELEASE);
  if (!walked.ok()) return walked.status();
  return new_tail - tail;
}

uint64_t PerfSession::ReadLeaderTotal() const {
  uint64_t total = 0;
  for (int fd : leader_fds_) {
    uint64_t buf[1 + 2 * ReadBlock::kMaxValues] = {};
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n >= 24 && buf[0] >= 1) total += buf[1];
  }
  return total;
}

}  // namespace tiergym::prof

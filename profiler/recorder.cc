#include "profiler/recorder.h"

#include <fcntl.h>
#include <linux/perf_event.h>
#include <poll.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <utility>

#include "absl/strings/str_join.h"
#include "profiler/access_decoder.h"
#include "profiler/efault_counter.h"
#include "profiler/elf_symbols.h"
#include "profiler/event_presets.h"
#include "profiler/launcher.h"
#include "profiler/stoppable_thread.h"
#include "profiler/trace_assembler.h"
#include "profiler/write_tracker.h"
#include "traces/base/file.h"
#include "traces/base/status_macros.h"
#include "traces/base/strings.h"

extern char** environ;

namespace tiergym::prof {
namespace {

namespace fs = std::filesystem;

constexpr uint64_t kDefaultPebsPeriod = 2003;
constexpr uint64_t kDefaultTimerPeriodNs = 100'000;
constexpr char kAgentName[] = "libtiergym_swsample.so";

uint64_t MonotonicNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

std::atomic<pid_t> g_forward_pid{0};
std::atomic<int> g_forwarded_signal{0};  // the last signal passed on to the command

void ForwardSignal(int sig) {
  const pid_t pid = g_forward_pid.load();
  if (pid > 0) {
    g_forwarded_signal = sig;
    ::kill(pid, sig);
  }
}

// Forwards SIGINT/SIGTERM/SIGHUP to the recorded command while alive, so that ^C ends
// the command (and the trace is still written) rather than the recorder.
class SignalForwarder {
 public:
  explicit SignalForwarder(pid_t pid) {
    g_forwarded_signal = 0;
    g_forward_pid = pid;
    struct sigaction sa;
    std::memset(&sa, 0, sizeof sa);
    sa.sa_handler = ForwardSignal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    for (int i = 0; i < 3; ++i) ::sigaction(kSignals[i], &sa, &old_[i]);
  }
  ~SignalForwarder() {
    for (int i = 0; i < 3; ++i) ::sigaction(kSignals[i], &old_[i], nullptr);
    g_forward_pid = 0;
  }

 private:
  static constexpr int kSignals[3] = {SIGINT, SIGTERM, SIGHUP};
  struct sigaction old_[3];
};

// Empties the rings of a session into an assembler from its own thread.
class Drainer {
 public:
  Drainer(PerfSession* session, TraceAssembler* assembler)
      : session_(session), assembler_(assembler) {}

  void Start() {
    thread_.Start([this] { Loop(); });
  }

  // Drains what is left and joins the thread.
  void Stop() { thread_.Stop(); }

  [[nodiscard]] uint64_t ring_errors() const { return ring_errors_; }
  [[nodiscard]] const std::string& first_error() const { return first_error_; }
  [[nodiscard]] uint64_t bytes() const { return bytes_; }

  // Timer backend: samples of `tick_ids` become the access of the instruction they
  // interrupted (or are dropped when it made none); `counts` (read after Stop) says how
  // the ticks went. Call before Start.
  void DecodeTicks(const absl::flat_hash_set<uint64_t>& tick_ids,
                   RecordSummary::TimerCounts* counts) {
    tick_ids_ = &tick_ids;
    timer_ = counts;
  }

 private:
  // Timer backend: false when the record is a tick that gave no access.
  bool Decode(PerfRecord& r) {
    if (r.type() == RecordType::kMmap2 && (r.mmap_prot & PROT_EXEC) != 0) {
      code_.NoteMapping(static_cast<pid_t>(r.pid), r.mmap_addr, r.mmap_addr + r.mmap_len,
                        r.mmap_pgoff, r.filename);
      return true;
    }
    if (r.type() != RecordType::kSample || !tick_ids_->contains(r.sample_id.id)) return true;
    ++timer_->ticks;
    if (r.regs_abi == 0) {
      ++timer_->unreadable;
      return false;
    }
    const uint64_t ip = r.regs[8];  // PERF_REG_X86_IP
    DecodedAccess access;
    NoAccess why = NoAccess::kNone;
    size_t at = 0;
    const auto code = code_.Read(static_cast<pid_t>(r.sample_id.pid), ip, &at);
    if (!decoder_.Decode(code, at, ip, r.regs, &access, &why)) {
      if (why == NoAccess::kNoMemoryOperand) {
        ++timer_->no_memory_operand;
      } else if (why == NoAccess::kUnsupported) {
        ++timer_->unsupported;
      } else {
        ++timer_->unreadable;
      }
      return false;
    }
    // The access's kind goes where PEBS puts it, the data source's mem_op bits (the
    // assembler's op column).
    if (access.kind == AccessKind::kRead) {
      ++timer_->reads;
      r.data_src = PERF_MEM_S(OP, LOAD);
    } else if (access.kind == AccessKind::kWrite) {
      ++timer_->writes;
      r.data_src = PERF_MEM_S(OP, STORE);
    } else {
      ++timer_->read_writes;
      r.data_src = PERF_MEM_S(OP, LOAD) | PERF_MEM_S(OP, STORE);
    }
    r.addr = access.address;
    return true;
  }

  void DrainAll() {
    const RecordLayout layout = session_->layout();
    for (size_t i = 0; i < session_->num_rings(); ++i) {
      auto n = session_->DrainRing(i, [&](std::span<const uint8_t> bytes) {
        auto record = ParsePerfRecord(bytes, layout);
        if (!record.ok()) return record.status();
        if (timer_ != nullptr && !Decode(*record)) return absl::OkStatus();
        assembler_->Add(*record);
        return absl::OkStatus();
      });
      if (n.ok()) {
        bytes_ += *n;
      } else {
        ++ring_errors_;
        if (first_error_.empty()) first_error_ = std::string(n.status().message());
      }
    }
  }

  void Loop() {
    std::vector<pollfd> fds;
    for (size_t i = 0; i < session_->num_rings(); ++i) {
      fds.push_back(pollfd{session_->ring_fd(i), POLLIN, 0});
    }
    fds.push_back(pollfd{thread_.wake_fd(), POLLIN, 0});
    while (!thread_.stopping()) {
      // The watermark wakes us when a ring is a quarter full; the timeout bounds the
      // latency for slow streams.
      ::poll(fds.data(), fds.size(), 20);
      DrainAll();
    }
    DrainAll();
  }

  PerfSession* session_;
  TraceAssembler* assembler_;
  const absl::flat_hash_set<uint64_t>* tick_ids_ = nullptr;
  RecordSummary::TimerCounts* timer_ = nullptr;
  AccessDecoder decoder_;
  CodeReader code_;
  uint64_t ring_errors_ = 0;
  uint64_t bytes_ = 0;
  std::string first_error_;
  StoppableThread thread_;  // last: stopped before the members its loop uses go
};

// Runs `executable` under the dynamic loader's trace mode and returns its stdout.
absl::StatusOr<std::string> TraceLoadedObjects(const std::string& executable) {
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) return ErrnoStatus(errno, "pipe");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, "LD_PRELOAD=", 11) != 0) env_strings.emplace_back(*e);
  }
  env_strings.emplace_back("LD_TRACE_LOADED_OBJECTS=1");
  std::vector<char*> envp;
  envp.reserve(env_strings.size() + 1);
  for (std::string& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  char* argv[] = {const_cast<char*>(executable.c_str()), nullptr};
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, executable.c_str(), &actions, nullptr, argv, envp.data());
  posix_spawn_file_actions_destroy(&actions);
  ::close(out[1]);
  if (rc != 0) {
    ::close(out[0]);
    return ErrnoStatus(rc, StrCat("cannot run ", executable, " to list its libraries"));
  }
  std::string text;
  char buf[4096];
  while (true) {
    const ssize_t n = ::read(out[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  ::close(out[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return text;
}

// Finds `symbol` in `path`, or NotFound naming both.
absl::StatusOr<ProbeSpec> ProbeAt(const std::string& path, const std::string& symbol) {
  TG_ASSIGN_OR_RETURN(ElfFile elf, ElfFile::Open(path));
  std::optional<ElfSymbol> s = elf.FindFunction(symbol);
  if (!s) return absl::NotFoundError(StrCat(path, " defines no function '", symbol, "'"));
  ProbeSpec p;
  p.path = path;
  p.offset = s->file_offset;
  p.label = StrCat(fs::path(path).filename().string(), ":", symbol);
  return p;
}

// The session of the backends without a PMU (timer, software): a task-clock leader read
// every 0.2 ms of the thread's CPU time (the instructions column's stand-in) and the
// software event `sampler_config` as the sampler.
void UseSoftwareEvents(uint64_t sampler_config, const char* sampler_name, SessionOptions* session,
                       RecordSummary* summary) {
  summary->counter = "task-clock-ns";
  session->leader.type = PERF_TYPE_SOFTWARE;
  session->leader.config = PERF_COUNT_SW_TASK_CLOCK;
  session->leader_name = "task-clock";
  session->leader_tick_period = 200'000;
  session->sampler = perf_event_attr{};
  session->sampler.type = PERF_TYPE_SOFTWARE;
  session->sampler.config = sampler_config;
  session->sampler_name = sampler_name;
  session->extra_sample_type = 0;
}

}  // namespace

absl::StatusOr<Backend> ParseBackend(const std::string& name) {
  if (name == "auto") return Backend::kAuto;
  if (name == "pebs") return Backend::kPebs;
  if (name == "software") return Backend::kSoftware;
  if (name == "timer") return Backend::kTimer;
  return absl::InvalidArgumentError(
      StrCat("--backend '", name, "' is not one of pebs, software, timer, auto"));
}

std::string FindBundledLibrary(const std::string& name) {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  for (const fs::path& candidate :
       {exe.parent_path().parent_path() / "lib" / name, exe.parent_path() / name}) {
    if (fs::is_regular_file(candidate, ec)) return candidate.lexically_normal().string();
  }
  return "";
}

absl::StatusOr<std::vector<std::string>> LoadedLibraries(const std::string& executable) {
  TG_ASSIGN_OR_RETURN(ElfFile elf, ElfFile::Open(executable));
  std::vector<std::string> libs;
  if (!elf.has_interpreter()) return libs;
  TG_ASSIGN_OR_RETURN(std::string text, TraceLoadedObjects(executable));
  // Lines: "\tlibfoo.so.1 => /usr/lib/libfoo.so.1 (0x...)" or "\t/lib64/ld-linux... (0x...)".
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(pos, end - pos);
    pos = end + 1;
    const size_t arrow = line.find("=> ");
    std::string path = arrow != std::string::npos ? line.substr(arrow + 3) : line;
    const size_t first = path.find_first_not_of(" \t");
    if (first == std::string::npos) continue;
    path = path.substr(first);
    const size_t paren = path.find(" (");
    if (paren != std::string::npos) path = path.substr(0, paren);
    if (!path.empty() && path[0] == '/') libs.push_back(path);
  }
  return libs;
}

absl::StatusOr<std::vector<ProbeSpec>> ResolveProbes(const std::string& executable,
                                                     const RecordOptions& options,
                                                     std::vector<std::string>* notes) {
  std::vector<ProbeSpec> probes;
  std::vector<std::string> libs;
  bool libs_listed = false;
  auto list_libs = [&]() -> absl::Status {
    if (libs_listed) return absl::OkStatus();
    TG_ASSIGN_OR_RETURN(libs, LoadedLibraries(executable));
    libs_listed = true;
    return absl::OkStatus();
  };
  // Searches the executable, then its libraries in load order.
  auto find_anywhere = [&](const std::string& symbol) -> absl::StatusOr<ProbeSpec> {
    auto in_exe = ProbeAt(executable, symbol);
    if (in_exe.ok() || in_exe.status().code() != absl::StatusCode::kNotFound) return in_exe;
    TG_RETURN_IF_ERROR(list_libs());
    for (const std::string& lib : libs) {
      auto in_lib = ProbeAt(lib, symbol);
      if (in_lib.ok()) return in_lib;
    }
    return absl::NotFoundError(StrCat("no function '", symbol, "' in ", executable, " or the ",
                                      libs.size(), " libraries it loads"));
  };

  if (options.phasemark_lib == "none") {
    // No phasemark probe.
  } else if (!options.phasemark_lib.empty()) {
    TG_ASSIGN_OR_RETURN(ProbeSpec p, ProbeAt(options.phasemark_lib, "phasemark"));
    probes.push_back(std::move(p));
  } else {
    auto in_exe = ProbeAt(executable, "phasemark");
    if (in_exe.ok()) {
      probes.push_back(*in_exe);
    } else if (in_exe.status().code() == absl::StatusCode::kInvalidArgument) {
      // Not an ELF file: a script, whose interpreter's libraries say nothing about the
      // program it runs.
      if (notes != nullptr) {
        notes->push_back(StrCat(executable,
                                " is not an ELF executable (a script?): no "
                                "automatic phasemark probe; give --phasemark-lib "
                                "PATH or --phasemark-at PATH:SYMBOL"));
      }
    } else {
      TG_RETURN_IF_ERROR(list_libs());
      for (const std::string& lib : libs) {
        if (fs::path(lib).filename().string().rfind("libphasemark.so", 0) != 0) continue;
        TG_ASSIGN_OR_RETURN(ProbeSpec p, ProbeAt(lib, "phasemark"));
        probes.push_back(std::move(p));
        break;
      }
      if (probes.empty() && notes != nullptr) {
        notes->push_back(
            StrCat("the command neither defines phasemark() nor loads libphasemark.so: the trace "
                   "holds phases only from --phasemark-at probes (",
                   options.phasemark_at.size(), " given)"));
      }
    }
  }
  for (const std::string& spec : options.phasemark_at) {
    const size_t colon = spec.rfind(':');
    if (colon != std::string::npos && colon > 0 && spec.find('/') != std::string::npos) {
      TG_ASSIGN_OR_RETURN(ProbeSpec p, ProbeAt(spec.substr(0, colon), spec.substr(colon + 1)));
      probes.push_back(std::move(p));
    } else {
      TG_ASSIGN_OR_RETURN(ProbeSpec p, find_anywhere(spec));
      probes.push_back(std::move(p));
    }
  }
  if (probes.size() + 2 > ReadBlock::kMaxValues) {
    return absl::InvalidArgumentError(StrCat("at most ", ReadBlock::kMaxValues - 2,
                                             " probe points per recording, ", probes.size(),
                                             " asked"));
  }
  return probes;
}

absl::StatusOr<RecordSummary> RecordCommand(const RecordOptions& options) {
  if (options.command.empty()) return absl::InvalidArgumentError("no command to record");
  if (options.output.empty()) return absl::InvalidArgumentError("no output file (-o)");
  if (options.device.empty()) {
    return absl::InvalidArgumentError("the tier the run is placed on is not named (--device)");
  }
  const std::string executable = ResolveCommand(options.command[0]);
  if (executable.empty()) {
    return absl::NotFoundError(
        StrCat("command '", options.command[0], "' not found (or not executable)"));
  }
  RecordSummary summary;

  // Pick the backend and build the two event attributes.
  SessionOptions session;
  Backend backend = options.backend;
  std::string event_name;
  if (backend != Backend::kSoftware && backend != Backend::kTimer) {
    std::string name = options.event;
    absl::Status why_not = absl::OkStatus();
    if (name.empty()) {
      auto preset = PresetForThisCpu();
      if (preset.ok()) {
        name = PresetEventName(*preset, options.ldlat_cycles);
      } else {
        why_not = preset.status();
      }
    }
    if (why_not.ok()) {
      auto encoded = EncodeEvent(name, options.precise_ip);
      if (encoded.ok()) {
        session.sampler = encoded->attr;
        session.sampler_name = name;
        if (name.find("ldlat=") != std::string::npos) {
          session.extra_sample_type = PERF_SAMPLE_WEIGHT;
        }
        // Probe PEBS on ourselves first: the child's environment depends on the backend.
        perf_event_attr probe = session.sampler;
        probe.size = sizeof probe;
        probe.sample_period = 100000;
        probe.sample_type = PERF_SAMPLE_ADDR;
        probe.disabled = 1;
        probe.exclude_kernel = 1;
        auto open_probe = [](perf_event_attr a) {
          const int fd =
              static_cast<int>(::syscall(SYS_perf_event_open, &a, 0, -1, -1, PERF_FLAG_FD_CLOEXEC));
          const int err = fd < 0 ? errno : 0;
          if (fd >= 0) ::close(fd);
          return err;
        };
        const int err = open_probe(probe);
        if (err == EACCES || err == EPERM) {
          why_not = absl::PermissionDeniedError(
              StrCat("perf_event_open(", name, ") refused: kernel.perf_event_paranoid is ",
                     PerfEventParanoid(),
                     "; run as root or `sudo sysctl -w kernel.perf_event_paranoid=1`"));
        } else if (err != 0) {
          perf_event_attr imprecise = probe;
          imprecise.precise_ip = 0;
          if (probe.precise_ip > 0 && open_probe(imprecise) == 0) {
            why_not = absl::UnimplementedError(
                StrCat("the CPU counts ", name, " but refuses precise_ip=", probe.precise_ip, " (",
                       std::strerror(err), "): PEBS is absent or disabled"));
          } else {
            why_not = absl::UnimplementedError(
                StrCat("the CPU refuses ", name, " (", std::strerror(err),
                       "): no hardware PMU for it (a VM without a virtual PMU?)"));
          }
        }
      } else {
        why_not = encoded.status();
      }
    }
    if (!why_not.ok()) {
      if (backend == Backend::kPebs || why_not.code() == absl::StatusCode::kPermissionDenied) {
        return absl::Status(
            why_not.code(),
            StrCat(why_not.message(), ". Without PEBS, record with --backend software"));
      }
      summary.notes.push_back(StrCat("--backend auto: PEBS unavailable (", why_not.message(),
                                     "); using the software backend"));
      backend = Backend::kSoftware;
    } else {
      backend = Backend::kPebs;
      event_name = name;
    }
  }

  LaunchOptions launch;
  launch.argv = options.command;
  std::unique_ptr<WriteTracker> tracker;  // the software backend's re-arming
  launch.membind_node = options.numa_node;
  launch.cpu_node = options.cpu_node;
  launch.keep_aslr = options.keep_aslr;
  uint64_t period = options.period;
  if (backend == Backend::kPebs) {
    summary.backend = "pebs";
    summary.event = event_name;
    summary.counter = "instructions";
    session.leader.type = PERF_TYPE_HARDWARE;
    session.leader.config = PERF_COUNT_HW_INSTRUCTIONS;
    session.leader_name = "instructions";
    session.leader_tick_period = 10'000'000;  // a counter reading every 10M instructions
    if (period == 0) period = kDefaultPebsPeriod;
  } else if (backend == Backend::kTimer) {
    summary.backend = "timer";
    summary.event = "task-clock-ip";
    UseSoftwareEvents(PERF_COUNT_SW_TASK_CLOCK, "task-clock (sampling)", &session, &summary);
    session.sample_regs_user = kTimerRegsMask;
    if (period == 0) period = kDefaultTimerPeriodNs;
  } else {
    summary.backend = "software";
    summary.event = "page-faults";
    UseSoftwareEvents(PERF_COUNT_SW_PAGE_FAULTS, "page-faults", &session, &summary);
    if (period == 0) period = 1;
    if (options.rearm_interval_us > 0) {
      std::string agent =
          options.agent_path.empty() ? FindBundledLibrary(kAgentName) : options.agent_path;
      if (agent.empty() || !fs::is_regular_file(agent)) {
        return absl::NotFoundError(
            StrCat("the software backend needs its agent ", kAgentName,
                   " (looked in ../lib next to tiergym-prof); give its path with --agent, or "
                   "record first touches only with --rearm-us 0"));
      }
      WriteTrackerOptions tracker_options;
      tracker_options.interval_us = options.rearm_interval_us;
      TG_ASSIGN_OR_RETURN(tracker, WriteTracker::Listen(tracker_options));
      const char* old_preload = std::getenv("LD_PRELOAD");
      launch.env.emplace_back("LD_PRELOAD", old_preload != nullptr && *old_preload != '\0'
                                                ? StrCat(agent, ":", old_preload)
                                                : agent);
      launch.env.emplace_back("TIERGYM_SWSAMPLE_SOCKET", tracker->socket_name());
    }
  }
  session.sample_period = period;
  session.ring_data_pages = options.ring_data_pages;
  if (options.no_inherit) session.cpus = {-1};

  TG_ASSIGN_OR_RETURN(session.probes, ResolveProbes(executable, options, &summary.notes));
  for (const ProbeSpec& p : session.probes) summary.probes.push_back(p.label);

  TG_ASSIGN_OR_RETURN(StoppedChild child, StoppedChild::Spawn(launch));
  session.pid = child.pid();
  TG_ASSIGN_OR_RETURN(std::unique_ptr<PerfSession> perf, PerfSession::Open(session));
  absl::StatusOr<EfaultCounter> efaults = EfaultCounter::Open(child.pid());
  if (!efaults.ok()) summary.efault_check = std::string(efaults.status().message());

  AssemblerConfig config;
  config.main_tid = static_cast<uint32_t>(child.pid());
  config.sample_ids = perf->sample_ids();
  config.mark_ids = perf->mark_ids();
  config.leader_ids = perf->leader_ids();
  config.per_cpu_counters = !options.no_inherit;
  config.weight_column = (session.extra_sample_type & PERF_SAMPLE_WEIGHT) != 0;
  config.op_column = backend == Backend::kTimer;
  uint64_t start_ns = 0, end_ns = 0;
  int wait_status = 0;
  TraceAssembler assembler(config);
  {
    Drainer drainer(perf.get(), &assembler);
    if (backend == Backend::kTimer) {
      drainer.DecodeTicks(perf->sample_ids(), &summary.timer);
    }
    drainer.Start();
    SignalForwarder forward(child.pid());
    if (tracker != nullptr) tracker->Start(child.pid());
    start_ns = MonotonicNs();
    absl::Status released = child.Release();
    if (!released.ok()) {
      drainer.Stop();
      return released;
    }
    TG_ASSIGN_OR_RETURN(wait_status, child.Wait());
    end_ns = MonotonicNs();
    if (tracker != nullptr) tracker->Stop();
    drainer.Stop();
    summary.ring_errors = drainer.ring_errors();
    if (drainer.ring_errors() > 0) {
      summary.notes.push_back(StrCat(drainer.ring_errors(), " corrupt ring reads were skipped (",
                                     drainer.first_error(), ")"));
    }
  }
  summary.counter_total = perf->ReadLeaderTotal();
  if (efaults.ok()) {
    summary.efault_returns = efaults->Read();
    if (summary.efault_returns < 0) summary.efault_check = "the counter could not be read";
  }
  perf.reset();

  const std::string app =
      options.app.empty() ? fs::path(options.command[0]).filename().string() : options.app;
  std::optional<uint64_t> pebs_reset;
  if (backend == Backend::kPebs) pebs_reset = period;
  TraceMetadata metadata = TraceMetadata::Make(app, options.device, summary.event, pebs_reset,
                                               static_cast<uint32_t>(::sysconf(_SC_PAGESIZE)));
  metadata.entries.emplace_back("backend", summary.backend);
  metadata.entries.emplace_back("instructions_counter", summary.counter);
  metadata.entries.emplace_back("sample_period", StrCat(period));
  if (backend == Backend::kTimer) {
    metadata.entries.emplace_back("sample_period_unit", "ns of the thread's CPU time");
    metadata.entries.emplace_back(
        "samples",
        "the data address that the instruction interrupted by a CPU-time tick was "
        "about to access (reads and writes; one tick per sample_period)");
  } else if (backend == Backend::kSoftware) {
    metadata.entries.emplace_back(
        "samples", options.rearm_interval_us > 0
                       ? "page faults: first touches, and first writes after each re-arm"
                       : "page faults: first touches");
  }
  if (options.numa_node >= 0) metadata.entries.emplace_back("numa_node", StrCat(options.numa_node));
  const std::string command_line = absl::StrJoin(options.command, " ");
  metadata.entries.emplace_back("command", command_line);

  summary.counts = assembler.counts();
  summary.unknown_id_samples = assembler.unknown_id_samples();
  summary.wait_status = wait_status;
  metadata.entries.emplace_back("lost_records", StrCat(summary.counts.lost));
  metadata.entries.emplace_back("throttled", StrCat(summary.counts.throttles));
  TG_ASSIGN_OR_RETURN(Trace trace, assembler.Finish(options.output, metadata, start_ns, end_ns));
  summary.marks = assembler.num_marks();
  summary.samples = trace.num_samples();
  summary.phases = trace.num_phases();
  summary.runtime_ns = trace.runtime_ns();
  TG_RETURN_IF_ERROR(SaveTrace(trace, options.output, options.format));
  summary.trace_path = options.output;
  const std::vector<MmapEntry> mmaps = assembler.Mmaps(start_ns);
  summary.mmaps = mmaps.size();
  summary.layout_path = options.output + ".mmaps";
  TG_RETURN_IF_ERROR(WriteFileAtomically(summary.layout_path,
                                         FormatMmapLayout(mmaps, {{"app", app},
                                                                  {"device", options.device},
                                                                  {"pid", StrCat(child.pid())},
                                                                  {"command", command_line}})));

  if (summary.counts.lost > 0 || summary.counts.lost_samples > 0) {
    summary.notes.push_back(
        StrCat(summary.counts.lost, " records (", summary.counts.lost_samples,
               " samples) were lost: the rings filled faster than they were drained. Use a larger "
               "--mmap-pages (now ",
               options.ring_data_pages, ") or a larger --period (now ", period, ")"));
  }
  if (summary.counts.throttles > 0) {
    auto rate = ReadFile("/proc/sys/kernel/perf_event_max_sample_rate");
    summary.notes.push_back(
        StrCat("the kernel throttled sampling ", summary.counts.throttles,
               " times (PERF_RECORD_THROTTLE; kernel.perf_event_max_sample_rate = ",
               rate.ok() ? std::string(rate->substr(0, rate->find('\n'))) : std::string("?"),
               " per second): samples are missing while throttled. Use a larger --period (now ",
               period, ") or raise the sysctl"));
  }
  if (tracker != nullptr) {
    const WriteTrackerStats ts = tracker->stats();
    summary.write_tracking = true;
    summary.tracked_processes = ts.processes;
    summary.rearm_rounds = ts.rounds;
    summary.rearm_busy_ns = ts.busy_ns;
    if (!ts.setup_error.empty()) {
      summary.notes.push_back(StrCat("write tracking refused a process: ", ts.setup_error));
    }
    if (!ts.stopped_reason.empty()) summary.notes.push_back(ts.stopped_reason);
    if (ts.processes == 0) {
      summary.notes.emplace_back(
          "no process of the command handed its userfaultfd over (statically linked, setuid, "
          "or userfaultfd refused by the kernel): samples are first touches only");
    }
  }
  if (WIFSIGNALED(wait_status) && WTERMSIG(wait_status) == g_forwarded_signal.exchange(0)) {
    summary.failure = StrCat("the command was ended by ", DescribeWaitStatus(wait_status),
                             ", which tiergym-prof received and passed on (^C or kill): the "
                             "trace covers the run up to there");
  } else if (WIFSIGNALED(wait_status)) {
    summary.failure =
        StrCat("the command was killed by ", DescribeWaitStatus(wait_status),
               " while recorded. Run it alone: if it does not die there, the recording harmed "
               "it, which must not happen; please report it");
  } else if (!WIFEXITED(wait_status) || WEXITSTATUS(wait_status) != 0) {
    summary.failure = StrCat("the command ended with ", DescribeWaitStatus(wait_status),
                             ": the trace may not cover a complete run");
  }
  if (summary.efault_returns > 0) {
    const std::string efault =
        StrCat(summary.efault_returns,
               " system calls of the command failed with EFAULT (bad address) while recorded. "
               "Run it alone: if they do not fail there, the recording harmed it");
    summary.failure = summary.failure.empty() ? efault : StrCat(summary.failure, "; ", efault);
  }
  if (backend == Backend::kTimer) {
    summary.notes.emplace_back(
        StrCat("timer backend: a sample is the data access of the instruction that a tick of the "
               "thread's CPU time (every ",
               period,
               " ns) interrupted, reads and writes alike; ticks on other instructions give "
               "none; the instructions column is the thread's CPU time in ns"));
    if (summary.timer.ticks > 0 && summary.timer.unreadable * 2 > summary.timer.ticks) {
      summary.notes.emplace_back(
          "most ticks could not be decoded (the instructions' bytes unreadable): run the "
          "recorder as the command's user or root so that it can read the command's memory");
    }
  }
  if (backend == Backend::kSoftware) {
    summary.notes.emplace_back(
        options.rearm_interval_us > 0
            ? "software backend: samples are page faults: the first touch of each page, and "
              "the first write to each page after each re-arm; the instructions column is the "
              "thread's CPU time in ns"
            : "software backend, --rearm-us 0: samples are first touches only; the "
              "instructions column is the thread's CPU time in ns");
  }
  return summary;
}

std::string FormatRecordSummary(const RecordSummary& s) {
  std::string out;
  StrAppend(&out, "recorded ", s.trace_path, " (layout ", s.layout_path, ")\n");
  StrAppend(&out, "  backend ", s.backend, ", event ", s.event, ", counter ", s.counter, "\n");
  StrAppend(&out, "  runtime ", FixedDecimal(static_cast<double>(s.runtime_ns) / 1e9, 3), " s, ",
            DescribeWaitStatus(s.wait_status), "\n");
  StrAppend(&out, "  samples ", s.samples, ", phasemarks ", s.marks, " (", s.phases,
            " phases), mappings ", s.mmaps, "\n");
  StrAppend(&out, "  lost records ", s.counts.lost, " (in ", s.counts.lost_records,
            " LOST records), lost samples ", s.counts.lost_samples, ", throttled ",
            s.counts.throttles, " times\n");
  StrAppend(&out, "  threads started ", s.counts.forks, ", ended ", s.counts.exits, ", ", s.counter,
            " total ", s.counter_total, "\n");
  StrAppend(&out, "  probes ", s.probes.empty() ? "none" : absl::StrJoin(s.probes, ", "), "\n");
  if (s.backend == "software" && s.write_tracking) {
    StrAppend(&out, "  write tracking: ", s.tracked_processes, " processes, ", s.rearm_rounds,
              " re-arm rounds (", FixedDecimal(static_cast<double>(s.rearm_busy_ns) / 1e6, 1),
              " ms)\n");
  } else if (s.backend == "software") {
    StrAppend(&out, "  write tracking: off (--rearm-us 0)\n");
  } else if (s.backend == "timer") {
    const auto& t = s.timer;
    StrAppend(&out, "  ticks ", t.ticks, ": accesses ", t.reads + t.writes + t.read_writes,
              " (reads ", t.reads, ", writes ", t.writes, ", read-modify-writes ", t.read_writes,
              "), no data access ", t.no_memory_operand, ", unsupported ", t.unsupported,
              ", unreadable ", t.unreadable, "\n");
  }
  StrAppend(&out, "  EFAULT returns: ",
            s.efault_returns < 0 ? StrCat("not counted (", s.efault_check, ")")
                                 : StrCat(s.efault_returns),
            "\n");
  for (const std::string& n : s.notes) StrAppend(&out, "  note: ", n, "\n");
  StrAppend(&out,
            s.failure.empty() ? std::string("recording succeeded")
                              : StrCat("RECORDING FAILED: ", s.failure),
            "\n");
  return out;
}

}  // namespace tiergym::prof

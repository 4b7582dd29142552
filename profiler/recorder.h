// `tiergym-prof record`: one sampled run of a command with all its memory on one tier.
//
// RecordCommand() starts the command held before exec (launcher.h) with its memory bound
// to the tier's NUMA node, opens the perf events on it (perf_session.h), lets it run, and
// meanwhile drains the per-CPU rings in a separate thread that only copies and decodes
// records into memory: nothing is written to disk until the command has ended, so a slow
// disk never slows the application, and the rings are emptied every few milliseconds so
// the kernel rarely has to drop records (drops are counted from PERF_RECORD_LOST and
// reported). At the end it writes the trace (CSV v1 or binary) and, beside it,
// `<trace>.mmaps`, the address-space layout from the MMAP2 records.
//
// Backends:
//   pebs      the CPU model's preset (event_presets.h) or --event, precise_ip, with the
//             retired-instructions counter as group leader;
//   software  no PMU needed: the software page-fault event, sample period 1, with the
//             faulting data address; the LD_PRELOAD agent libtiergym_swsample.so hands
//             the recorder a userfaultfd of the process, through which a WriteTracker
//             (write_tracker.h) write-protects its anonymous memory again every interval
//             in asynchronous mode (no signals, nothing for the program to handle; see
//             profiler/README.md). The leader is the thread's CPU time (task-clock, ns),
//             the stated stand-in for instructions;
//   auto      pebs when a preset exists and the CPU accepts precise sampling, else
//             software.
// Phasemarks: a uprobe on `phasemark` of the libphasemark.so the command loads (or of the
// executable, when linked in statically), plus one per --phasemark-at SYMBOL.
//
// Not thread-safe: one recording per process at a time (it forwards SIGINT/SIGTERM to
// the command while it runs).
#ifndef TIERGYM_PROFILER_RECORDER_H_
#define TIERGYM_PROFILER_RECORDER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "profiler/perf_session.h"
#include "traces/trace_file.h"

namespace tiergym::prof {

// pebs: the CPU's PEBS event; software: page faults (first touches, and writes through
// the write tracker); timer: CPU-time ticks decoded into the memory access of the
// interrupted instruction (reads and writes, no PMU; access_decoder.h).
enum class Backend { kAuto, kPebs, kSoftware, kTimer };

// "auto", "pebs", "software" or "timer".
absl::StatusOr<Backend> ParseBackend(const std::string& name);

struct RecordOptions {
  std::vector<std::string> command;  // required
  std::string output;                // required: the trace file
  TraceFormat format = TraceFormat::kCsv;
  std::string app;     // the trace's `app`; default: the command's file name
  std::string device;  // required: the tier the run is placed on
  int numa_node = -1;  // bind memory here (MPOL_BIND); -1 (default): no binding
  int cpu_node = -1;   // run threads on this node's CPUs; -1 (default): anywhere
  Backend backend = Backend::kAuto;
  std::string event;  // libpfm4 event name; default: the CPU model's preset
  // Sample period: PEBS reset, page faults, or ns of CPU time (timer); 0: 2003 for PEBS,
  // 1 for software, 100000 (every 100 us of each thread's CPU time) for timer.
  uint64_t period = 0;
  int precise_ip = 2;           // PEBS precision asked for
  uint32_t ldlat_cycles = 128;  // load-latency threshold of load-latency presets
  // Path of the libphasemark.so (or binary) whose `phasemark` is probed; "" (default):
  // found in the command; "none": no phasemark probe.
  std::string phasemark_lib;
  // More probe points: "SYMBOL" (searched in the command and its libraries) or
  // "PATH:SYMBOL".
  std::vector<std::string> phasemark_at;
  bool no_inherit = false;       // follow the first thread only (old kernels)
  size_t ring_data_pages = 512;  // per CPU, a power of two
  bool keep_aslr = false;        // default: ASLR off, for comparable layouts
  // Software backend.
  std::string agent_path;              // default: ../lib/libtiergym_swsample.so near the binary
  uint32_t rearm_interval_us = 10000;  // how often pages are write-protected again; 0: never
                                       // (first touches only, no agent)
};

struct RecordSummary {
  std::string backend;  // "pebs", "software" or "timer"
  std::string event;    // what was sampled
  std::string counter;  // what the instructions column counts
  std::string trace_path, layout_path;
  std::vector<std::string> probes;  // probe labels
  uint64_t samples = 0;
  uint64_t marks = 0;
  uint64_t phases = 0;
  uint64_t runtime_ns = 0;
  uint64_t counter_total = 0;  // the leader summed over threads (instructions or CPU ns)
  RecordCounts counts;         // lost records, throttling, ...
  uint64_t unknown_id_samples = 0;
  uint64_t ring_errors = 0;
  uint64_t mmaps = 0;
  int wait_status = 0;
  // Software backend: the re-arming (write_tracker.h).
  bool write_tracking = false;     // the agent was preloaded (--rearm-us > 0)
  uint64_t tracked_processes = 0;  // process images that handed their userfaultfd over
  uint64_t rearm_rounds = 0;
  uint64_t rearm_busy_ns = 0;
  // Timer backend: what the ticks gave (access_decoder.h).
  struct TimerCounts {
    uint64_t ticks = 0;                               // samples of the timer in user mode
    uint64_t reads = 0, writes = 0, read_writes = 0;  // accesses, by operand action
    uint64_t no_memory_operand = 0;  // ticks on instructions that access no data memory
    uint64_t unsupported = 0;        // gathers, FS/GS-relative operands
    uint64_t unreadable = 0;         // the instruction's bytes could not be read or decoded
  } timer;
  // System calls of the command that returned EFAULT (raw_syscalls:sys_exit with ret ==
  // -EFAULT, counted over all its threads and children); -1 when they could not be
  // counted, and `efault_check` says why.
  int64_t efault_returns = -1;
  std::string efault_check;
  // Why the run is not a successful recording (it ended by a signal or with a non-zero
  // status, or system calls failed with EFAULT); empty when it is one.
  std::string failure;
  std::vector<std::string> notes;  // warnings with what to do about them
};

// Runs and records the command. The trace is written even when the command fails (its
// exit status is in the summary, and `failure` says the recording failed). Errors: InvalidArgument
// for bad options, NotFound for a command or symbol that cannot be found, and the explained
// perf_event_open failures.
absl::StatusOr<RecordSummary> RecordCommand(const RecordOptions& options);

// The end-of-run summary as text lines.
std::string FormatRecordSummary(const RecordSummary& summary);

// The file `name` next to the running binary: <dir of /proc/self/exe>/../lib/<name>, or
// "" when it does not exist there.
std::string FindBundledLibrary(const std::string& name);

// Resolved probe points of a command (exposed for tests): the phasemark probe (unless
// disabled) and each --phasemark-at. `notes` receives what was not found.
absl::StatusOr<std::vector<ProbeSpec>> ResolveProbes(const std::string& executable,
                                                     const RecordOptions& options,
                                                     std::vector<std::string>* notes);

// The shared libraries a dynamically linked executable loads, as the dynamic loader
// resolves them (LD_TRACE_LOADED_OBJECTS=1): absolute paths. Empty for a static one.
absl::StatusOr<std::vector<std::string>> LoadedLibraries(const std::string& executable);

}  // namespace tiergym::prof

#endif  // TIERGYM_PROFILER_RECORDER_H_

// Turns decoded perf records into a trace (CSV v1 semantics) and an address-space layout.
//
// The recorder opens, per CPU, one group {counter leader, memory sampler, phasemark
// probes...}; every sample reads the whole group, so each memory sample and each
// phasemark carries its thread's leader count (retired instructions under PEBS, the
// stated stand-in under the software backend). Records arrive from several rings (one
// per CPU), each in time order; the assembler keeps a compact copy of what it needs and,
// at Finish(), merges them by time and writes the rows:
//   - time_ns = record time - start_time (CLOCK_MONOTONIC ns since the run began);
//   - phase 0 starts at time 0; each phasemark record starts the next phase;
//   - instructions = instructions retired by the process since the current phase began:
//     the sum over threads (and over the per-CPU counters of each thread) of the counter
//     progress since the phase began, where a counter is known up to its latest record. Exact for a
//     single thread; for several threads the other threads' progress is known only up to their last
//     record (a lower bound), and a thread first seen in a phase counts from its creation;
//   - an M row carries the count of the phase it ends; the E row that of the last phase.
// Samples of event ids that are neither samplers nor probes are counted and dropped, and
// so are marks of processes other than the recorded one and those it forked (CPU-wide
// probes see every process). A mark whose record does not read the leader (CPU-wide
// probes) takes its thread's counter from the thread's latest sample.
//
// Not thread-safe: one assembler is fed by one drain thread, then finished.
#ifndef TIERGYM_PROFILER_TRACE_ASSEMBLER_H_
#define TIERGYM_PROFILER_TRACE_ASSEMBLER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "profiler/perf_records.h"
#include "traces/trace.h"

namespace tiergym::prof {

struct AssemblerConfig {
  // The recorded process: the tid written on the E row, and the pid whose marks (with
  // those of the processes it forks) are kept.
  uint32_t main_tid = 0;
  absl::flat_hash_set<uint64_t> sample_ids;  // ids of the memory sampling events
  absl::flat_hash_set<uint64_t> mark_ids;    // ids of the phasemark probe events
  // ids of the group leaders: a record's read value counts only when its first value
  // comes from one of them (CPU-wide probes read only themselves). Samples of a leader
  // ("ticks") update the counters and write no row.
  absl::flat_hash_set<uint64_t> leader_ids;
  // The leader is opened once per CPU (inherit needs per-CPU events), so a thread's count
  // is split over one counter per CPU it ran on: counters are then told apart by
  // (thread, cpu) and a thread's progress is the sum over its CPUs. false (one counter per
  // thread, without inherit): by thread only. Default true.
  bool per_cpu_counters = true;
  // Adds the `weight` column (PERF_SAMPLE_WEIGHT: load latency in cycles). Default off.
  bool weight_column = false;
  // Adds the `cpu` column (PERF_SAMPLE_CPU). Default off.
  bool cpu_column = false;
  // Adds the `op` column from each sample's data source (the mem_op bits of
  // PERF_SAMPLE_DATA_SRC, or what the timer backend's decoder put there): `S` when it says
  // store (a read-modify-write included: it dirties the line), `L` when it says load,
  // empty otherwise. Default off.
  bool op_column = false;
};

// One mapping the process created (PERF_RECORD_MMAP/MMAP2), for the layout sidecar.
struct MmapEntry {
  uint64_t time_ns = 0;  // since the start of the run (perf clock inside the assembler)
  uint32_t pid = 0, tid = 0;
  uint64_t start = 0, end = 0, pgoff = 0;
  uint32_t prot = 0, flags = 0;  // MMAP2 only; 0 for MMAP
  bool has_prot = false;
  bool data = false;  // PERF_RECORD_MISC_MMAP_DATA: a non-executable mapping
  std::string filename;
};

class TraceAssembler {
 public:
  explicit TraceAssembler(AssemblerConfig config);

  // Takes one record of any type (samples, marks, mmaps; the rest is only counted).
  void Add(const PerfRecord& record);

  const RecordCounts& counts() const { return counts_; }
  uint64_t num_samples() const { return num_samples_; }
  // Marks kept (after Finish(); before it, every probe record).
  uint64_t num_marks() const { return num_marks_; }
  // Marks of other processes, dropped (after Finish()).
  uint64_t foreign_marks() const { return foreign_marks_; }
  // Samples whose event id is neither a sampler nor a probe (dropped).
  uint64_t unknown_id_samples() const { return unknown_ids_; }

  // Builds the trace. `start_time_ns` is the perf-clock time of time 0 (the command was
  // released to exec; earlier records are put at 0), `end_time_ns` the time it ended (the
  // E row; raised to the last record's time if that is later). The mmaps are kept.
  absl::StatusOr<Trace> Finish(std::string source, const TraceMetadata& metadata,
                               uint64_t start_time_ns, uint64_t end_time_ns);

  // The mappings seen, in time order, times relative to `start_time_ns`. Protection
  // changes (MMAP2 records of mprotect) are folded away: pieces set to PROT_NONE are left
  // out, an anonymous piece overlapping an anonymous mapping already listed widens it.
  std::vector<MmapEntry> Mmaps(uint64_t start_time_ns) const;

 private:
  struct Event {
    uint64_t time = 0;
    uint64_t address = 0;
    uint64_t counter = 0;
    uint32_t pid = 0;
    uint32_t tid = 0;
    uint32_t weight = 0;
    uint16_t cpu = 0;
    uint8_t op = kUnknownOp;
    uint8_t is_mark = 0;
    uint8_t is_tick = 0;
    uint8_t has_counter = 0;
  };

  AssemblerConfig config_;
  RecordCounts counts_;
  std::vector<Event> events_;
  std::vector<MmapEntry> mmaps_;
  absl::flat_hash_set<uint32_t> forked_pids_;
  uint64_t num_samples_ = 0, num_marks_ = 0, unknown_ids_ = 0, foreign_marks_ = 0;
};

// The layout sidecar (`<trace>.mmaps`, documented in profiler/README.md): a version line,
// `# key=value` lines from `header`, a column line and one tab-separated row per mapping:
//   time_ns pid tid start end pgoff prot flags kind filename
// start/end/pgoff/flags in 0x hex, prot as "rwx" letters ("?" without MMAP2), kind "data"
// or "exec"; backslash, tab and newline in file names written as \\, \t, \n.
std::string FormatMmapLayout(const std::vector<MmapEntry>& mmaps,
                             const std::vector<std::pair<std::string, std::string>>& header);

}  // namespace tiergym::prof

#endif  // TIERGYM_PROFILER_TRACE_ASSEMBLER_H_

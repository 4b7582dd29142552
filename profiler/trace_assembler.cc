#include "profiler/trace_assembler.h"

#include <linux/perf_event.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstdio>

#include "absl/container/flat_hash_map.h"
#include "traces/base/strings.h"

namespace tiergym::prof {
namespace {

std::string ProtLetters(const MmapEntry& m) {
  if (!m.has_prot) return "?";
  std::string s = "---";
  if (m.prot & PROT_READ) s[0] = 'r';
  if (m.prot & PROT_WRITE) s[1] = 'w';
  if (m.prot & PROT_EXEC) s[2] = 'x';
  return s;
}

std::string EscapeField(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '\t')
      out += "\\t";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

}  // namespace

TraceAssembler::TraceAssembler(AssemblerConfig config) : config_(std::move(config)) {}

void TraceAssembler::Add(const PerfRecord& r) {
  counts_.Add(r);
  switch (r.type()) {
    case RecordType::kSample: {
      Event e;
      const uint64_t id = r.sample_id.id;
      if (config_.mark_ids.contains(id)) {
        e.is_mark = 1;
        ++num_marks_;
      } else if (config_.sample_ids.contains(id)) {
        ++num_samples_;
      } else if (config_.leader_ids.contains(id)) {
        e.is_tick = 1;  // the leader sampling itself: a counter reading, no row
      } else {
        ++unknown_ids_;
        return;
      }
      e.time = r.sample_id.time;
      e.pid = r.sample_id.pid;
      e.tid = r.sample_id.tid;
      e.address = r.addr;
      e.weight = static_cast<uint32_t>(std::min<uint64_t>(r.weight, 0xfffffffeu));
      e.cpu = static_cast<uint16_t>(std::min<uint32_t>(r.sample_id.cpu, 0xffff));
      if ((r.data_src & PERF_MEM_S(OP, STORE)) != 0) {
        e.op = 'S';
      } else if ((r.data_src & PERF_MEM_S(OP, LOAD)) != 0) {
        e.op = 'L';
      }
      if (r.read.nr > 0 && config_.leader_ids.contains(r.read.values[0].id)) {
        e.counter = r.read.values[0].value;  // the group leader comes first
        e.has_counter = 1;
      }
      events_.push_back(e);
      break;
    }
    case RecordType::kMmap:
    case RecordType::kMmap2: {
      MmapEntry m;
      m.time_ns = r.sample_id.time;
      m.pid = r.pid;
      m.tid = r.tid;
      m.start = r.mmap_addr;
      m.end = r.mmap_addr + r.mmap_len;
      m.pgoff = r.mmap_pgoff;
      m.has_prot = r.type() == RecordType::kMmap2;
      m.prot = r.mmap_prot;
      m.flags = r.mmap_flags;
      m.data = (r.misc & PERF_RECORD_MISC_MMAP_DATA) != 0;
      m.filename = r.filename;
      mmaps_.push_back(std::move(m));
      break;
    }
    case RecordType::kFork:
      if (r.pid != r.ppid) forked_pids_.insert(r.pid);  // a new process, not a thread
      break;
    default:
      break;
  }
}

absl::StatusOr<Trace> TraceAssembler::Finish(std::string source, const TraceMetadata& metadata,
                                             uint64_t start_time_ns, uint64_t end_time_ns) {
  std::stable_sort(events_.begin(), events_.end(),
                   [](const Event& a, const Event& b) { return a.time < b.time; });
  OptionalColumns optional;
  optional.weight = config_.weight_column;
  optional.cpu = config_.cpu_column;
  optional.op = config_.op_column;
  TraceBuilder builder(std::move(source), metadata, optional);
  builder.Reserve(num_samples_);
  builder.AddMark(PhaseEvent{0, config_.main_tid, 0, 0});

  struct ThreadCounter {
    uint64_t latest = 0;  // the thread's counter at its latest record
    uint64_t base = 0;    // its counter when the current phase began
  };
  absl::flat_hash_map<uint64_t, ThreadCounter> threads;  // by (tid, cpu) or tid
  uint64_t phase_sum = 0;                                // sum over threads of latest - base
  uint32_t phase = 0;
  const uint64_t start = start_time_ns;
  uint64_t last_rel = 0;
  num_marks_ = 0;
  foreign_marks_ = 0;
  for (const Event& e : events_) {
    if (e.is_mark && e.pid != config_.main_tid && !forked_pids_.contains(e.pid)) {
      ++foreign_marks_;
      continue;
    }
    const uint64_t rel = e.time > start ? e.time - start : 0;
    last_rel = std::max(last_rel, rel);
    if (e.has_counter) {
      const uint64_t key =
          config_.per_cpu_counters ? (uint64_t{e.tid} << 16) | e.cpu : uint64_t{e.tid};
      auto [it, inserted] = threads.try_emplace(key);
      ThreadCounter& t = it->second;
      if (e.counter > t.latest) {
        phase_sum += e.counter - t.latest;
        t.latest = e.counter;
      }
    }
    if (e.is_tick) continue;
    if (e.is_mark) {
      ++num_marks_;
      ++phase;
      builder.AddMark(PhaseEvent{rel, e.tid, phase, phase_sum});
      for (auto& [tid, t] : threads) t.base = t.latest;
      phase_sum = 0;
      continue;
    }
    builder.AddSample(rel, e.tid, phase, phase_sum, e.address);
    if (config_.weight_column) builder.SetLastWeight(e.weight);
    if (config_.cpu_column) builder.SetLastCpu(e.cpu);
    if (config_.op_column) builder.SetLastOp(e.op);
  }
  const uint64_t end_rel = std::max(end_time_ns > start ? end_time_ns - start : 0, last_rel);
  builder.SetEnd(PhaseEvent{end_rel, config_.main_tid, phase, phase_sum});
  events_.clear();
  events_.shrink_to_fit();
  return builder.Finish();
}

std::vector<MmapEntry> TraceAssembler::Mmaps(uint64_t start_time_ns) const {
  std::vector<MmapEntry> sorted = mmaps_;
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const MmapEntry& a, const MmapEntry& b) { return a.time_ns < b.time_ns; });
  // mprotect() also produces MMAP2 records (one per changed piece of a mapping, or the
  // piece merged with its neighbours); the layout keeps mappings: pieces revoked to
  // PROT_NONE are dropped and an anonymous piece overlapping an anonymous mapping already
  // listed widens that mapping instead of being listed again.
  std::vector<MmapEntry> out;
  for (MmapEntry& m : sorted) {
    if (m.has_prot && m.prot == 0) continue;
    const bool anon = m.filename.empty() || m.filename == "//anon";
    bool merged = false;
    if (anon) {
      for (MmapEntry& k : out) {
        const bool k_anon = k.filename.empty() || k.filename == "//anon";
        if (k_anon && k.pid == m.pid && m.start < k.end && k.start < m.end) {
          k.start = std::min(k.start, m.start);
          k.end = std::max(k.end, m.end);
          merged = true;
          break;
        }
      }
    }
    if (merged) continue;
    m.time_ns = m.time_ns > start_time_ns ? m.time_ns - start_time_ns : 0;
    out.push_back(std::move(m));
  }
  // Widening may make two listed anonymous mappings overlap: fold them into the first.
  for (size_t i = 0; i < out.size(); ++i) {
    const bool i_anon = out[i].filename.empty() || out[i].filename == "//anon";
    for (size_t j = i + 1; i_anon && j < out.size();) {
      const bool j_anon = out[j].filename.empty() || out[j].filename == "//anon";
      if (j_anon && out[j].pid == out[i].pid && out[j].start < out[i].end &&
          out[i].start < out[j].end) {
        out[i].start = std::min(out[i].start, out[j].start);
        out[i].end = std::max(out[i].end, out[j].end);
        out.erase(out.begin() + static_cast<ptrdiff_t>(j));
        j = i + 1;
      } else {
        ++j;
      }
    }
  }
  return out;
}

std::string FormatMmapLayout(const std::vector<MmapEntry>& mmaps,
                             const std::vector<std::pair<std::string, std::string>>& header) {
  std::string out = "# tiergym mmap layout v1\n";
  for (const auto& [k, v] : header) StrAppend(&out, "# ", k, "=", v, "\n");
  out += "time_ns\tpid\ttid\tstart\tend\tpgoff\tprot\tflags\tkind\tfilename\n";
  for (const MmapEntry& m : mmaps) {
    StrAppend(&out, m.time_ns, "\t", m.pid, "\t", m.tid, "\t", Hex(m.start), "\t", Hex(m.end), "\t",
              Hex(m.pgoff), "\t", ProtLetters(m), "\t", Hex(m.flags), "\t",
              m.data ? "data" : "exec", "\t", EscapeField(m.filename), "\n");
  }
  return out;
}

}  // namespace tiergym::prof

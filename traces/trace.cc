#include "traces/trace.h"

#include <algorithm>
#include <cstring>

#include "traces/base/strings.h"

namespace tiergym {
namespace {

absl::Status Refuse(std::string_view source, std::string_view where, std::string_view rule,
                    std::string_view detail) {
  return absl::InvalidArgumentError(StrCat(source, ": ", where, ": ", rule, ": ", detail));
}

template <typename T>
bool SameSpan(std::span<const T> a, std::span<const T> b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size_bytes()) == 0);
}

// Holds the vectors of a TraceBuilder once they become a Trace's columns.
struct OwnedColumns {
  std::vector<uint64_t> time_ns, instructions, address;
  std::vector<uint32_t> tid, phase, weight, cpu;
  std::vector<uint8_t> op;
};

}  // namespace

TraceMetadata TraceMetadata::Make(std::string app, std::string device, std::string event,
                                  std::optional<uint64_t> pebs_reset, uint32_t page_size) {
  TraceMetadata m;
  m.app = std::move(app);
  m.device = std::move(device);
  m.event = std::move(event);
  m.pebs_reset = pebs_reset;
  m.page_size = page_size;
  if (!m.app.empty()) m.entries.emplace_back("app", m.app);
  m.entries.emplace_back("device", m.device);
  if (m.pebs_reset) m.entries.emplace_back("pebs_reset", StrCat(*m.pebs_reset));
  if (!m.event.empty()) m.entries.emplace_back("event", m.event);
  m.entries.emplace_back("page_size", StrCat(m.page_size));
  return m;
}

absl::Status ValidateTrace(std::string_view source, const TraceMetadata& metadata,
                           const OptionalColumns& optional, const TraceColumns& c,
                           std::span<const PhaseEvent> marks, const PhaseEvent& end) {
  if (metadata.device.empty()) {
    return Refuse(source, "header", "missing-device", "the `# device=` header line is required");
  }
  if (metadata.page_size == 0 || (metadata.page_size & (metadata.page_size - 1)) != 0) {
    return Refuse(source, "header", "bad-page-size",
                  StrCat("page_size ", metadata.page_size, " is not a power of two"));
  }
  const size_t n = c.time_ns.size();
  if (c.tid.size() != n || c.phase.size() != n || c.instructions.size() != n ||
      c.address.size() != n || c.op.size() != (optional.op ? n : 0) ||
      c.weight.size() != (optional.weight ? n : 0) || c.cpu.size() != (optional.cpu ? n : 0)) {
    return Refuse(source, "columns", "column-length", "columns have different lengths");
  }
  if (marks.empty()) {
    return Refuse(source, "mark 0", "first-mark", "a trace starts with the phasemark of phase 0");
  }
  if (marks[0].phase != 0 || marks[0].time_ns != 0 || marks[0].instructions != 0) {
    return Refuse(source, "mark 0", "first-mark",
                  "the first phasemark must be phase 0 at time 0 with 0 instructions");
  }
  for (size_t p = 1; p < marks.size(); ++p) {
    if (marks[p].phase != p) {
      return Refuse(source, StrCat("mark ", p), "phase-skip",
                    StrCat("phasemark for phase ", marks[p].phase, " follows phase ", p - 1,
                           "; phase indices increase by one"));
    }
    if (marks[p].time_ns < marks[p - 1].time_ns) {
      return Refuse(source, StrCat("mark ", p), "unsorted-time",
                    "phasemark earlier than the previous one");
    }
  }
  // Samples: time non-decreasing, phase equal to the mark before them in time.
  size_t p = 0;
  uint64_t last_time = 0;
  for (size_t i = 0; i < n; ++i) {
    const uint64_t t = c.time_ns[i];
    const uint32_t ph = c.phase[i];
    if (t < last_time) {
      return Refuse(source, StrCat("sample ", i), "unsorted-time",
                    StrCat("time_ns ", t, " is before the previous row's ", last_time));
    }
    last_time = t;
    if (ph != p) {
      if (ph < p || ph >= marks.size()) {
        return Refuse(source, StrCat("sample ", i), "phase-mismatch",
                      StrCat("sample is in phase ", ph, " but the current phase is ", p));
      }
      p = ph;
    }
    if (t < marks[p].time_ns) {
      return Refuse(source, StrCat("sample ", i), "unsorted-time",
                    StrCat("sample of phase ", p, " at ", t, " ns is before that phase's mark at ",
                           marks[p].time_ns));
    }
    if (p + 1 < marks.size() && t > marks[p + 1].time_ns) {
      return Refuse(
          source, StrCat("sample ", i), "unsorted-time",
          StrCat("sample of phase ", p, " at ", t, " ns is after the mark of phase ", p + 1));
    }
  }
  const PhaseEvent& last_mark = marks.back();
  if (end.phase != last_mark.phase) {
    return Refuse(
        source, "end", "phase-mismatch",
        StrCat("end row is in phase ", end.phase, " but the last phase is ", last_mark.phase));
  }
  if (end.time_ns < std::max(last_time, last_mark.time_ns)) {
    return Refuse(source, "end", "unsorted-time", "the end row is earlier than an earlier row");
  }
  return absl::OkStatus();
}

absl::StatusOr<Trace> Trace::Create(std::string source, TraceMetadata metadata,
                                    OptionalColumns optional, TraceColumns columns,
                                    std::vector<PhaseEvent> marks, PhaseEvent end) {
  absl::Status status = ValidateTrace(source, metadata, optional, columns, marks, end);
  if (!status.ok()) return status;
  auto begin = std::make_shared<std::vector<size_t>>(marks.size() + 1, 0);
  // Samples are grouped by phase in increasing order (validated), so the first sample of
  // each phase is found by binary search.
  for (size_t p = 0; p <= marks.size(); ++p) {
    (*begin)[p] =
        std::lower_bound(columns.phase.begin(), columns.phase.end(), static_cast<uint32_t>(p)) -
        columns.phase.begin();
  }
  Trace t;
  t.source_ = std::move(source);
  t.metadata_ = std::make_shared<const TraceMetadata>(std::move(metadata));
  t.optional_ = optional;
  t.columns_ = std::move(columns);
  t.marks_ = std::make_shared<const std::vector<PhaseEvent>>(std::move(marks));
  t.end_ = end;
  t.phase_begin_ = std::move(begin);
  return t;
}

uint64_t Trace::PhaseEndNs(size_t p) const {
  return p + 1 < marks_->size() ? (*marks_)[p + 1].time_ns : end_.time_ns;
}

uint64_t Trace::PhaseInstructions(size_t p) const {
  return p + 1 < marks_->size() ? (*marks_)[p + 1].instructions : end_.instructions;
}

TraceBuilder::TraceBuilder(std::string source, TraceMetadata metadata, OptionalColumns optional)
    : source_(std::move(source)), metadata_(std::move(metadata)), optional_(optional) {}

void TraceBuilder::Reserve(size_t n) {
  time_ns_.reserve(n);
  tid_.reserve(n);
  phase_.reserve(n);
  instructions_.reserve(n);
  address_.reserve(n);
  if (optional_.op) op_.reserve(n);
  if (optional_.weight) weight_.reserve(n);
  if (optional_.cpu) cpu_.reserve(n);
}

void TraceBuilder::AddSample(uint64_t time_ns, uint32_t tid, uint32_t phase, uint64_t instructions,
                             uint64_t address) {
  time_ns_.push_back(time_ns);
  tid_.push_back(tid);
  phase_.push_back(phase);
  instructions_.push_back(instructions);
  address_.push_back(address);
  if (optional_.op) op_.push_back(kUnknownOp);
  if (optional_.weight) weight_.push_back(kUnknownU32);
  if (optional_.cpu) cpu_.push_back(kUnknownU32);
}

absl::StatusOr<Trace> TraceBuilder::Finish() {
  auto owned = std::make_shared<OwnedColumns>();
  owned->time_ns = std::move(time_ns_);
  owned->tid = std::move(tid_);
  owned->phase = std::move(phase_);
  owned->instructions = std::move(instructions_);
  owned->address = std::move(address_);
  owned->op = std::move(op_);
  owned->weight = std::move(weight_);
  owned->cpu = std::move(cpu_);
  TraceColumns c;
  c.time_ns = owned->time_ns;
  c.tid = owned->tid;
  c.phase = owned->phase;
  c.instructions = owned->instructions;
  c.address = owned->address;
  c.op = owned->op;
  c.weight = owned->weight;
  c.cpu = owned->cpu;
  c.storage = std::move(owned);
  return Trace::Create(std::move(source_), std::move(metadata_), optional_, std::move(c),
                       std::move(marks_), end_);
}

bool SameContents(const Trace& a, const Trace& b) {
  return a.metadata() == b.metadata() && a.optional_columns() == b.optional_columns() &&
         SameSpan(a.time_ns(), b.time_ns()) && SameSpan(a.tid(), b.tid()) &&
         SameSpan(a.phase(), b.phase()) && SameSpan(a.instructions(), b.instructions()) &&
         SameSpan(a.address(), b.address()) && SameSpan(a.op(), b.op()) &&
         SameSpan(a.weight(), b.weight()) && SameSpan(a.cpu(), b.cpu()) &&
         std::equal(a.marks().begin(), a.marks().end(), b.marks().begin(), b.marks().end()) &&
         a.end() == b.end();
}

}  // namespace tiergym

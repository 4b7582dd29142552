// One sampled run of one application on one memory device (tier).
//
// A Trace is the in-memory form of a trace CSV v1 file (traces/TRACE_CSV.md)
// or of a binary trace (traces/FORMAT.md). It is columnar: one contiguous array per
// field of the sample rows, so that the estimators scan exactly the columns they need
// and so that a binary trace can be used straight from an mmap'ed file.
//
// A Trace is immutable once built and is safe to share between threads without locks;
// copying a Trace is cheap (the columns are shared, not copied). Every Trace that exists
// satisfies the invariants checked by ValidateTrace(): TraceBuilder::Finish() and the
// readers refuse anything else, so consumers may index by phase without re-checking.
#ifndef TIERGYM_TRACES_TRACE_H_
#define TIERGYM_TRACES_TRACE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tiergym {

// A phasemark (M row) or the end of the run (E row).
struct PhaseEvent {
  uint64_t time_ns = 0;
  uint32_t tid = 0;
  uint32_t phase = 0;
  // For a mark: instructions retired in the phase that just ended (0 for phase 0).
  // For the end: instructions retired in the last phase.
  uint64_t instructions = 0;

  friend bool operator==(const PhaseEvent&, const PhaseEvent&) = default;
};

// The `# key=value` header lines of a trace.
struct TraceMetadata {
  std::string app;     // empty when the header has no `app`
  std::string device;  // required: the tier the whole run was placed on
  std::string event;   // empty when absent
  std::optional<uint64_t> pebs_reset;
  uint32_t page_size = 4096;  // power of two; default 4096
  // Every `key=value` pair in header order, the known keys above included, so that
  // writing a trace back reproduces its header.
  std::vector<std::pair<std::string, std::string>> entries;

  // Builds the metadata of a new trace; fills `entries` from the fields.
  static TraceMetadata Make(std::string app, std::string device, std::string event = "",
                            std::optional<uint64_t> pebs_reset = std::nullopt,
                            uint32_t page_size = 4096);

  friend bool operator==(const TraceMetadata&, const TraceMetadata&) = default;
};

// Optional sample columns of the CSV format, kept so that round trips are lossless.
struct OptionalColumns {
  bool op = false;      // 'L' load, 'S' store, kUnknownOp when empty
  bool weight = false;  // latency in cycles, kUnknownU32 when empty
  bool cpu = false;     // kUnknownU32 when empty

  friend bool operator==(const OptionalColumns&, const OptionalColumns&) = default;
};

inline constexpr uint8_t kUnknownOp = 0;
inline constexpr uint32_t kUnknownU32 = 0xffffffffu;

// Read-only views of the columns of a trace, plus whatever keeps them alive.
struct TraceColumns {
  std::span<const uint64_t> time_ns;
  std::span<const uint32_t> tid;
  std::span<const uint32_t> phase;
  std::span<const uint64_t> instructions;
  std::span<const uint64_t> address;
  std::span<const uint8_t> op;       // empty unless OptionalColumns::op
  std::span<const uint32_t> weight;  // empty unless OptionalColumns::weight
  std::span<const uint32_t> cpu;     // empty unless OptionalColumns::cpu
  std::shared_ptr<const void> storage;
};

class Trace {
 public:
  // Checks every invariant (see ValidateTrace) and returns the trace or the first rule
  // it breaks. `source` names the trace in error messages (usually its file path).
  static absl::StatusOr<Trace> Create(std::string source, TraceMetadata metadata,
                                      OptionalColumns optional, TraceColumns columns,
                                      std::vector<PhaseEvent> marks, PhaseEvent end);

  const std::string& source() const { return source_; }
  const TraceMetadata& metadata() const { return *metadata_; }
  const OptionalColumns& optional_columns() const { return optional_; }

  size_t num_samples() const { return columns_.time_ns.size(); }
  std::span<const uint64_t> time_ns() const { return columns_.time_ns; }
  std::span<const uint32_t> tid() const { return columns_.tid; }
  std::span<const uint32_t> phase() const { return columns_.phase; }
  std::span<const uint64_t> instructions() const { return columns_.instructions; }
  std::span<const uint64_t> address() const { return columns_.address; }
  std::span<const uint8_t> op() const { return columns_.op; }
  std::span<const uint32_t> weight() const { return columns_.weight; }
  std::span<const uint32_t> cpu() const { return columns_.cpu; }

  // marks()[p] starts phase p; there is at least one mark.
  std::span<const PhaseEvent> marks() const { return *marks_; }
  const PhaseEvent& end() const { return end_; }
  size_t num_phases() const { return marks_->size(); }
  uint64_t runtime_ns() const { return end_.time_ns; }

  // REQUIRES: p < num_phases().
  uint64_t PhaseStartNs(size_t p) const { return (*marks_)[p].time_ns; }
  uint64_t PhaseEndNs(size_t p) const;
  uint64_t PhaseInstructions(size_t p) const;
  // Samples of phase p are the index range [PhaseBegin(p), PhaseBegin(p + 1)).
  size_t PhaseBegin(size_t p) const { return (*phase_begin_)[p]; }

 private:
  Trace() = default;

  std::string source_;
  std::shared_ptr<const TraceMetadata> metadata_;
  OptionalColumns optional_;
  TraceColumns columns_;
  std::shared_ptr<const std::vector<PhaseEvent>> marks_;
  PhaseEvent end_;
  std::shared_ptr<const std::vector<size_t>> phase_begin_;  // num_phases + 1 offsets
};

// Checks the invariants of the trace CSV v1 format on already-decoded columns:
// device present, page size a power of two, at least one mark, the first mark is phase 0
// at time 0 with 0 instructions, marks number phases 0, 1, 2, ..., time never decreases
// across the merged stream of marks, samples and end, every sample carries the phase of
// the mark before it, the end carries the last phase and is not earlier than any row,
// optional columns have one value per sample. The error names `source`, the sample or
// mark index and the rule.
absl::Status ValidateTrace(std::string_view source, const TraceMetadata& metadata,
                           const OptionalColumns& optional, const TraceColumns& columns,
                           std::span<const PhaseEvent> marks, const PhaseEvent& end);

// Accumulates rows in order and produces a Trace that owns its columns.
// Used by the synthetic generator, the profiler and the tests.
class TraceBuilder {
 public:
  TraceBuilder(std::string source, TraceMetadata metadata, OptionalColumns optional = {});

  void Reserve(size_t num_samples);
  void AddMark(const PhaseEvent& mark) { marks_.push_back(mark); }
  void AddSample(uint64_t time_ns, uint32_t tid, uint32_t phase, uint64_t instructions,
                 uint64_t address);
  // Only for the optional columns enabled in the constructor; call after AddSample.
  void SetLastOp(uint8_t op) { op_.back() = op; }
  void SetLastWeight(uint32_t weight) { weight_.back() = weight; }
  void SetLastCpu(uint32_t cpu) { cpu_.back() = cpu; }
  void SetEnd(const PhaseEvent& end) { end_ = end; }

  size_t num_samples() const { return time_ns_.size(); }

  // Validates and returns the trace; the builder is left empty.
  absl::StatusOr<Trace> Finish();

 private:
  std::string source_;
  TraceMetadata metadata_;
  OptionalColumns optional_;
  std::vector<uint64_t> time_ns_, instructions_, address_;
  std::vector<uint32_t> tid_, phase_, weight_, cpu_;
  std::vector<uint8_t> op_;
  std::vector<PhaseEvent> marks_;
  PhaseEvent end_;
};

// True when both traces hold the same metadata, rows and optional columns.
bool SameContents(const Trace& a, const Trace& b);

}  // namespace tiergym

#endif  // TIERGYM_TRACES_TRACE_H_

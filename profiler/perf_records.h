// Decoding of the records the kernel writes into perf_event ring buffers.
//
// The layout of a perf record depends on what its event was opened with (sample_type,
// read_format, sample_id_all; include/uapi/linux/perf_event.h). This module turns bytes
// into PerfRecord values as pure functions, with no system calls, so that it is tested on
// hand-built records: ParsePerfRecord decodes one record, ForEachRingRecord walks the
// unread part [tail, head) of a ring's data area (records may wrap around its end), and
// RecordCounts keeps the accounting the recorder reports (samples, lost records,
// throttling).
//
// Corrupt input (a size that does not fit, a record shorter than its fields) is reported
// as DataLoss naming the record type, its size and the field that did not fit; it never
// reads out of bounds. Thread-safety: pure functions; RecordCounts is a plain value.
#ifndef TIERGYM_PROFILER_PERF_RECORDS_H_
#define TIERGYM_PROFILER_PERF_RECORDS_H_

#include <array>
#include <cstdint>
#include <functional>
#include <span>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tiergym::prof {

// Record types of enum perf_event_type that the recorder asks for.
enum class RecordType : uint32_t {
  kMmap = 1,
  kLost = 2,
  kComm = 3,
  kExit = 4,
  kThrottle = 5,
  kUnthrottle = 6,
  kFork = 7,
  kRead = 8,
  kSample = 9,
  kMmap2 = 10,
  kLostSamples = 13,
};

// What the events writing into a ring were opened with. Every event sharing a ring must
// use the same layout (the recorder opens them so).
struct RecordLayout {
  uint64_t sample_type = 0;  // PERF_SAMPLE_* bits
  uint64_t read_format = 0;  // PERF_FORMAT_* bits
  bool sample_id_all = false;
  uint64_t sample_regs_user = 0;  // with PERF_SAMPLE_REGS_USER: which registers
};

// The sample_type bits ParsePerfRecord decodes. Others (CALLCHAIN, BRANCH_STACK,
// REGS_INTR, STACK_USER, AUX) change the layout in ways that need more of the attribute
// than RecordLayout holds; ValidateLayout refuses them.
uint64_t SupportedSampleTypeBits();

// InvalidArgument when `layout` asks for a sample_type or read_format bit this module does
// not decode (the message names the bit).
absl::Status ValidateLayout(const RecordLayout& layout);

// One counter of a PERF_SAMPLE_READ value (or a group member).
struct ReadValue {
  uint64_t value = 0;
  uint64_t id = 0;    // with PERF_FORMAT_ID
  uint64_t lost = 0;  // with PERF_FORMAT_LOST
};

// A read_format block. With PERF_FORMAT_GROUP values[0] is the group leader; without
// it there is one value (the sampling event's own count).
struct ReadBlock {
  static constexpr size_t kMaxValues = 8;
  uint64_t time_enabled = 0;  // with PERF_FORMAT_TOTAL_TIME_ENABLED
  uint64_t time_running = 0;  // with PERF_FORMAT_TOTAL_TIME_RUNNING
  uint32_t nr = 0;            // values used
  std::array<ReadValue, kMaxValues> values{};
};

// The identity fields a record carries: those of a PERF_RECORD_SAMPLE, or the trailing
// sample_id of any other record when sample_id_all is set. A field is 0 when the layout
// does not hold it.
struct SampleId {
  uint32_t pid = 0, tid = 0;  // PERF_SAMPLE_TID
  uint64_t time = 0;          // PERF_SAMPLE_TIME
  uint64_t id = 0;            // PERF_SAMPLE_ID or PERF_SAMPLE_IDENTIFIER
  uint64_t stream_id = 0;     // PERF_SAMPLE_STREAM_ID
  uint32_t cpu = 0;           // PERF_SAMPLE_CPU
};

// One decoded record. `type` says which group of fields is meaningful; the others stay
// zero. Unknown record types are returned with type_raw set and nothing decoded.
struct PerfRecord {
  uint32_t type_raw = 0;
  uint16_t misc = 0;
  uint16_t size = 0;
  RecordType type() const { return static_cast<RecordType>(type_raw); }

  SampleId sample_id;  // SAMPLE: its own fields; others: trailing sample_id (if any)

  // PERF_RECORD_SAMPLE
  uint64_t ip = 0;        // PERF_SAMPLE_IP
  uint64_t addr = 0;      // PERF_SAMPLE_ADDR: data address (PEBS) or faulting address
  uint64_t period = 0;    // PERF_SAMPLE_PERIOD
  ReadBlock read;         // PERF_SAMPLE_READ
  uint64_t weight = 0;    // PERF_SAMPLE_WEIGHT (full) or WEIGHT_STRUCT var1_dw
  uint64_t data_src = 0;  // PERF_SAMPLE_DATA_SRC
  uint64_t transaction = 0;
  uint64_t phys_addr = 0;
  uint64_t data_page_size = 0;
  uint64_t code_page_size = 0;
  // PERF_SAMPLE_REGS_USER: the ABI (0: no user registers) and the registers, indexed by
  // their bit in RecordLayout::sample_regs_user (enum perf_event_x86_regs on x86-64).
  uint64_t regs_abi = 0;
  std::array<uint64_t, 24> regs{};

  // MMAP / MMAP2 (pid, tid also for COMM, EXIT, FORK)
  uint32_t pid = 0, tid = 0;
  uint64_t mmap_addr = 0, mmap_len = 0, mmap_pgoff = 0;
  uint32_t mmap_prot = 0, mmap_flags = 0;  // MMAP2 only
  std::string filename;                    // MMAP/MMAP2 file name, COMM command name

  // EXIT / FORK
  uint32_t ppid = 0, ptid = 0;
  uint64_t time = 0;  // EXIT, FORK, THROTTLE, UNTHROTTLE: the record's own time field

  // LOST: records the kernel dropped (lost_id = the event); LOST_SAMPLES: samples dropped.
  uint64_t lost_id = 0;
  uint64_t lost = 0;

  // THROTTLE / UNTHROTTLE
  uint64_t throttle_id = 0, throttle_stream_id = 0;
};

// Size of struct perf_event_header.
inline constexpr size_t kPerfHeaderBytes = 8;

// Decodes one record (header included). `bytes.size()` must equal the header's size.
absl::StatusOr<PerfRecord> ParsePerfRecord(std::span<const uint8_t> bytes,
                                           const RecordLayout& layout);

// Walks the records in [tail, head) of a ring data area (`ring.size()` a power of two;
// positions count bytes since the ring was created and are taken modulo the size, as the
// kernel's data_head/data_tail are). Each record is passed whole to `fn`: in place when
// it is contiguous, else copied into a buffer owned by the walk. Returns the new tail
// (`head` when every record was consumed). DataLoss when a header is smaller than 8 bytes,
// not 8-byte aligned in size, or runs past head; nothing after that point is passed on.
// An error from `fn` stops the walk and is returned.
using RecordFn = std::function<absl::Status(std::span<const uint8_t> record)>;
absl::StatusOr<uint64_t> ForEachRingRecord(std::span<const uint8_t> ring, uint64_t tail,
                                           uint64_t head, const RecordFn& fn);

// What a ring delivered, for the summary and the diagnostics.
struct RecordCounts {
  uint64_t samples = 0;
  uint64_t mmaps = 0;  // MMAP and MMAP2
  uint64_t comms = 0;
  uint64_t forks = 0;
  uint64_t exits = 0;
  uint64_t throttles = 0;
  uint64_t unthrottles = 0;
  uint64_t lost_records = 0;  // PERF_RECORD_LOST records seen
  uint64_t lost = 0;          // sum of their `lost` fields: records dropped
  uint64_t lost_samples = 0;  // sum of PERF_RECORD_LOST_SAMPLES `lost` fields
  uint64_t other = 0;         // any other record type

  void Add(const PerfRecord& record);
  void Merge(const RecordCounts& other_counts);
};

}  // namespace tiergym::prof

#endif  // TIERGYM_PROFILER_PERF_RECORDS_H_

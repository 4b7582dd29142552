#include "profiler/perf_records.h"

#include <linux/perf_event.h>

#include <cstdio>
#include <cstring>
#include <vector>

#include "traces/base/status_macros.h"
#include "traces/base/strings.h"

namespace tiergym::prof {
namespace {

constexpr uint64_t kSupportedSampleType =
    PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME |
    PERF_SAMPLE_ADDR | PERF_SAMPLE_ID | PERF_SAMPLE_STREAM_ID | PERF_SAMPLE_CPU |
    PERF_SAMPLE_PERIOD | PERF_SAMPLE_READ | PERF_SAMPLE_RAW | PERF_SAMPLE_WEIGHT |
    PERF_SAMPLE_DATA_SRC | PERF_SAMPLE_TRANSACTION | PERF_SAMPLE_PHYS_ADDR | PERF_SAMPLE_CGROUP |
    PERF_SAMPLE_DATA_PAGE_SIZE | PERF_SAMPLE_CODE_PAGE_SIZE | PERF_SAMPLE_WEIGHT_STRUCT |
    PERF_SAMPLE_REGS_USER;

constexpr uint64_t kSupportedReadFormat = PERF_FORMAT_TOTAL_TIME_ENABLED |
                                          PERF_FORMAT_TOTAL_TIME_RUNNING | PERF_FORMAT_ID |
                                          PERF_FORMAT_GROUP | PERF_FORMAT_LOST;

// Reads fields front to back, refusing to run past the end of the record.
class Cursor {
 public:
  Cursor(std::span<const uint8_t> bytes, uint32_t type) : bytes_(bytes), type_(type) {}

  size_t offset() const { return offset_; }
  void set_limit(size_t limit) { limit_ = limit; }
  size_t limit() const { return limit_ == 0 ? bytes_.size() : limit_; }

  absl::Status U64(uint64_t* v, const char* field) {
    TG_RETURN_IF_ERROR(Need(8, field));
    std::memcpy(v, bytes_.data() + offset_, 8);
    offset_ += 8;
    return absl::OkStatus();
  }
  // Two u32 packed in one u64 slot (pid/tid, cpu/res, maj/min, prot/flags).
  absl::Status U32Pair(uint32_t* a, uint32_t* b, const char* field) {
    TG_RETURN_IF_ERROR(Need(8, field));
    std::memcpy(a, bytes_.data() + offset_, 4);
    std::memcpy(b, bytes_.data() + offset_ + 4, 4);
    offset_ += 8;
    return absl::OkStatus();
  }
  absl::Status Skip(size_t n, const char* field) {
    TG_RETURN_IF_ERROR(Need(n, field));
    offset_ += n;
    return absl::OkStatus();
  }
  // A NUL-terminated, 8-byte padded string running up to limit().
  std::string RestAsString() {
    const size_t end = limit();
    std::string s;
    if (offset_ < end) {
      const char* p = reinterpret_cast<const char*>(bytes_.data() + offset_);
      s.assign(p, strnlen(p, end - offset_));
    }
    offset_ = end;
    return s;
  }
  absl::Status Error(const char* field) const {
    return absl::DataLossError(StrCat("perf record type ", type_, " of ", bytes_.size(),
                                      " bytes is truncated: no room for ", field, " at offset ",
                                      offset_));
  }

 private:
  absl::Status Need(size_t n, const char* field) const {
    if (offset_ + n > limit()) return Error(field);
    return absl::OkStatus();
  }

  std::span<const uint8_t> bytes_;
  uint32_t type_;
  size_t offset_ = kPerfHeaderBytes;
  size_t limit_ = 0;
};

absl::Status ParseRead(Cursor& c, uint64_t read_format, ReadBlock* out) {
  if (read_format & PERF_FORMAT_GROUP) {
    uint64_t nr = 0;
    TG_RETURN_IF_ERROR(c.U64(&nr, "read.nr"));
    if (nr > ReadBlock::kMaxValues) {
      return absl::DataLossError(StrCat("perf read group of ", nr, " counters; at most ",
                                        ReadBlock::kMaxValues, " are decoded"));
    }
    if (read_format & PERF_FORMAT_TOTAL_TIME_ENABLED) {
      TG_RETURN_IF_ERROR(c.U64(&out->time_enabled, "read.time_enabled"));
    }
    if (read_format & PERF_FORMAT_TOTAL_TIME_RUNNING) {
      TG_RETURN_IF_ERROR(c.U64(&out->time_running, "read.time_running"));
    }
    out->nr = static_cast<uint32_t>(nr);
    for (uint64_t i = 0; i < nr; ++i) {
      ReadValue& v = out->values[i];
      TG_RETURN_IF_ERROR(c.U64(&v.value, "read.value"));
      if (read_format & PERF_FORMAT_ID) TG_RETURN_IF_ERROR(c.U64(&v.id, "read.id"));
      if (read_format & PERF_FORMAT_LOST) TG_RETURN_IF_ERROR(c.U64(&v.lost, "read.lost"));
    }
    return absl::OkStatus();
  }
  out->nr = 1;
  ReadValue& v = out->values[0];
  TG_RETURN_IF_ERROR(c.U64(&v.value, "read.value"));
  if (read_format & PERF_FORMAT_TOTAL_TIME_ENABLED) {
    TG_RETURN_IF_ERROR(c.U64(&out->time_enabled, "read.time_enabled"));
  }
  if (read_format & PERF_FORMAT_TOTAL_TIME_RUNNING) {
    TG_RETURN_IF_ERROR(c.U64(&out->time_running, "read.time_running"));
  }
  if (read_format & PERF_FORMAT_ID) TG_RETURN_IF_ERROR(c.U64(&v.id, "read.id"));
  if (read_format & PERF_FORMAT_LOST) TG_RETURN_IF_ERROR(c.U64(&v.lost, "read.lost"));
  return absl::OkStatus();
}

absl::Status ParseSample(Cursor& c, const RecordLayout& layout, PerfRecord* r) {
  const uint64_t st = layout.sample_type;
  uint32_t res = 0;
  if (st & PERF_SAMPLE_IDENTIFIER) TG_RETURN_IF_ERROR(c.U64(&r->sample_id.id, "identifier"));
  if (st & PERF_SAMPLE_IP) TG_RETURN_IF_ERROR(c.U64(&r->ip, "ip"));
  if (st & PERF_SAMPLE_TID) {
    TG_RETURN_IF_ERROR(c.U32Pair(&r->sample_id.pid, &r->sample_id.tid, "pid/tid"));
  }
  if (st & PERF_SAMPLE_TIME) TG_RETURN_IF_ERROR(c.U64(&r->sample_id.time, "time"));
  if (st & PERF_SAMPLE_ADDR) TG_RETURN_IF_ERROR(c.U64(&r->addr, "addr"));
  if (st & PERF_SAMPLE_ID) TG_RETURN_IF_ERROR(c.U64(&r->sample_id.id, "id"));
  if (st & PERF_SAMPLE_STREAM_ID) {
    TG_RETURN_IF_ERROR(c.U64(&r->sample_id.stream_id, "stream_id"));
  }
  if (st & PERF_SAMPLE_CPU) TG_RETURN_IF_ERROR(c.U32Pair(&r->sample_id.cpu, &res, "cpu"));
  if (st & PERF_SAMPLE_PERIOD) TG_RETURN_IF_ERROR(c.U64(&r->period, "period"));
  if (st & PERF_SAMPLE_READ) TG_RETURN_IF_ERROR(ParseRead(c, layout.read_format, &r->read));
  if (st & PERF_SAMPLE_RAW) {
    // u32 size, then size bytes; size keeps the whole field a multiple of 8 bytes.
    uint32_t raw_size = 0, unused = 0;
    TG_RETURN_IF_ERROR(c.U32Pair(&raw_size, &unused, "raw.size"));
    // U32Pair consumed 4 bytes of data beyond the size field; skip the remainder.
    if (raw_size < 4) return c.Error("raw.data");
    TG_RETURN_IF_ERROR(c.Skip(raw_size - 4, "raw.data"));
  }
  if (st & PERF_SAMPLE_REGS_USER) {
    // u64 abi; then one u64 per bit of sample_regs_user unless abi is 0 (no user
    // registers: the sample interrupted a kernel thread).
    TG_RETURN_IF_ERROR(c.U64(&r->regs_abi, "regs_user.abi"));
    if (r->regs_abi != 0) {
      uint64_t mask = layout.sample_regs_user;
      for (size_t bit = 0; mask != 0; ++bit, mask >>= 1) {
        if ((mask & 1) == 0) continue;
        uint64_t v = 0;
        TG_RETURN_IF_ERROR(c.U64(&v, "regs_user.regs"));
        if (bit < r->regs.size()) r->regs[bit] = v;
      }
    }
  }
  if (st & (PERF_SAMPLE_WEIGHT | PERF_SAMPLE_WEIGHT_STRUCT)) {
    uint64_t w = 0;
    TG_RETURN_IF_ERROR(c.U64(&w, "weight"));
    // WEIGHT_STRUCT: var1_dw (the latency) is the low 32 bits on little-endian machines.
    r->weight = (st & PERF_SAMPLE_WEIGHT_STRUCT) ? (w & 0xffffffffu) : w;
  }
  if (st & PERF_SAMPLE_DATA_SRC) TG_RETURN_IF_ERROR(c.U64(&r->data_src, "data_src"));
  if (st & PERF_SAMPLE_TRANSACTION) {
    TG_RETURN_IF_ERROR(c.U64(&r->transaction, "transaction"));
  }
  if (st & PERF_SAMPLE_PHYS_ADDR) TG_RETURN_IF_ERROR(c.U64(&r->phys_addr, "phys_addr"));
  if (st & PERF_SAMPLE_CGROUP) {
    uint64_t cgroup = 0;
    TG_RETURN_IF_ERROR(c.U64(&cgroup, "cgroup"));
  }
  if (st & PERF_SAMPLE_DATA_PAGE_SIZE) {
    TG_RETURN_IF_ERROR(c.U64(&r->data_page_size, "data_page_size"));
  }
  if (st & PERF_SAMPLE_CODE_PAGE_SIZE) {
    TG_RETURN_IF_ERROR(c.U64(&r->code_page_size, "code_page_size"));
  }
  return absl::OkStatus();
}

// Bytes of the trailing struct sample_id of non-sample records.
size_t SampleIdBytes(const RecordLayout& layout) {
  if (!layout.sample_id_all) return 0;
  const uint64_t st = layout.sample_type;
  size_t n = 0;
  for (uint64_t bit : {PERF_SAMPLE_TID, PERF_SAMPLE_TIME, PERF_SAMPLE_ID, PERF_SAMPLE_STREAM_ID,
                       PERF_SAMPLE_CPU, PERF_SAMPLE_IDENTIFIER}) {
    if (st & bit) n += 8;
  }
  return n;
}

absl::Status ParseSampleIdTrailer(std::span<const uint8_t> bytes, const RecordLayout& layout,
                                  uint32_t type, SampleId* out) {
  const size_t n = SampleIdBytes(layout);
  if (n == 0) return absl::OkStatus();
  if (bytes.size() < kPerfHeaderBytes + n) {
    return absl::DataLossError(StrCat("perf record type ", type, " of ", bytes.size(),
                                      " bytes is truncated: no room for its sample_id (", n,
                                      " bytes)"));
  }
  Cursor c(bytes, type);
  TG_RETURN_IF_ERROR(c.Skip(bytes.size() - n - kPerfHeaderBytes, "body"));
  const uint64_t st = layout.sample_type;
  uint32_t res = 0;
  if (st & PERF_SAMPLE_TID) TG_RETURN_IF_ERROR(c.U32Pair(&out->pid, &out->tid, "sample_id.tid"));
  if (st & PERF_SAMPLE_TIME) TG_RETURN_IF_ERROR(c.U64(&out->time, "sample_id.time"));
  if (st & PERF_SAMPLE_ID) TG_RETURN_IF_ERROR(c.U64(&out->id, "sample_id.id"));
  if (st & PERF_SAMPLE_STREAM_ID) {
    TG_RETURN_IF_ERROR(c.U64(&out->stream_id, "sample_id.stream_id"));
  }
  if (st & PERF_SAMPLE_CPU) TG_RETURN_IF_ERROR(c.U32Pair(&out->cpu, &res, "sample_id.cpu"));
  if (st & PERF_SAMPLE_IDENTIFIER) TG_RETURN_IF_ERROR(c.U64(&out->id, "sample_id.identifier"));
  return absl::OkStatus();
}

}  // namespace

uint64_t SupportedSampleTypeBits() { return kSupportedSampleType; }

absl::Status ValidateLayout(const RecordLayout& layout) {
  const uint64_t bad_st = layout.sample_type & ~kSupportedSampleType;
  if (bad_st != 0) {
    return absl::InvalidArgumentError(
        StrCat("sample_type bit ", Hex(bad_st & -bad_st), " is not decoded"));
  }
  const uint64_t bad_rf = layout.read_format & ~kSupportedReadFormat;
  if (bad_rf != 0) {
    return absl::InvalidArgumentError(
        StrCat("read_format bit ", Hex(bad_rf & -bad_rf), " is not decoded"));
  }
  return absl::OkStatus();
}

absl::StatusOr<PerfRecord> ParsePerfRecord(std::span<const uint8_t> bytes,
                                           const RecordLayout& layout) {
  if (bytes.size() < kPerfHeaderBytes) {
    return absl::DataLossError(
        StrCat("perf record of ", bytes.size(), " bytes is shorter than its header"));
  }
  perf_event_header h;
  std::memcpy(&h, bytes.data(), sizeof h);
  if (h.size != bytes.size()) {
    return absl::DataLossError(StrCat("perf record type ", h.type, " says ", h.size, " bytes but ",
                                      bytes.size(), " were given"));
  }
  PerfRecord r;
  r.type_raw = h.type;
  r.misc = h.misc;
  r.size = h.size;
  Cursor c(bytes, h.type);
  if (h.type == PERF_RECORD_SAMPLE) {
    TG_RETURN_IF_ERROR(ParseSample(c, layout, &r));
    return r;
  }
  switch (h.type) {
    case PERF_RECORD_MMAP:
    case PERF_RECORD_MMAP2:
    case PERF_RECORD_LOST:
    case PERF_RECORD_COMM:
    case PERF_RECORD_EXIT:
    case PERF_RECORD_FORK:
    case PERF_RECORD_THROTTLE:
    case PERF_RECORD_UNTHROTTLE:
    case PERF_RECORD_READ:
    case PERF_RECORD_LOST_SAMPLES:
      break;
    default:
      return r;  // a type the recorder does not ask for: returned undecoded
  }
  const size_t id_bytes = SampleIdBytes(layout);
  if (bytes.size() < kPerfHeaderBytes + id_bytes) {
    return absl::DataLossError(StrCat("perf record type ", h.type, " of ", bytes.size(),
                                      " bytes is truncated: no room for its sample_id"));
  }
  c.set_limit(bytes.size() - id_bytes);
  switch (h.type) {
    case PERF_RECORD_MMAP:
    case PERF_RECORD_MMAP2:
      TG_RETURN_IF_ERROR(c.U32Pair(&r.pid, &r.tid, "pid/tid"));
      TG_RETURN_IF_ERROR(c.U64(&r.mmap_addr, "addr"));
      TG_RETURN_IF_ERROR(c.U64(&r.mmap_len, "len"));
      TG_RETURN_IF_ERROR(c.U64(&r.mmap_pgoff, "pgoff"));
      if (h.type == PERF_RECORD_MMAP2) {
        // maj/min + ino + ino_generation, or the build-id variant of the same 24 bytes.
        TG_RETURN_IF_ERROR(c.Skip(24, "maj/min/ino"));
        TG_RETURN_IF_ERROR(c.U32Pair(&r.mmap_prot, &r.mmap_flags, "prot/flags"));
      }
      r.filename = c.RestAsString();
      break;
    case PERF_RECORD_LOST:
      TG_RETURN_IF_ERROR(c.U64(&r.lost_id, "id"));
      TG_RETURN_IF_ERROR(c.U64(&r.lost, "lost"));
      break;
    case PERF_RECORD_COMM:
      TG_RETURN_IF_ERROR(c.U32Pair(&r.pid, &r.tid, "pid/tid"));
      r.filename = c.RestAsString();
      break;
    case PERF_RECORD_EXIT:
    case PERF_RECORD_FORK:
      TG_RETURN_IF_ERROR(c.U32Pair(&r.pid, &r.ppid, "pid/ppid"));
      TG_RETURN_IF_ERROR(c.U32Pair(&r.tid, &r.ptid, "tid/ptid"));
      TG_RETURN_IF_ERROR(c.U64(&r.time, "time"));
      break;
    case PERF_RECORD_THROTTLE:
    case PERF_RECORD_UNTHROTTLE:
      TG_RETURN_IF_ERROR(c.U64(&r.time, "time"));
      TG_RETURN_IF_ERROR(c.U64(&r.throttle_id, "id"));
      TG_RETURN_IF_ERROR(c.U64(&r.throttle_stream_id, "stream_id"));
      break;
    case PERF_RECORD_READ:
      TG_RETURN_IF_ERROR(c.U32Pair(&r.pid, &r.tid, "pid/tid"));
      TG_RETURN_IF_ERROR(ParseRead(c, layout.read_format, &r.read));
      break;
    case PERF_RECORD_LOST_SAMPLES:
      TG_RETURN_IF_ERROR(c.U64(&r.lost, "lost"));
      break;
    default:
      break;
  }
  TG_RETURN_IF_ERROR(ParseSampleIdTrailer(bytes, layout, h.type, &r.sample_id));
  return r;
}

absl::StatusOr<uint64_t> ForEachRingRecord(std::span<const uint8_t> ring, uint64_t tail,
                                           uint64_t head, const RecordFn& fn) {
  const uint64_t size = ring.size();
  if (size == 0 || (size & (size - 1)) != 0 || size % 8 != 0) {
    return absl::InvalidArgumentError(
        StrCat("ring data area of ", size, " bytes is not a power of two"));
  }
  if (head < tail || head - tail > size) {
    return absl::DataLossError(
        StrCat("ring positions out of order: tail ", tail, ", head ", head, ", size ", size));
  }
  const uint64_t mask = size - 1;
  std::vector<uint8_t> scratch;
  while (tail < head) {
    if (head - tail < kPerfHeaderBytes) {
      return absl::DataLossError(
          StrCat("ring holds ", head - tail, " bytes at position ", tail, ", less than a header"));
    }
    uint8_t header_bytes[kPerfHeaderBytes];
    for (size_t i = 0; i < kPerfHeaderBytes; ++i) header_bytes[i] = ring[(tail + i) & mask];
    perf_event_header h;
    std::memcpy(&h, header_bytes, sizeof h);
    if (h.size < kPerfHeaderBytes || h.size % 8 != 0) {
      return absl::DataLossError(StrCat("ring record at position ", tail, " (type ", h.type,
                                        ") has a bad size of ", h.size, " bytes"));
    }
    if (h.size > head - tail) {
      return absl::DataLossError(StrCat("ring record at position ", tail, " (type ", h.type, ", ",
                                        h.size, " bytes) runs past the head at ", head));
    }
    const uint64_t off = tail & mask;
    std::span<const uint8_t> record;
    if (off + h.size <= size) {
      record = ring.subspan(off, h.size);
    } else {
      const size_t first = size - off;
      scratch.resize(h.size);
      std::memcpy(scratch.data(), ring.data() + off, first);
      std::memcpy(scratch.data() + first, ring.data(), h.size - first);
      record = scratch;
    }
    TG_RETURN_IF_ERROR(fn(record));
    tail += h.size;
  }
  return tail;
}

void RecordCounts::Add(const PerfRecord& r) {
  switch (r.type_raw) {
    case PERF_RECORD_SAMPLE:
      ++samples;
      break;
    case PERF_RECORD_MMAP:
    case PERF_RECORD_MMAP2:
      ++mmaps;
      break;
    case PERF_RECORD_COMM:
      ++comms;
      break;
    case PERF_RECORD_FORK:
      ++forks;
      break;
    case PERF_RECORD_EXIT:
      ++exits;
      break;
    case PERF_RECORD_THROTTLE:
      ++throttles;
      break;
    case PERF_RECORD_UNTHROTTLE:
      ++unthrottles;
      break;
    case PERF_RECORD_LOST:
      ++lost_records;
      lost += r.lost;
      break;
    case PERF_RECORD_LOST_SAMPLES:
      lost_samples += r.lost;
      break;
    default:
      ++other;
      break;
  }
}

void RecordCounts::Merge(const RecordCounts& o) {
  samples += o.samples;
  mmaps += o.mmaps;
  comms += o.comms;
  forks += o.forks;
  exits += o.exits;
  throttles += o.throttles;
  unthrottles += o.unthrottles;
  lost_records += o.lost_records;
  lost += o.lost;
  lost_samples += o.lost_samples;
  other += o.other;
}

}  // namespace tiergym::prof

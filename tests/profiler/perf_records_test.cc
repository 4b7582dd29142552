// Tests of the perf record decoder on records built byte by byte after the layouts of
// include/uapi/linux/perf_event.h.
#include "profiler/perf_records.h"

#include <linux/perf_event.h>

#include <cstring>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tiergym::prof {
namespace {

using ::testing::HasSubstr;

// Appends fields to a record body; Finish() prepends the header.
class RecordBuilder {
 public:
  RecordBuilder& U64(uint64_t v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    body_.insert(body_.end(), p, p + 8);
    return *this;
  }
  RecordBuilder& U32Pair(uint32_t a, uint32_t b) {
    const auto* pa = reinterpret_cast<const uint8_t*>(&a);
    const auto* pb = reinterpret_cast<const uint8_t*>(&b);
    body_.insert(body_.end(), pa, pa + 4);
    body_.insert(body_.end(), pb, pb + 4);
    return *this;
  }
  // NUL-terminated and padded to 8 bytes, as the kernel writes file and command names.
  RecordBuilder& Str(const std::string& s) {
    body_.insert(body_.end(), s.begin(), s.end());
    body_.push_back(0);
    while (body_.size() % 8 != 0) body_.push_back(0);
    return *this;
  }
  std::vector<uint8_t> Finish(uint32_t type, uint16_t misc = 0) const {
    perf_event_header h{type, misc, static_cast<uint16_t>(8 + body_.size())};
    std::vector<uint8_t> out(sizeof h + body_.size());
    std::memcpy(out.data(), &h, sizeof h);
    if (!body_.empty()) std::memcpy(out.data() + sizeof h, body_.data(), body_.size());
    return out;
  }

 private:
  std::vector<uint8_t> body_;
};

// The layout the recorder uses: identifier first, group read with ids, sample_id_all.
RecordLayout RecorderLayout() {
  RecordLayout l;
  l.sample_type = PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME |
                  PERF_SAMPLE_ADDR | PERF_SAMPLE_CPU | PERF_SAMPLE_READ;
  l.read_format = PERF_FORMAT_GROUP | PERF_FORMAT_ID;
  l.sample_id_all = true;
  return l;
}

// The sample_id trailer of RecorderLayout(): tid, time, cpu, identifier.
RecordBuilder& AddTrailer(RecordBuilder& b, uint32_t pid, uint32_t tid, uint64_t time,
                          uint64_t id) {
  return b.U32Pair(pid, tid).U64(time).U32Pair(1, 0).U64(id);
}

std::vector<uint8_t> GroupSample(uint64_t id, uint32_t tid, uint64_t time, uint64_t addr,
                                 uint64_t instructions) {
  RecordBuilder b;
  b.U64(id).U64(0x401000).U32Pair(100, tid).U64(time).U64(addr).U32Pair(1, 0);
  b.U64(3).U64(instructions).U64(11).U64(42).U64(12).U64(2).U64(13);  // nr, (value, id) x3
  return b.Finish(PERF_RECORD_SAMPLE, PERF_RECORD_MISC_USER);
}

TEST(ParsePerfRecordTest, DecodesAGroupSampleWithTheLeaderFirst) {
  auto r = ParsePerfRecord(GroupSample(12, 101, 5'000'000'123, 0x7f0012345678, 987654),
                           RecorderLayout());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->type(), RecordType::kSample);
  EXPECT_EQ(r->sample_id.id, 12u);
  EXPECT_EQ(r->ip, 0x401000u);
  EXPECT_EQ(r->sample_id.pid, 100u);
  EXPECT_EQ(r->sample_id.tid, 101u);
  EXPECT_EQ(r->sample_id.time, 5'000'000'123u);
  EXPECT_EQ(r->addr, 0x7f0012345678u);
  EXPECT_EQ(r->sample_id.cpu, 1u);
  ASSERT_EQ(r->read.nr, 3u);
  EXPECT_EQ(r->read.values[0].value, 987654u);
  EXPECT_EQ(r->read.values[0].id, 11u);
  EXPECT_EQ(r->read.values[1].value, 42u);
  EXPECT_EQ(r->read.values[2].id, 13u);
}

TEST(ParsePerfRecordTest, DecodesASingleCounterReadWithTimesAndId) {
  RecordLayout l;
  l.sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_READ | PERF_SAMPLE_PERIOD;
  l.read_format = PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING | PERF_FORMAT_ID |
                  PERF_FORMAT_LOST;
  RecordBuilder b;
  b.U32Pair(7, 8).U64(16).U64(500).U64(1000).U64(900).U64(77).U64(3);
  auto r = ParsePerfRecord(b.Finish(PERF_RECORD_SAMPLE), l);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->period, 16u);
  ASSERT_EQ(r->read.nr, 1u);
  EXPECT_EQ(r->read.values[0].value, 500u);
  EXPECT_EQ(r->read.time_enabled, 1000u);
  EXPECT_EQ(r->read.time_running, 900u);
  EXPECT_EQ(r->read.values[0].id, 77u);
  EXPECT_EQ(r->read.values[0].lost, 3u);
}

TEST(ParsePerfRecordTest, DecodesWeightDataSourceAndSkipsRawData) {
  RecordLayout l;
  l.sample_type = PERF_SAMPLE_ADDR | PERF_SAMPLE_RAW | PERF_SAMPLE_WEIGHT_STRUCT |
                  PERF_SAMPLE_DATA_SRC | PERF_SAMPLE_PHYS_ADDR;
  RecordBuilder b;
  b.U64(0x1000);
  b.U32Pair(12, 0xaaaaaaaa).U64(0xbbbbbbbbbbbbbbbb);  // raw: size 12, then 12 bytes of data
  b.U64((uint64_t{0x55} << 32) | 321);                // weight struct: var1_dw = 321
  b.U64(0x68100142).U64(0xabc000);
  auto r = ParsePerfRecord(b.Finish(PERF_RECORD_SAMPLE), l);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->addr, 0x1000u);
  EXPECT_EQ(r->weight, 321u);
  EXPECT_EQ(r->data_src, 0x68100142u);
  EXPECT_EQ(r->phys_addr, 0xabc000u);
}

TEST(ParsePerfRecordTest, DecodesUserRegistersByTheirBitInTheMask) {
  RecordLayout l;
  l.sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_REGS_USER | PERF_SAMPLE_WEIGHT;
  l.sample_regs_user = (1u << 0) | (1u << 5) | (1u << 8);  // AX, DI, IP
  RecordBuilder b;
  b.U64(0x401000);                            // ip
  b.U64(2).U64(0xa).U64(0xd1).U64(0x401000);  // abi 64-bit, then AX, DI, IP in bit order
  b.U64(77);                                  // weight follows the registers
  auto r = ParsePerfRecord(b.Finish(PERF_RECORD_SAMPLE), l);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->regs_abi, 2u);
  EXPECT_EQ(r->regs[0], 0xau);
  EXPECT_EQ(r->regs[5], 0xd1u);
  EXPECT_EQ(r->regs[8], 0x401000u);
  EXPECT_EQ(r->weight, 77u);
  // ABI 0 (no user registers): nothing more of the block.
  RecordBuilder none;
  none.U64(0x401000).U64(0).U64(78);
  r = ParsePerfRecord(none.Finish(PERF_RECORD_SAMPLE), l);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->regs_abi, 0u);
  EXPECT_EQ(r->weight, 78u);
  // Cut short: refused, not read past the end.
  RecordBuilder cut;
  cut.U64(0x401000).U64(2).U64(0xa);
  EXPECT_FALSE(ParsePerfRecord(cut.Finish(PERF_RECORD_SAMPLE), l).ok());
}

TEST(ParsePerfRecordTest, DecodesMmap2WithItsSampleIdTrailer) {
  RecordBuilder b;
  b.U32Pair(100, 100).U64(0x7f0000000000).U64(0x200000).U64(0x3000);
  b.U32Pair(8, 1).U64(123456).U64(0);  // maj/min, ino, ino_generation
  b.U32Pair(3, 0x22).Str("/usr/lib/libfoo.so");
  AddTrailer(b, 100, 100, 777, 12);
  auto r =
      ParsePerfRecord(b.Finish(PERF_RECORD_MMAP2, PERF_RECORD_MISC_MMAP_DATA), RecorderLayout());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->type(), RecordType::kMmap2);
  EXPECT_EQ(r->mmap_addr, 0x7f0000000000u);
  EXPECT_EQ(r->mmap_len, 0x200000u);
  EXPECT_EQ(r->mmap_pgoff, 0x3000u);
  EXPECT_EQ(r->mmap_prot, 3u);
  EXPECT_EQ(r->mmap_flags, 0x22u);
  EXPECT_EQ(r->filename, "/usr/lib/libfoo.so");
  EXPECT_EQ(r->sample_id.time, 777u);
  EXPECT_EQ(r->sample_id.id, 12u);
  EXPECT_EQ(r->misc & PERF_RECORD_MISC_MMAP_DATA, PERF_RECORD_MISC_MMAP_DATA);
}

TEST(ParsePerfRecordTest, DecodesMmapCommExitForkThrottleAndLost) {
  const RecordLayout l = RecorderLayout();
  {
    RecordBuilder b;
    b.U32Pair(5, 6).U64(0x400000).U64(0x1000).U64(0).Str("//anon");
    AddTrailer(b, 5, 6, 10, 12);
    auto r = ParsePerfRecord(b.Finish(PERF_RECORD_MMAP), l);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->filename, "//anon");
    EXPECT_EQ(r->tid, 6u);
  }
  {
    RecordBuilder b;
    b.U32Pair(5, 9).Str("worker-thread");
    AddTrailer(b, 5, 9, 11, 12);
    auto r = ParsePerfRecord(b.Finish(PERF_RECORD_COMM), l);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->filename, "worker-thread");
    EXPECT_EQ(r->sample_id.time, 11u);
  }
  for (uint32_t type : {PERF_RECORD_EXIT, PERF_RECORD_FORK}) {
    RecordBuilder b;
    b.U32Pair(5, 4).U32Pair(9, 5).U64(12345);
    AddTrailer(b, 5, 9, 12345, 12);
    auto r = ParsePerfRecord(b.Finish(type), l);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->pid, 5u);
    EXPECT_EQ(r->ppid, 4u);
    EXPECT_EQ(r->tid, 9u);
    EXPECT_EQ(r->ptid, 5u);
    EXPECT_EQ(r->time, 12345u);
  }
  for (uint32_t type : {PERF_RECORD_THROTTLE, PERF_RECORD_UNTHROTTLE}) {
    RecordBuilder b;
    b.U64(999).U64(12).U64(12);
    AddTrailer(b, 5, 9, 999, 12);
    auto r = ParsePerfRecord(b.Finish(type), l);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->time, 999u);
    EXPECT_EQ(r->throttle_id, 12u);
  }
  {
    RecordBuilder b;
    b.U64(12).U64(31);
    AddTrailer(b, 5, 9, 1000, 12);
    auto r = ParsePerfRecord(b.Finish(PERF_RECORD_LOST), l);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->lost_id, 12u);
    EXPECT_EQ(r->lost, 31u);
  }
}

TEST(ParsePerfRecordTest, RefusesATruncatedSampleNamingTheMissingField) {
  RecordBuilder b;
  b.U64(12).U64(0x401000).U32Pair(1, 1).U64(5);  // identifier, ip, tid, time; no addr
  auto r = ParsePerfRecord(b.Finish(PERF_RECORD_SAMPLE), RecorderLayout());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("no room for addr"));
}

TEST(ParsePerfRecordTest, RefusesASizeThatDisagreesWithTheBytes) {
  std::vector<uint8_t> rec = GroupSample(12, 1, 1, 1, 1);
  rec.resize(rec.size() - 8);
  auto r = ParsePerfRecord(rec, RecorderLayout());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss);
}

TEST(ParsePerfRecordTest, RefusesAMmapWithoutRoomForItsSampleId) {
  RecordBuilder b;
  b.U32Pair(5, 6);  // 16 bytes in all, the trailer needs 32
  auto r = ParsePerfRecord(b.Finish(PERF_RECORD_MMAP), RecorderLayout());
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("sample_id"));
}

TEST(ParsePerfRecordTest, ReturnsUnknownTypesUndecoded) {
  RecordBuilder b;
  b.U64(1).U64(2);
  auto r = ParsePerfRecord(b.Finish(99), RecorderLayout());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->type_raw, 99u);
}

TEST(ValidateLayoutTest, RefusesBitsItCannotDecode) {
  RecordLayout l = RecorderLayout();
  EXPECT_TRUE(ValidateLayout(l).ok());
  l.sample_type |= PERF_SAMPLE_CALLCHAIN;
  absl::Status s = ValidateLayout(l);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("0x20"));
}

// Writes `record` into `ring` at byte position `pos` (modulo the ring size).
void PutInRing(std::vector<uint8_t>& ring, uint64_t pos, const std::vector<uint8_t>& record) {
  for (size_t i = 0; i < record.size(); ++i) ring[(pos + i) % ring.size()] = record[i];
}

TEST(ForEachRingRecordTest, ReassemblesRecordsThatWrapAroundTheEnd) {
  // Four 112-byte samples in a 512-byte ring from offset 200: the third straddles the end.
  std::vector<uint8_t> ring(512, 0xee);
  std::vector<std::vector<uint8_t>> records;
  for (int i = 0; i < 4; ++i) records.push_back(GroupSample(12, 1, 100 + i, 0x1000 * i, i));
  // The positions run far past the size, as data_head does.
  const uint64_t start = 512 * 1000 + 200;
  uint64_t pos = start;
  for (const auto& r : records) {
    PutInRing(ring, pos, r);
    pos += r.size();
  }
  ASSERT_EQ(records[0].size(), 112u) << "test setup: the third record must straddle";
  std::vector<PerfRecord> got;
  bool saw_wrapped = false;
  auto tail = ForEachRingRecord(ring, start, pos, [&](std::span<const uint8_t> rec) {
    if (rec.data() < ring.data() || rec.data() >= ring.data() + ring.size()) saw_wrapped = true;
    auto r = ParsePerfRecord(rec, RecorderLayout());
    if (!r.ok()) return r.status();
    got.push_back(*r);
    return absl::OkStatus();
  });
  ASSERT_TRUE(tail.ok()) << tail.status();
  EXPECT_EQ(*tail, pos);
  EXPECT_TRUE(saw_wrapped);
  ASSERT_EQ(got.size(), 4u);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(got[i].sample_id.time, 100u + i);
    EXPECT_EQ(got[i].addr, 0x1000u * i);
    EXPECT_EQ(got[i].read.values[0].value, static_cast<uint64_t>(i));
  }
}

TEST(ForEachRingRecordTest, ReadsAHeaderSplitAcrossTheEnd) {
  // A 16-byte ring whose record starts 8 bytes before the end: the header is contiguous
  // but the body wraps.
  RecordBuilder b;
  b.U64(0x1234);
  const std::vector<uint8_t> rec = b.Finish(PERF_RECORD_LOST_SAMPLES);
  std::vector<uint8_t> ring(16, 0);
  PutInRing(ring, 8, rec);
  uint64_t lost = 0;
  auto tail = ForEachRingRecord(ring, 8, 24, [&](std::span<const uint8_t> r) {
    auto p = ParsePerfRecord(r, RecordLayout{});
    if (!p.ok()) return p.status();
    lost = p->lost;
    return absl::OkStatus();
  });
  ASSERT_TRUE(tail.ok()) << tail.status();
  EXPECT_EQ(lost, 0x1234u);
}

TEST(ForEachRingRecordTest, CountsLostRecordsAndThrottling) {
  const RecordLayout l = RecorderLayout();
  std::vector<uint8_t> ring(1024, 0);
  uint64_t pos = 512;
  auto put = [&](const std::vector<uint8_t>& r) {
    PutInRing(ring, pos, r);
    pos += r.size();
  };
  put(GroupSample(12, 1, 1, 0x10, 1));
  RecordBuilder lost1, lost2, thr, unthr, lost_samples;
  AddTrailer(lost1.U64(12).U64(5), 1, 1, 2, 12);
  put(lost1.Finish(PERF_RECORD_LOST));
  put(GroupSample(12, 1, 3, 0x20, 2));
  AddTrailer(thr.U64(4).U64(12).U64(12), 1, 1, 4, 12);
  put(thr.Finish(PERF_RECORD_THROTTLE));
  AddTrailer(unthr.U64(5).U64(12).U64(12), 1, 1, 5, 12);
  put(unthr.Finish(PERF_RECORD_UNTHROTTLE));
  AddTrailer(lost2.U64(12).U64(2), 1, 1, 6, 12);
  put(lost2.Finish(PERF_RECORD_LOST));
  AddTrailer(lost_samples.U64(9), 1, 1, 7, 12);
  put(lost_samples.Finish(PERF_RECORD_LOST_SAMPLES));
  put(GroupSample(12, 1, 8, 0x30, 3));

  RecordCounts counts;
  auto tail = ForEachRingRecord(ring, 512, pos, [&](std::span<const uint8_t> rec) {
    auto r = ParsePerfRecord(rec, l);
    if (!r.ok()) return r.status();
    counts.Add(*r);
    return absl::OkStatus();
  });
  ASSERT_TRUE(tail.ok()) << tail.status();
  EXPECT_EQ(counts.samples, 3u);
  EXPECT_EQ(counts.lost_records, 2u);
  EXPECT_EQ(counts.lost, 7u);
  EXPECT_EQ(counts.lost_samples, 9u);
  EXPECT_EQ(counts.throttles, 1u);
  EXPECT_EQ(counts.unthrottles, 1u);

  RecordCounts total;
  total.Merge(counts);
  total.Merge(counts);
  EXPECT_EQ(total.lost, 14u);
  EXPECT_EQ(total.samples, 6u);
}

TEST(ForEachRingRecordTest, RefusesABadSizeAndARecordPastTheHead) {
  std::vector<uint8_t> ring(64, 0);
  // Size 0: a corrupt header.
  auto zero =
      ForEachRingRecord(ring, 0, 16, [](std::span<const uint8_t>) { return absl::OkStatus(); });
  EXPECT_EQ(zero.status().code(), absl::StatusCode::kDataLoss);

  RecordBuilder b;
  b.U64(1).U64(2);
  PutInRing(ring, 0, b.Finish(PERF_RECORD_LOST_SAMPLES));  // 24 bytes
  auto past =
      ForEachRingRecord(ring, 0, 16, [](std::span<const uint8_t>) { return absl::OkStatus(); });
  EXPECT_EQ(past.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(past.status().message()), HasSubstr("runs past the head"));

  auto not_pow2 = ForEachRingRecord(std::span<const uint8_t>(ring.data(), 48), 0, 0,
                                    [](std::span<const uint8_t>) { return absl::OkStatus(); });
  EXPECT_EQ(not_pow2.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ForEachRingRecordTest, StopsAtTheFirstErrorOfTheCallback) {
  std::vector<uint8_t> ring(512, 0);
  uint64_t pos = 0;
  for (int i = 0; i < 3; ++i) {
    auto r = GroupSample(12, 1, i, 0, 0);
    PutInRing(ring, pos, r);
    pos += r.size();
  }
  int calls = 0;
  auto tail = ForEachRingRecord(ring, 0, pos, [&](std::span<const uint8_t>) {
    return ++calls == 2 ? absl::CancelledError("stop") : absl::OkStatus();
  });
  EXPECT_EQ(tail.status().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(calls, 2);
}

}  // namespace
}  // namespace tiergym::prof

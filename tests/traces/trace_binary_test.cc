#include "traces/trace_binary.h"

#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "traces/base/crc32c.h"
#include "traces/binary_format.h"
#include "traces/trace.h"
#include "traces/trace_csv.h"

namespace tiergym {
namespace {

namespace bf = binary_format;
using ::testing::HasSubstr;

std::string TempPath(const std::string& name) {
  return ::testing::TempDir() + "trace_binary_test_" + std::to_string(::getpid()) + "_" + name;
}

std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// Three phases, two threads, optional columns as asked.
Trace MakeTrace(OptionalColumns optional = {},
                TraceMetadata metadata = TraceMetadata::Make("minife", "hbm", "MEM_LOAD", 16,
                                                             4096)) {
  TraceBuilder b("test", std::move(metadata), optional);
  b.AddMark({0, 0, 0, 0});
  uint64_t t = 10;
  for (uint32_t phase = 0; phase < 3; ++phase) {
    if (phase > 0) b.AddMark({t++, 0, phase, 1000 * phase});
    for (int i = 0; i < 50; ++i) {
      b.AddSample(t, static_cast<uint32_t>(i % 2), phase, 100 * (i + 1),
                  0x7f0000000000ull + 64 * static_cast<uint64_t>(i * 37 % 101) + phase);
      if (optional.op) b.SetLastOp(i % 5 == 0 ? kUnknownOp : (i % 2 ? 'L' : 'S'));
      if (optional.weight) b.SetLastWeight(i % 7 == 0 ? kUnknownU32 : 30 + i);
      if (optional.cpu) b.SetLastCpu(i % 3 == 0 ? kUnknownU32 : i % 4);
      t += (i % 3 == 0) ? 0 : 7;  // equal times happen too
    }
  }
  b.SetEnd({t + 5, 0, 2, 4321});
  absl::StatusOr<Trace> trace = b.Finish();
  EXPECT_TRUE(trace.ok()) << trace.status();
  return *std::move(trace);
}

constexpr OptionalColumns kAllOptional = {true, true, true};

struct DirectoryEntry {
  uint32_t id;
  uint64_t offset;
  uint64_t size_bytes;
  size_t entry_offset;  // where the entry itself is in the file
};

std::vector<DirectoryEntry> Directory(const std::string& file) {
  std::vector<DirectoryEntry> out;
  const uint64_t dir = bf::Load64(file.data() + bf::kOffDirectoryOffset);
  const uint32_t n = bf::Load32(file.data() + bf::kOffNumColumns);
  for (uint32_t i = 0; i < n; ++i) {
    const size_t e = dir + i * bf::kDirectoryEntrySize;
    out.push_back({bf::Load32(file.data() + e + bf::kOffEntryColumnId),
                   bf::Load64(file.data() + e + bf::kOffEntryOffset),
                   bf::Load64(file.data() + e + bf::kOffEntrySize), e});
  }
  return out;
}

// Recomputes the checksums of an edited file, as a writer would have (those of columns
// that lie outside the file stay as they are).
void FixChecksums(std::string* file) {
  char* f = file->data();
  for (const DirectoryEntry& e : Directory(*file)) {
    if (e.offset > file->size() || e.size_bytes > file->size() - e.offset) continue;
    bf::Store32(f + e.entry_offset + bf::kOffEntryCrc, Crc32c(f + e.offset, e.size_bytes));
  }
  const uint32_t header_size = bf::Load32(f + bf::kOffHeaderSize);
  std::string header(f, header_size);
  std::memset(header.data() + bf::kOffHeaderCrc, 0, 4);
  uint32_t crc = Crc32c(header);
  const uint64_t dir = bf::Load64(f + bf::kOffDirectoryOffset);
  crc = Crc32c(f + dir, bf::Load32(f + bf::kOffNumColumns) * bf::kDirectoryEntrySize, crc);
  crc =
      Crc32c(f + bf::Load64(f + bf::kOffMetadataOffset), bf::Load64(f + bf::kOffMetadataSize), crc);
  crc = Crc32c(f + bf::Load64(f + bf::kOffMarksOffset), bf::Load64(f + bf::kOffMarksSize), crc);
  bf::Store32(f + bf::kOffHeaderCrc, crc);
}

Trace RoundTrip(const Trace& trace, const std::string& name) {
  const std::string path = TempPath(name);
  absl::Status written = WriteTraceBinary(trace, path);
  EXPECT_TRUE(written.ok()) << written;
  absl::StatusOr<Trace> read = ReadTraceBinary(path);
  EXPECT_TRUE(read.ok()) << read.status();
  std::filesystem::remove(path);
  return read.ok() ? *std::move(read) : trace;
}

TEST(TraceBinaryTest, RoundTripKeepsEveryColumnMarkAndHeaderEntry) {
  const Trace trace = MakeTrace();
  const Trace read = RoundTrip(trace, "plain.tgt");
  EXPECT_TRUE(SameContents(trace, read));
  EXPECT_EQ(read.num_phases(), 3u);
  EXPECT_EQ(read.end(), trace.end());
  EXPECT_EQ(read.metadata().pebs_reset, 16u);
}

TEST(TraceBinaryTest, RoundTripKeepsOptionalColumns) {
  const Trace trace = MakeTrace(kAllOptional);
  const Trace read = RoundTrip(trace, "optional.tgt");
  EXPECT_TRUE(SameContents(trace, read));
  EXPECT_EQ(read.optional_columns(), kAllOptional);
  EXPECT_EQ(read.op().size(), trace.num_samples());
}

TEST(TraceBinaryTest, RoundTripKeepsSomeOptionalColumnsAndNotOthers) {
  const OptionalColumns only_weight = {false, true, false};
  const Trace read = RoundTrip(MakeTrace(only_weight), "weight.tgt");
  EXPECT_EQ(read.optional_columns(), only_weight);
  EXPECT_TRUE(read.op().empty());
  EXPECT_TRUE(read.cpu().empty());
  EXPECT_TRUE(SameContents(MakeTrace(only_weight), read));
}

TEST(TraceBinaryTest, RoundTripKeepsUnknownHeaderKeysInOrder) {
  TraceMetadata metadata = TraceMetadata::Make("lulesh", "ddr");
  metadata.entries.insert(metadata.entries.begin() + 1, {"host", "knl-07"});
  metadata.entries.emplace_back("note", "");
  metadata.entries.emplace_back("unicode", "\xc3\xa9t\xc3\xa9 = 1, 2");
  const Trace trace = MakeTrace({}, metadata);
  const Trace read = RoundTrip(trace, "unknown_keys.tgt");
  EXPECT_TRUE(SameContents(trace, read));
  EXPECT_EQ(read.metadata().entries, metadata.entries);
}

TEST(TraceBinaryTest, RoundTripOfATraceWithoutSamples) {
  TraceBuilder b("empty", TraceMetadata::Make("", "remote"), kAllOptional);
  b.AddMark({0, 0, 0, 0});
  b.SetEnd({1000, 0, 0, 0});
  absl::StatusOr<Trace> trace = b.Finish();
  ASSERT_TRUE(trace.ok()) << trace.status();
  const Trace read = RoundTrip(*trace, "empty.tgt");
  EXPECT_TRUE(SameContents(*trace, read));
  EXPECT_EQ(read.num_samples(), 0u);
  EXPECT_EQ(read.runtime_ns(), 1000u);
}

TEST(TraceBinaryTest, ColumnsAre64ByteAlignedAndOutliveTheFirstTrace) {
  const std::string path = TempPath("aligned.tgt");
  ASSERT_TRUE(WriteTraceBinary(MakeTrace(kAllOptional), path).ok());
  std::optional<Trace> copy;
  {
    absl::StatusOr<Trace> read = ReadTraceBinary(path);
    ASSERT_TRUE(read.ok()) << read.status();
    EXPECT_EQ(reinterpret_cast<uintptr_t>(read->time_ns().data()) % 64, 0u);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(read->tid().data()) % 64, 0u);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(read->address().data()) % 64, 0u);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(read->op().data()) % 64, 0u);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(read->cpu().data()) % 64, 0u);
    copy = *read;
  }
  std::filesystem::remove(path);  // the mapping stays valid after the file is unlinked
  EXPECT_TRUE(SameContents(*copy, MakeTrace(kAllOptional)));
}

TEST(TraceBinaryTest, WriteReplacesAnExistingFileAndLeavesNoTemporaryFile) {
  const std::string dir = TempPath("replace_dir");
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/trace.tgt";
  WriteBytes(path, "old contents");
  ASSERT_TRUE(WriteTraceBinary(MakeTrace(), path).ok());
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir),
                          std::filesystem::directory_iterator()),
            1);
  absl::StatusOr<Trace> read = ReadTraceBinary(path);
  EXPECT_TRUE(read.ok()) << read.status();
  std::filesystem::remove_all(dir);
}

TEST(TraceBinaryTest, WriteRefusesMetadataFieldsThatDisagreeWithTheEntries) {
  TraceMetadata metadata = TraceMetadata::Make("minife", "ddr");
  metadata.device = "hbm";  // entries still say ddr: the file could not say both
  const std::string path = TempPath("disagree.tgt");
  absl::Status status = WriteTraceBinary(MakeTrace({}, metadata), path);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(TraceBinaryTest, CsvToBinaryToCsvIsLossless) {
  const std::string csv =
      "# tiergym trace v1\n"
      "# app=minife\n"
      "# host=knl-07\n"
      "# device=ddr\n"
      "# pebs_reset=16\n"
      "# event=MEM_UOPS_RETIRED:L2_MISS_LOADS\n"
      "# page_size=4096\n"
      "type,time_ns,tid,phase,instructions,address,op,weight,cpu\n"
      "M,0,0,0,0,,,,\n"
      "S,1532,0,0,20311,0x7f3a12345040,L,312,3\n"
      "S,1533,1,0,20400,140000000000,,,\n"
      "S,1533,1,0,20401,0xffffffffffffffff,S,0,0\n"
      "M,913321,0,1,5200000,,,,\n"
      "S,913400,0,1,1200,0x7f3a12346000,L,,7\n"
      "E,41000000000,0,1,1234,,,,\n";
  absl::StatusOr<Trace> parsed = ParseTraceCsv(csv, "golden.csv");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  const std::string csv_direct = FormatTraceCsv(*parsed);
  const Trace read = RoundTrip(*parsed, "golden.tgt");
  EXPECT_TRUE(SameContents(*parsed, read));
  EXPECT_EQ(FormatTraceCsv(read), csv_direct);
}

TEST(TraceBinaryTest, LooksLikeTraceBinaryRecognisesOnlyTheMagic) {
  const std::string path = TempPath("sniff.tgt");
  ASSERT_TRUE(WriteTraceBinary(MakeTrace(), path).ok());
  const std::string bytes = ReadBytes(path);
  std::filesystem::remove(path);
  EXPECT_TRUE(LooksLikeTraceBinary(bytes.substr(0, 8)));
  EXPECT_TRUE(LooksLikeTraceBinary(bytes));
  EXPECT_FALSE(LooksLikeTraceBinary(bytes.substr(0, 7)));
  EXPECT_FALSE(LooksLikeTraceBinary("# tiergym trace v1\n# device=ddr\n"));
  EXPECT_FALSE(LooksLikeTraceBinary(""));
}

TEST(TraceBinaryTest, MissingFileIsNotFound) {
  absl::StatusOr<Trace> read = ReadTraceBinary(TempPath("does_not_exist.tgt"));
  EXPECT_EQ(read.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(read.status().message()), HasSubstr("does_not_exist.tgt"));
}

// Corruption tests: each starts from a good file's bytes and edits them.
class CorruptedFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = TempPath(std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) +
                     ".tgt");
    ASSERT_TRUE(WriteTraceBinary(MakeTrace(kAllOptional), path_).ok());
    good_ = ReadBytes(path_);
  }
  void TearDown() override { std::filesystem::remove(path_); }

  absl::Status ReadBack(const std::string& bytes, BinaryReadOptions options = {}) {
    WriteBytes(path_, bytes);
    return ReadTraceBinary(path_, options).status();
  }

  std::string path_;
  std::string good_;
};

TEST_F(CorruptedFileTest, RefusesAFileWithoutTheMagic) {
  std::string bad = good_;
  bad[3] = 'X';
  absl::Status status = ReadBack(bad);
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(status.message()), HasSubstr("not a tiergym binary trace"));
  status = ReadBack("# tiergym trace v1\n# device=ddr\ntype,time_ns,tid,phase,instructions\n");
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(status.message()), HasSubstr("not a tiergym binary trace"));
}

TEST_F(CorruptedFileTest, RefusesANewerVersionSayingWhichOne) {
  std::string newer = good_;
  bf::Store32(newer.data() + bf::kOffVersion, 2);
  absl::Status status = ReadBack(newer);
  EXPECT_EQ(status.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(std::string(status.message()), HasSubstr("version 2"));
  EXPECT_THAT(std::string(status.message()), HasSubstr("(1)"));
}

TEST_F(CorruptedFileTest, RefusesATruncatedFileWhereverItIsCut) {
  const std::vector<DirectoryEntry> dir = Directory(good_);
  const size_t metadata = bf::Load64(good_.data() + bf::kOffMetadataOffset);
  const size_t marks = bf::Load64(good_.data() + bf::kOffMarksOffset);
  const std::vector<size_t> cuts = {0,
                                    5,
                                    8,
                                    100,
                                    bf::kHeaderSize,
                                    bf::kHeaderSize + 20,
                                    metadata + 3,
                                    marks + 30,
                                    dir[0].offset,
                                    dir[1].offset + 9,
                                    dir[4].offset + dir[4].size_bytes / 2,
                                    good_.size() - 1};
  for (size_t cut : cuts) {
    absl::Status status = ReadBack(good_.substr(0, cut));
    EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << "cut at " << cut << ": " << status;
  }
  absl::Status in_address = ReadBack(good_.substr(0, dir[4].offset + dir[4].size_bytes / 2));
  EXPECT_THAT(std::string(in_address.message()), HasSubstr("truncated"));
  EXPECT_THAT(std::string(in_address.message()), HasSubstr("column address"));
}

TEST_F(CorruptedFileTest, RefusesBytesAppendedAfterTheEnd) {
  EXPECT_EQ(ReadBack(good_ + std::string(64, '\0')).code(), absl::StatusCode::kDataLoss);
}

TEST_F(CorruptedFileTest, AFlippedByteInAColumnIsReportedWithTheColumnName) {
  const std::vector<std::pair<uint32_t, std::string>> names = {
      {bf::kColumnTimeNs, "time_ns"},  {bf::kColumnTid, "tid"},
      {bf::kColumnPhase, "phase"},     {bf::kColumnInstructions, "instructions"},
      {bf::kColumnAddress, "address"}, {bf::kColumnOp, "op"},
      {bf::kColumnWeight, "weight"},   {bf::kColumnCpu, "cpu"}};
  const std::vector<DirectoryEntry> dir = Directory(good_);
  ASSERT_EQ(dir.size(), names.size());
  for (const auto& [id, name] : names) {
    const auto entry = std::find_if(dir.begin(), dir.end(),
                                    [id = id](const DirectoryEntry& e) { return e.id == id; });
    ASSERT_NE(entry, dir.end()) << name;
    std::string bad = good_;
    bad[entry->offset + entry->size_bytes / 2] ^= 0x04;
    absl::Status status = ReadBack(bad);
    EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << name;
    EXPECT_THAT(std::string(status.message()), HasSubstr("column " + name + ": checksum"));
  }
}

TEST_F(CorruptedFileTest, AFlippedByteInTheMetadataOrMarksFailsTheHeaderChecksum) {
  for (const size_t at :
       {size_t{bf::kOffNumSamples}, size_t(bf::Load64(good_.data() + bf::kOffMetadataOffset) + 6),
        size_t(bf::Load64(good_.data() + bf::kOffMarksOffset) + 25)}) {
    std::string bad = good_;
    bad[at] ^= 0x01;
    absl::Status status = ReadBack(bad);
    EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << "byte " << at;
    EXPECT_THAT(std::string(status.message()), HasSubstr("checksum")) << "byte " << at;
  }
}

TEST_F(CorruptedFileTest, WithoutChecksumVerificationAFlippedColumnByteLoads) {
  const std::vector<DirectoryEntry> dir = Directory(good_);
  std::string bad = good_;
  bad[dir[4].offset + 8 * 10] ^= 0x40;  // address of sample 10
  BinaryReadOptions options;
  options.verify_checksums = false;
  WriteBytes(path_, bad);
  absl::StatusOr<Trace> read = ReadTraceBinary(path_, options);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->address()[10], MakeTrace(kAllOptional).address()[10] ^ 0x40);
}

TEST_F(CorruptedFileTest, RefusesCorrectChecksumsOverContentsThatBreakTheTraceRules) {
  const std::vector<DirectoryEntry> dir = Directory(good_);
  ASSERT_EQ(dir[0].id, bf::kColumnTimeNs);
  std::string bad = good_;
  bf::Store64(bad.data() + dir[0].offset + 8 * 20, 0);  // sample 20 now goes back in time
  FixChecksums(&bad);
  absl::Status status = ReadBack(bad);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr("unsorted-time"));
  EXPECT_THAT(std::string(status.message()), HasSubstr("sample 20"));
}

TEST_F(CorruptedFileTest, RefusesAColumnLongerThanTheSampleCount) {
  std::string bad = good_;
  const std::vector<DirectoryEntry> dir = Directory(good_);
  bf::Store64(bad.data() + dir[1].entry_offset + bf::kOffEntrySize, dir[1].size_bytes + 4);
  FixChecksums(&bad);
  absl::Status status = ReadBack(bad);
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(status.message()), HasSubstr("column tid"));
}

TEST_F(CorruptedFileTest, RefusesAColumnPointingPastTheEndOfTheFile) {
  std::string bad = good_;
  const std::vector<DirectoryEntry> dir = Directory(good_);
  bf::Store64(bad.data() + dir[2].entry_offset + bf::kOffEntryOffset, good_.size() - 64);
  FixChecksums(&bad);
  absl::Status status = ReadBack(bad);
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(status.message()), HasSubstr("column phase"));
  EXPECT_THAT(std::string(status.message()), HasSubstr("past the end"));
}

TEST_F(CorruptedFileTest, RefusesABadKnownHeaderEntryEvenWithCorrectChecksums) {
  std::string bad = good_;
  const size_t at = bad.find("page_size");
  ASSERT_NE(at, std::string::npos);
  const size_t value = at + std::strlen("page_size") + 4;  // past the value's length prefix
  ASSERT_EQ(bad.substr(value, 4), "4096");
  bad.replace(value, 4, "40x6");
  FixChecksums(&bad);
  absl::Status status = ReadBack(bad);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr("bad-header"));
  EXPECT_THAT(std::string(status.message()), HasSubstr("page_size '40x6'"));
}

TEST_F(CorruptedFileTest, RefusesAnOptionalColumnTheFlagsDoNotAnnounce) {
  std::string bad = good_;
  bf::Store32(bad.data() + bf::kOffFlags, bf::kFlagOp | bf::kFlagWeight);  // cpu flag cleared
  FixChecksums(&bad);
  absl::Status status = ReadBack(bad);
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(status.message()), HasSubstr("column cpu"));
}

// With checksums verified, a damaged file never loads as a different trace: every byte
// but the padding before columns is covered by a checksum.
TEST_F(CorruptedFileTest, ARandomlyDamagedByteIsRefusedOrHarmless) {
  const Trace original = MakeTrace(kAllOptional);
  std::mt19937_64 rng(99);
  int refused = 0;
  for (int i = 0; i < 300; ++i) {
    std::string bad = good_;
    const size_t at = rng() % bad.size();
    bad[at] = static_cast<char>(bad[at] ^ (1 + rng() % 255));
    WriteBytes(path_, bad);
    absl::StatusOr<Trace> read = ReadTraceBinary(path_);
    if (read.ok()) {
      EXPECT_TRUE(SameContents(*read, original)) << "byte " << at << " changed the trace";
    } else {
      ++refused;
    }
  }
  EXPECT_GT(refused, 250);  // padding is a small part of the file
}

}  // namespace
}  // namespace tiergym

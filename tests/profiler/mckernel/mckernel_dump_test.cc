#include "profiler/mckernel/mckernel_dump.h"

#include <filesystem>
#include <fstream>
#include <initializer_list>

#include "estimator/replay_estimator.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernel_patches/abi/tiergym_mckernel.h"
#include "tests/profiler/mckernel_dump_bytes.h"
#include "traces/placement.h"
#include "traces/profile.h"
#include "traces/trace_file.h"

namespace tiergym::mckernel {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;
namespace fs = std::filesystem;

std::string TempPath(const std::string& name) {
  const std::string dir = ::testing::TempDir() + "/mckernel_dump_test";
  fs::create_directories(dir);
  return dir + "/" + name;
}

// Writes `bytes` to a file named `name` and reads it back with ReadDump().
absl::StatusOr<Dump> ReadBytes(const std::string& name, const DumpBytes& bytes) {
  const std::string path = TempPath(name);
  std::ofstream(path, std::ios::binary) << bytes.bytes();
  return ReadDump(path);
}

// The refusal message for `rule` at byte `offset` of the file `name`.
void ExpectRefused(const std::string& name, const DumpBytes& bytes, const std::string& rule,
                   size_t offset) {
  auto d = ReadBytes(name, bytes);
  ASSERT_FALSE(d.ok()) << name << " was accepted";
  EXPECT_EQ(d.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(d.status().message()),
              StartsWith(TempPath(name) + ": byte " + std::to_string(offset) + ": " + rule + ": "));
}

// ---------------------------------------------------------------- parsing

TEST(ParseDumpTest, ReadsTheSectionsBatchesAndPhasemarksOfAKernelDump) {
  DumpBytes b;
  b.Vma(100, 0x2aaaab000000, 64 << 20).Vma(150, 0x2aaaaf000000, 4 << 20).EndSection();
  b.Vma(900, 0x2aaaaf000000, 4 << 20).EndSection();
  const size_t first_batch = b.size();
  b.Batch(1000, 5000, {0x2aaaab000040, 0x2aaaab001000});
  b.Batch(1200, 9000, {0x2aaaab002000});
  b.Phasemark();
  b.Batch(1300, 100, {});
  b.Batch(1500, 700, {0x7fffffffe000});
  auto d = ParseDump("a.dat", b.bytes());
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->source, "a.dat");
  ASSERT_EQ(d->mmaps.size(), 2u);
  EXPECT_EQ(d->mmaps[1].tsc, 150u);
  EXPECT_EQ(d->mmaps[1].start, 0x2aaaaf000000u);
  EXPECT_EQ(d->mmaps[1].length, 4u << 20);
  EXPECT_EQ(d->mmaps[1].offset, 24u);
  ASSERT_EQ(d->munmaps.size(), 1u);
  EXPECT_EQ(d->munmaps[0].tsc, 900u);
  EXPECT_EQ(d->munmaps[0].offset, 56u);
  ASSERT_EQ(d->batches.size(), 4u);
  EXPECT_EQ(d->batches[0].offset, first_batch);
  EXPECT_EQ(d->batches[1].tsc, 1200u);
  EXPECT_EQ(d->batches[1].instructions, 9000u);
  EXPECT_EQ(d->batches[1].phase, 0u);
  EXPECT_EQ(d->batches[1].first_address, 2u);
  EXPECT_EQ(d->batches[1].num_addresses, 1u);
  EXPECT_EQ(d->batches[2].phase, 1u);
  EXPECT_EQ(d->batches[2].num_addresses, 0u);
  EXPECT_EQ(d->batches[3].phase, 1u);
  ASSERT_EQ(d->marks.size(), 1u);
  EXPECT_EQ(d->marks[0].batch_before, 1u);
  EXPECT_EQ(d->marks[0].offset, first_batch + (4 + 2) * 8 + (4 + 1) * 8);
  EXPECT_THAT(d->addresses,
              ElementsAre(0x2aaaab000040u, 0x2aaaab001000u, 0x2aaaab002000u, 0x7fffffffe000u));
}

TEST(ParseDumpTest, AcceptsEmptySectionsEmptyBatchesAndBackToBackPhasemarks) {
  // A thread that never sampled and caught up on two phasemarks at its exit harvest.
  auto d = ParseDump("t.dat", Stream().Batch(10, 0, {}).Phasemark().Phasemark().bytes());
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_TRUE(d->mmaps.empty());
  EXPECT_TRUE(d->munmaps.empty());
  EXPECT_EQ(d->batches.size(), 1u);
  ASSERT_EQ(d->marks.size(), 2u);
  EXPECT_EQ(d->marks[1].batch_before, 0u);
}

TEST(ParseDumpTest, InstructionsRestartAfterAPhasemark) {
  auto d = ParseDump("t.dat", Stream().Batch(10, 9000, {1}).Phasemark().Batch(20, 50, {2}).bytes());
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->batches[1].instructions, 50u);
}

TEST(ParseDumpTest, RefusesAPartialWord) {
  ExpectRefused("partial.dat", Stream().Batch(10, 0, {1}).Cut(3), "partial-word", 6 * 8);
}

TEST(ParseDumpTest, RefusesAnEmptyFile) {
  ExpectRefused("empty.dat", DumpBytes(), "unterminated-mmap", 0);
}

TEST(ParseDumpTest, RefusesAnMmapSectionWithoutWatermark) {
  ExpectRefused("no_mmap_end.dat", DumpBytes().Vma(1, 2, 3), "unterminated-mmap", 24);
}

TEST(ParseDumpTest, RefusesATruncatedMmapRecord) {
  ExpectRefused("mmap_cut.dat", DumpBytes().Vma(1, 0x1000, 4 << 20).Word(2).Word(0x2000),
                "truncated-mmap-record", 24);
}

TEST(ParseDumpTest, RefusesAMunmapSectionWithoutWatermark) {
  ExpectRefused("no_munmap_end.dat", DumpBytes().EndSection().Vma(5, 6, 7), "unterminated-munmap",
                32);
}

TEST(ParseDumpTest, RefusesATruncatedMunmapRecord) {
  ExpectRefused("munmap_cut.dat", DumpBytes().EndSection().Word(5), "truncated-munmap-record", 8);
}

TEST(ParseDumpTest, RefusesAWordThatIsNoMarker) {
  // A dump whose ring buffer wrapped starts its stream in the middle of a batch.
  ExpectRefused("bad_marker.dat", Stream().Word(0x2aaaab000040).Batch(10, 0, {1}), "bad-marker",
                16);
  auto d = ReadBytes("bad_marker.dat", Stream().Word(0x2aaaab000040));
  EXPECT_THAT(std::string(d.status().message()), HasSubstr("word 0x2aaaab000040"));
}

TEST(ParseDumpTest, RefusesABadMarkerAfterABatch) {
  ExpectRefused("bad_marker2.dat", Stream().Batch(10, 0, {1, 2}).Word(7), "bad-marker", 16 + 6 * 8);
}

TEST(ParseDumpTest, RefusesATruncatedBatchHeader) {
  ExpectRefused("batch_cut.dat", Stream().Batch(10, 0, {1}).Word(TIERGYM_DUMP_WATERMARK).Word(20),
                "truncated-batch", 16 + 5 * 8);
}

TEST(ParseDumpTest, RefusesACountBeyondTheEnd) {
  DumpBytes b = Stream();
  b.Word(TIERGYM_DUMP_WATERMARK).Word(10).Word(0).Word(3).Word(0x1000).Word(0x2000);
  ExpectRefused("count.dat", b, "count-beyond-end", 16);
  auto d = ReadBytes("count.dat", b);
  EXPECT_THAT(std::string(d.status().message()), HasSubstr("counts 3 addresses but only 2"));
}

TEST(ParseDumpTest, RefusesAHugeCountWithoutOverflow) {
  DumpBytes b = Stream();
  b.Word(TIERGYM_DUMP_WATERMARK).Word(10).Word(0).Word(~uint64_t{0} >> 1).Word(0x1000);
  ExpectRefused("huge_count.dat", b, "count-beyond-end", 16);
}

TEST(ParseDumpTest, RefusesAPhasemarkBeforeAnyBatch) {
  ExpectRefused("mark_first.dat", Stream().Phasemark().Batch(10, 0, {1}), "phasemark-before-batch",
                16);
}

TEST(ParseDumpTest, RefusesDecreasingTsc) {
  ExpectRefused("tsc.dat", Stream().Batch(20, 0, {1}).Batch(10, 5, {2}), "tsc-decreasing",
                16 + 5 * 8);
}

TEST(ParseDumpTest, RefusesDecreasingInstructionsWithinAPhase) {
  ExpectRefused("instr.dat", Stream().Batch(10, 500, {1}).Batch(20, 400, {2}),
                "instructions-decreasing", 16 + 5 * 8);
}

TEST(ParseDumpTest, RefusesAStreamWithoutBatches) {
  ExpectRefused("no_batch.dat", Stream(), "no-batch", 16);
}

TEST(ParseDumpTest, ReportsAMissingFile) {
  auto d = ReadDump(TempPath("does_not_exist.dat"));
  EXPECT_EQ(d.status().code(), absl::StatusCode::kNotFound);
}

TEST(ParseDumpNameTest, ReadsTheKernelsFileName) {
  auto n = ParseDumpName("/run/x/lulesh2.0-PEBS-countdown-16-PEBS-buffer-0-pid-4242-tid-4245.dat");
  ASSERT_TRUE(n.has_value());
  EXPECT_EQ(n->exec, "lulesh2.0");
  EXPECT_EQ(n->countdown, 16u);
  EXPECT_EQ(n->buffer_size, 0u);
  EXPECT_EQ(n->pid, 4242u);
  EXPECT_EQ(n->tid, 4245u);
  EXPECT_EQ(ParseDumpName("a-b-PEBS-countdown-1-PEBS-buffer-65536-pid-1-tid-2.dat")->exec, "a-b");
}

TEST(ParseDumpNameTest, RejectsOtherNames) {
  EXPECT_FALSE(ParseDumpName("pebs.out").has_value());
  EXPECT_FALSE(ParseDumpName("app-PEBS-countdown-16-PEBS-buffer-0-pid-1-tid-2.bin").has_value());
  EXPECT_FALSE(ParseDumpName("app-PEBS-countdown-x-PEBS-buffer-0-pid-1-tid-2.dat").has_value());
  EXPECT_FALSE(ParseDumpName("app-PEBS-countdown-16-PEBS-buffer-0-pid-1.dat").has_value());
  EXPECT_FALSE(ParseDumpName("app-PEBS-countdown-16-PEBS-buffer-0-pid-1-tid-2x.dat").has_value());
}

// ---------------------------------------------------------------- import

constexpr char kLeadName[] = "/d/stream-PEBS-countdown-16-PEBS-buffer-0-pid-700-tid-700.dat";
constexpr char kOtherName[] = "/d/stream-PEBS-countdown-16-PEBS-buffer-0-pid-700-tid-701.dat";

Dump MustParse(const std::string& name, const DumpBytes& b) {
  auto d = ParseDump(name, b.bytes());
  EXPECT_TRUE(d.ok()) << d.status();
  return *std::move(d);
}

// The main thread of a two-phase run at 2 GHz: an mmap at TSC 1000, three batches in
// phase 0, the batch of the phasemark() call at TSC 5000 (9000 instructions), two batches
// in phase 1, the exit harvest at TSC 9000.
Dump LeadDump() {
  DumpBytes b;
  b.Vma(1000, 0x2aaaab000000, 8 << 20).EndSection().Vma(8800, 0x2aaaab000000, 8 << 20).EndSection();
  b.Batch(2000, 3000, {0xa000, 0xa040});
  b.Batch(4000, 8000, {0xb000});
  b.Batch(5000, 9000, {}).Phasemark();  // the harvest of phasemark()
  b.Batch(7000, 2000, {0xc000, 0xc040, 0xc080, 0xc0c0});
  b.Batch(9000, 4000, {0xd000});
  return MustParse(kLeadName, b);
}

ImportOptions Options() {
  ImportOptions o;
  o.device = "ddr";
  o.tsc_ghz = 2.0;
  return o;
}

TEST(ImportDumpsTest, TurnsOneDumpIntoATrace) {
  std::vector<Dump> dumps{LeadDump()};
  auto run = ImportDumps(dumps, Options());
  ASSERT_TRUE(run.ok()) << run.status();
  const Trace& t = run->trace;
  EXPECT_EQ(run->start_tsc, 1000u);  // the mmap record is the earliest
  EXPECT_EQ(t.source(), kLeadName);
  EXPECT_EQ(t.metadata().app, "stream");
  EXPECT_EQ(t.metadata().device, "ddr");
  EXPECT_EQ(t.metadata().event, "MEM_UOPS_RETIRED:L2_MISS_LOADS");
  EXPECT_EQ(t.metadata().pebs_reset, 16u);
  EXPECT_THAT(t.metadata().entries,
              ::testing::Contains(std::pair<std::string, std::string>("tsc_ghz", "2")));
  EXPECT_THAT(t.metadata().entries,
              ::testing::Contains(std::pair<std::string, std::string>("start_tsc", "1000")));
  ASSERT_EQ(t.num_phases(), 2u);
  EXPECT_EQ(t.marks()[0], (PhaseEvent{0, 700, 0, 0}));
  EXPECT_EQ(t.marks()[1], (PhaseEvent{2000, 700, 1, 9000}));  // (5000 - 1000) / 2 GHz
  EXPECT_EQ(t.end(), (PhaseEvent{4000, 700, 1, 4000}));
  EXPECT_THAT(std::vector<uint64_t>(t.time_ns().begin(), t.time_ns().end()),
              ElementsAre(500, 500, 1500, 3000, 3000, 3000, 3000, 4000));
  EXPECT_THAT(std::vector<uint32_t>(t.phase().begin(), t.phase().end()),
              ElementsAre(0, 0, 0, 1, 1, 1, 1, 1));
  EXPECT_THAT(std::vector<uint64_t>(t.instructions().begin(), t.instructions().end()),
              ElementsAre(3000, 3000, 8000, 2000, 2000, 2000, 2000, 4000));
  EXPECT_THAT(std::vector<uint64_t>(t.address().begin(), t.address().end()),
              ElementsAre(0xa000, 0xa040, 0xb000, 0xc000, 0xc040, 0xc080, 0xc0c0, 0xd000));
  EXPECT_THAT(std::vector<uint32_t>(t.tid().begin(), t.tid().end()), ::testing::Each(700u));
  ASSERT_EQ(run->vmas.size(), 2u);
  EXPECT_EQ(run->vmas[0].kind, VmaEvent::Kind::kMmap);
  EXPECT_EQ(run->vmas[0].time_ns, 0u);
  EXPECT_EQ(run->vmas[1].kind, VmaEvent::Kind::kMunmap);
  EXPECT_EQ(run->vmas[1].time_ns, 3900u);
  EXPECT_EQ(FormatVmaCsv(run->vmas),
            "type,time_ns,tid,start,length\n"
            "mmap,0,700,0x2aaaab000000,0x800000\n"
            "munmap,3900,700,0x2aaaab000000,0x800000\n");
}

TEST(ImportDumpsTest, OptionsOverrideTheFileName) {
  std::vector<Dump> dumps{LeadDump()};
  ImportOptions o = Options();
  o.app = "lulesh";
  o.pebs_reset = 64;
  o.event = "MEM_LOAD_RETIRED:L3_MISS";
  o.start_tsc = 0;
  auto run = ImportDumps(dumps, o);
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->trace.metadata().app, "lulesh");
  EXPECT_EQ(run->trace.metadata().pebs_reset, 64u);
  EXPECT_EQ(run->trace.metadata().event, "MEM_LOAD_RETIRED:L3_MISS");
  EXPECT_EQ(run->trace.marks()[1].time_ns, 2500u);  // 5000 / 2 GHz
}

TEST(ImportDumpsTest, SpreadsTheSamplesOfABatchSinceThePreviousOne) {
  std::vector<Dump> dumps{LeadDump()};
  ImportOptions o = Options();
  o.spread_within_batch = true;
  auto run = ImportDumps(dumps, o);
  ASSERT_TRUE(run.ok()) << run.status();
  const Trace& t = run->trace;
  // Batch 1 (TSC 2000, 3000 instructions, 2 samples) starts at time 0 with 0 instructions;
  // batch 4 (TSC 7000, 2000 instructions, 4 samples) at the phasemark (TSC 5000, 0).
  EXPECT_THAT(std::vector<uint64_t>(t.time_ns().begin(), t.time_ns().end()),
              ElementsAre(250, 500, 1500, 2250, 2500, 2750, 3000, 4000));
  EXPECT_THAT(std::vector<uint64_t>(t.instructions().begin(), t.instructions().end()),
              ElementsAre(1500, 3000, 8000, 500, 1000, 1500, 2000, 4000));
}

TEST(ImportDumpsTest, MergesTheOtherThreadsOnTheLeadingThreadsPhasesAndProgress) {
  // Thread 701 catches up on the phasemark at its next harvest (TSC 6000), after a batch
  // whose samples were taken partly after the mark.
  DumpBytes b = Stream();
  b.Batch(3000, 111, {0xe000});
  b.Batch(6000, 222, {0xe040}).Phasemark();
  b.Batch(8000, 50, {0xe080});
  std::vector<Dump> dumps{LeadDump(), MustParse(kOtherName, b)};
  auto run = ImportDumps(dumps, Options());
  ASSERT_TRUE(run.ok()) << run.status();
  const Trace& t = run->trace;
  ASSERT_EQ(t.num_samples(), 11u);
  // The leading thread's marks; the other's samples by time: 3000 -> 1000 ns (phase 0),
  // 6000 -> 2500 ns (phase 1), 8000 -> 3500 ns (phase 1).
  EXPECT_EQ(t.marks()[1].time_ns, 2000u);
  EXPECT_THAT(std::vector<uint64_t>(t.time_ns().begin(), t.time_ns().end()),
              ElementsAre(500, 500, 1000, 1500, 2500, 3000, 3000, 3000, 3000, 3500, 4000));
  EXPECT_THAT(std::vector<uint32_t>(t.tid().begin(), t.tid().end()),
              ElementsAre(700, 700, 701, 700, 701, 700, 700, 700, 700, 701, 700));
  EXPECT_THAT(std::vector<uint32_t>(t.phase().begin(), t.phase().end()),
              ElementsAre(0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1));
  // Instructions of thread 701 are the leading thread's progress at that time: 1000 ns lies
  // between (500 ns, 3000) and (1500 ns, 8000); 2500 ns between the mark (2000 ns, 0) and
  // (3000 ns, 2000); 3500 ns between (3000 ns, 2000) and (4000 ns, 4000).
  EXPECT_THAT(std::vector<uint64_t>(t.instructions().begin(), t.instructions().end()),
              ElementsAre(3000, 3000, 5500, 8000, 1000, 2000, 2000, 2000, 2000, 3000, 4000));
}

TEST(ImportDumpsTest, UsesTheDumpIndexAsTidForOtherFileNames) {
  std::vector<Dump> dumps{MustParse("main.dat", Stream().Batch(10, 5, {1})),
                          MustParse("worker.dat", Stream().Batch(20, 5, {2}))};
  auto run = ImportDumps(dumps, Options());
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_THAT(std::vector<uint32_t>(run->trace.tid().begin(), run->trace.tid().end()),
              ElementsAre(0, 1));
  EXPECT_EQ(run->trace.metadata().app, "");
  EXPECT_FALSE(run->trace.metadata().pebs_reset.has_value());
}

TEST(ImportDumpsTest, RefusesAnotherThreadWithMorePhasemarks) {
  std::vector<Dump> dumps{MustParse("main.dat", Stream().Batch(10, 5, {1})),
                          MustParse("worker.dat", Stream().Batch(20, 5, {2}).Phasemark())};
  auto run = ImportDumps(dumps, Options());
  ASSERT_FALSE(run.ok());
  EXPECT_EQ(run.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(run.status().message()),
              HasSubstr("worker.dat holds 1 phasemarks, more than the 0 of main.dat"));
}

TEST(ImportDumpsTest, RefusesTwoDumpsOfOneThreadOrOfTwoProcesses) {
  std::vector<Dump> same{LeadDump(), LeadDump()};
  EXPECT_THAT(std::string(ImportDumps(same, Options()).status().message()),
              HasSubstr("are both dumps of thread 700"));
  std::vector<Dump> two{LeadDump(),
                        MustParse("/d/stream-PEBS-countdown-16-PEBS-buffer-0-pid-9-tid-9.dat",
                                  Stream().Batch(10, 5, {1}))};
  EXPECT_THAT(std::string(ImportDumps(two, Options()).status().message()),
              HasSubstr("one trace is one process"));
}

TEST(ImportDumpsTest, RefusesBadOptions) {
  std::vector<Dump> dumps{LeadDump()};
  ImportOptions o = Options();
  o.device = "";
  EXPECT_EQ(ImportDumps(dumps, o).status().code(), absl::StatusCode::kInvalidArgument);
  o = Options();
  o.tsc_ghz = 0;
  EXPECT_EQ(ImportDumps(dumps, o).status().code(), absl::StatusCode::kInvalidArgument);
  o = Options();
  o.device = "dd\nr";
  EXPECT_EQ(ImportDumps(dumps, o).status().code(), absl::StatusCode::kInvalidArgument);
  o = Options();
  o.start_tsc = 1001;  // after the mmap record at TSC 1000
  EXPECT_THAT(std::string(ImportDumps(dumps, o).status().message()),
              HasSubstr("before the start TSC 1001"));
  EXPECT_EQ(ImportDumps({}, Options()).status().code(), absl::StatusCode::kInvalidArgument);
}

// ---------------------------------------------------------------- round trip

// The same program on two devices: the same addresses and phases, MCDRAM faster and
// retiring slightly different instruction counts (as the differential-tracing paper observed).
Dump DeviceDump(const std::string& dir, double slowdown, uint64_t instr_extra) {
  DumpBytes b;
  b.Vma(100, 0x2aaaab000000, 16 << 20).EndSection().EndSection();
  uint64_t tsc = 1000;
  uint32_t tid = 1;
  for (int phase = 0; phase < 3; ++phase) {
    uint64_t instructions = 0;
    for (int batch = 0; batch < 4; ++batch) {
      tsc += static_cast<uint64_t>(200000 * slowdown);
      instructions += 500000 + instr_extra;
      const uint64_t base = 0x2aaaab000000 + (phase * 4 + batch) * 0x100000;
      b.Batch(tsc, instructions, {base, base + 0x40, base + 0x1000, base + 0x2000});
    }
    if (phase < 2) b.Batch(tsc + 10, instructions + 100, {}).Phasemark();
  }
  return MustParse(
      dir + "/bench-PEBS-countdown-16-PEBS-buffer-0-pid-5-tid-" + std::to_string(tid) + ".dat", b);
}

TEST(ImportDumpsTest, RoundTripsDumpsIntoAnEstimateReadyProfile) {
  const std::string dir = TempPath("profile");
  fs::remove_all(dir);
  fs::create_directories(dir);
  struct Device {
    std::string name, file;
    double slowdown;
    uint64_t extra;
  };
  for (const Device& dev :
       {Device{"ddr", "ddr.csv", 2.0, 0}, Device{"mcdram", "mcdram.tgt", 1.0, 300}}) {
    std::vector<Dump> dumps{DeviceDump(dir, dev.slowdown, dev.extra)};
    ImportOptions o;
    o.device = dev.name;
    auto run = ImportDumps(dumps, o);
    ASSERT_TRUE(run.ok()) << run.status();
    ASSERT_TRUE(SaveTrace(run->trace, dir + "/" + dev.file, FormatForPath(dev.file)).ok());
  }
  auto profile = LoadProfile(dir);
  ASSERT_TRUE(profile.ok()) << profile.status();
  EXPECT_EQ(profile->app(), "bench");
  EXPECT_EQ(profile->devices(), (std::vector<std::string>{"ddr", "mcdram"}));
  EXPECT_EQ(profile->num_phases(), 3u);
  EXPECT_GT(profile->instruction_spread().max, 0.0);  // MCDRAM retired 300 more per batch
  const Trace* ddr = profile->Find("ddr");
  const Trace* mcdram = profile->Find("mcdram");
  ASSERT_NE(ddr, nullptr);
  ASSERT_NE(mcdram, nullptr);
  EXPECT_EQ(ddr->num_samples(), 48u);
  EXPECT_EQ(ddr->metadata().pebs_reset, 16u);
  EXPECT_GT(ddr->runtime_ns(), mcdram->runtime_ns());

  // All on one tier, the estimate is that tier's measured runtime; half the pages on
  // MCDRAM land in between.
  for (const char* tier : {"ddr", "mcdram"}) {
    auto placement = ParsePlacement(std::string("{\"default\": \"") + tier + "\"}", "p.json");
    ASSERT_TRUE(placement.ok()) << placement.status();
    auto e = EstimateByReplay(*profile, *placement, {.window_instructions = 250000});
    ASSERT_TRUE(e.ok()) << e.status();
    EXPECT_NEAR(e->runtime_ns, static_cast<double>(profile->Find(tier)->runtime_ns()),
                0.01 * e->runtime_ns)
        << tier;
  }
  auto half = ParsePlacement(
      R"({"default": "ddr", "ranges": [{"start": "0x2aaaab000000", "end": "0x2aaaab600000", "tier": "mcdram"}]})",
      "half.json");
  ASSERT_TRUE(half.ok()) << half.status();
  auto e = EstimateByReplay(*profile, *half, {.window_instructions = 250000});
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_GT(e->runtime_ns, static_cast<double>(mcdram->runtime_ns()));
  EXPECT_LT(e->runtime_ns, static_cast<double>(ddr->runtime_ns()));
}

}  // namespace
}  // namespace tiergym::mckernel

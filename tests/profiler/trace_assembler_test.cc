// Tests of the record -> trace assembly on decoded records built in memory.
#include "profiler/trace_assembler.h"

#include <linux/perf_event.h>
#include <sys/mman.h>

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tiergym::prof {
namespace {

using ::testing::HasSubstr;

constexpr uint64_t kStart = 1'000'000;
constexpr uint64_t kLeaderCpu0 = 10, kLeaderCpu1 = 20;
constexpr uint64_t kSamplerCpu0 = 11, kSamplerCpu1 = 21;
constexpr uint64_t kProbeCpu0 = 12, kProbeCpu1 = 22;
constexpr uint32_t kPid = 100;

AssemblerConfig Config() {
  AssemblerConfig c;
  c.main_tid = kPid;
  c.sample_ids = {kSamplerCpu0, kSamplerCpu1};
  c.mark_ids = {kProbeCpu0, kProbeCpu1};
  c.leader_ids = {kLeaderCpu0, kLeaderCpu1};
  return c;
}

// A sample of event `id` on `cpu`; `counter` is the leader's value read with it (or the
// probe's own count when `leader_read` is false, as CPU-wide probes read themselves).
PerfRecord Sample(uint64_t id, uint32_t tid, uint32_t cpu, uint64_t time, uint64_t addr,
                  uint64_t counter, bool leader_read = true, uint32_t pid = kPid) {
  PerfRecord r;
  r.type_raw = PERF_RECORD_SAMPLE;
  r.sample_id.id = id;
  r.sample_id.pid = pid;
  r.sample_id.tid = tid;
  r.sample_id.cpu = cpu;
  r.sample_id.time = kStart + time;
  r.addr = addr;
  r.read.nr = 1;
  r.read.values[0].value = counter;
  r.read.values[0].id = leader_read ? (cpu == 0 ? kLeaderCpu0 : kLeaderCpu1) : id;
  return r;
}

PerfRecord Mark(uint32_t tid, uint32_t cpu, uint64_t time, uint32_t pid = kPid) {
  // A CPU-wide probe: its read block holds its own count, not the leader's.
  return Sample(cpu == 0 ? kProbeCpu0 : kProbeCpu1, tid, cpu, time, 0, 1, false, pid);
}

TraceMetadata Meta() { return TraceMetadata::Make("app", "ddr", "page-faults"); }

TEST(TraceAssemblerTest, CountsInstructionsSinceThePhaseBegan) {
  TraceAssembler a(Config());
  a.Add(Sample(kSamplerCpu0, kPid, 0, 10, 0x1000, 1000));
  a.Add(Sample(kLeaderCpu0, kPid, 0, 19, 0, 1500));  // a tick just before the mark
  a.Add(Mark(kPid, 0, 20));
  a.Add(Sample(kSamplerCpu0, kPid, 0, 30, 0x2000, 1800));
  a.Add(Sample(kLeaderCpu0, kPid, 0, 35, 0, 1900));
  auto t = a.Finish("t", Meta(), kStart, kStart + 40);
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->num_phases(), 2u);
  EXPECT_EQ(t->marks()[1].time_ns, 20u);
  EXPECT_EQ(t->marks()[1].instructions, 1500u);  // phase 0 retired 1500
  ASSERT_EQ(t->num_samples(), 2u);
  EXPECT_EQ(t->instructions()[0], 1000u);
  EXPECT_EQ(t->phase()[0], 0u);
  EXPECT_EQ(t->instructions()[1], 300u);  // 1800 - 1500
  EXPECT_EQ(t->phase()[1], 1u);
  EXPECT_EQ(t->address()[1], 0x2000u);
  EXPECT_EQ(t->end().time_ns, 40u);
  EXPECT_EQ(t->end().instructions, 400u);  // the last tick: 1900 - 1500
  EXPECT_EQ(a.num_samples(), 2u);
  EXPECT_EQ(a.num_marks(), 1u);
}

TEST(TraceAssemblerTest, SumsTheCountersOfAThreadOverCpusAndThreads) {
  TraceAssembler a(Config());
  a.Add(Sample(kSamplerCpu0, 101, 0, 1, 0x10, 100));
  a.Add(Sample(kSamplerCpu1, 101, 1, 2, 0x20, 50));  // same thread, other CPU's counter
  a.Add(Sample(kSamplerCpu0, 101, 0, 3, 0x30, 300));
  a.Add(Sample(kSamplerCpu1, 102, 1, 4, 0x40, 1000));  // another thread
  auto t = a.Finish("t", Meta(), kStart, kStart + 10);
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->num_samples(), 4u);
  EXPECT_EQ(t->instructions()[0], 100u);
  EXPECT_EQ(t->instructions()[1], 150u);
  EXPECT_EQ(t->instructions()[2], 350u);
  EXPECT_EQ(t->instructions()[3], 1350u);
}

TEST(TraceAssemblerTest, CountsPerThreadWhenCountersAreNotPerCpu) {
  AssemblerConfig c = Config();
  c.per_cpu_counters = false;  // one counter per thread (no inherit)
  TraceAssembler a(c);
  a.Add(Sample(kSamplerCpu0, 101, 0, 1, 0x10, 100));
  a.Add(Sample(kSamplerCpu1, 101, 1, 2, 0x20, 150));
  auto t = a.Finish("t", Meta(), kStart, kStart + 10);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->instructions()[1], 150u);  // not 250
}

TEST(TraceAssemblerTest, MergesRingsByTime) {
  TraceAssembler a(Config());
  // CPU 1's ring is drained before CPU 0's: records come in out of time order.
  a.Add(Sample(kSamplerCpu1, 102, 1, 30, 0x30, 10));
  a.Add(Mark(102, 1, 25));
  a.Add(Sample(kSamplerCpu0, 101, 0, 10, 0x10, 10));
  a.Add(Sample(kSamplerCpu0, 101, 0, 40, 0x40, 20));
  auto t = a.Finish("t", Meta(), kStart, kStart + 50);
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->num_samples(), 3u);
  EXPECT_EQ(t->time_ns()[0], 10u);
  EXPECT_EQ(t->phase()[0], 0u);
  EXPECT_EQ(t->time_ns()[1], 30u);
  EXPECT_EQ(t->phase()[1], 1u);
  EXPECT_EQ(t->time_ns()[2], 40u);
  EXPECT_EQ(t->marks()[1].time_ns, 25u);
}

TEST(TraceAssemblerTest, KeepsMarksOfTheProcessAndItsChildrenOnly) {
  TraceAssembler a(Config());
  a.Add(Mark(kPid, 0, 10));
  a.Add(Mark(999, 0, 20, 999));  // another program using the same library
  PerfRecord fork;
  fork.type_raw = PERF_RECORD_FORK;
  fork.pid = 200;
  fork.ppid = kPid;
  fork.tid = 200;
  fork.ptid = kPid;
  a.Add(fork);
  PerfRecord thread = fork;  // a thread of the process: pid == ppid
  thread.pid = kPid;
  thread.tid = 150;
  a.Add(thread);
  a.Add(Mark(200, 1, 30, 200));  // the forked child
  auto t = a.Finish("t", Meta(), kStart, kStart + 50);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->num_phases(), 3u);
  EXPECT_EQ(a.num_marks(), 2u);
  EXPECT_EQ(a.foreign_marks(), 1u);
  EXPECT_EQ(a.counts().forks, 2u);
}

TEST(TraceAssemblerTest, DropsSamplesOfUnknownEvents) {
  TraceAssembler a(Config());
  a.Add(Sample(77, kPid, 0, 10, 0x10, 1));
  a.Add(Sample(kSamplerCpu0, kPid, 0, 20, 0x20, 2));
  EXPECT_EQ(a.unknown_id_samples(), 1u);
  auto t = a.Finish("t", Meta(), kStart, kStart + 30);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->num_samples(), 1u);
}

TEST(TraceAssemblerTest, ClampsEarlyRecordsAndRaisesALateEnd) {
  TraceAssembler a(Config());
  PerfRecord early = Sample(kSamplerCpu0, kPid, 0, 0, 0x10, 1);
  early.sample_id.time = kStart - 500;  // before the release of the command
  a.Add(early);
  a.Add(Sample(kSamplerCpu0, kPid, 0, 90, 0x20, 2));
  auto t = a.Finish("t", Meta(), kStart, kStart + 50);  // the end was taken before the last record
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->time_ns()[0], 0u);
  EXPECT_EQ(t->runtime_ns(), 90u);
}

TEST(TraceAssemblerTest, WritesTheWeightColumnWhenAsked) {
  AssemblerConfig c = Config();
  c.weight_column = true;
  TraceAssembler a(c);
  PerfRecord r = Sample(kSamplerCpu0, kPid, 0, 10, 0x10, 1);
  r.weight = 321;
  a.Add(r);
  auto t = a.Finish("t", Meta(), kStart, kStart + 20);
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_TRUE(t->optional_columns().weight);
  EXPECT_EQ(t->weight()[0], 321u);
}

TEST(TraceAssemblerTest, WritesTheOpColumnFromTheDataSourceWhenAsked) {
  AssemblerConfig c = Config();
  c.op_column = true;
  TraceAssembler a(c);
  const uint64_t sources[] = {PERF_MEM_S(OP, LOAD), PERF_MEM_S(OP, STORE),
                              PERF_MEM_S(OP, LOAD) | PERF_MEM_S(OP, STORE), PERF_MEM_S(OP, NA)};
  for (int i = 0; i < 4; ++i) {
    PerfRecord r = Sample(kSamplerCpu0, kPid, 0, 10 + i, 0x10, 1);
    r.data_src = sources[i];
    a.Add(r);
  }
  auto t = a.Finish("t", Meta(), kStart, kStart + 20);
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_TRUE(t->optional_columns().op);
  ASSERT_EQ(t->num_samples(), 4u);
  EXPECT_EQ(t->op()[0], 'L');
  EXPECT_EQ(t->op()[1], 'S');
  EXPECT_EQ(t->op()[2], 'S');  // a read-modify-write dirties the line: a store
  EXPECT_EQ(t->op()[3], kUnknownOp);
  // Without the option the trace has no op column.
  TraceAssembler plain(Config());
  plain.Add(Sample(kSamplerCpu0, kPid, 0, 10, 0x10, 1));
  auto u = plain.Finish("t", Meta(), kStart, kStart + 20);
  ASSERT_TRUE(u.ok());
  EXPECT_FALSE(u->optional_columns().op);
}

TEST(TraceAssemblerTest, CountsLostRecordsAndThrottling) {
  TraceAssembler a(Config());
  PerfRecord lost;
  lost.type_raw = PERF_RECORD_LOST;
  lost.lost = 12;
  a.Add(lost);
  PerfRecord throttle;
  throttle.type_raw = PERF_RECORD_THROTTLE;
  a.Add(throttle);
  EXPECT_EQ(a.counts().lost, 12u);
  EXPECT_EQ(a.counts().throttles, 1u);
}

PerfRecord Mmap2(uint64_t time, uint64_t start, uint64_t end, uint32_t prot,
                 const std::string& file) {
  PerfRecord r;
  r.type_raw = PERF_RECORD_MMAP2;
  r.misc = PERF_RECORD_MISC_MMAP_DATA;
  r.pid = r.tid = kPid;
  r.sample_id.time = kStart + time;
  r.mmap_addr = start;
  r.mmap_len = end - start;
  r.mmap_prot = prot;
  r.mmap_flags = MAP_PRIVATE;
  r.filename = file;
  return r;
}

TEST(TraceAssemblerTest, FoldsProtectionChangesOutOfTheLayout) {
  TraceAssembler a(Config());
  a.Add(Mmap2(5, 0x400000, 0x401000, PROT_READ | PROT_EXEC, "/bin/app"));
  a.Add(Mmap2(10, 0x7f0000000000, 0x7f0000800000, PROT_READ | PROT_WRITE, "//anon"));
  // The program's own protection changes: the whole array revoked, then a piece given
  // back, merged with its neighbour.
  a.Add(Mmap2(20, 0x7f0000000000, 0x7f0000800000, PROT_NONE, "//anon"));
  a.Add(Mmap2(21, 0x7f0000010000, 0x7f0000020000, PROT_READ | PROT_WRITE, "//anon"));
  a.Add(Mmap2(22, 0x7efffff00000, 0x7f0000020000, PROT_READ | PROT_WRITE, "//anon"));
  a.Add(Mmap2(30, 0x7f1000000000, 0x7f1000001000, PROT_READ | PROT_WRITE, "/tmp/a\tb"));
  const std::vector<MmapEntry> m = a.Mmaps(kStart);
  ASSERT_EQ(m.size(), 3u);
  EXPECT_EQ(m[0].filename, "/bin/app");
  EXPECT_EQ(m[0].time_ns, 5u);
  EXPECT_EQ(m[1].start, 0x7efffff00000u);  // widened by the overlapping piece
  EXPECT_EQ(m[1].end, 0x7f0000800000u);
  const std::string text = FormatMmapLayout(m, {{"app", "x"}});
  EXPECT_THAT(text, HasSubstr("# tiergym mmap layout v1\n# app=x\n"));
  EXPECT_THAT(text,
              HasSubstr("time_ns\tpid\ttid\tstart\tend\tpgoff\tprot\tflags\tkind\tfilename\n"));
  EXPECT_THAT(text, HasSubstr("\t0x400000\t0x401000\t0x0\tr-x\t0x2\tdata\t/bin/app\n"));
  EXPECT_THAT(text, HasSubstr("/tmp/a\\tb\n"));
}

}  // namespace
}  // namespace tiergym::prof

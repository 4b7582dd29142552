// ProjectTrace keeps what the program did and recomputes only the times per tier.
#include "traces/projection.h"

#include <cstdint>

#include "gtest/gtest.h"
#include "traces/machine.h"
#include "traces/trace.h"

namespace tiergym {
namespace {

// A recorded run on `device`: `phases` phases of 1 ms, each with `per_phase` samples
// evenly spread over 64 MiB (one every 1 ms / per_phase), 64 threads.
Trace Recording(const std::string& device, int phases, int per_phase, uint64_t reset) {
  TraceBuilder b("rec.csv", TraceMetadata::Make("app", device, "ev", reset));
  uint64_t instructions = 0;
  for (int p = 0; p < phases; ++p) {
    const uint64_t start = static_cast<uint64_t>(p) * 1'000'000;
    b.AddMark(PhaseEvent{start, 0, static_cast<uint32_t>(p), p == 0 ? 0 : instructions});
    for (int s = 0; s < per_phase; ++s) {
      const uint64_t t = start + static_cast<uint64_t>(s) * 1'000'000 / per_phase + 1;
      b.AddSample(t, static_cast<uint32_t>(s % 64), static_cast<uint32_t>(p),
                  static_cast<uint64_t>(s) * 1000, 0x10000000 + (s * 4096ull) % (64 << 20));
    }
    instructions = static_cast<uint64_t>(per_phase) * 1000;
  }
  b.SetEnd(PhaseEvent{static_cast<uint64_t>(phases) * 1'000'000, 0,
                      static_cast<uint32_t>(phases - 1), instructions});
  auto t = b.Finish();
  EXPECT_TRUE(t.ok()) << t.status();
  return *t;
}

TEST(ProjectTraceTest, KeepsAddressesPhasesAndInstructionsAndTheRecordedTiersTime) {
  auto knl = LoadMachine("knl");
  ASSERT_TRUE(knl.ok()) << knl.status();
  const Trace rec = Recording("ddr", 5, 200, 20000);
  auto out = ProjectTrace(rec, *knl);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), knl->tiers.size());
  for (size_t i = 0; i < out->size(); ++i) {
    const Trace& t = (*out)[i];
    EXPECT_EQ(t.metadata().device, knl->tiers[i].name);
    ASSERT_EQ(t.num_samples(), rec.num_samples());
    ASSERT_EQ(t.num_phases(), rec.num_phases());
    for (size_t s = 0; s < rec.num_samples(); ++s) {
      ASSERT_EQ(t.address()[s], rec.address()[s]);
      ASSERT_EQ(t.phase()[s], rec.phase()[s]);
      ASSERT_EQ(t.instructions()[s], rec.instructions()[s]);
      ASSERT_EQ(t.tid()[s], rec.tid()[s]);
    }
    for (size_t p = 0; p < rec.num_phases(); ++p) {
      EXPECT_EQ(t.PhaseInstructions(p), rec.PhaseInstructions(p));
    }
  }
  // The recorded tier keeps its time (to rounding); MCDRAM's bandwidth makes this
  // bandwidth-bound run (4 misses per ns, 256 GB/s asked of the DDR) shorter.
  EXPECT_NEAR(static_cast<double>((*out)[0].runtime_ns()), static_cast<double>(rec.runtime_ns()),
              1000.0);
  EXPECT_LT((*out)[1].runtime_ns(), rec.runtime_ns() * 9 / 10);
  EXPECT_GT((*out)[1].runtime_ns(), 0u);
}

TEST(ProjectTraceTest, AComputeBoundRecordingBarelyChanges) {
  auto knl = LoadMachine("knl");
  ASSERT_TRUE(knl.ok());
  const Trace rec = Recording("ddr", 5, 10, 1);  // ten misses per millisecond
  auto out = ProjectTrace(rec, *knl);
  ASSERT_TRUE(out.ok()) << out.status();
  const double ratio =
      static_cast<double>((*out)[1].runtime_ns()) / static_cast<double>((*out)[0].runtime_ns());
  EXPECT_NEAR(ratio, 1.0, 0.01);
}

TEST(ProjectTraceTest, RefusesWhatCannotBeProjectedSayingWhy) {
  auto knl = LoadMachine("knl");
  ASSERT_TRUE(knl.ok());
  Machine one = *knl;
  one.tiers.resize(1);
  auto r = ProjectTrace(Recording("ddr", 2, 10, 1), one);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("at least two"), std::string::npos) << r.status();

  TraceBuilder b("empty.csv", TraceMetadata::Make("app", "ddr"));
  b.AddMark(PhaseEvent{0, 0, 0, 0});
  b.SetEnd(PhaseEvent{1000, 0, 0, 10});
  auto empty = b.Finish();
  ASSERT_TRUE(empty.ok());
  r = ProjectTrace(*empty, *knl);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("no samples"), std::string::npos) << r.status();

  ProjectionOptions o;
  o.recorded_tier = "cxl";
  r = ProjectTrace(Recording("ddr", 2, 10, 1), *knl, o);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("'cxl' is not a tier"), std::string::npos) << r.status();
}

}  // namespace
}  // namespace tiergym

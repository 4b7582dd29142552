#include "traces/trace.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tiergym {
namespace {

using ::testing::HasSubstr;

TraceBuilder TwoPhaseBuilder() {
  TraceBuilder b("built", TraceMetadata::Make("app", "ddr", "EV", 16));
  b.AddMark({0, 1, 0, 0});
  b.AddSample(5, 1, 0, 10, 0x1000);
  b.AddSample(7, 2, 0, 20, 0x2000);
  b.AddMark({10, 1, 1, 100});
  b.AddSample(12, 1, 1, 5, 0x3000);
  b.SetEnd({20, 1, 1, 50});
  return b;
}

TEST(TraceTest, BuilderProducesColumnsAndPhaseIndex) {
  auto t = TwoPhaseBuilder().Finish();
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->num_samples(), 3u);
  EXPECT_EQ(t->num_phases(), 2u);
  EXPECT_EQ(t->PhaseBegin(0), 0u);
  EXPECT_EQ(t->PhaseBegin(1), 2u);
  EXPECT_EQ(t->PhaseBegin(2), 3u);
  EXPECT_EQ(t->PhaseStartNs(1), 10u);
  EXPECT_EQ(t->PhaseEndNs(0), 10u);
  EXPECT_EQ(t->PhaseEndNs(1), 20u);
  EXPECT_EQ(t->PhaseInstructions(0), 100u);
  EXPECT_EQ(t->PhaseInstructions(1), 50u);
  EXPECT_EQ(t->metadata().pebs_reset, 16u);
  EXPECT_EQ(t->tid()[1], 2u);
}

TEST(TraceTest, CopiesShareColumns) {
  auto t = TwoPhaseBuilder().Finish();
  ASSERT_TRUE(t.ok());
  Trace copy = *t;
  EXPECT_EQ(copy.address().data(), t->address().data());
  EXPECT_TRUE(SameContents(copy, *t));
}

TEST(TraceTest, MetadataMakeListsEntriesInHeaderOrder) {
  TraceMetadata m = TraceMetadata::Make("lulesh", "hbm", "E", 32, 8192);
  ASSERT_EQ(m.entries.size(), 5u);
  EXPECT_EQ(m.entries[0].first, "app");
  EXPECT_EQ(m.entries[1], (std::pair<std::string, std::string>("device", "hbm")));
  EXPECT_EQ(m.entries[4], (std::pair<std::string, std::string>("page_size", "8192")));
}

TEST(TraceTest, RefusesSampleOutsideItsPhaseTimeSpan) {
  TraceBuilder b("late", TraceMetadata::Make("", "ddr"));
  b.AddMark({0, 0, 0, 0});
  b.AddMark({10, 0, 1, 5});
  b.AddSample(11, 0, 0, 1, 0x1000);  // phase 0 after phase 1 started
  b.SetEnd({20, 0, 1, 5});
  auto t = b.Finish();
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(std::string(t.status().message()), HasSubstr("late: sample 0: unsorted-time"));
}

TEST(TraceTest, RefusesPhasesGoingBackwards) {
  TraceBuilder b("back", TraceMetadata::Make("", "ddr"));
  b.AddMark({0, 0, 0, 0});
  b.AddMark({10, 0, 1, 5});
  b.AddSample(12, 0, 1, 1, 0x1000);
  b.AddSample(13, 0, 0, 1, 0x1000);
  b.SetEnd({20, 0, 1, 5});
  auto t = b.Finish();
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(std::string(t.status().message()), HasSubstr("sample 1: phase-mismatch"));
}

TEST(TraceTest, RefusesMissingDeviceAndBadPageSize) {
  TraceBuilder b("nodev", TraceMetadata::Make("", ""));
  b.AddMark({0, 0, 0, 0});
  b.SetEnd({1, 0, 0, 0});
  EXPECT_THAT(std::string(b.Finish().status().message()), HasSubstr("missing-device"));
  TraceBuilder c("page", TraceMetadata::Make("", "ddr", "", std::nullopt, 1000));
  c.AddMark({0, 0, 0, 0});
  c.SetEnd({1, 0, 0, 0});
  EXPECT_THAT(std::string(c.Finish().status().message()), HasSubstr("bad-page-size"));
}

TEST(TraceTest, RefusesEndBeforeLastRowOrInWrongPhase) {
  TraceBuilder b("end", TraceMetadata::Make("", "ddr"));
  b.AddMark({0, 0, 0, 0});
  b.AddSample(30, 0, 0, 1, 0x1000);
  b.SetEnd({20, 0, 0, 5});
  EXPECT_THAT(std::string(b.Finish().status().message()), HasSubstr("end: unsorted-time"));
  TraceBuilder c("endphase", TraceMetadata::Make("", "ddr"));
  c.AddMark({0, 0, 0, 0});
  c.SetEnd({20, 0, 3, 5});
  EXPECT_THAT(std::string(c.Finish().status().message()), HasSubstr("end: phase-mismatch"));
}

TEST(TraceTest, RefusesTraceWithoutMarks) {
  TraceBuilder b("nomark", TraceMetadata::Make("", "ddr"));
  b.SetEnd({20, 0, 0, 5});
  EXPECT_THAT(std::string(b.Finish().status().message()), HasSubstr("first-mark"));
}

}  // namespace
}  // namespace tiergym

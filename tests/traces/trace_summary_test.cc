#include "traces/trace_summary.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tiergym {
namespace {

using ::testing::HasSubstr;

Trace MakeTrace() {
  TraceBuilder b("sum.csv", TraceMetadata::Make("minife", "ddr", "EV", 16));
  b.AddMark({0, 0, 0, 0});
  // Two samples on page 0x10, one on 0x11, one on 0x13 (gap of one page), and one far away.
  b.AddSample(1, 100, 0, 5, 0x10000);
  b.AddSample(2, 101, 0, 6, 0x10008);
  b.AddSample(3, 100, 0, 7, 0x11000);
  b.AddMark({10, 0, 1, 1000});
  b.AddSample(11, 102, 1, 8, 0x13fff);
  b.AddSample(12, 100, 1, 9, 0x7f0000000000);
  b.SetEnd({40, 0, 1, 3000});
  return *b.Finish();
}

TEST(TraceSummaryTest, CountsPhasesSamplesThreadsAndFootprint) {
  TraceSummary s = Summarize(MakeTrace());
  EXPECT_EQ(s.runtime_ns, 40u);
  EXPECT_EQ(s.samples, 5u);
  EXPECT_EQ(s.threads, 3u);
  ASSERT_EQ(s.phases.size(), 2u);
  EXPECT_EQ(s.phases[0].duration_ns, 10u);
  EXPECT_EQ(s.phases[0].instructions, 1000u);
  EXPECT_EQ(s.phases[0].samples, 3u);
  EXPECT_EQ(s.phases[1].start_ns, 10u);
  EXPECT_EQ(s.phases[1].duration_ns, 30u);
  EXPECT_EQ(s.phases[1].instructions, 3000u);
  EXPECT_EQ(s.total_instructions, 4000u);
  EXPECT_EQ(s.footprint_pages, 4u);
  EXPECT_EQ(s.footprint_bytes, 4u * 4096);
}

TEST(TraceSummaryTest, MergesTouchedPagesWithinTheGapIntoRanges) {
  TraceSummary s = Summarize(MakeTrace());
  ASSERT_EQ(s.ranges.size(), 2u);
  EXPECT_EQ(s.ranges[0].start, 0x10000u);
  EXPECT_EQ(s.ranges[0].end, 0x14000u);
  EXPECT_EQ(s.ranges[0].pages, 3u);
  EXPECT_EQ(s.ranges[0].samples, 4u);
  EXPECT_EQ(s.ranges[1].start, 0x7f0000000000u);
  // With no gap allowed, the page after a hole starts a new range.
  TraceSummary tight = Summarize(MakeTrace(), {.range_gap_bytes = 0});
  EXPECT_EQ(tight.ranges.size(), 3u);
}

TEST(TraceSummaryTest, TouchedPagesAreSortedAndDistinct) {
  EXPECT_EQ(TouchedPages(MakeTrace()), (std::vector<uint64_t>{0x10, 0x11, 0x13, 0x7f0000000}));
}

TEST(TraceSummaryTest, TextAndJsonReportsCarryTheFigures) {
  TraceSummary s = Summarize(MakeTrace());
  const std::string text = FormatSummaryText(s);
  EXPECT_THAT(text, HasSubstr("device       ddr"));
  EXPECT_THAT(text, HasSubstr("samples      5 from 3 thread(s)"));
  EXPECT_THAT(text, HasSubstr("0x7f0000000000"));
  json::Writer w;
  WriteSummaryJson(s, w);
  auto v = json::Parse(w.Take(), "summary");
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->Find("samples")->number(), 5);
  EXPECT_EQ(v->Find("footprint_bytes")->number(), 16384);
  EXPECT_EQ(v->Find("phases")->array().size(), 2u);
  EXPECT_EQ(v->Find("ranges")->array()[0].Find("start")->string(), "0x10000");
  EXPECT_EQ(v->Find("pebs_reset")->number(), 16);
}

TEST(TraceSummaryTest, FormatsDurationsAndBytesForPeople) {
  EXPECT_EQ(FormatDuration(41'000'000'000), "41.000 s");
  EXPECT_EQ(FormatDuration(913'321), "913.3 us");
  EXPECT_EQ(FormatDuration(12), "12 ns");
  EXPECT_EQ(FormatBytes(512), "512 B");
  EXPECT_EQ(FormatBytes(3ull << 30), "3.00 GiB");
}

}  // namespace
}  // namespace tiergym

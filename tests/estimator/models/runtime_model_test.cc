#include "estimator/models/runtime_model.h"

#include "estimator/models/concurrent_model.h"
#include "estimator/models/roofline_model.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tiergym {
namespace {

using ::testing::HasSubstr;

TEST(RuntimeModelTest, EveryModelIsFoundByTheNameItReports) {
  for (Model m : {Model::kPaper, Model::kConcurrent, Model::kRoofline}) {
    const RuntimeModel& impl = RuntimeModelFor(m);
    EXPECT_EQ(FindRuntimeModel(impl.name()), &impl);
    EXPECT_EQ(ModelName(m), impl.name());
    auto parsed = ParseModel(impl.name());
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, m);
  }
  EXPECT_EQ(FindRuntimeModel("linear"), nullptr);
  auto unknown = ParseModel("linear");
  ASSERT_FALSE(unknown.ok());
  EXPECT_THAT(unknown.status().message(), HasSubstr("known: paper, concurrent, roofline"));
}

TEST(RuntimeModelTest, OnlyThePaperModelIsLinearAndNeedsNoMachine) {
  EXPECT_TRUE(RuntimeModelFor(Model::kPaper).linear());
  EXPECT_FALSE(RuntimeModelFor(Model::kPaper).needs_machine());
  for (Model m : {Model::kConcurrent, Model::kRoofline}) {
    EXPECT_FALSE(RuntimeModelFor(m).linear());
    EXPECT_TRUE(RuntimeModelFor(m).needs_machine());
  }
}

// One block on two devices: floors of 10 and 4 ns, half the hits each.
BlockTable TwoDeviceBlock() {
  BlockTable b;
  b.devices = 2;
  b.total = {100};
  b.bandwidth_floor = {10, 4};
  b.compute = {0};
  b.overlap = {0.5};
  b.lo = {0};
  b.hi = {1000};
  b.scale = {1};
  b.latency = {3, 3};  // latency-bound time of all misses per device
  b.band = {10, 4};    // bandwidth-bound time of all misses per device
  b.curves = {LoadCurve{}, LoadCurve{}};
  return b;
}

TEST(RuntimeModelTest, CorrectionsVanishOnOneDeviceAndFollowTheirFormulasOnAMix) {
  const BlockTable b = TwoDeviceBlock();
  const uint64_t one[] = {100, 0}, half[] = {50, 50};
  for (Model m : {Model::kPaper, Model::kConcurrent, Model::kRoofline}) {
    EXPECT_DOUBLE_EQ(RuntimeModelFor(m).Correction(b, 0, one, nullptr), 0) << ModelName(m);
  }
  EXPECT_DOUBLE_EQ(RuntimeModelFor(Model::kPaper).Correction(b, 0, half, nullptr), 0);
  // Concurrent: sum_d s_d b_d - max_d s_d b_d = (5 + 2) - 5.
  EXPECT_DOUBLE_EQ(ConcurrentModel().Correction(b, 0, half, nullptr), 2);
  // Roofline without compute: sum_d s_d max(l_d, b_d) = 0.5 * 10 + 0.5 * 4 = 7, the mix
  // max(sum_d s_d l_d, max_d s_d b_d) = max(3, 5) = 5.
  EXPECT_DOUBLE_EQ(RooflineModel().Correction(b, 0, half, nullptr), 2);
  // Factors scale each device's part.
  const double factor[] = {2, 1};
  EXPECT_DOUBLE_EQ(ConcurrentModel().Correction(b, 0, half, factor), 2);  // 10 + 2 - 10
}

TEST(RuntimeModelTest, TheRooflineSpreadsItsCorrectionOverTheSpanItWasFittedTo) {
  const BlockTable b = TwoDeviceBlock();
  const RuntimeModel::Span windows{100, 200};
  EXPECT_EQ(RuntimeModelFor(Model::kConcurrent).CorrectionSpan(b, 0, windows), windows);
  EXPECT_EQ(RuntimeModelFor(Model::kRoofline).CorrectionSpan(b, 0, windows),
            (RuntimeModel::Span{0, 1000}));
}

}  // namespace
}  // namespace tiergym

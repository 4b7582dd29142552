#include "estimator/replay_estimator.h"

#include "estimator/page_placement.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/estimator/toy_profile.h"

namespace tiergym {
namespace {

using ::testing::HasSubstr;

using testing::kPageA;
using testing::kPageB;
using testing::Ranges;
using testing::Toy;

TEST(ReplayEstimatorTest, AllOnOneTierGivesThatRunsTime) {
  for (const char* tier : {"ddr", "hbm", "remote"}) {
    Placement p;
    p.default_tier = tier;
    auto est = EstimateByReplay(Toy(), p);
    ASSERT_TRUE(est.ok()) << est.status();
    EXPECT_NEAR(est->runtime_ns, Toy().Find(tier)->runtime_ns(), 1e-6) << tier;
  }
}

TEST(ReplayEstimatorTest, TwoTiersHandComputed) {
  // Window 0 (page A) on hbm: hbm takes 50 ns to reach 1 M instructions (interpolated
  // between 25 ns at 0.5 M and 75 ns at 1.5 M). Window 1 (page B) on ddr: 200 - 100.
  auto est = EstimateByReplay(Toy(), Ranges({{kPageA, kPageA + 4096, "hbm"}}));
  ASSERT_TRUE(est.ok()) << est.status();
  EXPECT_NEAR(est->runtime_ns, 50 + 100, 1e-6);
  ASSERT_EQ(est->phases.size(), 1u);
  EXPECT_EQ(est->phases[0].windows, 2u);
}

TEST(ReplayEstimatorTest, ThreeTiersHandComputed) {
  // Window 0 on hbm (50 ns), window 1 on remote (400 - 200 ns).
  auto est = EstimateByReplay(
      Toy(), Ranges({{kPageA, kPageA + 4096, "hbm"}, {kPageB, kPageB + 4096, "remote"}}));
  ASSERT_TRUE(est.ok()) << est.status();
  EXPECT_NEAR(est->runtime_ns, 50 + 200, 1e-6);
  // Devices in name order: ddr, hbm, remote; every run holds one sample of each page.
  EXPECT_NEAR(est->access_share[0], 0.0, 1e-12);
  EXPECT_NEAR(est->access_share[1], 0.5, 1e-12);
  EXPECT_NEAR(est->access_share[2], 0.5, 1e-12);
}

TEST(ReplayEstimatorTest, OneWindowMixesDevicesByAccessShare) {
  // A single window of the whole phase: half the accesses on hbm.
  EstimateOptions options;
  options.window_instructions = 10'000'000;
  auto est = EstimateByReplay(Toy(), Ranges({{kPageA, kPageA + 4096, "hbm"}}), options);
  ASSERT_TRUE(est.ok());
  EXPECT_NEAR(est->runtime_ns, 200 - (200 - 100) * 0.5, 1e-6);  // the paper's formula
}

TEST(ReplayEstimatorTest, FractionsFollowFirstTouchOrder) {
  // Page A is touched first, so 50 % of the footprint on hbm is page A.
  Placement p;
  p.default_tier = "ddr";
  p.fractions = {{"hbm", 0.5}};
  auto est = EstimateByReplay(Toy(), p);
  ASSERT_TRUE(est.ok()) << est.status();
  EXPECT_NEAR(est->runtime_ns, 150, 1e-6);
}

TEST(ReplayEstimatorTest, RangesPlacePagesByTheirFirstByte) {
  auto pages = PagePlacement::Resolve(Toy(), Ranges({{kPageA + 1, kPageB + 1, "hbm"}}));
  ASSERT_TRUE(pages.ok());
  EXPECT_EQ(pages->TierOfAddress(kPageA), 0);  // range starts inside page A
  EXPECT_EQ(pages->TierOfAddress(kPageA + 4096), 1);
  EXPECT_EQ(pages->TierOfAddress(kPageB + 100), 1);  // page B's first byte is covered
  EXPECT_EQ(pages->TierOfAddress(kPageB + 4096), 0);
}

TEST(ReplayEstimatorTest, RefusesATierWithoutARun) {
  auto est = EstimateByReplay(Toy(), Ranges({{kPageA, kPageA + 4096, "cxl"}}));
  ASSERT_FALSE(est.ok());
  EXPECT_THAT(std::string(est.status().message()),
              HasSubstr("tier 'cxl' but profile toy has runs only for: ddr, hbm, remote"));
}

TEST(ReplayEstimatorTest, WithoutPhasemarksTheWholeRunIsOnePhase) {
  EstimateOptions options;
  options.use_phasemarks = false;
  auto est = EstimateByReplay(Toy(), Ranges({{kPageA, kPageA + 4096, "hbm"}}), options);
  ASSERT_TRUE(est.ok());
  EXPECT_EQ(est->phases.size(), 1u);
  EXPECT_NEAR(est->runtime_ns, 150, 1e-6);
}

}  // namespace
}  // namespace tiergym

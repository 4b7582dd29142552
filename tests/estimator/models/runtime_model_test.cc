#include "estimator/models/runtime_model.h"

#include <vector>

#include "estimator/internal/roofline_fit.h"
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

// A block of misses N on ddr, hbm and remote (disagg's spec latencies and bandwidths),
// timed by the roofline the fit assumes with compute overlap 0.85.
struct ThreeTierBlock {
  std::vector<double> latency = {130, 155, 600}, band, t;
  double x = 0, compute = 0;
  ThreeTierBlock(double misses, double slots, double compute_ns) : x(misses / slots) {
    compute = compute_ns;
    for (double gbps : {90.0, 400.0, 25.0}) band.push_back(misses * 64 / gbps);
    for (size_t d = 0; d < 3; ++d) {
      t.push_back(internal::RoofTime(compute, std::max(latency[d] * x, band[d]), 0.85));
    }
  }
  [[nodiscard]] double Residual(double fx, double fc) const {
    double r = 0;
    for (size_t d = 0; d < 3; ++d) {
      const double e = t[d] - internal::RoofTime(fc, std::max(latency[d] * fx, band[d]), 0.85);
      r += e * e;
    }
    return r;
  }
};

TEST(RooflineFitTest, ATolerantFitTakesTheLeastConcurrencyWithinItsMisfit) {
  // Compute hides hbm's latency (LULESH's kinematics under compute overlap 0.85): the runs
  // tell the concurrency x only through hbm's hidden 15 %.
  const ThreeTierBlock hidden(6e5, 384, 3.33e5);
  // And a block whose hbm run is latency-bound, where they tell it directly.
  const ThreeTierBlock exposed(6e5, 96, 0.5e5);
  for (const ThreeTierBlock* b : {&hidden, &exposed}) {
    double best = -1, r0 = -1, r = -1;
    const auto fit = internal::FitRoofline(b->t, b->band, b->latency, 0.85, {}, &best);
    const auto same = internal::FitRoofline(b->t, b->band, b->latency, 0.85, {}, &r0, {}, 0);
    EXPECT_EQ(fit, same);
    EXPECT_NEAR(fit.first, b->x, 1e-3 * b->x);
    const auto tolerant = internal::FitRoofline(b->t, b->band, b->latency, 0.85, {}, &r, {}, 0.01);
    // The residual reported is the best fit's; the fit taken is within the tolerance.
    EXPECT_EQ(r, best);
    double squares = 0;
    for (double v : b->t) squares += v * v;
    EXPECT_LE(b->Residual(tolerant.first, tolerant.second), best + 1e-4 * squares * 1.000001);
    EXPECT_LE(tolerant.first, fit.first);
  }
  // 1 % of misfit allows less than half the concurrency where compute hides the latency,
  // and moves it by under 5 % where the latency shows.
  double r = 0;
  EXPECT_LT(
      internal::FitRoofline(hidden.t, hidden.band, hidden.latency, 0.85, {}, &r, {}, 0.01).first,
      0.5 * hidden.x);
  EXPECT_GT(
      internal::FitRoofline(exposed.t, exposed.band, exposed.latency, 0.85, {}, &r, {}, 0.01).first,
      0.95 * exposed.x);
}

}  // namespace
}  // namespace tiergym

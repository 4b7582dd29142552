#include "estimator/contention/smoothing.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tiergym::contention {
namespace {

using ::testing::HasSubstr;

constexpr double kTol = 1e-12;

SensitivityCurve Curve(double read_pct, std::vector<std::pair<double, double>> points) {
  SensitivityCurve c;
  c.read_pct = read_pct;
  for (const auto& [x, y] : points) c.points.push_back(CurvePoint{x, y});
  return c;
}

SmoothedCurve Smooth(const SensitivityCurve& c, Smoothing s, PointSet p = PointSet::kAll) {
  auto out = SmoothCurve(c, s, p);
  EXPECT_TRUE(out.ok()) << out.status();
  return *out;
}

std::vector<double> Levels(const std::vector<CurvePoint>& points) {
  std::vector<double> out;
  for (const CurvePoint& p : points) out.push_back(p.interference_gbps);
  return out;
}

// A measured curve on the line 1 - 0.01 x, two repeats per level, with one disturbed run
// (an outlier 20 points low at the largest level, as the synthetic campaign's outliers).
SensitivityCurve WithOutlier() {
  std::vector<std::pair<double, double>> points;
  for (double x = 2; x <= 20; x += 2) {
    const double wiggle = 0.002 * ((static_cast<int>(x) / 2) % 3 - 1);
    points.emplace_back(x, 1 - 0.01 * x + wiggle);
    points.emplace_back(x, 1 - 0.01 * x - wiggle);
  }
  points.back().second -= 0.2;
  return Curve(75, points);
}

TEST(SmoothingTest, RobustFitIsNotPulledByADisturbedMeasurement) {
  const SensitivityCurve c = WithOutlier();
  for (Smoothing s : {Smoothing::kLinear, Smoothing::kPoly2}) {
    auto ls = SmoothCurve(c, s, PointSet::kAll, Fit::kLeastSquares);
    auto robust = SmoothCurve(c, s, PointSet::kAll, Fit::kRobust);
    ASSERT_TRUE(ls.ok() && robust.ok());
    // At the largest level the truth is 0.8: least squares follows the outlier down.
    EXPECT_LT(ls->Evaluate(20), 0.79) << SmoothingName(s);
    EXPECT_NEAR(robust->Evaluate(20), 0.8, 0.003) << SmoothingName(s);
    EXPECT_NEAR(robust->Evaluate(10), 0.9, 0.003) << SmoothingName(s);
  }
}

TEST(SmoothingTest, RobustFitOfCleanPointsIsTheLeastSquaresFit) {
  // Points exactly on a line: every weight stays 1 (the scale's floor avoids 0 / 0).
  const SensitivityCurve c = Curve(75, {{2, 0.98}, {4, 0.96}, {6, 0.94}, {8, 0.92}, {10, 0.90}});
  auto robust = SmoothCurve(c, Smoothing::kLinear, PointSet::kAll, Fit::kRobust);
  ASSERT_TRUE(robust.ok());
  EXPECT_NEAR(robust->coefficients()[0], 1.0, 1e-9);
  EXPECT_NEAR(robust->coefficients()[1], -0.01, 1e-9);
  // Too few points to tell an outlier (unknowns + 2): ordinary least squares.
  const SensitivityCurve three = Curve(75, {{2, 0.98}, {4, 0.90}, {6, 0.94}});
  auto a = SmoothCurve(three, Smoothing::kLinear, PointSet::kAll, Fit::kRobust);
  auto b = SmoothCurve(three, Smoothing::kLinear, PointSet::kAll, Fit::kLeastSquares);
  EXPECT_EQ(a->coefficients(), b->coefficients());
}

TEST(SmoothingTest, AutoFitIsRobustWithAnOutlierAndLeastSquaresWithout) {
  const SensitivityCurve disturbed = WithOutlier();
  for (Smoothing s : {Smoothing::kLinear, Smoothing::kPoly2}) {
    auto robust = SmoothCurve(disturbed, s, PointSet::kAll, Fit::kRobust);
    auto chosen = SmoothCurve(disturbed, s, PointSet::kAll, Fit::kAuto);
    ASSERT_TRUE(robust.ok() && chosen.ok());
    EXPECT_EQ(chosen->coefficients(), robust->coefficients()) << SmoothingName(s);
  }
  // The same curve without its disturbed run: its residuals (+-0.002) hold no outlier, so
  // the fit is the least-squares one, which the robust fit's reweighting would not give
  // exactly.
  SensitivityCurve clean = disturbed;
  clean.points.back().normalized_perf += 0.2;
  clean.points[3].normalized_perf += 0.003;  // a wiggle the biweight would still downweight
  for (Smoothing s : {Smoothing::kLinear, Smoothing::kPoly2}) {
    auto ls = SmoothCurve(clean, s, PointSet::kAll, Fit::kLeastSquares);
    auto chosen = SmoothCurve(clean, s, PointSet::kAll, Fit::kAuto);
    ASSERT_TRUE(ls.ok() && chosen.ok());
    EXPECT_EQ(chosen->coefficients(), ls->coefficients()) << SmoothingName(s);
  }
}

// Hand fit: x = 2, 4, 6, 8; mean x 5, mean y 0.925; Sxx = 20, Sxy = -0.38;
// slope -0.019, intercept 0.925 + 5 * 0.019 = 1.02.
TEST(SmoothingTest, LinearIsTheLeastSquaresLine) {
  const SmoothedCurve s =
      Smooth(Curve(75, {{2, 0.98}, {4, 0.94}, {6, 0.92}, {8, 0.86}}), Smoothing::kLinear);
  EXPECT_NEAR(s.coefficients()[0], 1.02, kTol);
  EXPECT_NEAR(s.coefficients()[1], -0.019, kTol);
  EXPECT_EQ(s.coefficients()[2], 0);
  EXPECT_NEAR(s.Evaluate(5), 0.925, kTol);
  EXPECT_NEAR(s.Evaluate(8), 0.868, kTol);
  EXPECT_EQ(s.read_pct(), 75);
  EXPECT_EQ(s.distinct_points(), 4u);
}

// y = p(x) + 0.002 * (-1, 3, -3, 1) at x = 1..4 with p(x) = 1 - 0.01 x - 0.005 x^2; the
// perturbation is orthogonal to 1, x and x^2, so the least-squares parabola is p itself,
// and the least-squares line is that of p: x^2 fits as 5 x - 5 on 1..4, so the line is
// 1 - 0.01 x - 0.005 (5 x - 5) = 1.025 - 0.035 x.
TEST(SmoothingTest, Poly2IsTheLeastSquaresParabola) {
  const SensitivityCurve c = Curve(60, {{1, 0.983}, {2, 0.966}, {3, 0.919}, {4, 0.882}});
  const SmoothedCurve poly = Smooth(c, Smoothing::kPoly2);
  EXPECT_NEAR(poly.coefficients()[0], 1.0, 1e-10);
  EXPECT_NEAR(poly.coefficients()[1], -0.01, 1e-10);
  EXPECT_NEAR(poly.coefficients()[2], -0.005, 1e-10);
  EXPECT_NEAR(poly.Evaluate(3), 0.925, 1e-10);
  const SmoothedCurve line = Smooth(c, Smoothing::kLinear);
  EXPECT_NEAR(line.coefficients()[0], 1.025, 1e-10);
  EXPECT_NEAR(line.coefficients()[1], -0.035, 1e-10);
}

TEST(SmoothingTest, FitsCountEveryRepeatAsAnObservation) {
  // The level x = 2 is measured twice and counts twice. By hand over the four points:
  // mean x 3.5, mean y 0.93; deviations x (-1.5, -1.5, 0.5, 2.5), y (.05, .03, -.03, -.05);
  // Sxx = 11, Sxy = -0.26: slope -0.26 / 11, intercept 0.93 + 3.5 * 0.26 / 11.
  // (Averaging the repeats first would give slope -0.0225, intercept 1.00666...)
  const SmoothedCurve s =
      Smooth(Curve(50, {{2, 0.98}, {2, 0.96}, {4, 0.90}, {6, 0.88}}), Smoothing::kLinear);
  EXPECT_NEAR(s.coefficients()[1], -0.26 / 11, 1e-12);
  EXPECT_NEAR(s.coefficients()[0], 0.93 + 0.91 / 11, 1e-12);
  EXPECT_EQ(s.distinct_points(), 3u);
}

TEST(SmoothingTest, InterpolationAveragesRepeatsAndJoinsThePoints) {
  const SmoothedCurve s =
      Smooth(Curve(100, {{2, 0.98}, {2, 0.96}, {4, 0.90}, {8, 0.80}, {8, 0.84}}),
             Smoothing::kInterpolation);
  ASSERT_EQ(s.knots().size(), 3u);
  EXPECT_NEAR(s.knots()[0].second, 0.97, kTol);
  EXPECT_NEAR(s.knots()[2].second, 0.82, kTol);
  EXPECT_NEAR(s.Evaluate(2), 0.97, kTol);
  EXPECT_NEAR(s.Evaluate(3), 0.935, kTol);
  EXPECT_NEAR(s.Evaluate(4), 0.90, kTol);
  EXPECT_NEAR(s.Evaluate(6), 0.86, kTol);
  EXPECT_EQ(s.distinct_points(), 3u);
}

TEST(SmoothingTest, EveryCurveStartsAtOneAndIsFlatBeyondItsLastPoint) {
  const SensitivityCurve c = Curve(75, {{2, 0.98}, {4, 0.94}, {6, 0.92}, {8, 0.86}});
  for (Smoothing sm : {Smoothing::kLinear, Smoothing::kPoly2, Smoothing::kInterpolation}) {
    const SmoothedCurve s = Smooth(c, sm);
    EXPECT_EQ(s.Evaluate(0), 1.0) << SmoothingName(sm);
    EXPECT_EQ(s.Evaluate(-3), 1.0) << SmoothingName(sm);
    // Halfway to the first point: halfway between 1.0 and the curve's value there.
    EXPECT_NEAR(s.Evaluate(1), 1.0 + (s.Evaluate(2) - 1.0) / 2, kTol) << SmoothingName(sm);
    EXPECT_EQ(s.Evaluate(20), s.Evaluate(8)) << SmoothingName(sm);
    EXPECT_EQ(s.first_gbps(), 2);
    EXPECT_EQ(s.max_gbps(), 8);
  }
  // The linear fit at x = 2 is 1.02 - 0.038 = 0.982, so at x = 1 it is 0.991.
  EXPECT_NEAR(Smooth(c, Smoothing::kLinear).Evaluate(1), 0.991, kTol);
}

TEST(SmoothingTest, SampledPointsAreTheLevelsNearestQuartersOfTheMaximum) {
  SensitivityCurve c;
  c.read_pct = 75;
  for (int x = 1; x <= 16; ++x) c.points.push_back(CurvePoint{static_cast<double>(x), 0.9});
  c.points.push_back(CurvePoint{8, 0.8});  // a repeat of a sampled level stays (any order)
  EXPECT_THAT(Levels(SampledPoints(c)), ::testing::ElementsAre(4, 8, 8, 12, 16));
}

TEST(SmoothingTest, SampledTiesGoToTheLowerLevelAndLevelsAreNotRepeated) {
  // Maximum 4: targets 1, 2, 3, 4; 2 is as near to 1 as to 3 and takes 1, already chosen.
  const SensitivityCurve c = Curve(50, {{1, 0.99}, {3, 0.95}, {4, 0.9}});
  EXPECT_THAT(Levels(SampledPoints(c)), ::testing::ElementsAre(1, 3, 4));
  EXPECT_TRUE(SampledPoints(SensitivityCurve{}).empty());
}

TEST(SmoothingTest, SampledSmoothingUsesOnlyTheSampledLevels) {
  SensitivityCurve c;
  c.read_pct = 75;
  for (int x = 1; x <= 16; ++x) {
    // An outlier at every level that is not sampled: invisible to the sampled curve.
    const bool sampled = x % 4 == 0;
    c.points.push_back(CurvePoint{static_cast<double>(x), sampled ? 1.0 - 0.01 * x : 0.5});
  }
  const SmoothedCurve s = Smooth(c, Smoothing::kInterpolation, PointSet::kSampled);
  EXPECT_EQ(s.distinct_points(), 4u);
  EXPECT_NEAR(s.Evaluate(6), 0.94, kTol);
  const SmoothedCurve line = Smooth(c, Smoothing::kLinear, PointSet::kSampled);
  EXPECT_NEAR(line.coefficients()[0], 1.0, 1e-12);
  EXPECT_NEAR(line.coefficients()[1], -0.01, 1e-12);
}

TEST(SmoothingTest, RefusesCurvesWithTooFewLevelsForTheFit) {
  const SensitivityCurve two = Curve(80, {{2, 0.9}, {2, 0.92}, {4, 0.8}});
  auto poly = SmoothCurve(two, Smoothing::kPoly2, PointSet::kAll);
  EXPECT_EQ(poly.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(poly.status().message(), HasSubstr("80 % read curve has 2 distinct"));
  EXPECT_TRUE(SmoothCurve(two, Smoothing::kLinear, PointSet::kAll).ok());
  const SensitivityCurve one = Curve(80, {{2, 0.9}});
  EXPECT_FALSE(SmoothCurve(one, Smoothing::kLinear, PointSet::kAll).ok());
  ASSERT_TRUE(SmoothCurve(one, Smoothing::kInterpolation, PointSet::kAll).ok());
  EXPECT_NEAR(Smooth(one, Smoothing::kInterpolation).Evaluate(1), 0.95, kTol);
  EXPECT_FALSE(SmoothCurve(SensitivityCurve{}, Smoothing::kInterpolation, PointSet::kAll).ok());
}

TEST(SmoothingTest, EnvelopeNeverRisesAndNeverExceedsOne) {
  // Noisy knots: up from 0.95 to 0.97, then down; one point above 1.0.
  const SmoothedCurve s =
      Smooth(Curve(50, {{1, 1.03}, {2, 0.95}, {4, 0.97}, {6, 0.90}}), Smoothing::kInterpolation);
  EXPECT_NEAR(s.Evaluate(1), 1.03, kTol);
  EXPECT_EQ(s.Envelope(1), 1.0);
  EXPECT_NEAR(s.Evaluate(4), 0.97, kTol);
  EXPECT_NEAR(s.Envelope(4), 0.95, kTol);
  EXPECT_NEAR(s.Envelope(6), 0.90, kTol);
  EXPECT_EQ(s.Envelope(0), 1.0);
  double last = 1.0;
  for (double x = 0; x <= 8; x += 0.01) {
    EXPECT_LE(s.Envelope(x), last + 1e-15) << x;
    EXPECT_LE(s.Envelope(x), s.Evaluate(x) + 1e-15) << x;
    last = s.Envelope(x);
  }
}

TEST(SmoothingTest, EnvelopeOfAConvexParabolaKeepsItsMinimum) {
  // Exactly on 1 - 0.1 x + 0.01 x^2: lowest at x = 5 (0.75), 0.91 at x = 9.
  SensitivityCurve c;
  for (int x = 1; x <= 9; ++x)
    c.points.push_back(CurvePoint{double(x), 1 - 0.1 * x + 0.01 * x * x});
  const SmoothedCurve s = Smooth(c, Smoothing::kPoly2);
  EXPECT_NEAR(s.Evaluate(9), 0.91, 1e-10);
  EXPECT_NEAR(s.Envelope(9), 0.75, 1e-10);
  EXPECT_NEAR(s.Envelope(4.5), s.Evaluate(4.5), 1e-10);
}

}  // namespace
}  // namespace tiergym::contention

#include "estimator/contention/contention_model.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tiergym::contention {
namespace {

using ::testing::HasSubstr;

constexpr double kTol = 1e-12;

// A curve exactly on the line 1 - slope x at x = 2, 4, 6, 8, 10 (every smoothing
// reproduces it between 2 and 10).
SensitivityCurve Line(double read_pct, double slope) {
  SensitivityCurve c;
  c.read_pct = read_pct;
  for (double x = 2; x <= 10; x += 2) c.points.push_back(CurvePoint{x, 1 - slope * x});
  return c;
}

// Curves at 50 % (1 - 0.02 x), 75 % (1 - 0.016 x) and 100 % (1 - 0.01 x) reads.
SensitivityFamily Family() {
  return SensitivityFamily{"app", {Line(50, 0.02), Line(75, 0.016), Line(100, 0.01)}};
}

Method M(Smoothing s, PointSet p, CurveChoice c, double static_pct = 75) {
  Method m;
  m.smoothing = s;
  m.points = p;
  m.curve = c;
  m.static_read_pct = static_pct;
  return m;
}

ContentionModel Model(const SensitivityFamily& f, const Method& m) {
  auto model = ContentionModel::Create(f, m);
  EXPECT_TRUE(model.ok()) << model.status();
  return *model;
}

Interference One(double gbps, double read_pct) { return Interference{{{gbps, read_pct}}}; }

TEST(ContentionModelTest, RightCurveUsesTheMeasuredShareOrInterpolatesBetweenTwo) {
  const ContentionModel m = Model(Family(), Method());  // linear/all/right
  // At x = 10: P50 = 0.8, P75 = 0.84, P100 = 0.9.
  EXPECT_NEAR(m.NormalizedPerf(One(10, 75)), 0.84, kTol);
  // 80 % lies a fifth of the way from 75 to 100.
  EXPECT_NEAR(m.NormalizedPerf(One(10, 80)), 0.84 * 0.8 + 0.9 * 0.2, kTol);
  // 70 %: four fifths of the way from 50 to 75.
  EXPECT_NEAR(m.NormalizedPerf(One(10, 70)), 0.8 * 0.2 + 0.84 * 0.8, kTol);
  // Outside the measured shares: the nearest curve.
  EXPECT_NEAR(m.NormalizedPerf(One(10, 30)), 0.8, kTol);
  EXPECT_NEAR(m.NormalizedPerf(One(10, 100)), 0.9, kTol);
}

TEST(ContentionModelTest, StaticCurveIgnoresTheReadShare) {
  for (double pct : {50.0, 75.0, 100.0}) {
    const ContentionModel m =
        Model(Family(), M(Smoothing::kLinear, PointSet::kAll, CurveChoice::kStatic, pct));
    const double expected = pct == 50 ? 0.8 : pct == 75 ? 0.84 : 0.9;
    for (double r : {50.0, 62.0, 100.0}) {
      EXPECT_NEAR(m.NormalizedPerf(One(10, r)), expected, kTol) << pct << " " << r;
    }
  }
}

TEST(ContentionModelTest, EstimatedCurveIsEquationThree) {
  const ContentionModel m =
      Model(Family(), M(Smoothing::kLinear, PointSet::kAll, CurveChoice::kEstimated));
  // scale = (80 - 50) / 50 = 0.6: 0.8 * 0.4 + 0.9 * 0.6 = 0.86 (the 75 % curve is unused).
  EXPECT_NEAR(m.NormalizedPerf(One(10, 80)), 0.86, kTol);
  EXPECT_NEAR(m.NormalizedPerf(One(5, 60)), 0.9 * 0.8 + 0.95 * 0.2, kTol);
  // The scale is clamped to [0, 1].
  EXPECT_NEAR(m.NormalizedPerf(One(10, 20)), 0.8, kTol);
  EXPECT_NEAR(m.NormalizedPerf(One(10, 100)), 0.9, kTol);
  // Only the 50 and 100 curves are needed.
  SensitivityFamily two{"app", {Line(50, 0.02), Line(100, 0.01)}};
  EXPECT_TRUE(ContentionModel::Create(two, m.method()).ok());
  SensitivityFamily no100{"app", {Line(50, 0.02), Line(75, 0.016)}};
  auto missing = ContentionModel::Create(no100, m.method());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(missing.status().message(), HasSubstr("no 100 % read curve"));
}

TEST(ContentionModelTest, MemgenInterpolatesTheFourSampledPointsOfThe75Curve) {
  SensitivityCurve c75;
  c75.read_pct = 75;
  for (int x = 1; x <= 16; ++x) {
    // On the sampled levels 4, 8, 12, 16: 1 - 0.02 x, measured twice (+-0.01); every
    // other level is far off, which Memgen never sees.
    if (x % 4 == 0) {
      c75.points.push_back(CurvePoint{double(x), 1 - 0.02 * x + 0.01});
      c75.points.push_back(CurvePoint{double(x), 1 - 0.02 * x - 0.01});
    } else {
      c75.points.push_back(CurvePoint{double(x), 0.5});
    }
  }
  SensitivityFamily f{"app", {Line(50, 0.05), c75, Line(100, 0.001)}};
  const ContentionModel m = Model(f, Method::Memgen());
  EXPECT_TRUE(m.method().IsMemgen());
  EXPECT_NEAR(m.NormalizedPerf(One(4, 100)), 0.92, kTol);
  EXPECT_NEAR(m.NormalizedPerf(One(6, 50)), 0.88, kTol);   // between 4 and 8
  EXPECT_NEAR(m.NormalizedPerf(One(14, 75)), 0.72, kTol);  // between 12 and 16
  EXPECT_NEAR(m.NormalizedPerf(One(2, 75)), 0.96, kTol);   // from 1.0 at 0 to 0.92 at 4
  EXPECT_NEAR(m.NormalizedPerf(One(40, 75)), 0.68, kTol);  // flat beyond 16
  EXPECT_EQ(m.ProfilingCost(), 1.0);
}

TEST(ContentionModelTest, NoInterferenceChangesNothing) {
  for (const Method& m : {Method(), Method::Memgen(),
                          M(Smoothing::kPoly2, PointSet::kSampled, CurveChoice::kEstimated)}) {
    const ContentionModel model = Model(Family(), m);
    EXPECT_EQ(model.NormalizedPerf(Interference{}), 1.0);
    EXPECT_EQ(model.Slowdown(Interference{}), 1.0);
    EXPECT_EQ(model.NormalizedPerf(One(0, 50)), 1.0);
    EXPECT_EQ(model.Slowdown(Interference{{{0, 50}, {0, 100}}}), 1.0);
  }
}

TEST(ContentionModelTest, CoRunnersAddBandwidthAndWeighTheirReadShares) {
  const Interference two{{{6, 50}, {4, 100}}};
  EXPECT_EQ(two.TotalBandwidthGbps(), 10);
  EXPECT_NEAR(two.ReadPct(), 70, kTol);  // (6 * 50 + 4 * 100) / 10
  const ContentionModel m = Model(Family(), Method());
  EXPECT_NEAR(m.NormalizedPerf(two), m.NormalizedPerf(One(10, 70)), kTol);
  EXPECT_NEAR(m.NormalizedPerf(two), 0.8 * 0.2 + 0.84 * 0.8, kTol);
  // Co-runners of the same read share are one co-runner of their summed bandwidth.
  const Interference three{{{2, 75}, {3, 75}, {1, 75}}};
  EXPECT_NEAR(m.NormalizedPerf(three), m.NormalizedPerf(One(6, 75)), kTol);
  EXPECT_NEAR(m.Slowdown(three), m.Slowdown(One(6, 75)), kTol);
  // A co-runner without bandwidth changes nothing, whatever its read share.
  const Interference with_idle{{{6, 50}, {4, 100}, {0, 0}}};
  EXPECT_EQ(m.NormalizedPerf(with_idle), m.NormalizedPerf(two));
  EXPECT_EQ(Interference{}.ReadPct(), 100);
}

TEST(ContentionModelTest, SlowdownIsAtLeastOneAndGrowsWithBandwidth) {
  // A noisy family: the 50 % curve rises between 2 and 4 and starts above 1.0.
  SensitivityCurve noisy;
  noisy.read_pct = 50;
  for (auto [x, y] : std::vector<std::pair<double, double>>{
           {2, 1.02}, {4, 0.95}, {6, 0.97}, {8, 0.85}, {10, 0.86}, {12, 0.70}}) {
    noisy.points.push_back(CurvePoint{x, y});
  }
  SensitivityFamily f{"app", {noisy, Line(100, 0.01)}};
  for (Smoothing s : {Smoothing::kLinear, Smoothing::kPoly2, Smoothing::kInterpolation}) {
    for (CurveChoice c : {CurveChoice::kRight, CurveChoice::kEstimated}) {
      const ContentionModel m = Model(f, M(s, PointSet::kAll, c));
      for (double r : {50.0, 65.0, 100.0}) {
        double last = 1.0;
        for (double x = 0; x <= 20; x += 0.05) {
          // Several co-runners scaled together keep their read share.
          const Interference i{{{x * 0.25, r}, {x * 0.75, r}}};
          const double slowdown = m.Slowdown(i);
          EXPECT_GE(slowdown, 1.0);
          EXPECT_GE(slowdown, last - 1e-12) << SmoothingName(s) << " r " << r << " x " << x;
          last = slowdown;
        }
      }
    }
  }
  // Where the curve is non-increasing and below 1, the slowdown is 1 / the prediction.
  const ContentionModel m = Model(Family(), Method());
  EXPECT_NEAR(m.Slowdown(One(10, 75)), 1 / 0.84, kTol);
}

TEST(ContentionModelTest, SlowdownIsFlooredAtTheMinimumPerformance) {
  SensitivityFamily f{"app", {Line(100, 0.2)}};  // 1 - 0.2 x: 0 at x = 5, negative later
  const ContentionModel m = Model(f, Method());
  EXPECT_EQ(m.Slowdown(One(10, 100)), 1 / ContentionModel::kMinNormalizedPerf);
}

TEST(ContentionModelTest, ProfilingCostCountsCurvesTimesLevelsOverFour) {
  SensitivityFamily f = Family();  // 3 curves of 5 levels
  EXPECT_EQ(Model(f, Method()).ProfilingCost(), 15 / 4.0);
  EXPECT_EQ(Model(f, M(Smoothing::kLinear, PointSet::kAll, CurveChoice::kStatic)).ProfilingCost(),
            5 / 4.0);
  EXPECT_EQ(Model(f, M(Smoothing::kPoly2, PointSet::kAll, CurveChoice::kEstimated)).ProfilingCost(),
            10 / 4.0);
  // Sampled from 5 levels at 2..10: nearest 2.5 -> 2, 5 -> 4 (tie with 6 goes low),
  // 7.5 -> 8, 10 -> 10: four levels per curve.
  EXPECT_EQ(
      Model(f, M(Smoothing::kLinear, PointSet::kSampled, CurveChoice::kRight)).ProfilingCost(),
      3.0);
}

TEST(ContentionModelTest, CreateNamesTheAppAndTheMissingCurve) {
  auto m = ContentionModel::Create(SensitivityFamily{"lulesh", {Line(50, 0.02)}},
                                   M(Smoothing::kLinear, PointSet::kAll, CurveChoice::kStatic));
  EXPECT_EQ(m.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(m.status().message(), HasSubstr("\"lulesh\" has no 75 % read curve"));
  EXPECT_FALSE(ContentionModel::Create(SensitivityFamily{"x", {}}, Method()).ok());
  // Too few sampled levels for a parabola: the app is named.
  SensitivityCurve sparse{100, {{1, 0.9}, {2, 0.8}}};
  auto poly = ContentionModel::Create(SensitivityFamily{"nekbone", {sparse}},
                                      M(Smoothing::kPoly2, PointSet::kAll, CurveChoice::kRight));
  EXPECT_THAT(poly.status().message(), HasSubstr("app \"nekbone\""));
}

TEST(ContentionModelTest, OneShotPredictionsCheckTheInterference) {
  EXPECT_NEAR(*PredictNormalizedPerf(Family(), One(10, 75), Method()), 0.84, kTol);
  EXPECT_NEAR(*PredictSlowdown(Family(), One(10, 75), Method()), 1 / 0.84, kTol);
  EXPECT_EQ(PredictSlowdown(Family(), One(-1, 75), Method()).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(PredictNormalizedPerf(Family(), One(1, 101), Method()).ok());
  EXPECT_FALSE(CheckInterference(One(std::numeric_limits<double>::infinity(), 50)).ok());
  EXPECT_TRUE(CheckInterference(Interference{}).ok());
}

TEST(MethodTest, NamesRoundTripAndMemgenIsItsOwnName) {
  for (const char* name : {"linear/all/right", "poly2/sampled/estimated", "interpolation/all/50",
                           "linear/sampled/100", "memgen"}) {
    auto m = ParseMethod(name);
    ASSERT_TRUE(m.ok()) << m.status();
    EXPECT_EQ(MethodName(*m), name);
  }
  EXPECT_EQ(*ParseMethod("interpolation/sampled/75"), Method::Memgen());
  // The static share only tells static methods apart.
  EXPECT_EQ(M(Smoothing::kLinear, PointSet::kAll, CurveChoice::kRight, 50), Method());
  EXPECT_NE(M(Smoothing::kLinear, PointSet::kAll, CurveChoice::kStatic, 50),
            M(Smoothing::kLinear, PointSet::kAll, CurveChoice::kStatic, 100));
  EXPECT_EQ(CurveName(Method::Memgen()), "memgen");
  EXPECT_EQ(*ParseMethod("none/all/right"),
            M(Smoothing::kInterpolation, PointSet::kAll, CurveChoice::kRight));
  EXPECT_EQ(*ParseMethod("poly2/right"), M(Smoothing::kPoly2, PointSet::kAll, CurveChoice::kRight));
  EXPECT_EQ(ParseMethod("cubic/all/right").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(ParseMethod("linear/some/right").status().message(), HasSubstr("point set"));
  EXPECT_THAT(ParseMethod("linear/all/120").status().message(), HasSubstr("curve \"120\""));
  EXPECT_FALSE(ParseMethod("linear").ok());
  EXPECT_FALSE(ParseMethod("linear/all/right/extra").ok());
}

TEST(MethodTest, RobustFitsAreNamedAndRefusedForInterpolation) {
  for (const char* name : {"linear/all/right/robust", "poly2/sampled/estimated/robust"}) {
    auto m = ParseMethod(name);
    ASSERT_TRUE(m.ok()) << m.status();
    EXPECT_EQ(m->fit, Fit::kRobust);
    EXPECT_EQ(MethodName(*m), name);
  }
  EXPECT_EQ(ParseMethod("linear/right/robust")->points, PointSet::kAll);
  EXPECT_NE(*ParseMethod("linear/all/right/robust"), Method());
  EXPECT_THAT(ParseMethod("interpolation/all/right/robust").status().message(),
              HasSubstr("robust and auto apply to the linear and poly2 fits"));
  auto a = ParseMethod("poly2/all/right/auto");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->fit, Fit::kAuto);
  EXPECT_EQ(MethodName(*a), "poly2/all/right/auto");
  EXPECT_FALSE(ParseMethod("interpolation/all/right/auto").ok());
}

}  // namespace
}  // namespace tiergym::contention

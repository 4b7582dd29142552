#include "estimator/contention/fixed_point.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"

namespace tiergym::contention {
namespace {

// Two tenants slowing each other: each one's time is its solo time times 1 + c x the
// other's bandwidth (its bytes over its time). The fixed point solves
//   x = s_x (1 + c b_y / y),  y = s_y (1 + c b_x / x).
struct Pair {
  double sx = 1, sy = 2, bx = 3, by = 1, c = 0.5;
  void Pass(const std::vector<std::vector<double>>& t, std::vector<std::vector<double>>& n) const {
    n[0][0] = sx * (1 + c * by / t[1][0]);
    n[1][0] = sy * (1 + c * bx / t[0][0]);
  }
};

TEST(FixedPointTest, SettlesWhereEveryTimeIsThePassOfTheOthers) {
  const Pair pair;
  std::vector<std::vector<double>> times = {{pair.sx}, {pair.sy}};
  const FixedPointResult r =
      IterateDampedFixedPoint(times, [&](const auto& t, auto& n) { pair.Pass(t, n); },
                              {.max_iterations = 200, .tolerance = 1e-9});
  EXPECT_TRUE(r.converged);
  EXPECT_GT(r.iterations, 2);
  std::vector<std::vector<double>> again = {{0.0}, {0.0}};
  pair.Pass(times, again);
  EXPECT_NEAR(again[0][0], times[0][0], 1e-6 * times[0][0]);
  EXPECT_NEAR(again[1][0], times[1][0], 1e-6 * times[1][0]);
  // Below one pass from the solo times: the slowed co-runner loads the other less.
  EXPECT_LT(times[0][0], pair.sx * (1 + pair.c * pair.by / pair.sy));
  EXPECT_LT(times[1][0], pair.sy * (1 + pair.c * pair.bx / pair.sx));
}

TEST(FixedPointTest, OnePassTakesTheFirstPassWholeAndMayNotConverge) {
  const Pair pair;
  std::vector<std::vector<double>> times = {{pair.sx}, {pair.sy}};
  const FixedPointResult r =
      IterateDampedFixedPoint(times, [&](const auto& t, auto& n) { pair.Pass(t, n); },
                              {.max_iterations = 1, .tolerance = 1e-3});
  EXPECT_EQ(r.iterations, 1);
  EXPECT_FALSE(r.converged);
  EXPECT_EQ(times[0][0], pair.sx * (1 + pair.c * pair.by / pair.sy));
  EXPECT_EQ(times[1][0], pair.sy * (1 + pair.c * pair.bx / pair.sx));
}

TEST(FixedPointTest, HalfStepsSettleGeometricallyWhereHarmonicOnesCrawl) {
  const Pair pair;
  auto passes = [&](Damping damping) {
    std::vector<std::vector<double>> times = {{pair.sx}, {pair.sy}};
    const FixedPointResult r =
        IterateDampedFixedPoint(times, [&](const auto& t, auto& n) { pair.Pass(t, n); },
                                {.max_iterations = 100000, .tolerance = 1e-6, .damping = damping});
    EXPECT_TRUE(r.converged);
    return r.iterations;
  };
  const int half = passes(Damping::kHalf), harmonic = passes(Damping::kHalfThenHarmonic);
  EXPECT_LT(half, 30);
  EXPECT_GT(harmonic, 5 * half);
}

TEST(FixedPointTest, DampsLaterPassesHalfWayThenByOneOverKMinusThree) {
  // A pass that always answers the same target: pass 1 jumps to it, passes 2-5 halve the
  // distance to a moved target, pass 6 moves a third of the way.
  std::vector<double> targets = {10, 20, 20, 20, 20, 40};
  int k = 0;
  std::vector<std::vector<double>> times = {{1.0}};
  IterateDampedFixedPoint(
      times, [&](const auto&, auto& n) { n[0][0] = targets[static_cast<size_t>(k++)]; },
      {.max_iterations = 6, .tolerance = 1e-12, .damping = Damping::kHalfThenHarmonic});
  double x = 10;  // pass 1
  for (int pass = 2; pass <= 5; ++pass) x += 0.5 * (20 - x);
  x += (40 - x) / 3.0;
  EXPECT_EQ(k, 6);
  EXPECT_DOUBLE_EQ(times[0][0], x);
}

TEST(FixedPointTest, StopsWhenNoGroupsTotalMovesMoreThanTheTolerance) {
  // Group 0 is settled from the start; group 1's total keeps moving by 1 % until pass 4.
  int pass = 0;
  std::vector<std::vector<double>> times = {{1.0, 1.0}, {100.0}};
  const FixedPointResult r = IterateDampedFixedPoint(
      times,
      [&](const auto& t, auto& n) {
        ++pass;
        n[0] = t[0];
        n[1][0] = pass < 4 ? t[1][0] * 1.02 : t[1][0];  // damped to ~1 % after pass 1
      },
      {.max_iterations = 50, .tolerance = 1e-3});
  EXPECT_TRUE(r.converged);
  EXPECT_EQ(r.iterations, 4);
}

}  // namespace
}  // namespace tiergym::contention

#include "estimator/contention/validation.h"

#include <cmath>
#include <set>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tiergym::contention {
namespace {

using ::testing::HasSubstr;

std::string Data(const std::string& name) {
  return std::string(TIERGYM_CONTENTION_TESTDATA_DIR) + "/" + name;
}

// One family ("a") with only a 100 % read curve exactly on 1 - 0.01 x (x = 10, 20).
std::vector<SensitivityFamily> Families() {
  return {SensitivityFamily{"a", {SensitivityCurve{100, {{10, 0.9}, {20, 0.8}}}}}};
}

std::vector<AppBandwidth> Apps() { return {AppBandwidth{"b", 10, 0}, AppBandwidth{"c", 20, 0}}; }

TEST(ValidationTest, ErrorIsTheAbsoluteDifferenceInPercentagePoints) {
  // Predictions 0.90 and 0.80 against measured 0.92 and 0.77: errors 2 and 3 points.
  const std::vector<MeasuredPair> pairs = {{"a", "b", 0.92}, {"a", "c", 0.77}};
  Method static100;
  static100.curve = CurveChoice::kStatic;
  static100.static_read_pct = 100;
  auto report = Validate(Families(), Apps(), pairs, {Method(), static100}, "pairs.csv");
  ASSERT_TRUE(report.ok()) << report.status();
  ASSERT_EQ(report->rows.size(), 2u);
  EXPECT_EQ(report->targets, 1u);
  for (const ValidationRow& row : report->rows) {
    EXPECT_EQ(row.pairs, 2u);
    EXPECT_NEAR(row.mean, 2.5, 1e-9);
    EXPECT_NEAR(row.sd, std::sqrt(0.5), 1e-9);  // (0.25 + 0.25) / (2 - 1)
    EXPECT_NEAR(row.max, 3.0, 1e-9);
    EXPECT_EQ(row.cost, 0.5);  // one curve of two levels / 4
  }
}

TEST(ValidationTest, MethodsThatDoNotApplyAreSkippedWithTheReason) {
  const std::vector<MeasuredPair> pairs = {{"a", "b", 0.92}};
  auto report = Validate(Families(), Apps(), pairs, StandardMethods(), "pairs.csv");
  ASSERT_TRUE(report.ok()) << report.status();
  // Per smoothing and point set, right and 100 apply; 50, 75 and estimated do not. The
  // parabola needs three levels, which the two-level curve lacks.
  EXPECT_EQ(report->rows.size(), 8u);
  EXPECT_EQ(report->skipped.size(), 22u);
  bool memgen_skipped = false;
  for (const SkippedMethod& s : report->skipped) {
    if (s.method.IsMemgen()) {
      memgen_skipped = true;
      EXPECT_THAT(s.reason, HasSubstr("no 75 % read curve"));
    }
  }
  EXPECT_TRUE(memgen_skipped);
  // A single pair has no spread.
  EXPECT_EQ(report->rows[0].sd, 0);
}

TEST(ValidationTest, UnknownTargetOrInterfererNamesThePairsLine) {
  auto apps = ReadAppsCsv(Data("apps/valid.csv"));
  auto families = ReadCurvesCsv(Data("curves/valid.csv"));
  ASSERT_TRUE(apps.ok() && families.ok());
  for (const auto& [file, rule] :
       {std::pair<std::string, std::string>{"pairs/unknown_target.csv", "unknown-target"},
        {"pairs/unknown_interferer.csv", "unknown-interferer"}}) {
    auto pairs = ReadPairsCsv(Data(file));
    ASSERT_TRUE(pairs.ok()) << pairs.status();
    auto report = Validate(*families, *apps, *pairs, {Method()}, Data(file));
    EXPECT_EQ(report.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(report.status().message(), HasSubstr(Data(file) + ":3: " + rule + ":"));
  }
}

TEST(ValidationTest, StandardMethodsAreTheSeedsTablesWithMemgenOnce) {
  const std::vector<Method> methods = StandardMethods();
  ASSERT_EQ(methods.size(), 30u);  // 3 smoothings x 2 point sets x 5 curves
  std::set<std::string> names;
  for (const Method& m : methods) names.insert(MethodName(m));
  EXPECT_EQ(names.size(), 30u);
  EXPECT_EQ(MethodName(methods.front()), "poly2/all/right");
  EXPECT_EQ(MethodName(methods.back()), "interpolation/sampled/estimated");
  EXPECT_EQ(names.count("memgen"), 1u);
  EXPECT_EQ(names.count("linear/sampled/estimated"), 1u);
}

}  // namespace
}  // namespace tiergym::contention

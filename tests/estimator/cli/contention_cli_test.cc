// Runs the real `tiergym contention` commands as a user would and checks their output and
// exit status.
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/run_tiergym.h"
#include "traces/base/file.h"
#include "traces/base/json.h"

namespace tiergym {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
namespace fs = std::filesystem;

using testing::Result;
using testing::Tiergym;

std::string Bundled() { return std::string(TIERGYM_SOURCE_DIR) + "/estimator/contention/data"; }

std::string BundledArgs() {
  return "--curves " + Bundled() + "/curves.csv --apps " + Bundled() + "/apps.csv --pairs " +
         Bundled() + "/pairs.csv";
}

std::string Data(const std::string& name) {
  return std::string(TIERGYM_CONTENTION_TESTDATA_DIR) + "/" + name;
}

TEST(ContentionCliTest, ValidatePrintsTheTableOfEveryMethod) {
  Result r = Tiergym("contention validate " + BundledArgs());
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("Prediction error on 75 pairs (5 targets)"));
  EXPECT_THAT(r.out, HasSubstr("Method         Points   Read curve"));
  EXPECT_THAT(r.out, HasSubstr("Polynomial     all      right curve"));
  EXPECT_THAT(r.out, HasSubstr("Interpolation  all      right curve"));
  EXPECT_THAT(r.out, HasSubstr("75 (Memgen)"));
  // 1 title + 1 header + 30 rows.
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 32);
}

TEST(ContentionCliTest, ValidateJsonIsAListOfRowsWithExactlyTheDocumentedKeys) {
  Result r = Tiergym("contention validate --json " + BundledArgs());
  ASSERT_EQ(r.exit_code, 0) << r.out;
  auto v = json::Parse(r.out, "stdout");
  ASSERT_TRUE(v.ok()) << v.status() << r.out;
  ASSERT_TRUE(v->is_array());
  ASSERT_EQ(v->array().size(), 30u);
  int memgen = 0;
  for (const json::Value& row : v->array()) {
    EXPECT_TRUE(json::OnlyKeys(row, "stdout", "row",
                               {"smoothing", "points", "curve", "mean", "sd", "max", "cost"})
                    .ok());
    ASSERT_EQ(row.object().size(), 7u);
    EXPECT_THAT(std::string("linear poly2 interpolation"),
                HasSubstr(row.Find("smoothing")->string()));
    EXPECT_THAT(std::string("all sampled"), HasSubstr(row.Find("points")->string()));
    EXPECT_GE(row.Find("max")->number(), row.Find("mean")->number());
    memgen += row.Find("curve")->string() == "memgen";
  }
  EXPECT_EQ(memgen, 1);
  const json::Value& first = v->array()[0];
  EXPECT_EQ(first.Find("smoothing")->string(), "poly2");
  EXPECT_EQ(first.Find("points")->string(), "all");
  EXPECT_EQ(first.Find("curve")->string(), "right");
  EXPECT_EQ(first.Find("cost")->number(), 44);  // 11 curves x 16 levels / 4
  EXPECT_EQ(v->array()[1].Find("curve")->string(), "50");
  EXPECT_EQ(v->array()[1].Find("cost")->number(), 4);
}

TEST(ContentionCliTest, ValidateRefusesAMalformedFileNamingFileLineAndRule) {
  Result r = Tiergym("contention validate --curves " + Data("curves/bad_perf_range.csv") +
                         " --apps " + Bundled() + "/apps.csv --pairs " + Bundled() + "/pairs.csv",
                     true);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.out, HasSubstr("bad_perf_range.csv:3: perf-range"));
  Result unknown =
      Tiergym("contention validate --curves " + Data("curves/valid.csv") + " --apps " +
                  Data("apps/valid.csv") + " --pairs " + Data("pairs/unknown_interferer.csv"),
              true);
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_THAT(unknown.out, HasSubstr("unknown_interferer.csv:3: unknown-interferer"));
}

TEST(ContentionCliTest, PredictAnswersOneQuery) {
  const std::string curves = "--curves " + Bundled() + "/curves.csv";
  Result r = Tiergym("contention predict " + curves + " --app lulesh --bandwidth 20 --read-pct 70");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("lulesh under 20.00 GB/s with 70.0 % reads (1 co-runner), "
                               "method linear/all/right"));
  EXPECT_THAT(r.out, HasSubstr("normalized performance 0."));
  Result j = Tiergym("contention predict --json " + curves +
                     " --app lulesh --bandwidth 20 --read-pct 70 --method memgen");
  ASSERT_EQ(j.exit_code, 0) << j.out;
  auto v = json::Parse(j.out, "stdout");
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->Find("method")->string(), "memgen");
  EXPECT_EQ(v->Find("cost")->number(), 1);
  const double perf = v->Find("normalized_perf")->number();
  EXPECT_GT(perf, 0.5);
  EXPECT_LT(perf, 1.0);
  EXPECT_NEAR(v->Find("slowdown")->number(), 1 / perf, 0.05);
}

TEST(ContentionCliTest, PredictSaysSoBeyondTheMeasuredRange) {
  // The bundled curves reach 45 GB/s at most (the link): 500 GB/s is not extrapolated.
  const std::string query = "contention predict --curves " + Bundled() +
                            "/curves.csv --app lulesh --read-pct 70 --bandwidth ";
  Result far = Tiergym(query + "500", true);
  ASSERT_EQ(far.exit_code, 0) << far.out;
  EXPECT_THAT(far.out, HasSubstr("beyond the largest interference measured"));
  Result near = Tiergym(query + "20", true);
  ASSERT_EQ(near.exit_code, 0) << near.out;
  EXPECT_THAT(near.out, Not(HasSubstr("beyond")));
  Result j = Tiergym("contention predict --json --curves " + Bundled() +
                     "/curves.csv --app lulesh --read-pct 70 --bandwidth 500 --method "
                     "linear/all/right/robust");
  ASSERT_EQ(j.exit_code, 0) << j.out;
  auto v = json::Parse(j.out, "stdout");
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_TRUE(v->Find("beyond_measured")->bool_value());
  EXPECT_LT(v->Find("measured_max_gbps")->number(), 500);
  EXPECT_EQ(v->Find("method")->string(), "linear/all/right/robust");
}

TEST(ContentionCliTest, ValidateFitsRobustlyOnRequest) {
  const std::string files = " --curves " + Bundled() + "/curves.csv --apps " + Bundled() +
                            "/apps.csv --pairs " + Bundled() + "/pairs.csv";
  Result robust = Tiergym("contention validate --json --fit robust" + files);
  Result plain = Tiergym("contention validate --json" + files);
  ASSERT_EQ(robust.exit_code, 0) << robust.out;
  ASSERT_EQ(plain.exit_code, 0) << plain.out;
  EXPECT_NE(robust.out, plain.out);  // the fitted rows move, interpolation's do not
  EXPECT_EQ(Tiergym("contention validate --fit median" + files, true).exit_code, 2);
}

TEST(ContentionCliTest, PredictCombinesSeveralCoRunners) {
  const std::string base =
      "contention predict --json --curves " + Bundled() + "/curves.csv --app minife ";
  Result two = Tiergym(base + "--bandwidth 12 --read-pct 60 --bandwidth 8 --read-pct 85");
  Result one = Tiergym(base + "--bandwidth 20 --read-pct 70");
  ASSERT_EQ(two.exit_code, 0);
  ASSERT_EQ(one.exit_code, 0);
  auto a = json::Parse(two.out, "two");
  auto b = json::Parse(one.out, "one");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->Find("bandwidth_gbps")->number(), 20);
  EXPECT_NEAR(a->Find("read_pct")->number(), 70, 1e-12);
  EXPECT_NEAR(a->Find("normalized_perf")->number(), b->Find("normalized_perf")->number(), 1e-12);
}

TEST(ContentionCliTest, UsageErrorsExitWithTwo) {
  EXPECT_EQ(Tiergym("contention").exit_code, 2);
  EXPECT_EQ(Tiergym("contention frobnicate").exit_code, 2);
  EXPECT_EQ(Tiergym("contention --help").exit_code, 0);
  Result missing = Tiergym("contention validate --curves x.csv", true);
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_THAT(missing.out, HasSubstr("--apps FILE is required"));
  const std::string curves = "--curves " + Bundled() + "/curves.csv --app lulesh ";
  Result unpaired = Tiergym("contention predict " + curves + "--bandwidth 3", true);
  EXPECT_EQ(unpaired.exit_code, 2);
  Result mismatch =
      Tiergym("contention predict " + curves + "--bandwidth 3 --bandwidth 4 --read-pct 50", true);
  EXPECT_EQ(mismatch.exit_code, 2);
  EXPECT_THAT(mismatch.out, HasSubstr("one of each per co-runner"));
  EXPECT_EQ(Tiergym("contention predict " + curves + "--bandwidth x --read-pct 50").exit_code, 2);
  EXPECT_EQ(Tiergym("contention predict " + curves + "--bandwidth 3 --read-pct 150").exit_code, 2);
  Result method = Tiergym(
      "contention predict " + curves + "--bandwidth 3 --read-pct 50 --method cubic/all/right",
      true);
  EXPECT_EQ(method.exit_code, 2);
  EXPECT_THAT(method.out, HasSubstr("unknown smoothing \"cubic\""));
  Result app = Tiergym("contention predict --curves " + Bundled() +
                           "/curves.csv --app nosuch --bandwidth 3 --read-pct 50",
                       true);
  EXPECT_EQ(app.exit_code, 1);
  EXPECT_THAT(app.out, HasSubstr("\"nosuch\" has no curves"));
  Result help = Tiergym("contention validate --help");
  EXPECT_THAT(help.out, HasSubstr("smoothing"));  // the JSON keys are documented
  EXPECT_THAT(Tiergym("--help").out, HasSubstr("contention validate"));
}

TEST(ContentionCliTest, SynthWritesTheBundledDataForSeedOne) {
  const std::string dir = ::testing::TempDir() + "/contention_synth";
  fs::remove_all(dir);
  Result r = Tiergym("contention synth --out " + dir);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("5 families, 1760 measurements"));
  for (const char* name : {"curves.csv", "apps.csv", "pairs.csv"}) {
    EXPECT_EQ(*ReadFile(dir + "/" + name), *ReadFile(Bundled() + "/" + name)) << name;
  }
  ASSERT_EQ(Tiergym("contention synth --seed 7 --out " + dir).exit_code, 0);
  EXPECT_NE(*ReadFile(dir + "/pairs.csv"), *ReadFile(Bundled() + "/pairs.csv"));
  EXPECT_EQ(Tiergym("contention synth --out " + dir + " --tier nvme").exit_code, 1);
}

TEST(ContentionCliTest, ValidatePlotsAFamilyToPng) {
  if (std::system("/usr/bin/python3 -c 'import matplotlib' >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "/usr/bin/python3 with matplotlib (Debian python3-matplotlib) is missing";
  }
  const std::string png = ::testing::TempDir() + "/contention_family.png";
  fs::remove(png);
  Result r = Tiergym(
      "contention validate " + BundledArgs() + " --plot " + png + " --plot-app lulesh", true);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("plot of lulesh written to"));
  auto bytes = ReadFile(png);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_EQ(bytes->substr(0, 8), "\x89PNG\r\n\x1a\n");
  Result bad = Tiergym(
      "contention validate " + BundledArgs() + " --plot " + png + " --plot-app nosuch", true);
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_THAT(bad.out, Not(HasSubstr("written")));
}

}  // namespace
}  // namespace tiergym

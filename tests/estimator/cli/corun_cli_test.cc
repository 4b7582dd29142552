// `tiergym trace corun` and `tiergym validate --corun` as a user runs them, on small
// synthetic profiles generated into a temporary directory.
#include <filesystem>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/run_tiergym.h"
#include "tests/test_root.h"
#include "traces/base/json.h"
#include "traces/base/strings.h"

namespace tiergym {
namespace {

using ::testing::HasSubstr;
using testing::Result;
using testing::Tiergym;
namespace fs = std::filesystem;

// Two small profiles and the knl-2-ddr co-runs under the program's TestRoot() (removed
// when the tests end), made once for the suite.
class CorunCliTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    fs::create_directories(Dir());
    for (const char* app : {"minife", "lulesh"}) {
      Result r = Tiergym(StrCat("trace synth --app ", app,
                                " --machine knl --samples 20000 --chunks 40 --no-runs --quiet "
                                "--out ",
                                Dir()));
      ASSERT_EQ(r.exit_code, 0) << r.out;
    }
    Result r = Tiergym("trace corun --machine knl --scenario knl-2-ddr --chunks 20 --quiet --out " +
                       Dir() + "/coruns");
    ASSERT_EQ(r.exit_code, 0) << r.out;
  }
  static const std::string& Dir() { return testing::TestRoot(); }
  static std::string Corun() { return Dir() + "/coruns/coruns.csv"; }
};

TEST_F(CorunCliTest, TraceCorunWritesTheCoRunsAndTheirBandwidth) {
  std::ifstream in(Corun());
  std::string header, row;
  std::getline(in, header);
  EXPECT_EQ(header,
            "scenario,machine,tenant,app,placement,start_ns,read_pct,runtime_ns,solo_runtime_ns");
  int rows = 0;
  while (std::getline(in, row)) rows += !row.empty();
  EXPECT_EQ(rows, 2);
  EXPECT_TRUE(fs::exists(Dir() + "/coruns/placements/knl-2-ddr/minife.json"));
  std::ifstream bw(Dir() + "/coruns/bandwidth.csv");
  std::getline(bw, header);
  EXPECT_EQ(header, "scenario,tenant,from_ns,to_ns,tier,gbps");
  Result r = Tiergym("trace corun --machine knl --scenario nope --out " + Dir() + "/x", true);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.out, HasSubstr("knl-2-ddr"));  // the known scenarios are listed
  EXPECT_EQ(Tiergym("trace corun --machine knl --list").exit_code, 0);
}

TEST_F(CorunCliTest, ValidateCorunReportsTheComposedAndTheBlindError) {
  Result r = Tiergym("validate --corun " + Corun() + " --profiles " + Dir() + " --json --quiet");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  auto v = json::Parse(r.out, "stdout");
  ASSERT_TRUE(v.ok()) << v.status() << r.out;
  const json::Value* runs = v->Find("runs");
  ASSERT_NE(runs, nullptr);
  ASSERT_EQ(runs->array().size(), 2u);
  const json::Value* models = v->Find("models");
  ASSERT_NE(models, nullptr);
  const double blind = models->Find("blind")->Find("mean_error_pct")->number();
  const double composed = models->Find("composed")->Find("mean_error_pct")->number();
  // Two tenants sharing ddr run far slower than alone: the contention term must show.
  EXPECT_GT(blind, 15.0);
  EXPECT_LT(composed, blind / 2);
  EXPECT_EQ(v->Find("mean_error_pct")->number(), composed);
  const json::Value& first = runs->array()[0];
  EXPECT_EQ(first.Find("name")->string(), "knl-2-ddr/minife");
  EXPECT_GT(first.Find("mean_slowdown")->Find("ddr")->number(), 1.0);
  const json::Value* scenarios = v->Find("scenarios");
  ASSERT_EQ(scenarios->array().size(), 1u);
  EXPECT_TRUE(scenarios->array()[0].Find("converged")->bool_value());

  Result text = Tiergym("validate --corun " + Corun() + " --profiles " + Dir() + " --quiet");
  ASSERT_EQ(text.exit_code, 0);
  EXPECT_THAT(text.out, HasSubstr("2 tenants, composed estimate: mean error"));
  EXPECT_THAT(text.out, HasSubstr("2 tenants, blind estimate: mean error"));
}

TEST_F(CorunCliTest, ValidateCorunHasHelpAndRefusesBadInput) {
  Result help = Tiergym("validate --corun x --help");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_THAT(help.out, HasSubstr("--profiles"));
  EXPECT_THAT(help.out, HasSubstr("JSON output"));
  EXPECT_EQ(Tiergym("validate --corun " + Corun()).exit_code, 2);  // no --profiles
  const std::string bad = Dir() + "/coruns/bad.csv";
  std::ofstream(bad) << "scenario,machine,tenant,app,placement,start_ns,read_pct,runtime_ns,"
                        "solo_runtime_ns\n"
                     << "s,knl,a,minife,placements/knl-2-ddr/minife.json,0,85,12,0\n";
  Result r = Tiergym("validate --corun " + bad + " --profiles " + Dir(), true);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.out, HasSubstr(bad + ":2: zero-runtime: solo_runtime_ns"));
  // A tenant whose profile is missing is named.
  Result missing = Tiergym("validate --corun " + Corun() + " --profiles " + Dir() + "/none", true);
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_THAT(missing.out, HasSubstr("tenant minife"));
}

}  // namespace
}  // namespace tiergym

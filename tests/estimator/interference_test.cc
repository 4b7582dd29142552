#include "estimator/interference.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/estimator/small_index.h"
#include "tests/test_root.h"
#include "traces/synth/app_model.h"
#include "traces/synth/generator.h"

namespace tiergym {
namespace {

using ::testing::HasSubstr;

const std::string kCurves =
    std::string(TIERGYM_SOURCE_DIR) + "/estimator/contention/data/curves.csv";

// lulesh on knl.
using World = testing::IndexedProfile;
const World& Lulesh() { return testing::SmallIndexedProfile("lulesh", "knl"); }

InterferenceSchedule Schedule(double ddr_gbps, double hbm_gbps = 0) {
  InterferenceSchedule s;
  s.curves_path = kCurves;
  if (ddr_gbps > 0) s.entries.push_back({"ddr", 0.25, 0.75, {{{ddr_gbps, 70}}}});
  if (hbm_gbps > 0) s.entries.push_back({"hbm", 0.0, 1.0, {{{hbm_gbps, 100}}}});
  return s;
}

double Estimate(const Placement& p, const InterferenceSchedule& s) {
  const World& w = Lulesh();
  auto composer = InterferenceComposer::Create(s, w.profile->devices(), "lulesh");
  EXPECT_TRUE(composer.ok()) << composer.status();
  PlacementState state(w.index, *w.index->Resolve(p), Model::kPaper);
  return composer->IntervalNs(state, 0, w.index->total_instructions());
}

Placement Half() {
  Placement p;
  p.default_tier = "ddr";
  p.fractions = {{"hbm", 0.5}};
  return p;
}

TEST(InterferenceTest, NoInterferenceChangesNothing) {
  const World& w = Lulesh();
  PlacementState state(w.index, *w.index->Resolve(Half()), Model::kPaper);
  EXPECT_NEAR(Estimate(Half(), Schedule(0)), state.runtime_ns(), 1e-9 * state.runtime_ns());
  // An entry whose co-runners put no bandwidth: slowdown 1.
  InterferenceSchedule idle = Schedule(0);
  idle.entries.push_back({"ddr", 0, 1, {{{0.0, 50}}}});
  EXPECT_NEAR(Estimate(Half(), idle), state.runtime_ns(), 1e-9 * state.runtime_ns());
}

TEST(InterferenceTest, MoreInterferenceNeverMakesTheEstimateFaster) {
  double previous = Estimate(Half(), Schedule(0));
  for (double gbps : {2.0, 5.0, 10.0, 20.0, 40.0}) {
    const double t = Estimate(Half(), Schedule(gbps));
    EXPECT_GE(t, previous - 1e-6) << gbps;
    previous = t;
  }
  EXPECT_GT(previous, Estimate(Half(), Schedule(0)) * 1.01);  // it does slow down
}

TEST(InterferenceTest, OnlyTheContendedTiersTimeGrows) {
  Placement all_ddr;
  all_ddr.default_tier = "ddr";
  // Co-runners on hbm do not touch a run with everything on ddr.
  EXPECT_NEAR(Estimate(all_ddr, Schedule(0, 30)), Estimate(all_ddr, Schedule(0)), 1e-6);
  // On ddr they slow the middle half only: at most by the slowdown factor of that half.
  auto composer = InterferenceComposer::Create(Schedule(20), Lulesh().profile->devices(), "lulesh");
  ASSERT_TRUE(composer.ok());
  const double factor = composer->FactorsAt(0.5)[0];
  EXPECT_GT(factor, 1.0);
  EXPECT_EQ(composer->FactorsAt(0.1)[0], 1.0);
  EXPECT_EQ(composer->FactorsAt(0.5)[1], 1.0);
  const double base = Estimate(all_ddr, Schedule(0));
  const double contended = Estimate(all_ddr, Schedule(20));
  EXPECT_GT(contended, base);
  EXPECT_LT(contended, base * factor);
}

TEST(InterferenceTest, ReadsSchedulesAndRefusesBadOnesWithTheMember) {
  const std::string dir =
      std::filesystem::temp_directory_path() / ("intf-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  auto write = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir + "/" + name) << text;
    return dir + "/" + name;
  };
  auto ok = ReadInterferenceSchedule(write("ok.json", R"({"sensitivity": {"curves": "c.csv"},
  "schedule": [{"tier": "ddr", "from": 0.1, "to": 0.4,
                "co_runners": [{"bandwidth_gbps": 12, "read_pct": 80}]}]})"));
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->curves_path, dir + "/c.csv");  // relative to the schedule file
  EXPECT_EQ(ok->entries[0].interference.co_runners[0].read_pct, 80);
  auto order = ReadInterferenceSchedule(write("order.json", R"({"sensitivity": {"curves": "c.csv"},
  "schedule": [{"tier": "ddr", "from": 0.5, "to": 0.4, "co_runners": []}]})"));
  ASSERT_FALSE(order.ok());
  EXPECT_THAT(std::string(order.status().message()), HasSubstr("order.json:2"));
  EXPECT_THAT(std::string(order.status().message()), HasSubstr("0 <= from < to <= 1"));
  auto share = ReadInterferenceSchedule(write("share.json", R"({"sensitivity": {"curves": "c.csv"},
  "schedule": [{"tier": "ddr", "co_runners": [{"bandwidth_gbps": 1, "read_pct": 120}]}]})"));
  ASSERT_FALSE(share.ok());
  EXPECT_THAT(std::string(share.status().message()),
              HasSubstr("schedule[0].co_runners[0].read_pct"));
  auto key = ReadInterferenceSchedule(write("key.json", R"({"sensitivity": {"curves": "c.csv"},
  "schedule": [], "scenario": 1})"));
  EXPECT_FALSE(key.ok());
  InterferenceSchedule bad_tier = Schedule(0);
  bad_tier.entries.push_back({"cxl", 0, 1, {}});
  auto tier = InterferenceComposer::Create(bad_tier, Lulesh().profile->devices(), "lulesh");
  ASSERT_FALSE(tier.ok());
  EXPECT_THAT(std::string(tier.status().message()), HasSubstr("tier 'cxl' has no run"));
  auto app = InterferenceComposer::Create(Schedule(1), Lulesh().profile->devices(), "hpcg");
  ASSERT_FALSE(app.ok());
  EXPECT_THAT(std::string(app.status().message()),
              HasSubstr("no sensitivity curves for app 'hpcg'"));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tiergym

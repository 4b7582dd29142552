#include "env/interval_pricer.h"

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "env/regions.h"
#include "estimator/estimator_index.h"
#include "estimator/interference.h"
#include "estimator/placement_state.h"
#include "gtest/gtest.h"
#include "tests/estimator/small_index.h"
#include "tests/test_root.h"
#include "traces/machine.h"
#include "traces/profile.h"
#include "traces/synth/app_model.h"
#include "traces/synth/generator.h"

namespace tiergym::env {
namespace {

// lulesh on the three-tier disagg machine, indexed with the machine (for the concurrent
// model).
using World = testing::IndexedProfile;
const World& Lulesh() { return testing::SmallIndexedProfile("lulesh", "disagg", true); }

// The inputs an environment of `regions` regions and `steps` equal decision intervals
// gives, with machine tiers 1 and 2 on the profile's devices 2 and 1 (remote, hbm), so
// that a pricer that confused tiers with devices would show.
IntervalPricerInputs Inputs(Model model, int regions, int steps) {
  const World& w = Lulesh();
  const EstimatorIndex& x = *w.index;
  IntervalPricerInputs in;
  in.index = w.index;
  in.model = model;
  in.device_of_tier = {x.base(), 2, 1};  // the profile's devices: ddr, hbm, remote
  in.regions = MakeRegions(x.pages(), regions);
  in.region_of_page.assign(x.pages().size(), 0);
  for (size_t r = 0; r < in.regions.size(); ++r) {
    const auto [begin, end] = x.IdsOfPages(in.regions[r].start_page, in.regions[r].end_page);
    for (uint32_t id = begin; id < end; ++id) in.region_of_page[id] = static_cast<uint32_t>(r);
  }
  const uint64_t total = x.total_instructions();
  for (int i = 0; i <= steps; ++i) {
    in.bounds.push_back(static_cast<uint64_t>(static_cast<unsigned __int128>(total) *
                                              static_cast<unsigned>(i) / steps));
  }
  return in;
}

std::shared_ptr<const InterferenceComposer> Contention() {
  InterferenceSchedule s;
  s.curves_path = std::string(TIERGYM_SOURCE_DIR) + "/estimator/contention/data/curves.csv";
  s.entries.push_back({"ddr", 0.2, 0.7, {{{40, 70}}}});
  s.entries.push_back({"remote", 0.5, 1.0, {{{10, 100}}}});
  auto composer = InterferenceComposer::Create(s, Lulesh().profile->devices(), "lulesh");
  EXPECT_TRUE(composer.ok()) << composer.status();
  return std::make_shared<const InterferenceComposer>(*std::move(composer));
}

// Plays the same random moves on two pricers' episodes and compares every interval.
void ExpectSameIntervals(const IntervalPricer& a, const IntervalPricer& b, size_t regions,
                         size_t steps, double tolerance) {
  auto ea = a.NewEpisode();
  auto eb = b.NewEpisode();
  ASSERT_TRUE(ea.ok() && eb.ok());
  std::mt19937_64 rng(3);
  std::vector<int> tier(regions, 0);
  for (size_t step = 0; step < steps; ++step) {
    std::vector<int> moved;
    for (size_t r = 0; r < regions; ++r) {
      if (rng() % 3 != 0) continue;
      const int to = static_cast<int>(rng() % 3);
      if (to == tier[r]) continue;
      tier[r] = to;
      moved.push_back(static_cast<int>(r));
    }
    ASSERT_TRUE((*ea)->Move(moved, tier).ok());
    ASSERT_TRUE((*eb)->Move(moved, tier).ok());
    const double want = (*eb)->IntervalNs(step, tier);
    ASSERT_GT(want, 0);
    EXPECT_NEAR((*ea)->IntervalNs(step, tier), want, tolerance * want) << "step " << step;
  }
}

TEST(IntervalPricerTest, ThePaperModelIsPricedByLinearCostsThatFitTheTableLimit) {
  EXPECT_TRUE(PricesByLinearCosts(Model::kPaper, 100, 64, 3));
  EXPECT_FALSE(PricesByLinearCosts(Model::kPaper, 100'000, 64, 3));  // 19.2 M entries
  EXPECT_FALSE(PricesByLinearCosts(Model::kConcurrent, 100, 64, 3));
  EXPECT_FALSE(PricesByLinearCosts(Model::kRoofline, 100, 64, 3));
  EXPECT_STREQ(MakeIntervalPricer(Inputs(Model::kPaper, 16, 20))->name(), "linear costs");
  EXPECT_STREQ(MakeIntervalPricer(Inputs(Model::kConcurrent, 16, 20))->name(), "index walk");
  IntervalPricerInputs contended = Inputs(Model::kRoofline, 16, 20);
  contended.contention = Contention();
  EXPECT_STREQ(MakeIntervalPricer(contended)->name(), "contended index walk");
  IntervalPricerInputs big = Inputs(Model::kPaper, 16, 20);
  big.max_linear_entries = 16 * 20 * 3 - 1;
  EXPECT_STREQ(MakeIntervalPricer(big)->name(), "index walk");
}

// The linear tables are the walk, decomposed: any placement prices alike.
TEST(IntervalPricerTest, LinearCostsEqualTheIndexWalk) {
  const IntervalPricerInputs in = Inputs(Model::kPaper, 24, 40);
  IntervalPricerInputs walk_in = in;
  walk_in.max_linear_entries = 0;
  const auto linear = MakeIntervalPricer(in);
  const auto walk = MakeIntervalPricer(walk_in);
  ASSERT_STREQ(walk->name(), "index walk");
  ExpectSameIntervals(*linear, *walk, 24, 40, 1e-9);
  EXPECT_GT(linear->MemoryBytes(), 40u * 24 * 3 * sizeof(double) - 1);
}

TEST(IntervalPricerTest, LinearCostsUnderContentionEqualTheContendedWalk) {
  IntervalPricerInputs in = Inputs(Model::kPaper, 24, 40);
  in.contention = Contention();
  IntervalPricerInputs walk_in = in;
  walk_in.max_linear_entries = 0;
  const auto linear = MakeIntervalPricer(in);
  const auto walk = MakeIntervalPricer(walk_in);
  ASSERT_STREQ(walk->name(), "contended index walk");
  ExpectSameIntervals(*linear, *walk, 24, 40, 1e-9);
  // And contention does slow the run down: the default placement's whole run is slower.
  const auto plain = MakeIntervalPricer(Inputs(Model::kPaper, 24, 40));
  auto busy = (*linear->NewEpisode());
  auto quiet = (*plain->NewEpisode());
  const std::vector<int> all_default(24, 0);
  double busy_ns = 0, quiet_ns = 0;
  for (size_t i = 0; i < 40; ++i) {
    busy_ns += busy->IntervalNs(i, all_default);
    quiet_ns += quiet->IntervalNs(i, all_default);
  }
  EXPECT_GT(busy_ns, quiet_ns * 1.01);
}

// The walk's episode is the estimator's PlacementState with the regions' pages moved.
TEST(IntervalPricerTest, TheWalkIsThePlacementStateOfTheRegionsPlacement) {
  const World& w = Lulesh();
  const IntervalPricerInputs in = Inputs(Model::kConcurrent, 8, 10);
  const auto pricer = MakeIntervalPricer(in);
  auto episode = pricer->NewEpisode();
  ASSERT_TRUE(episode.ok());
  std::vector<int> tier(8, 0);
  tier[2] = 1;  // machine tier 1: device 2 (remote)
  tier[5] = 2;  // machine tier 2: device 1 (hbm)
  const std::vector<int> moved = {2, 5};
  ASSERT_TRUE((*episode)->Move(moved, tier).ok());
  PlacementState state(w.index, *w.index->Resolve(Placement{"ddr", {}, {}}), Model::kConcurrent);
  const uint64_t page = uint64_t{1} << w.index->page_shift();
  ASSERT_TRUE(state.Move(in.regions[2].start_page * page, in.regions[2].end_page * page, 2).ok());
  ASSERT_TRUE(state.Move(in.regions[5].start_page * page, in.regions[5].end_page * page, 1).ok());
  for (size_t i = 0; i < 10; ++i) {
    EXPECT_EQ((*episode)->IntervalNs(i, tier), state.IntervalNs(in.bounds[i], in.bounds[i + 1]));
  }
  // A new episode starts all on the default tier again.
  auto fresh = pricer->NewEpisode();
  PlacementState all_default(w.index, *w.index->Resolve(Placement{"ddr", {}, {}}),
                             Model::kConcurrent);
  EXPECT_EQ((*fresh)->IntervalNs(3, std::vector<int>(8, 0)),
            all_default.IntervalNs(in.bounds[3], in.bounds[4]));
}

}  // namespace
}  // namespace tiergym::env

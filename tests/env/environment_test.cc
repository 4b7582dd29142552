#include "env/environment.h"

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <optional>
#include <random>

#include "env/profile_assets.h"
#include "env/regions.h"
#include "estimator/calibration.h"
#include "estimator/estimator_index.h"
#include "estimator/placement_state.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/test_root.h"
#include "traces/base/field_status.h"
#include "traces/base/strings.h"
#include "traces/profile.h"

namespace tiergym::env {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

// --- Regions ---------------------------------------------------------------------------

TEST(RegionsTest, CoverEveryPageWithoutSpanningGaps) {
  // Two mapped areas far apart: 300 pages and 100 pages.
  std::vector<uint64_t> pages;
  for (uint64_t p = 1000; p < 1300; ++p) pages.push_back(p);
  for (uint64_t p = 900000; p < 900100; ++p) pages.push_back(p);
  const std::vector<Region> regions = MakeRegions(pages, 8);
  ASSERT_EQ(regions.size(), 8u);
  uint64_t covered = 0;
  for (size_t i = 0; i < regions.size(); ++i) {
    covered += regions[i].footprint_pages;
    EXPECT_LT(regions[i].start_page, regions[i].end_page);
    if (i > 0) {
      EXPECT_LE(regions[i - 1].end_page, regions[i].start_page);
    }
    // No region spans the gap.
    EXPECT_FALSE(regions[i].start_page < 1300 && regions[i].end_page > 900000) << i;
  }
  EXPECT_EQ(covered, pages.size());
  // Regions in proportion to the areas: 6 for the big one, 2 for the small one.
  EXPECT_EQ(std::count_if(regions.begin(), regions.end(),
                          [](const Region& r) { return r.start_page < 1300; }),
            6);
  EXPECT_EQ(MakeRegions(pages, 8)[3].start_page, regions[3].start_page);  // deterministic
}

TEST(RegionsTest, MergesTheClosestAreasWhenThereAreMoreAreasThanRegions) {
  // Four single pages; gaps 1000, 10, 5000 pages: with two regions, pages 2 and 3 share one.
  const std::vector<uint64_t> pages = {0, 1000, 1010, 6010};
  const std::vector<Region> regions = MakeRegions(pages, 2, /*gap_pages=*/4);
  ASSERT_EQ(regions.size(), 2u);
  EXPECT_EQ(regions[0].footprint_pages + regions[1].footprint_pages, 4u);
  const std::vector<Region> three = MakeRegions(pages, 3, 4);
  ASSERT_EQ(three.size(), 3u);
  EXPECT_EQ(three[1].start_page, 1000u);
  EXPECT_EQ(three[1].end_page, 1011u);
  EXPECT_EQ(MakeRegions({5, 6}, 64).size(), 2u);  // fewer pages than regions
}

// --- Episodes ----------------------------------------------------------------------------

using testing::SmallProfileDir;
using testing::TestRoot;

struct EnvFixture {
  std::shared_ptr<const EnvAssets> assets;
  std::unique_ptr<Environment> env;
};

EnvFixture Make(ConfigMap keys) {
  EnvFixture f;
  if (!keys.count("profiles")) keys["profiles"] = SmallProfileDir("lulesh", "knl");
  auto config = ParseEnvConfig(keys);
  EXPECT_TRUE(config.ok()) << config.status();
  auto assets = EnvAssets::Load(*config);
  EXPECT_TRUE(assets.ok()) << assets.status();
  f.assets = *assets;
  f.env = *Environment::Create(f.assets);
  return f;
}

Action AllOn(const Environment& env, int tier) {
  return Action{std::vector<int64_t>(env.spec().num_regions, tier)};
}

TEST(EnvironmentTest, SpacesDescribeTheObservationAndAction) {
  EnvFixture f = Make({{"num_regions", "16"}});
  const EnvSpec& spec = f.env->spec();
  EXPECT_EQ(spec.num_regions, 16);
  EXPECT_EQ(spec.tiers, (std::vector<std::string>{"ddr", "hbm"}));
  EXPECT_EQ(spec.action.kind, Space::kMultiDiscrete);
  EXPECT_EQ(spec.action.n, 2);
  EXPECT_EQ(spec.observation.shape, (std::vector<int64_t>{16 * 4 + 2 + 2}));
  auto first = f.env->Reset(1, {});
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->observation.size(), static_cast<size_t>(spec.observation.shape[0]));
  EXPECT_EQ(first->info.profile, "lulesh");
}

TEST(EnvironmentTest, ReturnIsTheFractionalSpeedup) {
  EnvFixture f = Make({});
  ASSERT_TRUE(f.env->Reset(1, {}).ok());
  double ret = 0;
  uint64_t migrated = 0;
  StepResult last;
  int steps = 0;
  for (bool done = false; !done; ++steps) {
    // Everything on hbm: lulesh's 2.1 GB footprint fits KNL's 16 GiB.
    auto r = f.env->Step(AllOn(*f.env, 1));
    ASSERT_TRUE(r.ok()) << r.status();
    ret += r->reward;
    migrated += r->info.migrated_bytes;
    done = r->terminated;
    last = *r;
  }
  EXPECT_EQ(steps, 100);
  const double total = last.info.default_total_ns;
  EXPECT_NEAR(ret, (total - last.info.elapsed_ns) / total, 1e-9);
  EXPECT_NEAR(last.info.default_elapsed_ns, total, 1e-6 * total);
  // All on hbm, migration included: about the hbm run's speedup (77.9 s -> 40.1 s).
  EXPECT_GT(ret, 0.4);
  EXPECT_LT(ret, 0.5);
  EXPECT_EQ(migrated, last.info.tier_used_bytes[1]);  // moved once, in the first step
  // Doing nothing gains nothing.
  ASSERT_TRUE(f.env->Reset(1, {}).ok());
  double idle = 0;
  for (bool done = false; !done;) {
    auto r = f.env->Step(AllOn(*f.env, 0));
    idle += r->reward;
    done = r->terminated;
  }
  EXPECT_NEAR(idle, 0, 1e-9);
}

// The environment prices a step from per-region cost tables (GroupCostModel) instead of
// moving pages in the estimator: each interval must equal the estimator's own walk over
// the same interval with the regions where the environment says they are.
TEST(EnvironmentTest, StepTimesAreTheEstimatorsIntervalsForTheRegionsPlacement) {
  const std::string dir = SmallProfileDir("lulesh", "disagg");
  EnvFixture f =
      Make({{"profiles", dir}, {"machine", "disagg"}, {"num_regions", "12"}, {"steps", "30"}});
  const EnvSpec& spec = f.env->spec();
  auto machine = LoadMachine("disagg");
  ASSERT_EQ(spec.tier_capacity_bytes.size(), 3u);
  for (size_t t = 0; t < 3; ++t) {
    EXPECT_EQ(spec.tier_capacity_bytes[t], machine->tiers[t].capacity_bytes);
    EXPECT_EQ(spec.tier_migration_gbps[t], machine->tiers[t].migration_gbps);
    EXPECT_EQ(spec.tier_bandwidth_gbps[t], machine->tiers[t].bandwidth_gbps);
  }
  ASSERT_EQ(spec.region_bounds.size(), 12u * 2);
  for (size_t r = 0; r + 1 < 12; ++r) {
    EXPECT_LE(spec.region_bounds[2 * r], spec.region_bounds[2 * r + 1]);
    EXPECT_LE(spec.region_bounds[2 * r + 1], spec.region_bounds[2 * r + 2]);
  }

  auto profile = LoadProfile(dir);
  ASSERT_TRUE(profile.ok()) << profile.status();
  IndexOptions options;
  options.base_device = "ddr";
  auto index = EstimatorIndex::Build(*profile, options);
  ASSERT_TRUE(index.ok()) << index.status();
  PlacementState walk(*index, *(*index)->Resolve(Placement{"ddr", {}, {}}), Model::kPaper);
  const auto& devices = (*index)->devices();
  const uint64_t total = (*index)->total_instructions();

  ASSERT_TRUE(f.env->Reset(5, {}).ok());
  std::mt19937_64 rng(5);
  std::vector<int> region_tier(12, 0);
  for (uint64_t step = 0; step < 30; ++step) {
    Action a{std::vector<int64_t>(12)};
    for (int64_t& v : a.values) v = static_cast<int64_t>(rng() % 3);
    auto r = f.env->Step(a);
    ASSERT_TRUE(r.ok()) << r.status();
    for (size_t region = 0; region < 12; ++region) {
      const bool refused = std::count(r->info.refused_regions.begin(),
                                      r->info.refused_regions.end(), static_cast<int>(region));
      if (refused || a.values[region] == region_tier[region]) continue;
      region_tier[region] = static_cast<int>(a.values[region]);
      const std::string& tier = spec.tiers[region_tier[region]];
      const int device =
          static_cast<int>(std::find(devices.begin(), devices.end(), tier) - devices.begin());
      ASSERT_TRUE(
          walk.Move(spec.region_bounds[2 * region], spec.region_bounds[2 * region + 1], device)
              .ok());
    }
    const uint64_t from = static_cast<uint64_t>(static_cast<unsigned __int128>(total) * step / 30);
    const uint64_t to =
        static_cast<uint64_t>(static_cast<unsigned __int128>(total) * (step + 1) / 30);
    const double expected = walk.IntervalNs(from, to);
    ASSERT_NEAR(r->info.interval_ns, expected, 1e-9 * expected) << "step " << step;
  }
}

// Configurations that differ in regions, steps or model share each profile's estimator
// and index through a ProfileCache; another estimator window is another index.
TEST(EnvironmentTest, ConfigurationsShareProfilesThroughTheCache) {
  ProfileCache cache;
  auto load = [&](ConfigMap keys) {
    keys["profiles"] = SmallProfileDir("lulesh", "knl");
    auto config = ParseEnvConfig(keys);
    EXPECT_TRUE(config.ok()) << config.status();
    auto assets = EnvAssets::Load(*config, &cache);
    EXPECT_TRUE(assets.ok()) << assets.status();
    return *assets;
  };
  auto a = load({{"num_regions", "8"}});
  auto b = load({{"num_regions", "16"}, {"steps", "10"}, {"model", "concurrent"}});
  ASSERT_GT(a->IndexBytes(), 0u);
  EXPECT_EQ(cache.MemoryBytes(), a->IndexBytes());  // one index, held by both
  EXPECT_EQ(b->IndexBytes(), a->IndexBytes());
  auto c = load({{"window_instructions", "500000"}});
  EXPECT_GT(cache.MemoryBytes(), a->IndexBytes());
  // Episodes of a shared profile are those of a profile loaded alone.
  EnvFixture alone = Make({{"num_regions", "8"}});
  auto shared_env = Environment::Create(a);
  ASSERT_TRUE(shared_env.ok());
  auto r1 = (*shared_env)->Reset(2, {});
  auto r2 = alone.env->Reset(2, {});
  ASSERT_TRUE(r1.ok() && r2.ok());
  auto s1 = (*shared_env)->Step(AllOn(**shared_env, 1));
  auto s2 = alone.env->Step(AllOn(*alone.env, 1));
  ASSERT_TRUE(s1.ok() && s2.ok());
  EXPECT_EQ(s1->info.interval_ns, s2->info.interval_ns);
  // Unused profiles are not kept.
  shared_env->reset();
  a.reset();
  b.reset();
  c.reset();
  EXPECT_EQ(cache.MemoryBytes(), 0u);
}

// An estimate of a placement with another default tier than the machine's builds an index
// of its own, which the profile's estimator holds from then on: the cache counts it (what a
// server's memory budget reads), and a second such estimate builds nothing more.
TEST(EnvironmentTest, TheCacheCountsTheIndexesEstimatesBuild) {
  ProfileCache cache;
  auto config = ParseEnvConfig({{"profiles", SmallProfileDir("lulesh", "knl")}});
  ASSERT_TRUE(config.ok()) << config.status();
  auto assets = EnvAssets::Load(*config, &cache);
  ASSERT_TRUE(assets.ok()) << assets.status();
  auto env = Environment::Create(*assets);
  ASSERT_TRUE(env.ok()) << env.status();
  const ProfileAssets& p = (*assets)->profiles()[0];
  const size_t before = cache.MemoryBytes();
  EXPECT_EQ(before, p.index->MemoryBytes());  // the machine's default tier's, ddr
  Placement hbm;
  hbm.default_tier = "hbm";
  ASSERT_TRUE(p.estimator->HasIndex("ddr"));
  ASSERT_FALSE(p.estimator->HasIndex("hbm"));
  absl::StatusOr<double> ns = (*env)->EstimatePlacementNs(p.name, hbm);
  ASSERT_TRUE(ns.ok()) << ns.status();
  ASSERT_TRUE(p.estimator->HasIndex("hbm"));
  auto index = p.estimator->IndexFor("hbm");  // built by the estimate: no work here
  ASSERT_TRUE(index.ok()) << index.status();
  EXPECT_GT((*index)->MemoryBytes(), 0u);
  EXPECT_EQ(cache.MemoryBytes(), before + (*index)->MemoryBytes());
  EXPECT_EQ(p.estimator->IndexBytes(), cache.MemoryBytes());
  ASSERT_TRUE((*env)->EstimatePlacementNs(p.name, hbm).ok());
  EXPECT_EQ(cache.MemoryBytes(), before + (*index)->MemoryBytes());
}

TEST(EnvironmentTest, MigrationIsChargedOnceAtTheMigrationBandwidth) {
  EnvFixture f = Make({{"migration_gbps", "2"}});
  ASSERT_TRUE(f.env->Reset(3, {}).ok());
  Action a = AllOn(*f.env, 0);
  a.values[0] = 1;
  auto r = f.env->Step(a);
  ASSERT_TRUE(r.ok());
  ASSERT_GT(r->info.migrated_bytes, 0u);
  EXPECT_NEAR(r->info.migration_ns, r->info.migrated_bytes / 2.0, 1e-6);
  EXPECT_NEAR(r->reward,
              (r->info.default_interval_ns - r->info.interval_ns - r->info.migration_ns) /
                  r->info.default_total_ns,
              1e-12);
  auto again = f.env->Step(a);  // already there: nothing moves
  EXPECT_EQ(again->info.migrated_bytes, 0u);
  EXPECT_EQ(again->info.migration_ns, 0);
}

TEST(EnvironmentTest, CapacityRefusesWhatDoesNotFitAndMasksIt) {
  // A machine whose hbm holds 600 MiB: not the whole of lulesh.
  auto knl = LoadMachine("knl");
  std::string json = MachineToJson(*knl);
  const std::string cap = std::to_string(uint64_t{16} << 30);
  ASSERT_NE(json.find(cap), std::string::npos);
  json.replace(json.find(cap), cap.size(), std::to_string(uint64_t{600} << 20));
  const std::string path =
      fs::temp_directory_path() / ("small-hbm-" + std::to_string(getpid()) + ".json");
  { std::ofstream(path) << json; }
  EnvFixture f = Make({{"machine", path}, {"num_regions", "8"}});
  ASSERT_TRUE(f.env->Reset(1, {}).ok());
  auto r = f.env->Step(AllOn(*f.env, 1));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->info.refused_regions.empty());
  EXPECT_LE(r->info.tier_used_bytes[1], uint64_t{600} << 20);
  // Refused regions stay on ddr and are masked for hbm.
  for (int region : r->info.refused_regions) {
    EXPECT_EQ(r->info.action_mask[region * 2 + 1], 0) << region;
    EXPECT_EQ(r->info.action_mask[region * 2 + 0], 1) << region;
  }
  // Deterministic order: region order, so the refused ones are the last that were tried.
  EXPECT_TRUE(std::is_sorted(r->info.refused_regions.begin(), r->info.refused_regions.end()));
  fs::remove(path);
}

// In placement mode the mask is joint: taking every move it allows at once is never
// refused (a per-region mask would let each region in alone, and refuse some of them
// together). info.step counts the decision intervals done (PROTOCOL.md).
TEST(EnvironmentTest, PlacementMasksAreJointAndStepCountsTheIntervalsDone) {
  constexpr size_t kRegions = 16, kTiers = 2;
  EnvFixture f = Make({{"tier_capacity_mib", "hbm:600"}, {"num_regions", "16"}, {"steps", "10"}});
  auto r = f.env->Reset(1, {});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->info.step, 0u);
  for (uint64_t step = 1; step <= 10; ++step) {
    Action wanted{std::vector<int64_t>(kRegions, 0)};
    size_t allowed = 0;
    for (size_t region = 0; region < kRegions; ++region) {
      if (r->info.action_mask[region * kTiers + 1] != 0) {
        wanted.values[region] = 1;
        ++allowed;
      }
    }
    if (step == 1) {
      EXPECT_GT(allowed, 0u);        // hbm has room for some regions,
      EXPECT_LT(allowed, kRegions);  // not for all of lulesh
    }
    r = f.env->Step(wanted);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_TRUE(r->info.refused_regions.empty()) << "step " << step;
    EXPECT_EQ(r->info.step, step);
    EXPECT_EQ(r->terminated, step == 10);
  }
}

TEST(EnvironmentTest, SameSeedAndActionsGiveIdenticalEpisodes) {
  EnvFixture a = Make(
      {{"profiles", SmallProfileDir("lulesh", "knl") + "," + SmallProfileDir("minife", "knl")}});
  EnvFixture b = Make(
      {{"profiles", SmallProfileDir("lulesh", "knl") + "," + SmallProfileDir("minife", "knl")}});
  for (uint64_t seed : {1u, 2u, 3u, 4u}) {
    auto ra = a.env->Reset(seed, {});
    auto rb = b.env->Reset(seed, {});
    ASSERT_TRUE(ra.ok() && rb.ok());
    EXPECT_EQ(ra->info.profile, rb->info.profile);
    EXPECT_EQ(ra->observation, rb->observation);
    std::mt19937_64 actions(seed);
    for (int i = 0; i < 30; ++i) {
      Action act = AllOn(*a.env, 0);
      for (int64_t& v : act.values) v = static_cast<int64_t>(actions() % 2);
      auto sa = a.env->Step(act);
      auto sb = b.env->Step(act);
      ASSERT_TRUE(sa.ok() && sb.ok());
      EXPECT_EQ(sa->observation, sb->observation);
      EXPECT_EQ(sa->reward, sb->reward);  // bit-identical
    }
  }
}

TEST(EnvironmentTest, ObservationsStayInTheirBoundsAndShowOnlyThePast) {
  EnvFixture f = Make({{"num_regions", "32"}});
  auto first = f.env->Reset(5, {});
  ASSERT_TRUE(first.ok());
  const int k = 32;
  for (int i = 0; i < k; ++i) {
    EXPECT_EQ(first->observation[i * 4 + 1], 0.0f);  // no interval seen yet
  }
  for (bool done = false; !done;) {
    auto r = f.env->Step(AllOn(*f.env, 0));
    ASSERT_TRUE(r.ok());
    float shares = 0;
    for (float v : r->observation) {
      EXPECT_GE(v, 0.0f);
      EXPECT_LE(v, 1.0f);
    }
    for (int i = 0; i < k; ++i) shares += r->observation[i * 4 + 1];
    EXPECT_TRUE(shares == 0 || std::fabs(shares - 1) < 1e-4) << shares;
    done = r->terminated;
  }
}

TEST(EnvironmentTest, MoveModeMovesOneRegion) {
  EnvFixture f = Make({{"action_mode", "move"}, {"num_regions", "8"}});
  EXPECT_EQ(f.env->spec().action.kind, Space::kDiscrete);
  EXPECT_EQ(f.env->spec().action.n, 8 * 2 + 1);
  ASSERT_TRUE(f.env->Reset(1, {}).ok());
  auto r = f.env->Step(Action{{3 * 2 + 1}});  // region 3 to hbm
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_GT(r->info.tier_used_bytes[1], 0u);
  EXPECT_EQ(r->observation[3 * 4], 1.0f);
  auto noop = f.env->Step(Action{{16}});
  ASSERT_TRUE(noop.ok());
  EXPECT_EQ(noop->info.migrated_bytes, 0u);
  EXPECT_EQ(r->info.action_mask.size(), 17u);
}

// Keep mode: per region 0 keeps it where it is, 1 + t moves it to tier t; the mask is
// [region, 1 + tiers], keep always allowed, the moves joint as in placement mode.
TEST(EnvironmentTest, KeepModeKeepsByDefaultAndMovesOnRequest) {
  constexpr size_t kRegions = 16, kColumns = 3;
  EnvFixture f = Make({{"action_mode", "keep"},
                       {"num_regions", "16"},
                       {"tier_capacity_mib", "hbm:600"},
                       {"steps", "10"}});
  EXPECT_EQ(f.env->spec().action.kind, Space::kMultiDiscrete);
  EXPECT_EQ(f.env->spec().action.n, 3);
  auto r = f.env->Reset(1, {});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->info.action_mask.size(), kRegions * kColumns);
  EXPECT_EQ(r->info.action_mask_columns, kColumns);
  // Every move the mask allows at once, to hbm: none refused, and some regions not allowed.
  Action wanted{std::vector<int64_t>(kRegions, 0)};
  size_t allowed = 0;
  for (size_t region = 0; region < kRegions; ++region) {
    EXPECT_EQ(r->info.action_mask[region * kColumns], 1);  // keep
    if (r->info.action_mask[region * kColumns + 2] != 0) {
      wanted.values[region] = 2;
      ++allowed;
    }
  }
  EXPECT_GT(allowed, 0u);
  EXPECT_LT(allowed, kRegions);
  r = f.env->Step(wanted);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->info.refused_regions.empty());
  EXPECT_GT(r->info.migrated_bytes, 0u);
  const uint64_t on_hbm = r->info.tier_used_bytes[1];
  // All keep: nothing moves and the placement stays.
  r = f.env->Step(AllOn(*f.env, 0));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->info.migrated_bytes, 0u);
  EXPECT_EQ(r->info.tier_used_bytes[1], on_hbm);
  // 1 + ddr brings everything back.
  r = f.env->Step(AllOn(*f.env, 1));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->info.tier_used_bytes[1], 0u);
  EXPECT_EQ(r->info.migrated_bytes, on_hbm);
  auto range = f.env->Step(AllOn(*f.env, 3));
  ASSERT_FALSE(range.ok());
  EXPECT_THAT(std::string(range.status().message()),
              HasSubstr("action[0]: code 3 out of range [0, 3) (keep mode: 0 keeps the region "
                        "where it is, 1 + t moves it to tier t, t < 2)"));  // the one check
  EXPECT_THAT(
      std::string(ParseEnvConfig({{"profiles", "x"}, {"action_mode", "stay"}}).status().message()),
      HasSubstr("'stay' is not placement, keep or move"));
}

// Normalized observations: the raw four features, then the squashed densities and size,
// in [0, 1); the same episode otherwise (same rewards as the raw observation's).
TEST(EnvironmentTest, NormalizedObservationAddsDensitiesAgainstTheAverage) {
  EnvFixture raw = Make({{"num_regions", "8"}});
  EnvFixture norm = Make({{"num_regions", "8"}, {"observation", "normalized"}});
  EXPECT_EQ(norm.env->spec().obs_region_features, 7);
  EXPECT_EQ(norm.env->spec().obs_global_offset, 8 * 7);
  EXPECT_EQ(norm.env->spec().observation.shape, (std::vector<int64_t>{8 * 7 + 2 + 2}));
  ASSERT_TRUE(raw.env->Reset(1, {}).ok());
  ASSERT_TRUE(norm.env->Reset(1, {}).ok());
  for (int step = 0; step < 5; ++step) {
    auto a = raw.env->Step(AllOn(*raw.env, step % 2));
    auto b = norm.env->Step(AllOn(*norm.env, step % 2));
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(a->reward, b->reward);
    float size_share_sum = 0;
    for (int r = 0; r < 8; ++r) {
      const float* x = &a->observation[r * 4];
      const float* y = &b->observation[r * 7];
      for (int i = 0; i < 4; ++i) EXPECT_EQ(x[i], y[i]);
      const auto squash = [](float v) { return v / (1 + v); };
      if (x[3] > 0) {
        EXPECT_FLOAT_EQ(y[4], squash(x[1] / x[3]));
        EXPECT_FLOAT_EQ(y[5], squash(x[2] / x[3]));
      }
      EXPECT_FLOAT_EQ(y[6], squash(x[3] * 8));
      for (int i = 4; i < 7; ++i) {
        EXPECT_GE(y[i], 0.0f);
        EXPECT_LT(y[i], 1.0f);
      }
      size_share_sum += x[3];
    }
    EXPECT_NEAR(size_share_sum, 1.0f, 1e-4);
    // The global features are the raw observation's.
    EXPECT_TRUE(std::equal(a->observation.begin() + 8 * 4, a->observation.end(),
                           b->observation.begin() + 8 * 7));
  }
}

// Relative observations: the normalized seven, then features relative to the application
// and the tiers (env/README.md, "Observations that transfer"); the same episode otherwise.
TEST(EnvironmentTest, RelativeObservationExtendsTheNormalizedOne) {
  constexpr int kRegions = 8;
  EnvFixture rel =
      Make({{"num_regions", "8"}, {"observation", "relative"}, {"tier_capacity_mib", "hbm:512"}});
  EnvFixture norm512 =
      Make({{"num_regions", "8"}, {"observation", "normalized"}, {"tier_capacity_mib", "hbm:512"}});
  const size_t tiers = 2;
  const int features = kRelativeCommonFeatures + kRelativePerTierFeatures * 2;
  EXPECT_EQ(RegionFeatures(ObservationMode::kRelative, tiers), features);
  EXPECT_EQ(rel.env->spec().obs_region_features, features);
  EXPECT_EQ(rel.env->spec().obs_global_offset, kRegions * features);
  EXPECT_EQ(rel.env->spec().observation.shape,
            (std::vector<int64_t>{kRegions * features + 2 + 2 + kRelativeGlobalPerTier * 2}));
  const Machine& m = rel.assets->machine();
  const auto unsquash = [](float y) { return static_cast<double>(y) / (1.0 - y); };
  auto a0 = norm512.env->Reset(1, {});
  auto b0 = rel.env->Reset(1, {});
  ASSERT_TRUE(a0.ok() && b0.ok());
  const std::vector<uint64_t>& bytes = rel.assets->profiles()[0].region_bytes;
  uint64_t footprint = 0;
  for (uint64_t b : bytes) footprint += b;
  for (int step = 0; step < 6; ++step) {
    // Everything on hbm that fits, then back: moves, refusals and a full fast tier.
    const Action act = AllOn(*rel.env, step < 3 ? 1 : 0);
    auto a = norm512.env->Step(act);
    auto b = rel.env->Step(act);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(a->reward, b->reward);
    const std::vector<float>& x = a->observation;
    const std::vector<float>& y = b->observation;
    double traffic = 0;
    for (int r = 0; r < kRegions; ++r) {
      const float* n = &x[r * 7];
      const float* f = &y[r * features];
      for (int i = 0; i < 7; ++i) EXPECT_EQ(n[i], f[i]) << "region " << r << " feature " << i;
      for (int i = 0; i < features; ++i) {
        EXPECT_GE(f[i], 0.0f);
        EXPECT_LE(f[i], 1.0f);
      }
      const float* on = f + kRelativeCommonFeatures;
      const int tier = static_cast<int>(std::lround(f[0]));
      EXPECT_EQ(on[tier], 1.0f);
      EXPECT_EQ(on[1 - tier], 0.0f);
      // The trend: the last share against the decayed one.
      if (f[1] + f[2] > 0) {
        EXPECT_FLOAT_EQ(f[8], f[1] / (f[1] + f[2]));
      }
      // The bytes ahead (own included) against each tier's capacity, by decayed density.
      double ahead = 0;
      for (int q = 0; q < kRegions; ++q) {
        const float* g = &y[q * features];
        const double dq = g[3] > 0 ? g[2] / g[3] : 0, dr = f[3] > 0 ? f[2] / f[3] : 0;
        if (dq > dr || (dq == dr && q <= r)) ahead += static_cast<double>(bytes[q]);
      }
      for (size_t t = 0; t < tiers; ++t) {
        EXPECT_NEAR(unsquash(on[tiers + t]), ahead / static_cast<double>(m.tiers[t].capacity_bytes),
                    1e-5)
            << "region " << r << " tier " << t;
        // Room: its size against the tier's free bytes (its own when it is there).
        const double free_bytes =
            static_cast<double>(m.tiers[t].capacity_bytes - b->info.tier_used_bytes[t]) +
            (static_cast<size_t>(tier) == t ? static_cast<double>(bytes[r]) : 0.0);
        if (free_bytes > 0) {
          EXPECT_NEAR(unsquash(on[3 * tiers + t]), static_cast<double>(bytes[r]) / free_bytes,
                      1e-4 * (1 + static_cast<double>(bytes[r]) / free_bytes));
        }
        // Migration: none to its own tier; to the other, its bytes over the migration
        // bandwidth, in intervals.
        if (static_cast<size_t>(tier) == t) {
          EXPECT_EQ(on[4 * tiers + t], 0.0f);
        } else {
          EXPECT_NEAR(
              unsquash(on[4 * tiers + t]),
              static_cast<double>(bytes[r]) / m.tiers[t].migration_gbps / b->info.interval_ns,
              1e-4);
        }
      }
      traffic += unsquash(f[9]) * m.tiers[0].bandwidth_gbps;
    }
    EXPECT_GT(traffic, 0);
    // Globals: the normalized ones, then per tier the share of the footprint it holds, its
    // bandwidth and latency against the highest, the application's traffic against it.
    const size_t g = kRegions * features;
    EXPECT_TRUE(std::equal(x.begin() + kRegions * 7, x.end(), y.begin() + static_cast<long>(g)));
    const size_t extra = g + tiers + 2;
    EXPECT_NEAR(y[extra + 0], 1.0, 1e-6);  // ddr holds it all
    EXPECT_NEAR(y[extra + 1], 512.0 * (1 << 20) / static_cast<double>(footprint), 1e-6);
    EXPECT_NEAR(y[extra + 2], 90.0 / 400, 1e-6);
    EXPECT_NEAR(y[extra + 3], 1.0, 1e-6);
    EXPECT_NEAR(y[extra + 4], 130.0 / 155, 1e-6);
    EXPECT_NEAR(y[extra + 5], 1.0, 1e-6);
    EXPECT_NEAR(unsquash(y[extra + 6]), traffic / 90.0, 1e-3 * traffic / 90.0);
    EXPECT_NEAR(unsquash(y[extra + 7]), traffic / 400.0, 1e-3 * traffic / 400.0);
  }
  // Before the first step nothing was observed: no traffic, no migration cost.
  for (int r = 0; r < kRegions; ++r) {
    EXPECT_EQ(b0->observation[r * features + 9], 0.0f);
    EXPECT_EQ(b0->observation[r * features + 7], 0.0f);
    EXPECT_EQ(b0->observation[r * features + 8], 0.5f);
  }
  EXPECT_THAT(
      std::string(
          ParseEnvConfig({{"profiles", "x"}, {"observation", "pixels"}}).status().message()),
      HasSubstr("config key 'observation': 'pixels' is not raw, normalized, relative or "
                "relative-load"));
}

// observation=relative-load: relative's features, then each region's load; the load is the
// application's traffic while the region is accessed against its mean, so the regions'
// loads averaged over their accesses are 1, and it depends on the run, not the placement.
TEST(EnvironmentTest, RelativeLoadObservationAppendsEachRegionsLoad) {
  constexpr int kRegions = 8;
  EnvFixture rel =
      Make({{"num_regions", "8"}, {"observation", "relative"}, {"tier_capacity_mib", "hbm:512"}});
  EnvFixture load = Make(
      {{"num_regions", "8"}, {"observation", "relative-load"}, {"tier_capacity_mib", "hbm:512"}});
  EnvFixture moved = Make(
      {{"num_regions", "8"}, {"observation", "relative-load"}, {"tier_capacity_mib", "hbm:512"}});
  const int base = RegionFeatures(ObservationMode::kRelative, 2);
  const int features = base + kRelativeLoadFeatures;
  EXPECT_EQ(RegionFeatures(ObservationMode::kRelativeLoad, 2), features);
  EXPECT_EQ(load.env->spec().obs_region_features, features);
  EXPECT_EQ(load.env->spec().observation.shape,
            (std::vector<int64_t>{kRegions * features + 2 + 2 + kRelativeGlobalPerTier * 2}));
  const auto unsquash = [](float y) { return static_cast<double>(y) / (1.0 - y); };
  auto r0 = rel.env->Reset(1, {});
  auto l0 = load.env->Reset(1, {});
  auto m0 = moved.env->Reset(1, {});
  ASSERT_TRUE(r0.ok() && l0.ok() && m0.ok());
  for (int r = 0; r < kRegions; ++r) EXPECT_EQ(l0->observation[r * features + base], 0.0f);
  bool spread = false, placed_apart = false;
  for (int step = 0; step < 6; ++step) {
    auto a = rel.env->Step(AllOn(*rel.env, 0));
    auto b = load.env->Step(AllOn(*load.env, 0));
    auto c = moved.env->Step(AllOn(*moved.env, 1));
    ASSERT_TRUE(a.ok() && b.ok() && c.ok());
    placed_apart |= b->info.tier_used_bytes != c->info.tier_used_bytes;
    const std::vector<float>& x = a->observation;
    const std::vector<float>& y = b->observation;
    double mean = 0;
    for (int r = 0; r < kRegions; ++r) {
      const float* f = &y[r * features];
      EXPECT_TRUE(std::equal(f, f + base, x.begin() + r * base)) << "region " << r;
      EXPECT_EQ(f[base], c->observation[r * features + base]) << "region " << r;
      if (f[7] == 0) {
        EXPECT_EQ(f[base], 0.0f) << "region " << r << " was never sampled";
        continue;
      }
      // The region's share of the accesses so far (density since the start x size share)
      // times its load against the application's.
      mean += unsquash(f[7]) * f[3] * unsquash(f[base]);
      spread |= std::fabs(f[base] - 0.5f) > 0.01f;
    }
    EXPECT_NEAR(mean, 1.0, 1e-3) << "step " << step;
    EXPECT_TRUE(std::equal(x.begin() + kRegions * base, x.end(), y.begin() + kRegions * features));
  }
  EXPECT_TRUE(spread) << "every region at the application's mean load: nothing to tell apart";
  EXPECT_TRUE(placed_apart) << "the two episodes placed alike: the load's independence untested";
}

TEST(EnvironmentTest, OneStepPerPhase) {
  EnvFixture f = Make({{"steps", "0"}});
  ASSERT_TRUE(f.env->Reset(1, {}).ok());
  int steps = 0;
  for (bool done = false; !done; ++steps) done = f.env->Step(AllOn(*f.env, 0))->terminated;
  EXPECT_EQ(steps, 481);  // lulesh's phases
}

TEST(EnvironmentTest, RefusesBadActionsAndOutOfOrderCalls) {
  EnvFixture f = Make({{"num_regions", "4"}});
  auto early = f.env->Step(AllOn(*f.env, 0));
  ASSERT_FALSE(early.ok());
  EXPECT_EQ(early.status().code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(f.env->Reset(1, {}).ok());
  auto shape = f.env->Step(Action{{0, 1}});
  ASSERT_FALSE(shape.ok());
  EXPECT_THAT(std::string(shape.status().message()), HasSubstr("expected 4 values"));
  auto range = f.env->Step(Action{{0, 1, 7, 0}});
  ASSERT_FALSE(range.ok());
  EXPECT_THAT(std::string(range.status().message()), HasSubstr("action[2]: tier 7 out of range"));
  EXPECT_TRUE(f.env->Step(AllOn(*f.env, 1)).ok());  // the episode goes on
  auto unknown = f.env->Reset(1, ResetOptions{"hpcg"});
  ASSERT_FALSE(unknown.ok());
  EXPECT_THAT(std::string(unknown.status().message()),
              HasSubstr("unknown profile 'hpcg' (known: lulesh)"));
}

TEST(EnvironmentTest, RefusesBadConfiguration) {
  auto bad = ParseEnvConfig({{"profiles", "x"}, {"num_regions", "0"}});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("config key 'num_regions'"));
  auto unknown = ParseEnvConfig({{"profiles", "x"}, {"regions", "4"}});
  ASSERT_FALSE(unknown.ok());
  EXPECT_THAT(std::string(unknown.status().message()), HasSubstr("unknown config key 'regions'"));
  EXPECT_FALSE(ParseEnvConfig({}).ok());  // profiles required
  // A knl profile on the three-tier machine: no run for 'remote'.
  auto config =
      ParseEnvConfig({{"profiles", SmallProfileDir("lulesh", "knl")}, {"machine", "disagg"}});
  ASSERT_TRUE(config.ok());
  auto assets = EnvAssets::Load(*config);
  ASSERT_FALSE(assets.ok());
  EXPECT_THAT(std::string(assets.status().message()), HasSubstr("has no run for tier 'remote'"));
}

// The spec follows from the configuration and the machine alone (EnvPool's spec before
// dynamics): a client learns the spaces without any profile being read, and a bad
// configuration fails before one is.
TEST(EnvironmentTest, SpecIsKnownBeforeAnyProfileIsLoaded) {
  auto config = ParseEnvConfig({{"profiles", "/nonexistent/profile"},
                                {"machine", "disagg"},
                                {"num_regions", "12"},
                                {"action_mode", "keep"},
                                {"observation", "normalized"},
                                {"migration_gbps", "3"}});
  ASSERT_TRUE(config.ok()) << config.status();
  auto spec = MakeEnvSpec(*config);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_TRUE(spec->profiles.empty());
  EXPECT_TRUE(spec->region_bounds.empty());
  // What the loaded assets declare, but for the profiles' names and regions.
  config->profiles = {SmallProfileDir("lulesh", "disagg")};
  auto assets = EnvAssets::Load(*config);
  ASSERT_TRUE(assets.ok()) << assets.status();
  const EnvSpec& loaded = (*assets)->spec();
  EXPECT_EQ(loaded.profiles, std::vector<std::string>{"lulesh"});
  EXPECT_EQ(loaded.region_bounds.size(), 12u * 2);
  EXPECT_EQ(spec->observation.kind, loaded.observation.kind);
  EXPECT_EQ(spec->observation.shape, loaded.observation.shape);
  EXPECT_EQ(spec->observation.shape, (std::vector<int64_t>{12 * 7 + 3 + 2}));
  EXPECT_EQ(spec->action.kind, loaded.action.kind);
  EXPECT_EQ(spec->action.shape, loaded.action.shape);
  EXPECT_EQ(spec->action.n, 4);  // keep, or one of three tiers
  EXPECT_EQ(spec->action.n, loaded.action.n);
  EXPECT_EQ(spec->tiers, loaded.tiers);
  EXPECT_EQ(spec->num_regions, loaded.num_regions);
  EXPECT_EQ(spec->obs_region_features, loaded.obs_region_features);
  EXPECT_EQ(spec->obs_global_offset, loaded.obs_global_offset);
  EXPECT_EQ(spec->tier_capacity_bytes, loaded.tier_capacity_bytes);
  EXPECT_EQ(spec->tier_migration_gbps, (std::vector<double>{3, 3, 3}));
  EXPECT_EQ(spec->tier_migration_gbps, loaded.tier_migration_gbps);
  EXPECT_EQ(spec->tier_bandwidth_gbps, loaded.tier_bandwidth_gbps);
  // A contention scenario adds a level per tier, known without reading the schedule.
  config->interference = "/nonexistent/schedule.json";
  auto contended = MakeEnvSpec(*config);
  ASSERT_TRUE(contended.ok()) << contended.status();
  EXPECT_EQ(contended->observation.shape, (std::vector<int64_t>{12 * 7 + 3 + 2 + 3}));
  // A capacity override of a tier the machine lacks fails before any profile is read:
  // the profile does not exist, yet the error is the override's.
  config->profiles = {"/nonexistent/profile"};
  config->interference.clear();
  config->tier_capacity_mib = {{"nvm", 100}};
  for (const absl::Status& status :
       {MakeEnvSpec(*config).status(), EnvAssets::Load(*config).status()}) {
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(status.message()),
                HasSubstr("machine disagg has no tier 'nvm' (tiers: ddr, hbm, remote)"));
    EXPECT_EQ(ErrorField(status), "tier_capacity_mib");
  }
  config->tier_capacity_mib.clear();
  config->num_regions = 0;
  EXPECT_EQ(ErrorField(MakeEnvSpec(*config).status()), "num_regions");
}

// tier_capacity_mib shrinks a tier without a machine file (which a remote server would
// need on its own file system); bad overrides name the key and the rule.
TEST(EnvironmentTest, CapacityOverridesByConfigurationKey) {
  EnvFixture f = Make({{"tier_capacity_mib", "hbm:600"}, {"num_regions", "8"}});
  EXPECT_EQ(f.env->spec().tier_capacity_bytes[1], uint64_t{600} << 20);
  ASSERT_TRUE(f.env->Reset(1, {}).ok());
  auto r = f.env->Step(AllOn(*f.env, 1));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->info.refused_regions.empty());
  EXPECT_LE(r->info.tier_used_bytes[1], uint64_t{600} << 20);

  for (const auto& [value, message] : std::vector<std::pair<std::string, std::string>>{
           {"hbm", "'hbm' is not TIER:MIB"},
           {":5", "':5' is not TIER:MIB"},
           {"hbm:0", "config key 'tier_capacity_mib'"},
           {"hbm:1,hbm:2", "tier 'hbm' given twice"}}) {
    auto bad = ParseEnvConfig({{"profiles", "x"}, {"tier_capacity_mib", value}});
    ASSERT_FALSE(bad.ok()) << value;
    EXPECT_THAT(std::string(bad.status().message()), HasSubstr(message)) << value;
  }
  auto config = ParseEnvConfig(
      {{"profiles", SmallProfileDir("lulesh", "knl")}, {"tier_capacity_mib", "remote:100"}});
  ASSERT_TRUE(config.ok());
  auto unknown = EnvAssets::Load(*config);
  ASSERT_FALSE(unknown.ok());
  EXPECT_THAT(std::string(unknown.status().message()),
              HasSubstr("has no tier 'remote' (tiers: ddr, hbm)"));
  // Every episode starts on the default tier: it must hold the footprint.
  config = ParseEnvConfig(
      {{"profiles", SmallProfileDir("lulesh", "knl")}, {"tier_capacity_mib", "ddr:100"}});
  ASSERT_TRUE(config.ok());
  auto small = EnvAssets::Load(*config);
  ASSERT_FALSE(small.ok());
  EXPECT_THAT(std::string(small.status().message()),
              HasSubstr("does not fit the default tier 'ddr'"));
}

// A calibration file (tiergym calibrate) sets the roofline model's compute overlap, tier
// overlap, queue strength and fit span: each changes the episode's rewards.
TEST(EnvironmentTest, CalibrationFileSetsTheRooflineOverlap) {
  // queue_fitted: a queueing fit that may have fitted the strength 0 (none: the strength
  // is read from the profile, the default).
  auto write = [](double overlap, double tier_overlap = 1.0, double queue_strength = 0,
                  bool queue_fitted = false, std::optional<uint64_t> fit_span = std::nullopt) {
    Calibration c;
    c.fit_span_samples = fit_span;  // version 6
    c.model = Model::kRoofline;
    c.compute_overlap = overlap;
    c.tier_overlap = tier_overlap;
    if (queue_strength > 0 || queue_fitted) {  // version 4: the curve is named, resolved on
      c.queue_strength = queue_strength;       // reading
      c.queue_like = "xeonmax:ddr";
      c.queue_shape = TierSpec{};
    }
    const std::string path =
        StrCat(TestRoot(), "/calibration-", overlap, "-", tier_overlap, "-", queue_strength,
               queue_fitted ? "-fitted" : "", "-", fit_span.value_or(0), ".json");
    std::ofstream(path) << FormatCalibration(c);
    return path;
  };
  // Half the regions on hbm: a mix, where the overlap matters.
  auto episode = [](ConfigMap keys) {
    keys["model"] = "roofline";
    keys["num_regions"] = "8";
    EnvFixture f = Make(keys);
    EXPECT_TRUE(f.env->Reset(1, {}).ok());
    double ret = 0;
    for (bool done = false; !done;) {
      auto r = f.env->Step(Action{{0, 1, 0, 1, 0, 1, 0, 1}});
      EXPECT_TRUE(r.ok()) << r.status();
      if (!r.ok()) break;
      ret += r->reward;
      done = r->terminated;
    }
    return ret;
  };
  const double prior = episode({});
  EXPECT_EQ(episode({{"calibration", write(0.5)}}), prior);  // the prior itself
  EXPECT_NE(episode({{"calibration", write(1.0)}}), prior);
  // The tier overlap and the queue strength enter the environment's estimates too (they
  // were once dropped: only the compute overlap was applied), each on its own.
  const double tiers = episode({{"calibration", write(0.5, 0.6)}});
  const double queue = episode({{"calibration", write(0.5, 1.0, 1.5)}});
  EXPECT_NE(tiers, prior);
  EXPECT_NE(queue, prior);
  EXPECT_NE(queue, tiers);
  // Through one ProfileCache, calibrations that differ only in the tier overlap or the
  // queue strength are other estimators (the cache's key holds every calibrated term; with
  // the compute overlap alone in it they shared one index), the same calibration twice one.
  ProfileCache cache;
  auto cached = [&](const std::string& calibration) {
    auto config = ParseEnvConfig({{"profiles", SmallProfileDir("lulesh", "knl")},
                                  {"model", "roofline"},
                                  {"calibration", calibration}});
    EXPECT_TRUE(config.ok()) << config.status();
    auto assets = EnvAssets::Load(*config, &cache);
    EXPECT_TRUE(assets.ok()) << assets.status();
    return *assets;
  };
  const auto plain = cached(write(0.5));
  const size_t one = cache.MemoryBytes();
  ASSERT_GT(one, 0u);
  const auto again = cached(write(0.5));
  EXPECT_EQ(cache.MemoryBytes(), one);
  const auto tier = cached(write(0.5, 0.6));
  EXPECT_EQ(cache.MemoryBytes(), 2 * one);
  const auto queued = cached(write(0.5, 1.0, 1.5));
  EXPECT_EQ(cache.MemoryBytes(), 3 * one);
  // A fitted strength 0 is not the default's strength read from the profile: another
  // key (knl's two runs read 0, so the estimates agree; a queueing profile's would not).
  const auto flat = cached(write(0.5, 1.0, 0, true));
  EXPECT_EQ(cache.MemoryBytes(), 4 * one);
  EXPECT_EQ(episode({{"calibration", write(0.5, 1.0, 0, true)}}), prior);
  // The fit span the calibration was fitted with is the one its estimates use (on a
  // profile whose phases hold more than a block: the small knl profile's hold one).
  const ConfigMap spans = {{"profiles", SmallProfileDir("hotset", "disagg")},
                           {"machine", "disagg"}};
  auto with = [&](const std::string& calibration) {
    ConfigMap keys = spans;
    keys["calibration"] = calibration;
    return episode(keys);
  };
  const double unspanned = episode(spans);
  EXPECT_NE(with(write(0.5, 1.0, 0, false, 2048)), unspanned);
  EXPECT_EQ(with(write(0.5, 1.0, 0, false, 0)), unspanned);
  const auto spanned = cached(write(0.5, 1.0, 0, false, 2048));
  EXPECT_EQ(cache.MemoryBytes(), 5 * one);
  // So are the other options it records (version 7): the file's, not the defaults.
  auto recorded = [&](const std::string& name, EstimatorOptions fitted) {
    Calibration c;
    c.model = Model::kRoofline;
    c.tier_overlap = 1.0;  // write()'s
    c.options = RecordedOptions(fitted);
    const std::string path = StrCat(TestRoot(), "/calibration-options-", name, ".json");
    std::ofstream(path) << FormatCalibration(c);
    return path;
  };
  EstimatorOptions big_blocks;
  big_blocks.block_samples = 4096;
  EXPECT_EQ(with(recorded("defaults", EstimatorOptions{})), with(write(0.5)));
  EXPECT_NE(with(recorded("blocks", big_blocks)), with(write(0.5)));
  const auto blocks = cached(recorded("blocks", big_blocks));
  EXPECT_EQ(cache.MemoryBytes(), 6 * one);
  EstimatorOptions windowed;
  windowed.window_instructions = 2'000'000;
  const absl::Status window = [&] {
    auto config = ParseEnvConfig({{"profiles", SmallProfileDir("lulesh", "knl")},
                                  {"model", "roofline"},
                                  {"calibration", recorded("window", windowed)}});
    EXPECT_TRUE(config.ok()) << config.status();
    return EnvAssets::Load(*config).status();
  }();
  EXPECT_THAT(std::string(window.message()),
              HasSubstr("was fitted with a window of 2000000 instructions, but config key "
                        "'window_instructions' is 1000000"));
  // A calibration fitted on another machine is refused, naming both.
  const absl::Status machine = [&] {
    Calibration c;
    c.model = Model::kRoofline;
    c.machine = "disagg";
    const std::string path = TestRoot() + "/calibration-on-disagg.json";
    std::ofstream(path) << FormatCalibration(c);
    auto config = ParseEnvConfig({{"profiles", SmallProfileDir("lulesh", "knl")},
                                  {"model", "roofline"},
                                  {"calibration", path}});
    EXPECT_TRUE(config.ok()) << config.status();
    return EnvAssets::Load(*config).status();
  }();
  EXPECT_THAT(std::string(machine.message()), HasSubstr("fitted on machine 'disagg', not 'knl'"));

  auto load = [](ConfigMap keys) {
    keys["profiles"] = SmallProfileDir("lulesh", "knl");
    auto config = ParseEnvConfig(keys);
    EXPECT_TRUE(config.ok()) << config.status();
    return EnvAssets::Load(*config).status();
  };
  const absl::Status missing =
      load({{"calibration", TestRoot() + "/none.json"}, {"model", "roofline"}});
  EXPECT_THAT(std::string(missing.message()), HasSubstr("config key 'calibration'"));
  const absl::Status other_model = load({{"calibration", write(0.7)}});  // model paper
  EXPECT_THAT(std::string(other_model.message()),
              HasSubstr("fitted for the roofline model, but config key 'model' is paper"));
}

TEST(EnvironmentTest, ThreeTiersAndTheConcurrentModel) {
  EnvFixture f = Make({{"profiles", SmallProfileDir("minife", "disagg")},
                       {"machine", "disagg"},
                       {"model", "concurrent"}});
  EXPECT_EQ(f.env->spec().action.n, 3);
  ASSERT_TRUE(f.env->Reset(1, {}).ok());
  double ret = 0;
  for (bool done = false; !done;) {
    auto r = f.env->Step(AllOn(*f.env, 2));  // all remote: slower
    ASSERT_TRUE(r.ok());
    ret += r->reward;
    done = r->terminated;
  }
  EXPECT_LT(ret, 0);
}

TEST(EnvironmentTest, ContentionScenarioSlowsTheSharedTierAndIsObserved) {
  const std::string schedule =
      fs::temp_directory_path() / ("scenario-" + std::to_string(getpid()) + ".json");
  {
    std::ofstream(schedule) << R"({"sensitivity": {"curves": ")" << TIERGYM_SOURCE_DIR
                            << R"(/estimator/contention/data/curves.csv"},
      "schedule": [{"tier": "ddr", "from": 0.5, "to": 1.0,
                    "co_runners": [{"bandwidth_gbps": 30, "read_pct": 80}]}]})";
  }
  EnvFixture plain = Make({{"num_regions", "8"}});
  EnvFixture busy = Make({{"num_regions", "8"}, {"interference", schedule}});
  const int64_t base_len = plain.env->spec().observation.shape[0];
  EXPECT_EQ(busy.env->spec().observation.shape[0], base_len + 2);  // a level per tier
  auto run = [](Environment& env, int tier, std::vector<float>* late_obs) {
    EXPECT_TRUE(env.Reset(1, {}).ok());
    double ret = 0, total = 0;
    for (bool done = false; !done;) {
      auto r = env.Step(Action{std::vector<int64_t>(8, tier)});
      EXPECT_TRUE(r.ok()) << r.status();
      ret += r->reward;
      total = r->info.default_total_ns;
      done = r->terminated;
      if (r->info.step == 70 && late_obs) *late_obs = r->observation;
    }
    return std::make_pair(ret, total);
  };
  std::vector<float> obs;
  const auto [plain_ret, plain_total] = run(*plain.env, 1, nullptr);
  const auto [busy_ret, busy_total] = run(*busy.env, 1, &obs);
  EXPECT_GT(busy_total, plain_total);                      // the default run (all ddr) is slowed
  EXPECT_GT(busy_ret, plain_ret);                          // so escaping ddr gains more
  EXPECT_NEAR(run(*busy.env, 0, nullptr).first, 0, 1e-9);  // staying gains nothing
  ASSERT_EQ(obs.size(), static_cast<size_t>(base_len + 2));
  EXPECT_NEAR(obs[base_len], 30.0f / 90.0f, 1e-6);  // ddr: 30 of its 90 GB/s
  EXPECT_EQ(obs[base_len + 1], 0.0f);               // hbm: nobody
  fs::remove(schedule);
}

}  // namespace
}  // namespace tiergym::env

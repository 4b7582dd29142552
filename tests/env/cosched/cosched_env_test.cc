#include "env/cosched/cosched_env.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>

#include "env/environment.h"
#include "estimator/contention/contention_model.h"
#include "estimator/contention/sensitivity_csv.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/test_root.h"
#include "traces/base/field_status.h"

namespace tiergym::env {
namespace {

using ::testing::HasSubstr;
using testing::SmallProfileDir;
using testing::TestRoot;

std::string Curves() {
  return std::string(TIERGYM_SOURCE_DIR) + "/estimator/contention/data/curves.csv";
}

absl::StatusOr<std::unique_ptr<CoschedEnv>> MakeNode(ConfigMap keys) {
  if (!keys.count("sensitivity")) keys["sensitivity"] = Curves();
  absl::StatusOr<CoschedConfig> config = ParseCoschedConfig(keys);
  if (!config.ok()) return config.status();
  absl::StatusOr<std::shared_ptr<const CoschedAssets>> assets = CoschedAssets::Load(*config);
  if (!assets.ok()) return assets.status();
  return CoschedEnv::Create(*assets);
}

std::unique_ptr<CoschedEnv> MustMakeNode(ConfigMap keys) {
  auto node = MakeNode(std::move(keys));
  EXPECT_TRUE(node.ok()) << node.status();
  return node.ok() ? *std::move(node) : nullptr;
}

// A random action of `spec`'s action space.
Action RandomAction(const EnvSpec& spec, std::mt19937_64& rng) {
  Action a;
  if (spec.action.kind == Space::kDiscrete) {
    a.values.push_back(static_cast<int64_t>(rng() % static_cast<uint64_t>(spec.action.n)));
  } else {
    for (int64_t r = 0; r < spec.action.shape[0]; ++r) {
      a.values.push_back(static_cast<int64_t>(rng() % static_cast<uint64_t>(spec.action.n)));
    }
  }
  return a;
}

// Each region's tier, read back from a tenant observation (feature 0: tier / (tiers - 1)).
std::vector<int> TiersOf(const EnvSpec& spec, const std::vector<float>& obs) {
  std::vector<int> tiers;
  const auto n = static_cast<float>(spec.tiers.size() - 1);
  for (int r = 0; r < spec.num_regions; ++r) {
    tiers.push_back(
        static_cast<int>(std::lround(obs[static_cast<size_t>(r * spec.obs_region_features)] * n)));
  }
  return tiers;
}

// --- One tenant is the single-application environment ---------------------------------------

struct Case {
  ConfigMap keys;
  uint64_t seed;
};

TEST(CoschedEnvTest, OneTenantReproducesTheSingleApplicationEnvironmentBitForBit) {
  const std::string lulesh = SmallProfileDir("lulesh", "knl");
  const std::string minife = SmallProfileDir("minife", "knl");
  const std::vector<Case> cases = {
      {{{"num_regions", "16"}, {"steps", "20"}}, 1},
      {{{"num_regions", "8"}, {"steps", "12"}, {"model", "concurrent"}}, 2},  // index walk
      {{{"num_regions", "32"}, {"action_mode", "keep"}, {"tier_capacity_mib", "hbm:300"}}, 3},
      {{{"num_regions", "16"}, {"action_mode", "move"}, {"observation", "normalized"}}, 4},
      {{{"num_regions", "24"}, {"steps", "0"}, {"tier_capacity_mib", "hbm:200"}}, 5},
  };
  for (const Case& c : cases) {
    for (const std::string& profile : {lulesh, minife}) {
      SCOPED_TRACE(ConfigValueText(c.keys.begin()->second) + " " + profile);
      ConfigMap single = c.keys;
      single["profiles"] = profile;
      auto config = ParseEnvConfig(single);
      ASSERT_TRUE(config.ok()) << config.status();
      auto assets = EnvAssets::Load(*config);
      ASSERT_TRUE(assets.ok()) << assets.status();
      std::unique_ptr<Environment> env = *Environment::Create(*assets);
      ConfigMap cosched = c.keys;
      cosched["tenants"] = profile;
      std::unique_ptr<CoschedEnv> node = MustMakeNode(cosched);
      ASSERT_NE(node, nullptr);
      const EnvSpec& spec = env->spec();
      ASSERT_EQ(node->assets().tenant_spec().observation.shape[0],
                spec.observation.shape[0] + static_cast<int64_t>(spec.tiers.size()));

      auto first = env->Reset(c.seed, {});
      auto node_first = node->Reset(c.seed);
      ASSERT_TRUE(first.ok() && node_first.ok());
      std::mt19937_64 rng(c.seed);
      int steps = 0;
      for (bool done = false; !done; ++steps) {
        const Action action = RandomAction(spec, rng);
        auto a = env->Step(action);
        auto b = node->Step({action});
        ASSERT_TRUE(a.ok()) << a.status();
        ASSERT_TRUE(b.ok()) << b.status();
        const TenantStep& t = b->tenants[0];
        ASSERT_EQ(t.reward, a->reward) << "step " << steps;  // bit for bit
        ASSERT_EQ(t.info.interval_ns, a->info.interval_ns);
        ASSERT_EQ(t.info.migration_ns, a->info.migration_ns);
        ASSERT_EQ(t.info.refused_regions, a->info.refused_regions);
        ASSERT_EQ(t.info.elapsed_ns, a->info.elapsed_ns);
        if (!a->terminated) {  // in the last step the tenant has left: its mask differs
          ASSERT_EQ(t.info.action_mask, a->info.action_mask) << steps;
        }
        ASSERT_EQ(t.terminated, a->terminated);
        ASSERT_EQ(b->done, a->terminated);
        const std::vector<float> prefix(t.observation.begin(),
                                        t.observation.begin() + spec.observation.shape[0]);
        // The same observation, but for the fill in the last one: the tenant has left.
        const auto fill = static_cast<size_t>(spec.obs_global_offset);
        for (size_t o = 0; o < prefix.size(); ++o) {
          if (a->terminated && o >= fill && o < fill + spec.tiers.size()) {
            ASSERT_EQ(prefix[o], 0.0f);
            continue;
          }
          ASSERT_EQ(prefix[o], a->observation[o]) << "step " << steps << " feature " << o;
        }
        EXPECT_EQ(t.slowdown, std::vector<double>(spec.tiers.size(), 1.0));  // no co-runner
        done = a->terminated;
      }
      EXPECT_GT(steps, 1);
    }
  }
}

// --- Contention ----------------------------------------------------------------------------

// The first tenant's steps on the nodes lulesh; lulesh, minife; lulesh, minife, minife;
// lulesh, minife, minife, lulesh, every tenant slot with its own random actions (the same
// in every node; none with random = false: everything stays on DDR), `keys` added.
std::vector<std::vector<TenantStep>> FirstTenantOnGrowingNodes(uint64_t seed, bool random,
                                                               const ConfigMap& keys) {
  const std::string lulesh = SmallProfileDir("lulesh", "knl");
  const std::string minife = SmallProfileDir("minife", "knl");
  // Capacity to spare: no move is refused, so every tenant's placement is what its actions
  // say whatever the others do, and only the co-runners change.
  ConfigMap base = {{"num_regions", "16"}, {"steps", "15"}, {"tier_capacity_mib", "hbm:65536"}};
  for (const auto& [k, v] : keys) base[k] = v;
  const std::vector<std::vector<std::string>> nodes = {
      {lulesh}, {lulesh, minife}, {lulesh, minife, minife}, {lulesh, minife, minife, lulesh}};
  std::mt19937_64 rng(seed);
  std::vector<std::vector<Action>> actions(4, std::vector<Action>(15));
  std::unique_ptr<CoschedEnv> probe = MustMakeNode([&] {
    ConfigMap k = base;
    k["tenants"] = lulesh;
    return k;
  }());
  std::vector<std::vector<TenantStep>> first(nodes.size());
  if (probe == nullptr) return first;
  for (auto& seq : actions) {
    for (Action& a : seq) {
      if (random) a = RandomAction(probe->assets().tenant_spec(), rng);
    }
  }
  for (size_t n = 0; n < nodes.size(); ++n) {
    ConfigMap k = base;
    k["tenants"] = ConfigValue(ConfigValue::List(nodes[n]));
    std::unique_ptr<CoschedEnv> node = MustMakeNode(k);
    if (node == nullptr) return first;
    EXPECT_TRUE(node->Reset(seed).ok());
    for (int s = 0;; ++s) {
      std::vector<Action> step_actions(nodes[n].size());
      for (size_t i = 0; i < nodes[n].size(); ++i) step_actions[i] = actions[i][s];
      auto r = node->Step(step_actions);
      EXPECT_TRUE(r.ok()) << r.status();
      if (!r.ok()) return first;
      for (const TenantStep& t : r->tenants) {
        for (double f : t.slowdown) EXPECT_GE(f, 1.0);
        EXPECT_TRUE(t.info.refused_regions.empty());
      }
      first[n].push_back(r->tenants[0]);
      if (r->done) break;
    }
  }
  return first;
}

bool Contended(const std::vector<std::vector<TenantStep>>& first) {
  for (const auto& node : first) {
    for (const TenantStep& t : node) {
      for (double f : t.slowdown) {
        if (f > 1.0) return true;
      }
    }
  }
  return false;
}

TEST(CoschedEnvTest, MoreContentionNeverMakesATenantFasterInOnePass) {
  // One pass reads the co-runners at their solo bandwidth: a co-runner more only adds
  // bandwidth, whatever the placements.
  bool contended = false;
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    const auto first = FirstTenantOnGrowingNodes(seed, true, {{"contention_max_passes", "1"}});
    contended = contended || Contended(first);
    for (size_t n = 1; n < first.size(); ++n) {
      ASSERT_EQ(first[n].size(), first[0].size());
      for (size_t s = 0; s < first[n].size(); ++s) {
        EXPECT_GE(first[n][s].info.interval_ns, first[n - 1][s].info.interval_ns * (1 - 1e-12))
            << "seed " << seed << " node " << n << " step " << s;
      }
    }
  }
  EXPECT_TRUE(contended) << "the co-runners never slowed the first tenant: a vacuous test";
}

TEST(CoschedEnvTest, MoreContentionNeverMakesATenantFasterOnOneSharedTier) {
  // At the fixed point, every tenant on DDR: a newcomer slows the others there, but what
  // they lose in bandwidth it more than brings.
  const auto first = FirstTenantOnGrowingNodes(1, false, {});
  EXPECT_TRUE(Contended(first));
  for (size_t n = 1; n < first.size(); ++n) {
    ASSERT_EQ(first[n].size(), first[0].size());
    for (size_t s = 0; s < first[n].size(); ++s) {
      EXPECT_GE(first[n][s].info.interval_ns, first[n - 1][s].info.interval_ns * (1 - 1e-12))
          << "node " << n << " step " << s;
      EXPECT_GE(first[n][s].interference_gbps[0], first[n - 1][s].interference_gbps[0])
          << "node " << n << " step " << s;
    }
  }
}

TEST(CoschedEnvTest, ATenantIsFasterAmongMoreCoRunnersOnlyWhereTheyLoadItsTiersLess) {
  // At the fixed point a newcomer that slows a co-runner on one tier also lowers that
  // co-runner's bandwidth on the others (it runs slower), so a tenant using those may be
  // faster among more co-runners, as on a real node. What must hold: its slowdown on a
  // tier never falls unless the co-runners' bandwidth there fell (every read share 100 %:
  // the curves are non-decreasing in it), and it is never faster unless some tier's fell.
  bool contended = false;
  int indirect = 0;
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    const auto first = FirstTenantOnGrowingNodes(seed, true, {});
    contended = contended || Contended(first);
    for (size_t n = 1; n < first.size(); ++n) {
      ASSERT_EQ(first[n].size(), first[0].size());
      for (size_t s = 0; s < first[n].size(); ++s) {
        const TenantStep& more = first[n][s];
        const TenantStep& fewer = first[n - 1][s];
        bool some_tier_less_loaded = false;
        for (size_t d = 0; d < more.slowdown.size(); ++d) {
          if (more.interference_gbps[d] >= fewer.interference_gbps[d]) {
            EXPECT_GE(more.slowdown[d], fewer.slowdown[d])
                << "seed " << seed << " node " << n << " step " << s << " tier " << d;
          } else {
            some_tier_less_loaded = true;
          }
        }
        if (more.info.interval_ns < fewer.info.interval_ns * (1 - 1e-12)) {
          EXPECT_TRUE(some_tier_less_loaded) << "seed " << seed << " node " << n << " step " << s;
          ++indirect;
        }
      }
    }
  }
  EXPECT_TRUE(contended) << "the co-runners never slowed the first tenant: a vacuous test";
  std::cout << indirect << " steps where a co-runner more made the first tenant faster\n";
}

TEST(CoschedEnvTest, TwinTenantsSlowEachOtherAlikeToTheLastStep) {
  // Two tenants of one profile with the same actions are symmetric in every step, the last
  // included (the first to leave still ran in it and still counts as a co-runner).
  const std::string lulesh = SmallProfileDir("lulesh", "knl");
  std::unique_ptr<CoschedEnv> node = MustMakeNode({{"tenants", ConfigValue::List{lulesh, lulesh}},
                                                   {"num_regions", "8"},
                                                   {"steps", "6"},
                                                   {"tier_capacity_mib", "hbm:65536"}});
  ASSERT_NE(node, nullptr);
  ASSERT_TRUE(node->Reset(1).ok());
  std::mt19937_64 rng(1);
  for (bool done = false; !done;) {
    const Action action = RandomAction(node->assets().tenant_spec(), rng);
    auto r = node->Step({action, action});
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->tenants[0].slowdown, r->tenants[1].slowdown) << r->step;
    EXPECT_GT(*std::max_element(r->tenants[1].slowdown.begin(), r->tenants[1].slowdown.end()), 1.0)
        << r->step;
    EXPECT_EQ(r->tenants[0].info.interval_ns, r->tenants[1].info.interval_ns) << r->step;
    EXPECT_EQ(r->tenants[0].reward, r->tenants[1].reward) << r->step;
    done = r->done;
  }
}

// The bytes tenant i moved on each tier in the step (bandwidth x the interval time its
// co-runners saw, which is its interval to the fixed point's tolerance).
std::vector<double> BytesMoved(const TenantStep& t) {
  std::vector<double> bytes;
  for (double gbps : t.bandwidth_gbps) bytes.push_back(gbps * t.info.interval_ns);
  return bytes;
}

TEST(CoschedEnvTest, EachStepsSlowdownsAreTheFixedPointOfTheCoRunnersSlowedBandwidth) {
  // lulesh and minife on DDR, the same placement in three nodes: lulesh alone (its bytes
  // per tier), both at the fixed point, both with one pass at the solo bandwidths.
  const std::string lulesh = SmallProfileDir("lulesh", "knl");
  const std::string minife = SmallProfileDir("minife", "knl");
  const ConfigMap base = {{"num_regions", "8"}, {"steps", "6"}, {"tier_capacity_mib", "hbm:65536"}};
  auto run = [&](std::vector<std::string> tenants, std::string passes) {
    ConfigMap k = base;
    k["tenants"] = ConfigValue(ConfigValue::List(tenants));
    k["contention_max_passes"] = passes;
    k["tenant_read_pct"] = tenants.size() == 1 ? ConfigValue(ConfigValue::List{"65"})
                                               : ConfigValue(ConfigValue::List{"65", "85"});
    std::unique_ptr<CoschedEnv> node = MustMakeNode(k);
    std::vector<NodeStep> steps;
    if (node == nullptr) return steps;
    EXPECT_TRUE(node->Reset(1).ok());
    for (bool done = false; !done;) {
      auto r = node->Step(std::vector<Action>(tenants.size()));
      EXPECT_TRUE(r.ok()) << r.status();
      if (!r.ok()) break;
      steps.push_back(*r);
      done = r->done;
    }
    return steps;
  };
  const std::vector<NodeStep> alone = run({lulesh}, "50");
  const std::vector<NodeStep> fixed = run({lulesh, minife}, "50");
  const std::vector<NodeStep> once = run({lulesh, minife}, "1");
  ASSERT_EQ(alone.size(), fixed.size());
  ASSERT_EQ(once.size(), fixed.size());
  // The curves of both applications, to check the slowdowns against.
  absl::StatusOr<std::vector<contention::SensitivityFamily>> families =
      contention::ReadCurvesCsv(Curves());
  ASSERT_TRUE(families.ok()) << families.status();
  auto model = [&](const std::string& app) {
    auto m = contention::ContentionModel::Create(*contention::FindFamily(*families, app),
                                                 *contention::ParseMethod("linear/all/right"));
    EXPECT_TRUE(m.ok());
    return *m;
  };
  const contention::ContentionModel lulesh_model = model("lulesh");
  bool iterated = false, one_pass_off = false, shorter_co_runner = false;
  for (size_t s = 0; s < fixed.size(); ++s) {
    const TenantStep& f = fixed[s].tenants[0];
    const TenantStep& o = once[s].tenants[0];
    const TenantStep& co = fixed[s].tenants[1];
    EXPECT_TRUE(fixed[s].contention_converged) << s;
    iterated = iterated || fixed[s].contention_passes > 3;
    EXPECT_EQ(once[s].contention_passes, 1);
    EXPECT_FALSE(once[s].contention_converged);
    // The reported slowdown is the curves' answer to the reported interference at the
    // co-runner's read share (85 %): the co-runner's bandwidth, over the part of lulesh's
    // interval it overlaps (a tenant whose interval ends first waits at the barrier).
    const double overlap_f = std::min(1.0, co.info.interval_ns / f.info.interval_ns);
    const double overlap_co = std::min(1.0, f.info.interval_ns / co.info.interval_ns);
    shorter_co_runner = shorter_co_runner || overlap_f < 0.9;
    for (size_t d = 0; d < f.slowdown.size(); ++d) {
      EXPECT_NEAR(f.interference_gbps[d], co.bandwidth_gbps[d] * overlap_f,
                  1e-3 * f.interference_gbps[d] + 1e-12)
          << s;
      EXPECT_NEAR(co.interference_gbps[d], f.bandwidth_gbps[d] * overlap_co,
                  1e-3 * co.interference_gbps[d] + 1e-12)
          << s;
      if (f.interference_gbps[d] <= 0) continue;
      EXPECT_EQ(f.slowdown[d], lulesh_model.Slowdown({{{f.interference_gbps[d], 85.0}}})) << s;
    }
    // At the fixed point the co-runners' bandwidth is their bytes over their slowed
    // interval: bandwidth x interval gives the bytes lulesh moves alone, to the tolerance.
    // One pass reads it at the solo interval, which the slowed interval exceeds.
    const std::vector<double> bytes = BytesMoved(alone[s].tenants[0]);
    const std::vector<double> at_fixed = BytesMoved(f), at_once = BytesMoved(o);
    for (size_t d = 0; d < bytes.size(); ++d) {
      if (bytes[d] <= 0) continue;
      EXPECT_NEAR(at_fixed[d] / bytes[d], 1.0, 1e-3) << s;
      one_pass_off = one_pass_off || at_once[d] / bytes[d] > 1.01;
    }
    // Slowed co-runners load each other less than at their solo bandwidth.
    EXPECT_LE(f.info.interval_ns, o.info.interval_ns * (1 + 1e-12)) << s;
    EXPECT_GE(f.info.interval_ns, alone[s].tenants[0].info.interval_ns) << s;
  }
  EXPECT_TRUE(iterated) << "no step needed more than two passes: the test proves little";
  EXPECT_TRUE(shorter_co_runner) << "the intervals were alike: the overlap went untested";
  EXPECT_TRUE(one_pass_off) << "one pass agreed with the fixed point: nothing was contended";
}

TEST(CoschedEnvTest, TheCoRunnersReadShareChoosesTheCurves) {
  const std::string lulesh = SmallProfileDir("lulesh", "knl");
  auto first_slowdown = [&](const std::string& read_pct) {
    std::unique_ptr<CoschedEnv> node = MustMakeNode({{"tenants", ConfigValue::List{lulesh, lulesh}},
                                                     {"tenant_read_pct", "100," + read_pct},
                                                     {"num_regions", "4"},
                                                     {"steps", "4"}});
    EXPECT_NE(node, nullptr);
    if (node == nullptr) return 0.0;
    EXPECT_TRUE(node->Reset(1).ok());
    auto r = node->Step({{}, {}});
    EXPECT_TRUE(r.ok());
    return r.ok() ? r->tenants[0].slowdown[0] : 0.0;
  };
  const double all_reads = first_slowdown("100"), mixed = first_slowdown("50");
  EXPECT_GT(all_reads, 1.0);
  EXPECT_GT(mixed, 1.0);
  EXPECT_NE(all_reads, mixed);
}

TEST(CoschedEnvTest, CapacityIsNeverExceededAndDepartedTenantsFreeIt) {
  const std::string lulesh = SmallProfileDir("lulesh", "knl");
  const std::string minife = SmallProfileDir("minife", "knl");
  for (const char* mode : {"placement", "keep", "move"}) {
    std::unique_ptr<CoschedEnv> node =
        MustMakeNode({{"tenants", ConfigValue::List{lulesh, minife, lulesh}},
                      {"tenant_start_steps", "0,3,7"},
                      {"num_regions", "16"},
                      {"steps", "10"},
                      {"action_mode", mode},
                      {"tier_capacity_mib", "hbm:700"}});
    ASSERT_NE(node, nullptr);
    const EnvSpec& spec = node->assets().tenant_spec();
    const uint64_t hbm = spec.tier_capacity_bytes[1];
    std::mt19937_64 rng(7);
    auto r = node->Reset(7);
    ASSERT_TRUE(r.ok());
    int refusals = 0, steps = 0;
    while (!r->done) {
      std::vector<Action> actions;
      for (size_t i = 0; i < 3; ++i) actions.push_back(RandomAction(spec, rng));
      r = node->Step(actions);
      ASSERT_TRUE(r.ok()) << r.status();
      ++steps;
      ASSERT_LE(r->tier_used_bytes[1], hbm);
      // The node's used bytes are the running tenants' regions, where their observations
      // say they are.
      std::vector<uint64_t> used(spec.tiers.size(), 0);
      for (size_t i = 0; i < 3; ++i) {
        const TenantStep& t = r->tenants[i];
        refusals += static_cast<int>(t.info.refused_regions.size());
        if (t.waiting || t.terminated) continue;
        const std::vector<int> tiers = TiersOf(spec, t.observation);
        for (int reg = 0; reg < spec.num_regions; ++reg) {
          used[static_cast<size_t>(tiers[static_cast<size_t>(reg)])] +=
              spec.region_bounds[(i == 1 ? 1 : 0) * 2 * spec.num_regions + 2 * reg + 1] -
              spec.region_bounds[(i == 1 ? 1 : 0) * 2 * spec.num_regions + 2 * reg];
        }
      }
      ASSERT_EQ(used, r->tier_used_bytes) << mode << " node step " << steps;
      if (steps < 3) {
        EXPECT_TRUE(r->tenants[1].waiting);
      }
      if (steps <= 3) {
        EXPECT_EQ(r->tenants[1].reward, 0.0);
      }
    }
    // Starts 0, 3, 7 and 10 intervals each: the last leaves after node step 17.
    EXPECT_EQ(steps, 17) << mode;
    EXPECT_EQ(r->tier_used_bytes, std::vector<uint64_t>(spec.tiers.size(), 0)) << mode;
    EXPECT_GT(refusals, 0) << mode << ": hbm was never full, the test proves nothing";
    EXPECT_FALSE(node->Step({{}, {}, {}}).ok());  // after the end
  }
}

TEST(CoschedEnvTest, IsDeterministicUnderASeed) {
  const std::string lulesh = SmallProfileDir("lulesh", "knl");
  const std::string minife = SmallProfileDir("minife", "knl");
  const ConfigMap keys = {{"tenants", ConfigValue::List{lulesh, minife}},
                          {"start_jitter_steps", "4"},
                          {"num_regions", "8"},
                          {"steps", "8"},
                          {"tier_capacity_mib", "hbm:400"}};
  auto run = [&](uint64_t seed) {
    std::unique_ptr<CoschedEnv> node = MustMakeNode(keys);
    std::vector<double> trace;
    std::mt19937_64 rng(seed);
    auto r = node->Reset(seed);
    for (int guard = 0; r.ok() && !r->done && guard < 100; ++guard) {
      for (const TenantStep& t : r->tenants) {
        trace.push_back(t.reward);
        trace.insert(trace.end(), t.observation.begin(), t.observation.end());
      }
      r = node->Step({RandomAction(node->assets().tenant_spec(), rng),
                      RandomAction(node->assets().tenant_spec(), rng)});
    }
    EXPECT_TRUE(r.ok());
    trace.push_back(r->elapsed_ns);
    trace.push_back(static_cast<double>(r->step));
    return trace;
  };
  EXPECT_EQ(run(11), run(11));
  bool differs = false;
  for (uint64_t seed = 12; seed < 20 && !differs; ++seed) differs = run(seed) != run(11);
  EXPECT_TRUE(differs);
}

// --- Refusals ------------------------------------------------------------------------------

void ExpectRefused(const ConfigMap& keys, const std::string& field, const std::string& text) {
  auto node = MakeNode(keys);
  ASSERT_FALSE(node.ok()) << field;
  EXPECT_EQ(ErrorField(node.status()).value_or(""), field) << node.status();
  EXPECT_THAT(node.status().message(), HasSubstr(text));
}

TEST(CoschedEnvTest, BadConfigurationsAreRefusedNamingTheKey) {
  const std::string lulesh = SmallProfileDir("lulesh", "knl");
  ExpectRefused({{"num_regions", "8"}}, "tenants", "at least one tenant");
  ExpectRefused({{"tenants", lulesh}, {"sensitivity", ""}}, "sensitivity", "required");
  ExpectRefused({{"tenants", lulesh}, {"sensitivity", "/no/such/curves.csv"}}, "sensitivity",
                "no/such");
  ExpectRefused({{"tenants", lulesh}, {"profiles", lulesh}}, "profiles", "tenants");
  ExpectRefused({{"tenants", lulesh}, {"interference", "x.json"}}, "interference", "contend");
  ExpectRefused({{"tenants", ConfigValue::List{lulesh, lulesh}}, {"tenant_start_steps", "1"}},
                "tenant_start_steps", "one each");
  ExpectRefused({{"tenants", lulesh}, {"tenant_start_steps", "-1"}}, "tenant_start_steps",
                "not an integer");
  ExpectRefused({{"tenants", lulesh}, {"sensitivity_method", "nosuch"}}, "sensitivity_method", "");
  ExpectRefused({{"tenants", ConfigValue::List{lulesh, lulesh}}, {"tenant_read_pct", "60"}},
                "tenant_read_pct", "one each");
  ExpectRefused({{"tenants", lulesh}, {"tenant_read_pct", "101"}}, "tenant_read_pct", "");
  ExpectRefused({{"tenants", lulesh}, {"tenant_read_pct", "x"}}, "tenant_read_pct", "");
  ExpectRefused({{"tenants", lulesh}, {"contention_max_passes", "0"}}, "contention_max_passes", "");
  ExpectRefused({{"tenants", lulesh}, {"steps", "x"}}, "steps", "not an integer");
  ExpectRefused({{"tenants", lulesh}, {"tier_capacity_mib", "ddr:1"}}, "tier_capacity_mib",
                "does not fit");
  // A default tier one tenant fits and two do not.
  std::unique_ptr<CoschedEnv> one = MustMakeNode({{"tenants", lulesh}});
  ASSERT_NE(one, nullptr);
  const std::vector<uint64_t>& bounds = one->assets().tenant_spec().region_bounds;
  uint64_t footprint = 0;
  for (size_t i = 0; i + 1 < bounds.size(); i += 2) footprint += bounds[i + 1] - bounds[i];
  const std::string ddr = "ddr:" + std::to_string((footprint * 3 / 2) >> 20);
  EXPECT_TRUE(MakeNode({{"tenants", lulesh}, {"tier_capacity_mib", ddr}}).ok());
  ExpectRefused({{"tenants", ConfigValue::List{lulesh, lulesh}}, {"tier_capacity_mib", ddr}},
                "tier_capacity_mib", "together");
  // Curves without the tenant's application.
  std::filesystem::create_directories(TestRoot());
  const std::string curves = TestRoot() + "/minife_only.csv";
  {
    std::ifstream in(Curves());
    std::ofstream out(curves);
    std::string line;
    std::getline(in, line);
    out << line << "\n";
    while (std::getline(in, line)) {
      if (line.rfind("minife,", 0) == 0) out << line << "\n";
    }
  }
  ExpectRefused({{"tenants", lulesh}, {"sensitivity", curves}}, "sensitivity",
                "no curves for 'lulesh'");
}

TEST(CoschedEnvTest, BadActionsAreRefusedNamingTheTenant) {
  const std::string lulesh = SmallProfileDir("lulesh", "knl");
  std::unique_ptr<CoschedEnv> node = MustMakeNode(
      {{"tenants", ConfigValue::List{lulesh, lulesh}}, {"num_regions", "4"}, {"steps", "5"}});
  ASSERT_NE(node, nullptr);
  EXPECT_EQ(node->Step({{}, {}}).status().code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(node->Reset(1).ok());
  auto wrong_count = node->Step({{}});
  EXPECT_EQ(ErrorField(wrong_count.status()).value_or(""), "actions");
  auto bad = node->Step({Action{{0, 0, 0, 0}}, Action{{0, 5, 0, 0}}});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(ErrorField(bad.status()).value_or(""), HasSubstr("actions[1]"));
  EXPECT_EQ(node->assets().tenant_names(), (std::vector<std::string>{"lulesh", "lulesh#2"}));
  EXPECT_TRUE(node->Step({Action{{1, 1, 1, 1}}, {}}).ok());  // empty: keep
}

TEST(CoschedEnvTest, AWaitingOrDepartedTenantsBadActionIsRefusedNamingIt) {
  const std::string lulesh = SmallProfileDir("lulesh", "knl");
  std::unique_ptr<CoschedEnv> node = MustMakeNode({{"tenants", ConfigValue::List{lulesh, lulesh}},
                                                   {"tenant_start_steps", "0,3"},
                                                   {"num_regions", "4"},
                                                   {"steps", "2"}});
  ASSERT_NE(node, nullptr);
  auto r = node->Reset(1);
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE(r->tenants[1].waiting);
  auto bad = node->Step({Action{{0, 0, 0, 0}}, Action{{0, 7, 0, 0}}});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(ErrorField(bad.status()).value_or(""), HasSubstr("actions[1]"));
  auto short_action = node->Step({{}, Action{{1, 1}}});
  EXPECT_THAT(ErrorField(short_action.status()).value_or(""), HasSubstr("actions[1]"));
  // Refused before anything moved: the first tenant's step still comes, with its action.
  r = node->Step({Action{{1, 1, 1, 1}}, Action{{1, 1, 1, 1}}});  // valid: checked, ignored
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->tenants[0].active);
  EXPECT_FALSE(r->tenants[1].active);
  EXPECT_EQ(r->step, 1u);
  // The first tenant leaves after its two intervals; its bad action is refused too.
  r = node->Step({{}, {}});
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE(r->tenants[0].terminated);
  bad = node->Step({Action{{0, 9, 0, 0}}, {}});
  EXPECT_THAT(ErrorField(bad.status()).value_or(""), HasSubstr("actions[0]"));
  EXPECT_TRUE(node->Step({Action{{0, 0, 0, 0}}, {}}).ok());
}

}  // namespace
}  // namespace tiergym::env

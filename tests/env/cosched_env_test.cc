#include "env/cosched/cosched_env.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>

#include "env/environment.h"
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

TEST(CoschedEnvTest, MoreContentionNeverMakesATenantFaster) {
  const std::string lulesh = SmallProfileDir("lulesh", "knl");
  const std::string minife = SmallProfileDir("minife", "knl");
  // Capacity to spare: no move is refused, so every tenant's placement is what its actions
  // say whatever the others do, and only the co-runners change.
  const ConfigMap base = {
      {"num_regions", "16"}, {"steps", "15"}, {"tier_capacity_mib", "hbm:65536"}};
  const std::vector<std::vector<std::string>> nodes = {
      {lulesh}, {lulesh, minife}, {lulesh, minife, minife}, {lulesh, minife, minife, lulesh}};
  bool contended = false;
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    // One random action sequence per tenant slot, the same in every node.
    std::mt19937_64 rng(seed);
    std::vector<std::vector<Action>> actions(4);
    std::unique_ptr<CoschedEnv> probe = MustMakeNode([&] {
      ConfigMap k = base;
      k["tenants"] = lulesh;
      return k;
    }());
    ASSERT_NE(probe, nullptr);
    for (auto& seq : actions) {
      for (int s = 0; s < 15; ++s) seq.push_back(RandomAction(probe->assets().tenant_spec(), rng));
    }
    std::vector<std::vector<double>> interval_of_first(nodes.size());
    for (size_t n = 0; n < nodes.size(); ++n) {
      ConfigMap k = base;
      k["tenants"] = ConfigValue(ConfigValue::List(nodes[n]));
      std::unique_ptr<CoschedEnv> node = MustMakeNode(k);
      ASSERT_NE(node, nullptr);
      ASSERT_TRUE(node->Reset(seed).ok());
      for (int s = 0;; ++s) {
        std::vector<Action> step_actions(nodes[n].size());
        for (size_t i = 0; i < nodes[n].size(); ++i) step_actions[i] = actions[i][s];
        auto r = node->Step(step_actions);
        ASSERT_TRUE(r.ok()) << r.status();
        for (const TenantStep& t : r->tenants) {
          for (double f : t.slowdown) ASSERT_GE(f, 1.0);
          ASSERT_TRUE(t.info.refused_regions.empty());
        }
        interval_of_first[n].push_back(r->tenants[0].info.interval_ns);
        for (double f : r->tenants[0].slowdown) contended = contended || f > 1.0;
        if (r->done) break;
      }
    }
    for (size_t n = 1; n < nodes.size(); ++n) {
      ASSERT_EQ(interval_of_first[n].size(), interval_of_first[0].size());
      for (size_t s = 0; s < interval_of_first[n].size(); ++s) {
        EXPECT_GE(interval_of_first[n][s], interval_of_first[n - 1][s] * (1 - 1e-12))
            << "seed " << seed << " node " << n << " step " << s;
      }
    }
  }
  EXPECT_TRUE(contended) << "the co-runners never slowed the first tenant: a vacuous test";
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

}  // namespace
}  // namespace tiergym::env

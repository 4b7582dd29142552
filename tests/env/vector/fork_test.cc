// Forking episodes (Environment::Fork, SessionEnv::Fork, VectorEnv::Fork): a fork continues
// bit for bit as the original does under the same actions, for every way of pricing an
// interval (linear costs, the index walk of the concurrent and roofline models); the two
// never reach each other; forks of forks, forks before the first reset and after the end;
// a fork is charged to the provider's memory budget like a session.
#include <malloc.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "env/environment.h"
#include "env/profile_assets.h"
#include "env/provider/placement_provider.h"
#include "env/vector/vector_env.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/env/provider_budget.h"
#include "tests/test_root.h"

namespace tiergym::env {
namespace {

using testing::FreeBytes;
using ::testing::HasSubstr;
using ::tiergym::testing::SmallProfileDir;

std::shared_ptr<const EnvAssets> Assets(const std::string& model) {
  ConfigMap keys{{"profiles", SmallProfileDir("lulesh") + "," + SmallProfileDir("minife")},
                 {"num_regions", "12"},
                 {"steps", "20"},
                 {"model", model},
                 {"tier_capacity_mib", "hbm:128"}};
  absl::StatusOr<EnvConfig> config = ParseEnvConfig(keys);
  EXPECT_TRUE(config.ok()) << config.status();
  absl::StatusOr<std::shared_ptr<const EnvAssets>> assets = EnvAssets::Load(*config);
  EXPECT_TRUE(assets.ok()) << assets.status();
  return *assets;
}

Action RandomAction(const EnvSpec& spec, std::mt19937_64& rng) {
  std::uniform_int_distribution<int64_t> tier(0, spec.action.n - 1);
  Action a;
  for (int r = 0; r < spec.num_regions; ++r) a.values.push_back(tier(rng));
  return a;
}

// Steps both with the same random actions until the episode ends; every result equal,
// bit for bit.
void ExpectSameContinuation(Environment& a, Environment& b, uint64_t seed) {
  std::mt19937_64 rng(seed);
  for (int t = 0;; ++t) {
    const Action action = RandomAction(a.spec(), rng);
    absl::StatusOr<StepResult> x = a.Step(action);
    absl::StatusOr<StepResult> y = b.Step(action);
    ASSERT_TRUE(x.ok() && y.ok()) << x.status() << " " << y.status();
    ASSERT_EQ(x->observation, y->observation) << "step " << t;
    ASSERT_EQ(x->reward, y->reward) << "step " << t;  // bit-identical, not near
    ASSERT_EQ(x->info.elapsed_ns, y->info.elapsed_ns) << "step " << t;
    ASSERT_EQ(x->info.action_mask, y->info.action_mask) << "step " << t;
    ASSERT_EQ(x->info.refused_regions, y->info.refused_regions) << "step " << t;
    ASSERT_EQ(x->terminated, y->terminated);
    if (x->terminated || x->truncated) return;
  }
}

class ForkTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ForkTest, AForkContinuesBitForBitAsTheOriginal) {
  std::unique_ptr<Environment> env = *Environment::Create(Assets(GetParam()));
  ASSERT_TRUE(env->Reset(7, {}).ok());
  std::mt19937_64 rng(1);
  for (int t = 0; t < 6; ++t) ASSERT_TRUE(env->Step(RandomAction(env->spec(), rng)).ok());
  std::unique_ptr<Environment> fork = env->Fork();
  ExpectSameContinuation(*env, *fork, 2);
  // The generator was forked too: the next (unseeded) episodes are the same.
  absl::StatusOr<StepResult> a = env->Reset(std::nullopt, {});
  absl::StatusOr<StepResult> b = fork->Reset(std::nullopt, {});
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->info.profile, b->info.profile);
  EXPECT_EQ(a->observation, b->observation);
  ExpectSameContinuation(*env, *fork, 3);
}

TEST_P(ForkTest, WhatAForkDoesNeverReachesTheOriginal) {
  std::unique_ptr<Environment> env = *Environment::Create(Assets(GetParam()));
  std::unique_ptr<Environment> reference = *Environment::Create(Assets(GetParam()));
  ASSERT_TRUE(env->Reset(3, {}).ok());
  ASSERT_TRUE(reference->Reset(3, {}).ok());
  std::mt19937_64 rng(4);
  for (int t = 0; t < 5; ++t) {
    const Action action = RandomAction(env->spec(), rng);
    ASSERT_TRUE(env->Step(action).ok());
    ASSERT_TRUE(reference->Step(action).ok());
  }
  {
    // A fork that moves everything to the fast tier and runs to the end, then goes away.
    std::unique_ptr<Environment> fork = env->Fork();
    Action all_fast{std::vector<int64_t>(fork->spec().num_regions, 1)};
    for (bool done = false; !done;) {
      absl::StatusOr<StepResult> r = fork->Step(all_fast);
      ASSERT_TRUE(r.ok()) << r.status();
      done = r->terminated;
    }
  }
  ExpectSameContinuation(*env, *reference, 5);  // as if no fork had been made
}

TEST_P(ForkTest, ForksOfForksStayBitIdentical) {
  std::unique_ptr<Environment> env = *Environment::Create(Assets(GetParam()));
  ASSERT_TRUE(env->Reset(11, {}).ok());
  std::vector<std::unique_ptr<Environment>> chain;
  std::mt19937_64 rng(6);
  const Environment* last = env.get();
  for (int i = 0; i < 8; ++i) {  // each a fork of the previous, one step later
    const Action action = RandomAction(env->spec(), rng);
    ASSERT_TRUE(env->Step(action).ok());
    for (auto& c : chain) ASSERT_TRUE(c->Step(action).ok());
    chain.push_back(last->Fork());
    last = chain.back().get();
  }
  for (auto& c : chain) {
    std::unique_ptr<Environment> again = env->Fork();
    ExpectSameContinuation(*again, *c, 8);
  }
}

INSTANTIATE_TEST_SUITE_P(EveryPricer, ForkTest,
                         ::testing::Values("paper", "concurrent", "roofline"),
                         [](const auto& info) { return info.param; });

TEST(ForkStatesTest, AForkBeforeTheFirstResetOrAfterTheEndKeepsThatState) {
  std::unique_ptr<Environment> env = *Environment::Create(Assets("paper"));
  std::unique_ptr<Environment> unreset = env->Fork();
  Action keep{std::vector<int64_t>(env->spec().num_regions, 0)};
  absl::StatusOr<StepResult> early = unreset->Step(keep);
  EXPECT_EQ(early.status().code(), absl::StatusCode::kFailedPrecondition) << early.status();
  ASSERT_TRUE(env->Reset(1, {}).ok());
  for (bool done = false; !done;) done = env->Step(keep)->terminated;
  std::unique_ptr<Environment> ended = env->Fork();
  absl::StatusOr<StepResult> late = ended->Step(keep);
  EXPECT_EQ(late.status().code(), absl::StatusCode::kFailedPrecondition) << late.status();
  ASSERT_TRUE(ended->Reset(2, {}).ok());  // a fork resets as any environment
}

PlacementProviderOptions Budget(uint64_t bytes) {
  PlacementProviderOptions o;
  o.data_dirs = {"/"};  // the test's profile directories
  o.max_asset_bytes = bytes;
  return o;
}

ConfigMap SessionConfig() {
  return {{"profiles", SmallProfileDir("lulesh")}, {"num_regions", "4096"}, {"steps", "10"}};
}

TEST(SessionForkTest, AForkIsChargedToTheBudgetLikeASessionAndGivenBack) {
  const uint64_t budget = uint64_t{64} << 20;
  PlacementProvider provider(Budget(budget));
  const uint64_t one_session =
      provider.EstimateCost(*ParseEnvConfig(SessionConfig())).session_bytes;
  ASSERT_GT(one_session, 0u);
  absl::StatusOr<std::unique_ptr<SessionEnv>> session = provider.Make(SessionConfig());
  ASSERT_TRUE(session.ok()) << session.status();
  ASSERT_TRUE((*session)->Reset(1, {}).ok());
  // Everything but room for two and a half sessions is taken (as by other clients).
  const uint64_t taken = FreeBytes(provider, budget) - (5 * one_session) / 2;
  ASSERT_TRUE(provider.Charge(taken).ok());
  absl::StatusOr<std::unique_ptr<SessionEnv>> a = (*session)->Fork(&provider);
  absl::StatusOr<std::unique_ptr<SessionEnv>> b = (*session)->Fork(&provider);
  ASSERT_TRUE(a.ok() && b.ok()) << a.status() << " " << b.status();
  absl::StatusOr<std::unique_ptr<SessionEnv>> c = (*a)->Fork(&provider);  // a third: no room
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kResourceExhausted) << c.status();
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("a fork is charged as a session"));
  absl::StatusOr<std::unique_ptr<SessionEnv>> d = provider.Make(SessionConfig());  // nor a session
  EXPECT_EQ(d.status().code(), absl::StatusCode::kResourceExhausted) << d.status();
  a->reset();  // a fork gone: its charge given back
  c = (*b)->Fork(&provider);
  ASSERT_TRUE(c.ok()) << c.status();
  provider.Uncharge(taken);
  // Without a budget (the in-process vector environment) forks are not refused.
  absl::StatusOr<std::unique_ptr<SessionEnv>> unbudgeted = (*session)->Fork(nullptr);
  EXPECT_TRUE(unbudgeted.ok()) << unbudgeted.status();
}

// The index walk's episodes hold a PlacementState (a byte per footprint page, counts per
// block and segment): IntervalPricer::EpisodeBytes says how much, as malloc sees it, and a
// session (so a fork) of the concurrent model is charged that on top of what a session of
// the linear pricer is.
TEST(SessionChargeTest, TheIndexWalksPlacementStateIsCharged) {
  std::shared_ptr<const EnvAssets> walk = Assets("concurrent");
  const IntervalPricer& pricer = *walk->profiles()[0].pricer;
  ASSERT_STREQ(pricer.name(), "index walk");
  const size_t said = pricer.EpisodeBytes();
  const size_t before = mallinfo2().uordblks;
  absl::StatusOr<std::unique_ptr<IntervalPricer::Episode>> episode = pricer.NewEpisode();
  ASSERT_TRUE(episode.ok()) << episode.status();
  const size_t allocated = mallinfo2().uordblks - before;
  EXPECT_GE(said, allocated * 9 / 10) << "allocated " << allocated;
  EXPECT_LE(said, allocated * 11 / 10 + 1024) << "allocated " << allocated;
  EXPECT_EQ(Assets("paper")->profiles()[0].pricer->EpisodeBytes(), 0u);

  const uint64_t budget = uint64_t{256} << 20;
  PlacementProvider provider(Budget(budget));
  auto charge_of = [&](const std::string& model) {
    ConfigMap c = SessionConfig();
    c["model"] = model;
    std::unique_ptr<SessionEnv> warm = *provider.Make(c);  // the assets loaded first
    const uint64_t free = FreeBytes(provider, budget);
    std::unique_ptr<SessionEnv> session = *provider.Make(c);
    return free - FreeBytes(provider, budget);
  };
  const uint64_t linear = charge_of("paper"), walked = charge_of("concurrent");
  ConfigMap c = SessionConfig();
  c["model"] = "concurrent";
  absl::StatusOr<std::shared_ptr<const EnvAssets>> assets =
      EnvAssets::Load(*ParseEnvConfig(*provider.Resolve(c)));
  ASSERT_TRUE(assets.ok()) << assets.status();
  const size_t state = (*assets)->profiles()[0].pricer->EpisodeBytes();
  EXPECT_GT(state, 0u);
  EXPECT_NEAR(static_cast<double>(walked), static_cast<double>(linear + state), 2048.0);
}

TEST(VectorForkTest, ForksOfSubEnvironmentsContinueAsTheirOriginals) {
  PlacementProvider provider(Budget(0));
  std::vector<std::unique_ptr<SessionEnv>> envs;
  ConfigMap config{{"profiles", SmallProfileDir("lulesh") + "," + SmallProfileDir("minife")},
                   {"num_regions", "8"},
                   {"steps", "6"}};
  for (int i = 0; i < 3; ++i) envs.push_back(*provider.Make(config));
  VectorEnvOptions options;
  options.autoreset = AutoresetMode::kSameStep;
  std::unique_ptr<VectorEnv> vec = *VectorEnv::Create(std::move(envs), options);
  BatchBuffers out(*vec);
  ASSERT_TRUE(vec->Reset({}, {1, 2, 3}, {}, out.out).ok());
  std::mt19937_64 rng(9);
  std::vector<int64_t> actions(3 * 8);
  auto draw = [&] {
    for (int64_t& a : actions) a = static_cast<int64_t>(rng() % 2);
  };
  for (int t = 0; t < 4; ++t) {
    draw();
    ASSERT_TRUE(vec->Step(actions.data(), actions.size(), out.out).ok());
  }
  const std::vector<int32_t> ids = {2, 0, 2};
  absl::StatusOr<std::unique_ptr<VectorEnv>> forked = vec->Fork(ids, &provider);
  ASSERT_TRUE(forked.ok()) << forked.status();
  BatchBuffers fout(**forked);
  vec->CopyRows(out.out, ids, fout.out);
  for (size_t k = 0; k < ids.size(); ++k) {  // the forks' current rows are the originals'
    for (size_t j = 0; j < vec->ObsSize(); ++j) {
      ASSERT_EQ(fout.obs[k * vec->ObsSize() + j], out.obs[ids[k] * vec->ObsSize() + j]);
    }
  }
  for (int t = 0; t < 12; ++t) {  // past the ends of the episodes (same-step resets)
    draw();
    std::vector<int64_t> theirs;
    for (const int32_t i : ids) {
      theirs.insert(theirs.end(), actions.begin() + i * 8, actions.begin() + (i + 1) * 8);
    }
    ASSERT_TRUE(vec->Step(actions.data(), actions.size(), out.out).ok());
    ASSERT_TRUE((*forked)->Step(theirs.data(), theirs.size(), fout.out).ok());
    for (size_t k = 0; k < ids.size(); ++k) {
      ASSERT_EQ(fout.reward[k], out.reward[ids[k]]) << t;
      ASSERT_EQ(fout.terminated[k], out.terminated[ids[k]]) << t;
      for (size_t j = 0; j < vec->ObsSize(); ++j) {
        ASSERT_EQ(fout.obs[k * vec->ObsSize() + j], out.obs[ids[k] * vec->ObsSize() + j]) << t;
      }
    }
  }
  absl::StatusOr<std::unique_ptr<VectorEnv>> bad = vec->Fork({3}, nullptr);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument) << bad.status();
  EXPECT_THAT(std::string(bad.status().message()),
              HasSubstr("env_ids[0]: 3 is not an environment"));
}

}  // namespace
}  // namespace tiergym::env

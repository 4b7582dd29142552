// The in-process vector environment (env/vector/vector_env.h) against single Environments
// stepped one by one with the server's step_batch semantics: same seeds and actions, same
// observations, rewards, flags and infos, bit for bit, across autoresets, in both modes,
// synchronous and asynchronous, with 1 and 3 threads.
#include "env/vector/vector_env.h"

#include <map>
#include <random>
#include <string>
#include <vector>

#include "env/environment.h"
#include "env/provider/placement_provider.h"
#include "env/vector/make_vector_env.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/test_root.h"
#include "traces/base/field_status.h"

namespace tiergym::env {
namespace {

using ::testing::HasSubstr;
using testing::SmallProfileDir;
using ::testing::StartsWith;

// A configuration of text values, typed as a protocol message would carry them as text.
ConfigMap Typed(const std::map<std::string, std::string>& text) {
  return {text.begin(), text.end()};
}

// Short episodes over two profiles, with a small fast tier so that moves get refused.
std::map<std::string, std::string> Config(const std::string& action_mode = "placement") {
  return {{"profiles", SmallProfileDir("lulesh") + "," + SmallProfileDir("minife")},
          {"num_regions", "12"},
          {"steps", "7"},
          {"action_mode", action_mode},
          {"tier_capacity_mib", "hbm:64"}};
}

// A provider that reads the test's profile directories (as a private server trusts its
// owner).
PlacementProviderOptions Trusting() {
  PlacementProviderOptions o;
  o.data_dirs = {"/"};
  return o;
}

std::vector<std::unique_ptr<SessionEnv>> MakeEnvs(PlacementProvider& provider, int n,
                                                  const std::map<std::string, std::string>& c) {
  std::vector<std::unique_ptr<SessionEnv>> envs;
  for (int i = 0; i < n; ++i) {
    auto env = provider.Make(ConfigMap(c.begin(), c.end()));
    EXPECT_TRUE(env.ok()) << env.status();
    envs.push_back(*std::move(env));
  }
  return envs;
}

// Row `row` of the columns equals `info`.
void ExpectInfo(const EnvSpec& spec, const InfoColumns& c, size_t row, const StepInfo& info,
                const std::string& where) {
  const size_t tiers = spec.tiers.size(), regions = spec.num_regions;
  ASSERT_GE(c.profile[row], 0) << where;
  EXPECT_EQ(spec.profiles[c.profile[row]], info.profile) << where;
  EXPECT_EQ(c.step[row], info.step) << where;
  EXPECT_EQ(c.interval_ns[row], info.interval_ns) << where;
  EXPECT_EQ(c.default_interval_ns[row], info.default_interval_ns) << where;
  EXPECT_EQ(c.migration_ns[row], info.migration_ns) << where;
  EXPECT_EQ(c.migrated_bytes[row], info.migrated_bytes) << where;
  EXPECT_EQ(c.elapsed_ns[row], info.elapsed_ns) << where;
  EXPECT_EQ(c.default_elapsed_ns[row], info.default_elapsed_ns) << where;
  EXPECT_EQ(c.default_total_ns[row], info.default_total_ns) << where;
  EXPECT_EQ(
      std::vector<uint64_t>(c.tier_used_bytes + row * tiers, c.tier_used_bytes + (row + 1) * tiers),
      info.tier_used_bytes)
      << where;
  EXPECT_EQ(std::vector<int32_t>(c.refused_regions + row * regions,
                                 c.refused_regions + row * regions + c.refused_count[row]),
            std::vector<int32_t>(info.refused_regions.begin(), info.refused_regions.end()))
      << where;
  const size_t mask = info.action_mask.size();
  EXPECT_EQ(std::vector<uint8_t>(c.action_mask + row * mask, c.action_mask + (row + 1) * mask),
            info.action_mask)
      << where;
}

void ExpectRow(const VectorEnv& v, const BatchBuffers& b, size_t row, const StepResult& want,
               const std::string& where) {
  const size_t obs = v.ObsSize();
  EXPECT_EQ(std::vector<float>(b.obs.begin() + row * obs, b.obs.begin() + (row + 1) * obs),
            want.observation)
      << where;
  EXPECT_EQ(b.reward[row], want.reward) << where;
  EXPECT_EQ(b.terminated[row] != 0, want.terminated) << where;
  EXPECT_EQ(b.truncated[row] != 0, want.truncated) << where;
  ExpectInfo(v.spec(), b.out.info, row, want.info, where);
}

// One environment stepped as step_batch steps it: the reference.
struct Reference {
  std::unique_ptr<SessionEnv> env;
  bool reset_next = false;
  // The row step_batch returns for this action, and the ended step (same_step) if any.
  StepResult Step(const Action& a, AutoresetMode mode, std::optional<StepResult>* final) {
    final->reset();
    if (reset_next) {
      reset_next = false;
      return *env->Reset(std::nullopt, {});
    }
    StepResult r = *env->Step(a);
    if (!(r.terminated || r.truncated)) return r;
    if (mode == AutoresetMode::kNextStep) {
      reset_next = true;
      return r;
    }
    *final = r;
    StepResult again = *env->Reset(std::nullopt, {});
    again.reward = r.reward;
    again.terminated = r.terminated;
    again.truncated = r.truncated;
    return again;
  }
};

Action RandomAction(const EnvSpec& spec, std::mt19937_64& rng) {
  Action a;
  const size_t width = spec.action.kind == Space::kMultiDiscrete ? spec.num_regions : 1;
  for (size_t r = 0; r < width; ++r)
    a.values.push_back(static_cast<int64_t>(rng() % spec.action.n));
  return a;
}

struct Case {
  AutoresetMode mode;
  int threads;
  std::string action_mode;
};

// A vector environment of `n` environments of the case's configuration, beside `n` reference
// environments made alike (the provider, declared first, outlives both).
struct Paired {
  Paired(const Case& c, int n) : provider(Trusting()) {
    v = VectorEnv::Create(MakeEnvs(provider, n, Config(c.action_mode)), {c.mode, c.threads});
    ref.resize(n);
    for (int i = 0; i < n; ++i) ref[i].env = *provider.Make(Typed(Config(c.action_mode)));
  }

  PlacementProvider provider;
  absl::StatusOr<std::unique_ptr<VectorEnv>> v;
  std::vector<Reference> ref;
};

class VectorEnvTest : public ::testing::TestWithParam<Case> {};

TEST_P(VectorEnvTest, StepGivesTheEpisodesOfSingleEnvironments) {
  const Case c = GetParam();
  const int n = 5;
  Paired p(c, n);
  ASSERT_TRUE(p.v.ok()) << p.v.status();
  VectorEnv& v = **p.v;
  BatchBuffers b(v);
  std::vector<std::optional<uint64_t>> seeds;
  for (int i = 0; i < n; ++i)
    seeds.push_back(i == 3 ? std::nullopt : std::optional<uint64_t>(40 + i));
  ASSERT_TRUE(v.Reset({}, seeds, {}, b.out).ok());
  for (int i = 0; i < n; ++i) {
    ExpectRow(v, b, i, *p.ref[i].env->Reset(seeds[i], {}), "reset env " + std::to_string(i));
  }
  std::mt19937_64 rng(7);
  const size_t width = v.ActionSize();
  int ends = 0, refusals = 0;
  for (int t = 0; t < 20; ++t) {  // episodes of 7 steps: two autoresets each
    std::vector<Action> actions;
    std::vector<int64_t> flat;
    for (int i = 0; i < n; ++i) {
      actions.push_back(RandomAction(v.spec(), rng));
      flat.insert(flat.end(), actions.back().values.begin(), actions.back().values.end());
    }
    ASSERT_TRUE(v.Step(flat.data(), flat.size(), b.out).ok());
    ASSERT_EQ(flat.size(), n * width);
    bool any = false;
    for (int i = 0; i < n; ++i) {
      const std::string where = "step " + std::to_string(t) + " env " + std::to_string(i);
      std::optional<StepResult> final;
      ExpectRow(v, b, i, p.ref[i].Step(actions[i], c.mode, &final), where);
      EXPECT_EQ(b.ended[i] != 0, final.has_value()) << where;
      EXPECT_EQ(b.env_id[i], i);
      if (final) {
        any = true;
        const size_t obs = v.ObsSize();
        EXPECT_EQ(
            std::vector<float>(b.final_obs.begin() + i * obs, b.final_obs.begin() + (i + 1) * obs),
            final->observation)
            << where;
        ExpectInfo(v.spec(), b.out.final_info, i, final->info, where + " final");
      }
      ends += b.terminated[i];
      refusals += b.out.info.refused_count[i] > 0;
    }
    EXPECT_EQ(b.any_ended, any);
  }
  EXPECT_GE(ends, 2 * n);  // episodes did end and restart
  if (c.action_mode == "placement") {
    EXPECT_GT(refusals, 0);  // the refusal column was used
  }
}

TEST_P(VectorEnvTest, SendRecvGivesEachEnvironmentItsOwnEpisode) {
  const Case c = GetParam();
  const int n = 6, batch = 4;
  Paired p(c, n);
  ASSERT_TRUE(p.v.ok()) << p.v.status();
  VectorEnv& v = **p.v;
  BatchBuffers b(v);
  std::vector<std::optional<uint64_t>> seeds;
  for (int i = 0; i < n; ++i) seeds.push_back(100 + i);
  ASSERT_TRUE(v.SendReset(seeds, {}).ok());
  std::vector<int> received(n, 0);
  std::vector<std::mt19937_64> rngs;
  for (int i = 0; i < n; ++i) rngs.emplace_back(i);
  std::vector<Action> sent(n);
  // Checks row `row` of the last Recv against env i's reference episode.
  auto expect_row = [&](int row, int i, const std::string& where) {
    std::optional<StepResult> final;
    const StepResult want = received[i] == 0 ? *p.ref[i].env->Reset(seeds[i], {})
                                             : p.ref[i].Step(sent[i], c.mode, &final);
    ExpectRow(v, b, row, want, where);
    EXPECT_EQ(b.ended[row] != 0, final.has_value()) << where;
    ++received[i];
  };
  for (int round = 0; round < 25; ++round) {
    ASSERT_TRUE(v.Recv(batch, b.out).ok());
    std::vector<int32_t> ids(b.env_id.begin(), b.env_id.begin() + batch);
    std::vector<int64_t> flat;
    for (int row = 0; row < batch; ++row) {
      const int i = ids[row];
      expect_row(row, i, "round " + std::to_string(round) + " env " + std::to_string(i));
      sent[i] = RandomAction(v.spec(), rngs[i]);
      flat.insert(flat.end(), sent[i].values.begin(), sent[i].values.end());
    }
    ASSERT_TRUE(v.Send(ids, flat.data(), flat.size()).ok());
  }
  // What is still in flight arrives too, and is right (a worker a loaded machine held
  // back may have kept an environment out of every round above).
  while (v.in_flight() > 0) {
    ASSERT_TRUE(v.Recv(1, b.out).ok());
    expect_row(0, b.env_id[0], "drain env " + std::to_string(b.env_id[0]));
  }
  for (int i = 0; i < n; ++i) EXPECT_GT(received[i], 0) << i;  // nobody starves
}

INSTANTIATE_TEST_SUITE_P(Modes, VectorEnvTest,
                         ::testing::Values(Case{AutoresetMode::kNextStep, 1, "placement"},
                                           Case{AutoresetMode::kNextStep, 3, "placement"},
                                           Case{AutoresetMode::kSameStep, 1, "placement"},
                                           Case{AutoresetMode::kSameStep, 3, "placement"},
                                           Case{AutoresetMode::kSameStep, 2, "move"}),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return std::string(
                                      info.param.mode == AutoresetMode::kNextStep   ? "NextStep"
                                      : info.param.mode == AutoresetMode::kSameStep ? "SameStep"
                                                                                    : "Disabled") +
                                  "Threads" + std::to_string(info.param.threads) +
                                  (info.param.action_mode == "move" ? "Move" : "Placement");
                         });

TEST(VectorEnvErrorsTest, ABadActionIsRefusedBeforeAnythingMoves) {
  PlacementProvider provider(Trusting());
  auto v = VectorEnv::Create(MakeEnvs(provider, 3, Config()), {AutoresetMode::kNextStep, 2});
  ASSERT_TRUE(v.ok());
  BatchBuffers b(**v);
  const size_t width = (*v)->ActionSize();
  std::vector<int64_t> actions(3 * width, 1);
  absl::Status early = (*v)->Step(actions.data(), actions.size(), b.out);
  EXPECT_EQ(early.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(early.message(), HasSubstr("reset it first"));
  ASSERT_TRUE((*v)->Reset({}, {}, {3, "lulesh"}, b.out).ok());
  const std::vector<float> first(b.obs.begin(), b.obs.end());
  actions[2 * width + 5] = 7;
  absl::Status s = (*v)->Step(actions.data(), actions.size(), b.out);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("actions[2][5]: tier 7 out of range [0, 2)"));
  EXPECT_EQ(ErrorField(s), "actions[2][5]");                         // the one action check's field
  EXPECT_EQ(std::vector<float>(b.obs.begin(), b.obs.end()), first);  // nothing written
  EXPECT_EQ((*v)->Step(actions.data(), 5, b.out).code(), absl::StatusCode::kInvalidArgument);
  // Every environment is still at its first step: a good batch steps all from there.
  actions[2 * width + 5] = 1;
  ASSERT_TRUE((*v)->Step(actions.data(), actions.size(), b.out).ok());
  for (int i = 0; i < 3; ++i) {
    std::unique_ptr<SessionEnv> ref = *provider.Make(Typed(Config()));
    ResetOptions lulesh;
    lulesh.profile = "lulesh";
    ASSERT_TRUE(ref->Reset(std::nullopt, lulesh).ok());
    ExpectRow(**v, b, i,
              *ref->Step(Action{std::vector<int64_t>(actions.begin() + i * width,
                                                     actions.begin() + (i + 1) * width)}),
              "env " + std::to_string(i));
  }
}

TEST(VectorEnvErrorsTest, AsyncCallsOutOfOrderAreRefusedWithTheReason) {
  PlacementProvider provider(Trusting());
  auto v = VectorEnv::Create(MakeEnvs(provider, 3, Config()), {AutoresetMode::kNextStep, 2});
  ASSERT_TRUE(v.ok());
  BatchBuffers b(**v);
  EXPECT_EQ((*v)->Recv(1, b.out).code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE((*v)->Reset({}, {}, {}, b.out).ok());
  EXPECT_THAT((*v)->Reset({}, {1}, {}, b.out).message(),
              HasSubstr("seeds: 1 entries for 3 environments"));
  EXPECT_THAT((*v)->Reset({1, 0}, {}, {}, b.out).message(),
              HasSubstr("reset_mask: 2 entries for 3 environments"));
  const size_t width = (*v)->ActionSize();
  std::vector<int64_t> actions(2 * width, 0);
  EXPECT_THAT((*v)->Send({0, 0}, actions.data(), actions.size()).message(),
              HasSubstr("env_ids[1]: env 0 appears twice"));
  EXPECT_THAT((*v)->Send({0, 3}, actions.data(), actions.size()).message(),
              HasSubstr("env_ids[1]: 3 out of range [0, 3)"));
  actions[width + 3] = 9;  // entry 1 goes to env 2
  const absl::Status bad = (*v)->Send({0, 2}, actions.data(), actions.size());
  EXPECT_THAT(bad.message(), HasSubstr("actions[1][3]: tier 9 out of range [0, 2) (env 2)"));
  EXPECT_EQ(ErrorField(bad), "actions[1][3]");
  EXPECT_EQ((*v)->in_flight(), 0);  // nothing was sent
  actions[width + 3] = 0;
  ASSERT_TRUE((*v)->Send({0, 2}, actions.data(), actions.size()).ok());
  EXPECT_EQ((*v)->in_flight(), 2);
  EXPECT_EQ((*v)->Send({2}, actions.data(), width).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ((*v)->Step(actions.data(), 3 * width, b.out).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ((*v)->Recv(3, b.out).code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE((*v)->Recv(2, b.out).ok());
  std::vector<int32_t> got = {b.env_id[0], b.env_id[1]};
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, (std::vector<int32_t>{0, 2}));
  EXPECT_EQ((*v)->in_flight(), 0);
}

TEST(VectorEnvDisabledTest, OnlyAMaskedResetStartsAnEpisodeAgain) {
  const int n = 3;
  PlacementProvider provider(Trusting());
  auto v = VectorEnv::Create(MakeEnvs(provider, n, Config()), {AutoresetMode::kDisabled, 2});
  ASSERT_TRUE(v.ok()) << v.status();
  std::vector<std::unique_ptr<SessionEnv>> ref;
  for (int i = 0; i < n; ++i) ref.push_back(*provider.Make(Typed(Config())));
  BatchBuffers b(**v);
  const std::vector<std::optional<uint64_t>> seeds = {5, 6, 7};
  const std::vector<std::optional<std::string>> profiles = {"lulesh", "minife", std::nullopt};
  ASSERT_TRUE((*v)->Reset({}, seeds, profiles, b.out).ok());
  for (int i = 0; i < n; ++i) {
    ResetOptions o;
    o.profile = profiles[i];
    ExpectRow(**v, b, i, *ref[i]->Reset(seeds[i], o), "reset env " + std::to_string(i));
  }
  std::mt19937_64 rng(3);
  const size_t width = (*v)->ActionSize();
  auto step_all = [&](std::vector<int64_t>* flat) {
    flat->clear();
    std::vector<Action> actions;
    for (int i = 0; i < n; ++i) {
      actions.push_back(RandomAction((*v)->spec(), rng));
      flat->insert(flat->end(), actions.back().values.begin(), actions.back().values.end());
    }
    return actions;
  };
  std::vector<int64_t> flat;
  bool ended = false;
  for (int t = 0; t < 7; ++t) {  // episodes of 7 steps
    std::vector<Action> actions = step_all(&flat);
    ASSERT_TRUE((*v)->Step(flat.data(), flat.size(), b.out).ok());
    EXPECT_FALSE(b.any_ended);  // nothing resets, so no final rows
    for (int i = 0; i < n; ++i) {
      ExpectRow(**v, b, i, *ref[i]->Step(actions[i]), "step " + std::to_string(t));
      ended = ended || b.terminated[i] || b.truncated[i];
    }
  }
  ASSERT_TRUE(ended);
  // Every episode ended: stepping is refused, naming the environment, and moves nothing.
  step_all(&flat);
  const std::vector<float> last(b.obs.begin(), b.obs.end());
  absl::Status s = (*v)->Step(flat.data(), flat.size(), b.out);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("env 0 has no episode running"));
  // A masked reset writes only its rows and starts only those episodes.
  ASSERT_TRUE((*v)->Reset({1, 0, 1}, {}, {}, b.out).ok());
  for (int i : {0, 2}) ExpectRow(**v, b, i, *ref[i]->Reset(std::nullopt, {}), "partial reset");
  EXPECT_EQ(
      std::vector<float>(b.obs.begin() + (*v)->ObsSize(), b.obs.begin() + 2 * (*v)->ObsSize()),
      std::vector<float>(last.begin() + (*v)->ObsSize(), last.begin() + 2 * (*v)->ObsSize()));
  EXPECT_THAT((*v)->Step(flat.data(), flat.size(), b.out).message(),
              HasSubstr("env 1 has no episode running"));
  ASSERT_TRUE((*v)->Reset({0, 1, 0}, {}, {}, b.out).ok());
  ASSERT_TRUE(ref[1]->Reset(std::nullopt, {}).ok());
  std::vector<Action> actions = step_all(&flat);
  ASSERT_TRUE((*v)->Step(flat.data(), flat.size(), b.out).ok());
  for (int i = 0; i < n; ++i) ExpectRow(**v, b, i, *ref[i]->Step(actions[i]), "after resets");
  EXPECT_EQ(width * n, flat.size());
}

TEST(VectorEnvErrorsTest, EnvironmentsOfDifferentShapesAreRefused) {
  PlacementProvider provider(Trusting());
  std::vector<std::unique_ptr<SessionEnv>> envs = MakeEnvs(provider, 1, Config());
  auto other = Config();
  other["num_regions"] = "8";
  envs.push_back(*provider.Make(Typed(other)));
  auto v = VectorEnv::Create(std::move(envs), {});
  EXPECT_EQ(v.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(v.status().message(), HasSubstr("env 1: its spaces differ"));
  EXPECT_EQ(VectorEnv::Create({}, {}).status().code(), absl::StatusCode::kInvalidArgument);
}

// MakeVectorEnv takes typed values as a `make` message carries them: a list of profile
// directories stays a list, numbers stay numbers; errors carry the key at fault as their
// field. (It serves the bundled profiles by default, so it generates them into the user's
// cache the first time, as `tiergym serve` and the Python tests do.)
TEST(MakeVectorEnvTest, TakesTypedValuesAndNamesTheKeyAtFault) {
  const std::string lulesh = SmallProfileDir("lulesh"), minife = SmallProfileDir("minife");
  const ConfigMap config = {{"profiles", ConfigValue::List{lulesh, minife}},
                            {"num_regions", 12},
                            {"steps", 7},
                            {"tier_capacity_mib", "hbm:64"}};
  absl::StatusOr<MadeVectorEnv> made = MakeVectorEnv({config, config}, {});
  ASSERT_TRUE(made.ok()) << made.status();
  EXPECT_EQ(made->env->num_envs(), 2);
  EXPECT_EQ(made->env->spec().num_regions, 12);
  EXPECT_EQ(made->env->spec().profiles.size(), 2u);
  ASSERT_EQ(made->configs.size(), 2u);
  EXPECT_EQ(made->configs[1].at("profiles"), lulesh + "," + minife);
  EXPECT_EQ(made->configs[1].at("num_regions"), "12");
  EXPECT_EQ(made->configs[1].at("action_mode"), "placement");  // the default, in force

  ConfigMap bad = config;
  bad["num_regions"] = 0;
  made = MakeVectorEnv({config, bad}, {});
  EXPECT_EQ(made.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ErrorField(made.status()), "config.num_regions");
  EXPECT_THAT(std::string(made.status().message()), StartsWith("configs[1]: config.num_regions: "));
  bad["num_regions"] = "twelve";
  made = MakeVectorEnv({bad}, {});
  EXPECT_EQ(ErrorField(made.status()), "config.num_regions");
  EXPECT_THAT(std::string(made.status().message()), StartsWith("config.num_regions: "));

  made = MakeVectorEnv({{{"bogus", 1}}}, {});
  EXPECT_EQ(ErrorField(made.status()), "config.bogus");
  EXPECT_THAT(std::string(made.status().message()),
              StartsWith("config.bogus: unknown configuration key (known: "));
  EXPECT_EQ(MakeVectorEnv({}, {}).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tiergym::env

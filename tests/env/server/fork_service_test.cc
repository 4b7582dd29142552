// The fork op (env/PROTOCOL.md "fork") through the session manager (env/server/service.h)
// on real placement sessions (env/provider/placement_provider.h): a fork, a fork of a fork
// and many forks of one session continue bit for bit as the session does under the same
// requests (step, step_batch, unseeded resets), on the linear and the index-walk pricers;
// what a fork does never reaches its original; forks count against the session limits and
// the memory budget, are refused cleanly past them and give their charge back on close;
// another connection's session is not found and a co-scheduling node is not forked; the
// C++ client forks over ZeroMQ.
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "env/client/client.h"
#include "env/provider/cosched_provider.h"
#include "env/provider/placement_provider.h"
#include "env/server/service.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/env/provider_budget.h"
#include "tests/env/reply_checks.h"
#include "tests/env/running_server.h"
#include "tests/test_root.h"

namespace tiergym::env {
namespace {

using protocol::Op;
using testing::FreeBytes;
using ::testing::HasSubstr;
using ::tiergym::testing::SmallProfileDir;
using ::tiergym::testing::TestRoot;

constexpr int kRegions = 8;

ConfigMap Config(const std::string& model = "paper") {
  return {{"profiles",
           ConfigValue(ConfigValue::List{SmallProfileDir("lulesh"), SmallProfileDir("minife")})},
          {"num_regions", std::to_string(kRegions)},
          {"steps", "12"},
          {"model", model},
          {"tier_capacity_mib", "hbm:128"}};
}

// What a client sees of a step or reset: its reply's bytes.
std::string Wire(const StepResult& r) {
  return protocol::EncodeReply(protocol::Reply{1, protocol::StepReply{r}});
}

class ForkServiceTest : public ::testing::TestWithParam<std::string> {
 protected:
  ForkServiceTest() : pool_(2) {}

  void SetUp() override { MakeService(ServiceOptions{}, 0); }

  void MakeService(ServiceOptions options, uint64_t budget, bool cosched = false) {
    PlacementProviderOptions o;
    o.data_dirs = {"/"};  // the test's profile directories
    o.max_asset_bytes = budget;
    provider_ = std::make_shared<PlacementProvider>(o);
    options.max_asset_bytes = budget;
    if (cosched) {
      CoschedProviderOptions co;
      co.data_dirs = {std::string(TIERGYM_SOURCE_DIR) + "/estimator/contention/data"};
      co.named_profiles = {{"minife", SmallProfileDir("minife")},
                           {"lulesh", SmallProfileDir("lulesh")}};
      options.cosched = std::make_shared<CoschedProvider>(co, provider_.get());
    }
    service_ = std::make_unique<Service>(options, provider_, &pool_);
  }

  protocol::ReplyBody Call(Op op, protocol::RequestBody body, const std::string& owner = "a") {
    return testing::RoundTrip([&](const std::string& p) { return service_->Handle(p, owner); },
                              protocol::Request{op, protocol::kVersion, ++id_, std::move(body)});
  }
  template <typename T>
  T Ok(Op op, protocol::RequestBody body, const std::string& owner = "a") {
    return testing::OkBody<T>(Call(op, std::move(body), owner));
  }
  protocol::Error Err(Op op, protocol::RequestBody body, absl::StatusCode code,
                      const std::string& field, const std::string& owner = "a") {
    return testing::ErrorBody(Call(op, std::move(body), owner), code, field);
  }

  std::string Make(const std::string& model = "paper", const std::string& owner = "a") {
    return Ok<protocol::MakeReply>(Op::kMake,
                                   protocol::MakeRequest{protocol::kEnvId, Config(model)}, owner)
        .session;
  }
  std::string Fork(const std::string& session, const std::string& owner = "a") {
    return Ok<protocol::ForkReply>(Op::kFork, protocol::ForkRequest{session}, owner).session;
  }
  StepResult Reset(const std::string& session, std::optional<uint64_t> seed) {
    return Ok<protocol::ResetReply>(Op::kReset, protocol::ResetRequest{session, seed, {}}).result;
  }
  StepResult Step(const std::string& session, const Action& action) {
    return Ok<protocol::StepReply>(Op::kStep, protocol::StepRequest{session, action}).result;
  }
  void Close(const std::string& session, const std::string& owner = "a") {
    Ok<protocol::CloseReply>(Op::kClose, protocol::CloseRequest{session}, owner);
  }

  static Action RandomAction(std::mt19937_64& rng) {
    Action a;
    for (int r = 0; r < kRegions; ++r) a.values.push_back(static_cast<int64_t>(rng() % 2));
    return a;
  }

  ThreadPool pool_;
  std::shared_ptr<PlacementProvider> provider_;
  std::unique_ptr<Service> service_;
  uint64_t id_ = 0;
};

// One session and its forks (a fork, a fork of that fork, four forks of the session) driven
// alike past several episode ends, by step and by step_batch, resets without a seed
// between episodes (the episode generator was forked too): every reply byte for byte the
// session's.
TEST_P(ForkServiceTest, ForksContinueBitForBitAsTheirOriginal) {
  const std::string s = Make(GetParam());
  Reset(s, 5);
  std::mt19937_64 rng(1);
  for (int t = 0; t < 3; ++t) Step(s, RandomAction(rng));
  std::vector<std::string> forks = {Fork(s)};
  for (int t = 0; t < 2; ++t) {
    const Action a = RandomAction(rng);
    EXPECT_EQ(Wire(Step(s, a)), Wire(Step(forks[0], a))) << "step " << t;
  }
  forks.push_back(Fork(forks[0]));  // a fork of a fork
  for (int k = 0; k < 4; ++k) forks.push_back(Fork(s));
  for (int t = 0; t < 40; ++t) {
    const Action a = RandomAction(rng);
    const StepResult mine = Step(s, a);
    if (t % 2 == 0) {
      for (size_t k = 0; k < forks.size(); ++k) {
        ASSERT_EQ(Wire(mine), Wire(Step(forks[k], a))) << "fork " << k << ", step " << t;
      }
    } else {  // the forks in one batch
      protocol::StepBatchRequest batch;
      batch.sessions = forks;
      batch.actions.assign(forks.size(), a);
      const auto reply = Ok<protocol::StepBatchReply>(Op::kStepBatch, batch);
      ASSERT_EQ(reply.results.size(), forks.size());
      for (size_t k = 0; k < forks.size(); ++k) {
        ASSERT_EQ(Wire(mine), Wire(reply.results[k])) << "fork " << k << ", step " << t;
      }
    }
    if (mine.terminated || mine.truncated) {  // the next episodes, from the forked generator
      const std::string first = Wire(Reset(s, std::nullopt));
      for (const std::string& f : forks) ASSERT_EQ(first, Wire(Reset(f, std::nullopt)));
    }
  }
}

TEST_P(ForkServiceTest, WhatAForkDoesNeverReachesTheOriginal) {
  const std::string s = Make(GetParam()), reference = Make(GetParam());
  Reset(s, 3);
  Reset(reference, 3);
  std::mt19937_64 rng(2);
  for (int t = 0; t < 4; ++t) {
    const Action a = RandomAction(rng);
    Step(s, a);
    Step(reference, a);
  }
  const std::string f = Fork(s);
  const Action all_fast{std::vector<int64_t>(kRegions, 1)};
  for (bool done = false; !done;) done = Step(f, all_fast).terminated;
  Reset(f, 77);
  Step(f, all_fast);
  Close(f);
  for (int t = 0; t < 6; ++t) {
    const Action a = RandomAction(rng);
    ASSERT_EQ(Wire(Step(s, a)), Wire(Step(reference, a))) << "step " << t;
  }
}

INSTANTIATE_TEST_SUITE_P(LinearAndIndexWalk, ForkServiceTest,
                         ::testing::Values("paper", "concurrent"),
                         [](const auto& info) { return info.param; });

using ForkRefusalTest = ForkServiceTest;

// A fork keeps whether its original is inside an episode: before the first reset and
// after the end it has none either (FAILED_PRECONDITION), and resets like any session.
TEST_F(ForkRefusalTest, AForkKeepsItsOriginalsEpisodeFlag) {
  const std::string s = Make();
  const std::string unreset = Fork(s);
  const Action keep{std::vector<int64_t>(kRegions, 0)};
  Err(Op::kStep, protocol::StepRequest{unreset, keep}, absl::StatusCode::kFailedPrecondition,
      "session");
  EXPECT_EQ(Wire(Reset(unreset, 4)), Wire(Reset(s, 4)));
  for (bool done = false; !done;) done = Step(s, keep).terminated;
  const std::string ended = Fork(s);
  Err(Op::kStep, protocol::StepRequest{ended, keep}, absl::StatusCode::kFailedPrecondition,
      "session");
  Reset(ended, 1);
  Step(ended, keep);
}

TEST_F(ForkRefusalTest, ForksCountAgainstTheSessionLimits) {
  ServiceOptions options;
  options.max_sessions_per_connection = 3;
  options.max_sessions = 5;
  MakeService(options, 0);
  const std::string s = Make();
  Reset(s, 1);
  const std::string f1 = Fork(s);
  Fork(f1);
  protocol::Error e =
      Err(Op::kFork, protocol::ForkRequest{s}, absl::StatusCode::kResourceExhausted, "op");
  EXPECT_THAT(e.message, HasSubstr("fork refused: this connection has 3 sessions open"));
  Close(f1);
  Fork(s);  // room again
  const std::string b = Make("paper", "b");
  Fork(b, "b");
  e = Err(Op::kFork, protocol::ForkRequest{b}, absl::StatusCode::kResourceExhausted, "op", "b");
  EXPECT_THAT(e.message, HasSubstr("fork refused: 5 sessions open, the server's limit"));
  EXPECT_EQ(service_->Stats().sessions, 5u);
}

TEST_F(ForkRefusalTest, OnlyTheOwnersPlacementSessionsAreForked) {
  MakeService(ServiceOptions{}, 0, /*cosched=*/true);
  const std::string s = Make();
  const protocol::Error theirs =
      Err(Op::kFork, protocol::ForkRequest{s}, absl::StatusCode::kNotFound, "session", "b");
  const protocol::Error unknown = Err(Op::kFork, protocol::ForkRequest{std::string(32, '0')},
                                      absl::StatusCode::kNotFound, "session");
  EXPECT_EQ(theirs.message, unknown.message);  // another connection's: as if none
  ConfigMap node{{"tenants", ConfigValue(ConfigValue::List{"minife", "lulesh"})},
                 {"sensitivity", "curves.csv"},
                 {"num_regions", "8"},
                 {"steps", "12"}};
  const std::string n =
      Ok<protocol::CoschedMakeReply>(Op::kCoschedMake, protocol::CoschedMakeRequest{node}).session;
  const protocol::Error e =
      Err(Op::kFork, protocol::ForkRequest{n}, absl::StatusCode::kUnimplemented, "session");
  EXPECT_THAT(e.message, HasSubstr("a co-scheduling node cannot be forked"));
  EXPECT_EQ(service_->Stats().sessions, 2u);  // nothing left behind by the refusals
}

TEST_F(ForkRefusalTest, AForkIsChargedToTheBudgetAndGivesItBackOnClose) {
  const uint64_t budget = uint64_t{256} << 20;
  MakeService(ServiceOptions{}, budget);
  const std::string s = Make("concurrent");
  Reset(s, 2);
  const uint64_t before = FreeBytes(*provider_, budget);
  const std::string f = Fork(s);
  const uint64_t charge = before - FreeBytes(*provider_, budget);
  EXPECT_GT(charge, 4096u);  // a session's charge, the index walk's placement state included
  Close(f);
  EXPECT_NEAR(static_cast<double>(FreeBytes(*provider_, budget)), static_cast<double>(before),
              1024.0);
  // Everything but room for one and a half forks taken (as by other clients).
  const uint64_t taken = before - charge * 3 / 2;
  ASSERT_TRUE(provider_->Charge(taken).ok());
  const std::string g = Fork(s);
  const protocol::Error e =
      Err(Op::kFork, protocol::ForkRequest{s}, absl::StatusCode::kResourceExhausted, "op");
  EXPECT_THAT(e.message, HasSubstr("fork refused: a fork is charged as a session"));
  EXPECT_THAT(e.message, HasSubstr("--max-asset-mib"));
  EXPECT_EQ(service_->Stats().sessions, 2u);
  Close(g);
  Fork(s);  // its charge given back: room again
  provider_->Uncharge(taken);
}

// The C++ client on a real server over ZeroMQ: Client::Fork gives a session that steps as
// its original does; the server's refusals come back as statuses.
TEST_F(ForkRefusalTest, TheCppClientForksOverZeroMq) {
  PlacementProviderOptions po;
  po.data_dirs = {"/"};
  std::filesystem::create_directories(TestRoot());  // removed when the tests end
  ServerOptions so;
  so.endpoint = "ipc://" + TestRoot() + "/fork.sock";
  so.threads = 1;
  testing::RunningServer server(so, ServiceOptions{}, std::make_shared<PlacementProvider>(po));
  ASSERT_NE(server.get(), nullptr);
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect({server.endpoint(), 30});
  ASSERT_TRUE(client.ok()) << client.status();
  absl::StatusOr<protocol::MakeReply> made = (*client)->Make(Config("concurrent"));
  ASSERT_TRUE(made.ok()) << made.status();
  ASSERT_TRUE((*client)->Reset(made->session, 6).ok());
  absl::StatusOr<protocol::SessionId> fork = (*client)->Fork(made->session);
  ASSERT_TRUE(fork.ok()) << fork.status();
  EXPECT_EQ(fork->size(), 32u);
  EXPECT_NE(*fork, made->session);
  std::mt19937_64 rng(3);
  for (int t = 0; t < 12; ++t) {
    const Action a = RandomAction(rng);
    absl::StatusOr<StepResult> x = (*client)->Step(made->session, a);
    absl::StatusOr<StepResult> y = (*client)->Step(*fork, a);
    ASSERT_TRUE(x.ok() && y.ok()) << x.status() << " " << y.status();
    ASSERT_EQ(Wire(*x), Wire(*y)) << "step " << t;
    if (x->terminated) break;
  }
  EXPECT_TRUE((*client)->Close(*fork).ok());
  EXPECT_EQ((*client)->Fork(*fork).status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE((*client)->Close(made->session).ok());
}

}  // namespace
}  // namespace tiergym::env

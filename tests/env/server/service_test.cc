// The session manager (env/server/service.h) on a fake environment: every operation,
// every refusal with its code and field, limits, idle reclamation, and step_batch
// (parallel, all-or-nothing checks, autoreset) against stepping the sessions one by one;
// step_batch results through shared memory against the same results in the reply, and the
// segments' ownership, lifetime and limits.
#include "env/server/service.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "env/server/shm_batch.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/env/fake_env.h"
#include "tests/env/msgpack_builder.h"
#include "tests/env/reply_checks.h"

namespace tiergym::env {
namespace {

using protocol::Op;
using protocol::Reply;
using protocol::Request;
using ::testing::HasSubstr;
using ::testing::StartsWith;
namespace mp = tiergym::testing::mp;

class ServiceTest : public ::testing::Test {
 protected:
  explicit ServiceTest(int threads = 2) : pool_(threads) {}

  void SetUp() override { MakeService(ServiceOptions{}); }

  void MakeService(ServiceOptions options) {
    options.clock = [this] { return now_; };
    service_ =
        std::make_unique<Service>(options, std::make_shared<testing::FakeProvider>(), &pool_);
  }

  protocol::ReplyBody Call(Op op, protocol::RequestBody body = std::monostate{}) {
    Request req{op, protocol::kVersion, ++id_, std::move(body)};
    absl::StatusOr<Reply> r =
        protocol::DecodeReply(service_->Handle(protocol::EncodeRequest(req), owner_), op);
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok()) return protocol::Error{};
    EXPECT_EQ(r->id, id_);
    return r->body;
  }
  // The body of a successful reply; fails the test on an error reply.
  template <typename T>
  T Ok(Op op, protocol::RequestBody body = std::monostate{}) {
    return testing::OkBody<T>(Call(op, std::move(body)));
  }
  protocol::Error Err(Op op, protocol::RequestBody body, absl::StatusCode code,
                      const std::string& field) {
    return testing::ErrorBody(Call(op, std::move(body)), code, field);
  }

  protocol::SessionId Make(protocol::ConfigMap config = {}) {
    return Ok<protocol::MakeReply>(Op::kMake, protocol::MakeRequest{protocol::kEnvId, config})
        .session;
  }
  StepResult Reset(const protocol::SessionId& s, std::optional<uint64_t> seed = std::nullopt) {
    return Ok<protocol::ResetReply>(Op::kReset, protocol::ResetRequest{s, seed, {}}).result;
  }
  StepResult Step(const protocol::SessionId& s, std::vector<int64_t> action) {
    return Ok<protocol::StepReply>(Op::kStep, protocol::StepRequest{s, Action{std::move(action)}})
        .result;
  }

  ThreadPool pool_;
  std::chrono::steady_clock::time_point now_{};
  std::unique_ptr<Service> service_;
  uint64_t id_ = 0;
  std::string owner_ = "connection-a";  // the connection requests come on
};

TEST_F(ServiceTest, HelloListAndVersions) {
  auto hello = Ok<protocol::HelloReply>(Op::kHello);
  EXPECT_EQ(hello.protocol, protocol::kVersion);
  EXPECT_THAT(hello.envs, ::testing::ElementsAre(protocol::kEnvId));
  EXPECT_EQ(hello.limits.threads, 2u);
  auto list = Ok<protocol::ListReply>(Op::kList);
  ASSERT_EQ(list.envs.size(), 1u);
  EXPECT_EQ(list.envs[0].config_keys[0].name, "num_regions");

  // hello answers any version; anything else wants the server's.
  std::string reply = service_->Handle(mp::Map({{"v", mp::U(9)}, {"op", mp::S("hello")}}));
  absl::StatusOr<Reply> r = protocol::DecodeReply(reply, Op::kHello);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(std::holds_alternative<protocol::HelloReply>(r->body));
  r = protocol::DecodeReply(service_->Handle(mp::Map({{"v", mp::U(9)}, {"op", mp::S("list")}})),
                            Op::kList);
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE(std::holds_alternative<protocol::Error>(r->body));
  EXPECT_EQ(std::get<protocol::Error>(r->body).code, absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(std::get<protocol::Error>(r->body).field, "v");
}

TEST_F(ServiceTest, MakeDescribesTheSpacesAndTheConfigurationInForce) {
  auto m = Ok<protocol::MakeReply>(Op::kMake,
                                   protocol::MakeRequest{protocol::kEnvId, {{"num_regions", "6"}}});
  EXPECT_EQ(m.session.size(), 32u);
  EXPECT_EQ(m.spec.num_regions, 6);
  EXPECT_EQ(m.spec.action.kind, Space::kMultiDiscrete);
  EXPECT_EQ(m.spec.observation.shape, std::vector<int64_t>{8});
  EXPECT_EQ(m.config.at("num_regions"), "6");
  EXPECT_EQ(m.config.at("steps"), "3");  // the default
  EXPECT_NE(Make(), m.session);
}

TEST_F(ServiceTest, MakeRefusals) {
  Err(Op::kMake, protocol::MakeRequest{"tiergym/Nope-v9", {}}, absl::StatusCode::kNotFound, "env");
  auto e = Err(Op::kMake, protocol::MakeRequest{protocol::kEnvId, {{"num_regoins", "4"}}},
               absl::StatusCode::kInvalidArgument, "config.num_regoins");
  EXPECT_THAT(e.message, HasSubstr("num_regions"));  // the known keys are listed
  Err(Op::kMake, protocol::MakeRequest{protocol::kEnvId, {{"num_regions", "zero"}}},
      absl::StatusCode::kInvalidArgument, "config.num_regions");
  Err(Op::kMake, protocol::MakeRequest{protocol::kEnvId, {{"fail", "load"}}},
      absl::StatusCode::kNotFound, "config.profiles");
}

TEST_F(ServiceTest, AnEpisodeAndItsRefusals) {
  const protocol::SessionId s = Make();
  Err(Op::kStep, protocol::StepRequest{s, Action{{0, 0, 0, 0}}},
      absl::StatusCode::kFailedPrecondition, "session");
  StepResult r = Reset(s, 5);
  EXPECT_EQ(r.observation.size(), 6u);
  Err(Op::kStep, protocol::StepRequest{s, Action{{0, 1}}}, absl::StatusCode::kInvalidArgument,
      "action");
  auto e = Err(Op::kStep, protocol::StepRequest{s, Action{{0, 1, 2, 0}}},
               absl::StatusCode::kInvalidArgument, "action[2]");
  EXPECT_THAT(e.message, HasSubstr("tier 2 out of range [0, 2)"));
  Err(Op::kStep, protocol::StepRequest{s, Action{{0, -1, 0, 0}}},
      absl::StatusCode::kInvalidArgument, "action[1]");
  // Refused actions changed nothing: the episode goes on from step 0.
  r = Step(s, {1, 1, 0, 0});
  EXPECT_EQ(r.info.step, 1u);
  EXPECT_DOUBLE_EQ(r.reward, 2.0 / 12);
  r = Step(s, {1, 1, 1, 1});
  r = Step(s, {0, 0, 0, 0});
  EXPECT_TRUE(r.terminated);
  Err(Op::kStep, protocol::StepRequest{s, Action{{0, 0, 0, 0}}},
      absl::StatusCode::kFailedPrecondition, "session");
  EXPECT_EQ(Reset(s).info.step, 0u);
}

TEST_F(ServiceTest, MoveModeActionsAreOneIntegerInRange) {
  const protocol::SessionId s = Make({{"action_mode", "move"}});
  Reset(s);
  Err(Op::kStep, protocol::StepRequest{s, Action{{1, 2}}}, absl::StatusCode::kInvalidArgument,
      "action");
  Err(Op::kStep, protocol::StepRequest{s, Action{{9}}}, absl::StatusCode::kInvalidArgument,
      "action");  // 4 regions * 2 tiers + 1 actions
  EXPECT_EQ(Step(s, {8}).info.step, 1u);
}

TEST_F(ServiceTest, SameSeedSameEpisode) {
  const protocol::SessionId a = Make(), b = Make();
  StepResult ra = Reset(a, 11), rb = Reset(b, 11);
  EXPECT_EQ(ra.observation, rb.observation);
  EXPECT_EQ(ra.info.profile, rb.info.profile);
  EXPECT_EQ(Step(a, {1, 0, 1, 0}).observation, Step(b, {1, 0, 1, 0}).observation);
}

TEST_F(ServiceTest, ResetOptionsPickTheProfile) {
  const protocol::SessionId s = Make();
  EXPECT_EQ(Ok<protocol::ResetReply>(Op::kReset, protocol::ResetRequest{s, 1, ResetOptions{"beta"}})
                .result.info.profile,
            "beta");
  EXPECT_EQ(Ok<protocol::ResetReply>(Op::kReset, protocol::ResetRequest{s, 1, ResetOptions{"0"}})
                .result.info.profile,
            "alpha");
  Err(Op::kReset, protocol::ResetRequest{s, 1, ResetOptions{"gamma"}}, absl::StatusCode::kNotFound,
      "options.profile");
}

TEST_F(ServiceTest, UnknownAndClosedSessions) {
  Err(Op::kStep, protocol::StepRequest{"12345", Action{{0}}}, absl::StatusCode::kNotFound,
      "session");
  Err(Op::kReset, protocol::ResetRequest{"12345", {}, {}}, absl::StatusCode::kNotFound, "session");
  const protocol::SessionId s = Make();
  Ok<protocol::CloseReply>(Op::kClose, protocol::CloseRequest{s});
  Err(Op::kClose, protocol::CloseRequest{s}, absl::StatusCode::kNotFound, "session");
  Err(Op::kReset, protocol::ResetRequest{s, {}, {}}, absl::StatusCode::kNotFound, "session");
}

// Handles carry 128 random bits and belong to the connection that made them: another
// connection gets exactly the answer an unknown handle gets, for every operation.
TEST_F(ServiceTest, SessionsAreUnguessableAndOwnedByTheirConnection) {
  std::set<protocol::SessionId> seen;
  for (int i = 0; i < 200; ++i) {
    const protocol::SessionId s = Make();
    ASSERT_EQ(s.size(), 32u);
    EXPECT_EQ(s.find_first_not_of("0123456789abcdef"), std::string::npos) << s;
    EXPECT_TRUE(seen.insert(s).second);
    Ok<protocol::CloseReply>(Op::kClose, protocol::CloseRequest{s});
  }
  const protocol::SessionId mine = Make();
  Reset(mine, 1);
  const std::string hbm = R"({"default": "fast1"})";
  auto errors_of = [&](const protocol::SessionId& s) {
    std::vector<std::string> m;
    m.push_back(Err(Op::kStep, protocol::StepRequest{s, Action{{0, 0, 0, 0}}},
                    absl::StatusCode::kNotFound, "session")
                    .message);
    m.push_back(
        Err(Op::kReset, protocol::ResetRequest{s, {}, {}}, absl::StatusCode::kNotFound, "session")
            .message);
    m.push_back(Err(Op::kEstimate, protocol::EstimateRequest{s, {}, "alpha", hbm, {}},
                    absl::StatusCode::kNotFound, "session")
                    .message);
    protocol::StepBatchRequest b;
    b.sessions = {s};
    b.actions = {Action{{0, 0, 0, 0}}};
    m.push_back(Err(Op::kStepBatch, b, absl::StatusCode::kNotFound, "sessions[0]").message);
    m.push_back(
        Err(Op::kClose, protocol::CloseRequest{s}, absl::StatusCode::kNotFound, "session").message);
    return m;
  };
  owner_ = "connection-b";
  const std::vector<std::string> theirs = errors_of(mine);
  const std::vector<std::string> unknown = errors_of(std::string(32, '0'));
  EXPECT_EQ(theirs, unknown);
  for (const std::string& m : theirs) EXPECT_THAT(m, ::testing::Not(HasSubstr(mine)));
  // The owner's session did not move.
  owner_ = "connection-a";
  EXPECT_EQ(Step(mine, {0, 0, 0, 1}).info.step, 1u);
  // When its connection goes, its sessions go; other connections keep theirs.
  owner_ = "connection-b";
  const protocol::SessionId other = Make();
  EXPECT_EQ(service_->CloseSessionsOf("connection-a"), 1u);
  EXPECT_EQ(service_->CloseSessionsOf("connection-a"), 0u);
  Reset(other, 2);
  EXPECT_EQ(Step(other, {0, 0, 0, 0}).info.step, 1u);
  owner_ = "connection-a";
  Err(Op::kStep, protocol::StepRequest{mine, Action{{0, 0, 0, 0}}}, absl::StatusCode::kNotFound,
      "session");
  EXPECT_EQ(Ok<protocol::StatsReply>(Op::kStats).sessions_reclaimed, 1u);
}

TEST_F(ServiceTest, OneConnectionCannotTakeEverySession) {
  ServiceOptions o;
  o.max_sessions = 5;
  o.max_sessions_per_connection = 3;
  MakeService(o);
  for (int i = 0; i < 3; ++i) Make();
  auto e = Err(Op::kMake, protocol::MakeRequest{protocol::kEnvId, {}},
               absl::StatusCode::kResourceExhausted, "op");
  EXPECT_THAT(e.message, HasSubstr("per connection"));
  owner_ = "connection-b";
  Make();
  Make();
  e = Err(Op::kMake, protocol::MakeRequest{protocol::kEnvId, {}},
          absl::StatusCode::kResourceExhausted, "op");
  EXPECT_THAT(e.message, HasSubstr("--max-sessions)"));
  EXPECT_EQ(Ok<protocol::HelloReply>(Op::kHello).limits.max_sessions_per_connection, 3u);
}

TEST_F(ServiceTest, SessionLimitIsResourceExhaustedUntilOneCloses) {
  ServiceOptions o;
  o.max_sessions = 2;
  MakeService(o);
  const protocol::SessionId a = Make();
  Make();
  Err(Op::kMake, protocol::MakeRequest{protocol::kEnvId, {}}, absl::StatusCode::kResourceExhausted,
      "op");
  Ok<protocol::CloseReply>(Op::kClose, protocol::CloseRequest{a});
  Make();
}

TEST_F(ServiceTest, OversizedMessagesAreRefusedWithoutBeingRead) {
  ServiceOptions o;
  o.max_message_bytes = 64;
  MakeService(o);
  std::string big = mp::Req("hello", {{"id", mp::U(3)}, {"pad", mp::S(std::string(100, 'x'))}});
  absl::StatusOr<Reply> r = protocol::DecodeReply(service_->Handle(big), Op::kHello);
  ASSERT_TRUE(r.ok());
  const auto& e = std::get<protocol::Error>(r->body);
  EXPECT_EQ(e.code, absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(e.field, protocol::kPayloadField);
  EXPECT_FALSE(r->id.has_value());
  Ok<protocol::HelloReply>(Op::kHello);  // still serving
}

TEST_F(ServiceTest, MalformedPayloadsGetErrorRepliesAndTheServiceGoesOn) {
  const protocol::SessionId s = Make();
  Reset(s);
  for (const std::string& bad : {std::string("\xc1"), mp::Arr({}), mp::Req("fly"),
                                 mp::Req("step", {{"session", mp::S("x")}})}) {
    absl::StatusOr<Reply> r = protocol::DecodeReply(service_->Handle(bad), Op::kStep);
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_TRUE(std::holds_alternative<protocol::Error>(r->body));
    EXPECT_FALSE(std::get<protocol::Error>(r->body).field.empty());
  }
  EXPECT_EQ(Step(s, {0, 0, 0, 1}).info.step, 1u);
  auto stats = Ok<protocol::StatsReply>(Op::kStats);
  EXPECT_EQ(stats.errors, 4u);
  EXPECT_EQ(stats.ops.at("step"), 1u);  // the malformed step never decoded
}

// 10,000 mutations of valid requests (bytes flipped, inserted, cut, spliced): every one
// gets one decodable reply whose strings are valid UTF-8, and none is INTERNAL.
TEST_F(ServiceTest, TenThousandMutatedRequestsGetCleanRefusals) {
  const protocol::SessionId s = Make();
  Reset(s, 1);
  const std::vector<std::string> seeds = {
      mp::Req("hello", {{"id", mp::U(1)}}),
      mp::Req("step", {{"id", mp::U(2)},
                       {"session", mp::S(s)},
                       {"action", mp::Nd<int64_t>("int64", {4}, {0, 1, 1, 0})}}),
      mp::Req("reset", {{"session", mp::S(s)},
                        {"seed", mp::U(3)},
                        {"options", mp::Map({{"profile", mp::S("alpha")}})}}),
      mp::Req("make", {{"env", mp::S(protocol::kEnvId)},
                       {"config", mp::Map({{"num_regions", mp::U(4)}, {"steps", mp::U(3)}})}}),
      mp::Req("step_batch", {{"sessions", mp::Arr({mp::S(s)})},
                             {"actions", mp::Nd<int64_t>("int64", {1, 4}, {0, 1, 0, 1})},
                             {"autoreset", mp::S("same_step")}}),
      mp::Req("estimate", {{"session", mp::S(s)},
                           {"profile", mp::S("alpha")},
                           {"placement", mp::S(R"({"default": "fast1"})")}}),
      mp::Req("close", {{"session", mp::S(std::string(32, 'f'))}}),
  };
  std::mt19937_64 rng(20261123);
  int internal = 0, errors = 0;
  for (int i = 0; i < 10000; ++i) {
    std::string m = seeds[rng() % seeds.size()];
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits && !m.empty(); ++e) {
      const size_t at = rng() % m.size();
      switch (rng() % 5) {
        case 0:
          m[at] = static_cast<char>(rng());
          break;
        case 1:
          m[at] ^= static_cast<char>(1 << (rng() % 8));
          break;
        case 2:
          m.insert(at, 1, static_cast<char>(rng()));
          break;
        case 3:
          m.erase(at, 1 + rng() % 8);
          break;
        default:
          m += seeds[rng() % seeds.size()].substr(0, 1 + rng() % 16);
      }
    }
    const std::string reply = service_->Handle(m, owner_);
    absl::StatusOr<Reply> r = protocol::DecodeReply(reply, Op::kHello);
    // Replies of other ops decode as hello errors only when they are errors; check the map.
    if (r.ok() && std::holds_alternative<protocol::Error>(r->body)) {
      const protocol::Error& e = std::get<protocol::Error>(r->body);
      ++errors;
      if (e.code == absl::StatusCode::kInternal) {
        ++internal;
        ADD_FAILURE() << e.message;
      }
      EXPECT_THAT(e.message, StartsWith(e.field + ": "));
      EXPECT_TRUE(mp::IsUtf8(e.message)) << e.message;
    }
    ASSERT_FALSE(reply.empty());
  }
  EXPECT_EQ(internal, 0);
  EXPECT_GT(errors, 5000);  // most mutations break the message
  Reset(s, 1);              // the session still works
  EXPECT_EQ(Step(s, {0, 0, 0, 1}).info.step, 1u);
}

TEST_F(ServiceTest, IdleSessionsAreReclaimed) {
  ServiceOptions o;
  o.idle_timeout_s = 10;
  MakeService(o);
  const protocol::SessionId old_one = Make();
  now_ += std::chrono::seconds(6);
  const protocol::SessionId young = Make();
  EXPECT_EQ(service_->ReclaimIdle(), 0u);
  now_ += std::chrono::seconds(5);
  EXPECT_EQ(service_->ReclaimIdle(), 1u);
  Err(Op::kReset, protocol::ResetRequest{old_one, {}, {}}, absl::StatusCode::kNotFound, "session");
  Reset(young);  // a request keeps a session alive
  now_ += std::chrono::seconds(9);
  EXPECT_EQ(service_->ReclaimIdle(), 0u);
  EXPECT_EQ(Ok<protocol::StatsReply>(Op::kStats).sessions_reclaimed, 1u);
}

TEST_F(ServiceTest, EstimateBySessionOrConfiguration) {
  const protocol::SessionId s = Make();
  const std::string hbm = R"({"default": "fast1"})";
  auto e = Ok<protocol::EstimateReply>(Op::kEstimate,
                                       protocol::EstimateRequest{s, {}, "alpha", hbm, {}});
  EXPECT_EQ(e.runtime_ns, 500.0);
  EXPECT_EQ(e.default_runtime_ns, 1000.0);
  e = Ok<protocol::EstimateReply>(
      Op::kEstimate, protocol::EstimateRequest{"", protocol::ConfigMap{}, "1", hbm, {}});
  EXPECT_EQ(e.runtime_ns, 500.0);  // profile by index
  Err(Op::kEstimate, protocol::EstimateRequest{s, {}, "gamma", hbm, {}},
      absl::StatusCode::kNotFound, "profile");
  Err(Op::kEstimate, protocol::EstimateRequest{s, {}, "alpha", "{\"default\": 3}", {}},
      absl::StatusCode::kInvalidArgument, "placement");
  Err(Op::kEstimate,
      protocol::EstimateRequest{"", protocol::ConfigMap{{"bogus", "1"}}, "alpha", hbm, {}},
      absl::StatusCode::kInvalidArgument, "config.bogus");
}

// A placement may come as a map: the same estimate as its JSON text, and the same rules,
// on the path of the part at fault.
TEST_F(ServiceTest, EstimateTakesAPlacementMap) {
  const protocol::SessionId s = Make();
  Placement fast;
  fast.default_tier = "fast1";
  auto e = Ok<protocol::EstimateReply>(Op::kEstimate,
                                       protocol::EstimateRequest{s, {}, "alpha", "", fast});
  EXPECT_EQ(e.runtime_ns, 500.0);
  EXPECT_EQ(e.speedup, 0.5);
  Placement overlapping;
  overlapping.default_tier = "ddr";
  overlapping.ranges = {
      {0x1000, 0x3000, "fast1"}, {0x8000, 0x9000, "fast1"}, {0x2000, 0x4000, "fast1"}};
  auto err = Err(Op::kEstimate, protocol::EstimateRequest{s, {}, "alpha", "", overlapping},
                 absl::StatusCode::kInvalidArgument, "placement.ranges[2]");
  EXPECT_THAT(err.message, HasSubstr("ranges overlap: ranges[0] [0x1000, 0x3000)"));
}

class StepBatchTest : public ServiceTest {
 protected:
  protocol::StepBatchRequest Batch(const std::vector<protocol::SessionId>& sessions,
                                   const std::vector<std::vector<int64_t>>& actions) {
    protocol::StepBatchRequest b;
    b.sessions = sessions;
    for (const auto& a : actions) b.actions.push_back(Action{a});
    return b;
  }

  // `n` sessions of `steps`-step episodes reset (seeds seed0 + i) by the batch that makes a
  // shared-memory segment for their results, and `n` twins reset alike with the results in
  // the reply.
  struct Twins {
    std::vector<protocol::SessionId> shm, plain;
    protocol::StepBatchReply made;      // the reset that made the segment
    protocol::StepBatchReply expected;  // the twins' reset
  };
  Twins MakeTwins(size_t n, const std::string& steps, uint64_t seed0, bool requests = false) {
    Twins t;
    for (size_t i = 0; i < n; ++i) {
      t.shm.push_back(Make({{"steps", steps}}));
      t.plain.push_back(Make({{"steps", steps}}));
    }
    auto first = Batch(t.shm, std::vector<std::vector<int64_t>>(n, {0, 0, 0, 0}));
    first.reset.assign(n, 1);
    for (size_t i = 0; i < n; ++i) first.seeds.push_back(seed0 + i);
    protocol::StepBatchRequest twin = first;
    twin.sessions = t.plain;
    first.shm_new = true;
    first.shm_requests = requests;
    t.made = Ok<protocol::StepBatchReply>(Op::kStepBatch, first);
    t.expected = Ok<protocol::StepBatchReply>(Op::kStepBatch, twin);
    return t;
  }
  // Step `step` of the twins (same_step autoreset): the batch into the segment, and the
  // twins' batch with the same actions.
  std::pair<protocol::StepBatchRequest, protocol::StepBatchRequest> TwinSteps(const Twins& twins,
                                                                              int step) {
    std::vector<std::vector<int64_t>> actions;
    for (size_t i = 0; i < twins.shm.size(); ++i) {
      actions.push_back({(step + static_cast<int>(i)) % 2, 1, 0, 1});
    }
    auto b = Batch(twins.shm, actions);
    b.autoreset = protocol::Autoreset::kSameStep;
    auto t = b;
    t.sessions = twins.plain;
    b.shm_segment = twins.made.shm->segment;
    return {b, t};
  }
};

TEST_F(StepBatchTest, MatchesSteppingEachSessionAlone) {
  constexpr int kN = 40;
  std::vector<protocol::SessionId> batched, single;
  for (int i = 0; i < kN; ++i) {
    batched.push_back(Make());
    single.push_back(Make());
    Reset(batched.back(), 100 + i);
    Reset(single.back(), 100 + i);
  }
  std::vector<std::vector<int64_t>> actions;
  for (int i = 0; i < kN; ++i) actions.push_back({i % 2, (i / 2) % 2, 1, 0});
  auto reply = Ok<protocol::StepBatchReply>(Op::kStepBatch, Batch(batched, actions));
  ASSERT_EQ(reply.results.size(), static_cast<size_t>(kN));
  for (int i = 0; i < kN; ++i) {
    StepResult alone = Step(single[i], actions[i]);
    EXPECT_EQ(reply.results[i].observation, alone.observation) << i;
    EXPECT_EQ(reply.results[i].reward, alone.reward) << i;
    EXPECT_EQ(reply.results[i].info.profile, alone.info.profile) << i;
    EXPECT_EQ(reply.was_reset[i], 0);
  }
  EXPECT_TRUE(reply.finals.empty());
}

TEST_F(StepBatchTest, ChecksTheWholeBatchBeforeAnythingMoves) {
  const protocol::SessionId a = Make(), b = Make(), c = Make({{"num_regions", "5"}});
  Reset(a);
  Reset(b);
  const std::vector<int64_t> ok = {1, 1, 1, 1};
  Err(Op::kStepBatch, Batch({a, a}, {ok, ok}), absl::StatusCode::kInvalidArgument, "sessions[1]");
  Err(Op::kStepBatch, Batch({a, "999"}, {ok, ok}), absl::StatusCode::kNotFound, "sessions[1]");
  Err(Op::kStepBatch, Batch({a, b}, {ok, {1, 1, 7, 1}}), absl::StatusCode::kInvalidArgument,
      "actions[1][2]");
  Err(Op::kStepBatch, Batch({a, b}, {ok, {1}}), absl::StatusCode::kInvalidArgument, "actions[1]");
  Err(Op::kStepBatch, Batch({a, c}, {ok, {1, 1, 1, 1, 1}}), absl::StatusCode::kInvalidArgument,
      "sessions[1]");
  const protocol::SessionId fresh = Make();
  Err(Op::kStepBatch, Batch({a, fresh}, {ok, ok}), absl::StatusCode::kFailedPrecondition,
      "sessions[1]");
  // Nothing moved: a's episode is still at step 0.
  EXPECT_EQ(Step(a, ok).info.step, 1u);
}

TEST_F(StepBatchTest, ResetsRequestedEntries) {
  const protocol::SessionId a = Make(), b = Make();
  Reset(a, 1);
  auto batch = Batch({a, b}, {{1, 1, 0, 0}, {0, 0, 0, 0}});
  batch.reset = {0, 1};
  batch.seeds = {std::nullopt, 77};
  auto reply = Ok<protocol::StepBatchReply>(Op::kStepBatch, batch);
  EXPECT_EQ(reply.was_reset[0], 0);
  EXPECT_EQ(reply.was_reset[1], 1);
  EXPECT_EQ(reply.results[0].info.step, 1u);
  EXPECT_EQ(reply.results[1].info.step, 0u);
  const protocol::SessionId twin = Make();
  EXPECT_EQ(reply.results[1].observation, Reset(twin, 77).observation);
}

TEST_F(StepBatchTest, SameStepAutoresetReturnsTheFinalStepAndTheNewEpisode) {
  const protocol::SessionId a = Make({{"steps", "1"}}), b = Make({{"steps", "2"}});
  Reset(a);
  Reset(b);
  auto batch = Batch({a, b}, {{1, 1, 1, 1}, {1, 0, 0, 0}});
  batch.autoreset = protocol::Autoreset::kSameStep;
  auto reply = Ok<protocol::StepBatchReply>(Op::kStepBatch, batch);
  ASSERT_EQ(reply.finals.size(), 2u);
  EXPECT_TRUE(reply.results[0].terminated);
  EXPECT_EQ(reply.results[0].reward, 4.0 / 4);
  EXPECT_EQ(reply.was_reset[0], 1);
  EXPECT_EQ(reply.results[0].info.step, 0u);  // the new episode
  EXPECT_EQ(reply.finals[0].info.step, 1u);   // the step that ended the old one
  EXPECT_FLOAT_EQ(reply.finals[0].observation[0], 1.0f);
  EXPECT_FALSE(reply.results[1].terminated);
  EXPECT_EQ(reply.was_reset[1], 0);
  EXPECT_EQ(reply.finals[1].observation, reply.results[1].observation);
  // a is inside its new episode.
  EXPECT_EQ(Step(a, {0, 0, 0, 0}).info.step, 1u);
}

TEST_F(StepBatchTest, EnvironmentFailuresNameTheEntry) {
  const protocol::SessionId a = Make(), b = Make({{"fail", "step"}});
  Reset(a);
  Reset(b);
  Err(Op::kStepBatch, Batch({a, b}, {{0, 0, 0, 0}, {0, 0, 0, 0}}), absl::StatusCode::kInternal,
      "sessions[1]");
}

// A segment as a client maps it (by the name the reply that made it gave).
class MappedSegment {
 public:
  explicit MappedSegment(const protocol::ShmReply& made) : bytes_(made.bytes) {
    for (const protocol::ShmArray& a : made.layout) arrays_[a.name] = a;
    const int fd = shm_open(made.name.c_str(), O_RDONLY, 0);
    EXPECT_GE(fd, 0) << made.name << ": " << std::strerror(errno);
    if (fd < 0) return;
    struct stat st = {};
    EXPECT_EQ(fstat(fd, &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u) << "only the server's user may open it";
    EXPECT_EQ(static_cast<uint64_t>(st.st_size), bytes_);
    void* base = mmap(nullptr, bytes_, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    EXPECT_NE(base, MAP_FAILED);
    if (base != MAP_FAILED) base_ = static_cast<const char*>(base);
  }
  ~MappedSegment() {
    if (base_ != nullptr) munmap(const_cast<char*>(base_), bytes_);
  }
  MappedSegment(const MappedSegment&) = delete;
  MappedSegment& operator=(const MappedSegment&) = delete;
  bool ok() const { return base_ != nullptr; }

  template <typename T>
  std::vector<T> Row(const std::string& name, size_t row) const {
    const protocol::ShmArray& a = arrays_.at(name);
    size_t width = 1;
    for (size_t d = 1; d < a.shape.size(); ++d) width *= a.shape[d];
    std::vector<T> out(width);
    EXPECT_LE(a.offset + (row + 1) * width * sizeof(T), bytes_) << name;
    std::memcpy(out.data(), base_ + a.offset + row * width * sizeof(T), width * sizeof(T));
    return out;
  }
  template <typename T>
  T At(const std::string& name, size_t row) const {
    return Row<T>(name, row)[0];
  }
  const void* Address(const std::string& name) const { return base_ + arrays_.at(name).offset; }

  // Row `row` of the results (or of the final results) as a StepResult, the profile by
  // its index into `profiles`.
  StepResult Result(size_t row, bool final, const std::vector<std::string>& profiles) const {
    const std::string info = final ? "final_info." : "info.";
    StepResult r;
    r.observation = Row<float>(final ? "final_obs" : "obs", row);
    if (!final) {
      r.reward = At<double>("reward", row);
      r.terminated = At<uint8_t>("terminated", row) != 0;
      r.truncated = At<uint8_t>("truncated", row) != 0;
    }
    const int32_t profile = At<int32_t>(info + "profile", row);
    r.info.profile = profile < 0 ? "?" : profiles.at(static_cast<size_t>(profile));
    r.info.step = At<uint64_t>(info + "step", row);
    r.info.interval_ns = At<double>(info + "interval_ns", row);
    r.info.migrated_bytes = At<uint64_t>(info + "migrated_bytes", row);
    r.info.elapsed_ns = At<double>(info + "elapsed_ns", row);
    r.info.tier_used_bytes = Row<uint64_t>(info + "tier_used_bytes", row);
    const std::vector<int32_t> refused = Row<int32_t>(info + "refused_regions", row);
    r.info.refused_regions.assign(refused.begin(),
                                  refused.begin() + At<int32_t>(info + "refused_count", row));
    r.info.action_mask = Row<uint8_t>(info + "action_mask", row);
    return r;
  }

 private:
  const char* base_ = nullptr;
  uint64_t bytes_ = 0;
  std::map<std::string, protocol::ShmArray> arrays_;
};

void ExpectSameResult(const StepResult& shm, const StepResult& reply, bool final,
                      const std::string& what) {
  SCOPED_TRACE(what);
  EXPECT_EQ(shm.observation, reply.observation);
  if (!final) {
    EXPECT_EQ(shm.reward, reply.reward);
    EXPECT_EQ(shm.terminated, reply.terminated);
    EXPECT_EQ(shm.truncated, reply.truncated);
  }
  EXPECT_EQ(shm.info.profile, reply.info.profile);
  EXPECT_EQ(shm.info.step, reply.info.step);
  EXPECT_EQ(shm.info.interval_ns, reply.info.interval_ns);
  EXPECT_EQ(shm.info.migrated_bytes, reply.info.migrated_bytes);
  EXPECT_EQ(shm.info.elapsed_ns, reply.info.elapsed_ns);
  EXPECT_EQ(shm.info.tier_used_bytes, reply.info.tier_used_bytes);
  EXPECT_EQ(shm.info.refused_regions, reply.info.refused_regions);
  EXPECT_EQ(shm.info.action_mask, reply.info.action_mask);
}

// The segment holds step `step` (after the making batch) of a batch whose replies are
// `want`: its sequence number and every entry's results and finals. True when there were
// finals.
bool ExpectSegmentHoldsStep(const MappedSegment& seg, const protocol::StepBatchReply& want,
                            int step, const std::vector<std::string>& profiles) {
  EXPECT_EQ(seg.At<uint64_t>("seq", 0), 2u + step);
  EXPECT_EQ(seg.At<uint8_t>("has_final", 0) != 0, !want.finals.empty());
  // The summary: whether a row has refused regions, whether an entry was reset.
  bool refused = false;
  for (const StepResult& r : want.results) refused = refused || !r.info.refused_regions.empty();
  const bool reset =
      std::find(want.was_reset.begin(), want.was_reset.end(), 1) != want.was_reset.end();
  EXPECT_EQ(seg.At<uint8_t>("summary", 0),
            (refused ? ShmBatch::kSummaryRefused : 0) | (reset ? ShmBatch::kSummaryReset : 0))
      << "step " << step;
  for (size_t i = 0; i < want.results.size(); ++i) {
    const std::string what = StrCat("step ", step, " entry ", i);
    ExpectSameResult(seg.Result(i, false, profiles), want.results[i], false, what);
    if (!want.finals.empty()) {
      ExpectSameResult(seg.Result(i, true, profiles), want.finals[i], true, what + " final");
    }
  }
  return !want.finals.empty();
}

bool NameExists(const std::string& name) {
  const int fd = shm_open(name.c_str(), O_RDONLY, 0);
  if (fd >= 0) close(fd);
  return fd >= 0;
}

// The same batches, seeds and actions on two sets of sessions: one through shared memory,
// one in the replies; every array the same, through resets, steps and same_step autoresets.
TEST_F(StepBatchTest, SharedMemoryResultsAreTheReplysResults) {
  constexpr size_t kN = 6;
  const Twins twins = MakeTwins(kN, "3", 40);
  const protocol::StepBatchReply &made = twins.made, &expected = twins.expected;
  const std::vector<std::string> profiles = {"alpha", "beta"};
  ASSERT_TRUE(made.shm.has_value());
  // The reply that makes the segment carries the results too.
  ASSERT_EQ(made.results.size(), kN);
  EXPECT_EQ(made.shm->seq, 1u);
  EXPECT_EQ(made.shm->rows, kN);
  EXPECT_EQ(made.shm->segment.size(), 32u);
  EXPECT_THAT(made.shm->name, StartsWith(StrCat("/tiergym-", getpid(), "-")));
  MappedSegment seg(*made.shm);
  ASSERT_TRUE(seg.ok());
  EXPECT_EQ(seg.At<uint64_t>("seq", 0), 1u);
  for (size_t i = 0; i < kN; ++i) {
    ExpectSameResult(seg.Result(i, false, profiles), expected.results[i], false,
                     StrCat("reset ", i));
    ExpectSameResult(made.results[i], expected.results[i], false, StrCat("reply ", i));
    EXPECT_EQ(seg.At<uint8_t>("reset", i), 1);
  }
  // Steps naming the segment: only `shm` in the reply; episodes end (3 steps) and restart.
  EXPECT_TRUE(NameExists(made.shm->name));
  bool saw_final = false;
  for (int step = 0; step < 7; ++step) {
    auto [b, t] = TwinSteps(twins, step);
    auto got = Ok<protocol::StepBatchReply>(Op::kStepBatch, b);
    const auto want = Ok<protocol::StepBatchReply>(Op::kStepBatch, t);
    ASSERT_TRUE(got.shm.has_value());
    EXPECT_TRUE(got.results.empty()) << "the arrays stay out of the reply";
    EXPECT_TRUE(got.shm->name.empty());
    EXPECT_EQ(got.shm->seq, 2u + step);
    EXPECT_EQ(seg.At<uint64_t>("seq", 0), got.shm->seq);
    EXPECT_EQ(got.shm->has_final, !want.finals.empty());
    for (size_t i = 0; i < kN; ++i) {
      const std::string what = StrCat("step ", step, " entry ", i);
      ExpectSameResult(seg.Result(i, false, profiles), want.results[i], false, what);
      EXPECT_EQ(seg.At<uint8_t>("reset", i), want.was_reset[i]) << what;
      if (got.shm->has_final) {
        saw_final = true;
        ExpectSameResult(seg.Result(i, true, profiles), want.finals[i], true, what + " final");
      }
    }
    // Named once, the segment has no name any more: only the two mappings hold it.
    EXPECT_FALSE(NameExists(made.shm->name));
  }
  EXPECT_TRUE(saw_final);
  auto stats = Ok<protocol::StatsReply>(Op::kStats);
  EXPECT_EQ(stats.shm_segments, 1u);
  EXPECT_EQ(stats.shm_bytes, made.shm->bytes);
}

// With shm_signal, a batch that succeeds gets no reply: its results, has_final and number
// are in the segment, and a process sleeping on the seq word (FUTEX_WAIT on its low 32
// bits, through its own read-only mapping) is woken. Failures are replies as always.
TEST_F(StepBatchTest, ASignalledBatchGetsNoReplyAndWakesWhoWaitsOnTheSegment) {
  constexpr size_t kN = 3;
  const Twins twins = MakeTwins(kN, "2", 7);
  const protocol::StepBatchReply& made = twins.made;
  const std::vector<std::string> profiles = {"alpha", "beta"};
  ASSERT_TRUE(made.shm.has_value());
  EXPECT_TRUE(made.shm->signal);
  MappedSegment seg(*made.shm);
  ASSERT_TRUE(seg.ok());
  const auto* word = static_cast<const uint32_t*>(seg.Address("seq"));
  bool saw_final = false;
  for (int step = 0; step < 4; ++step) {
    auto [b, t] = TwinSteps(twins, step);
    b.shm_signal = true;
    const auto before = static_cast<uint32_t>(seg.At<uint64_t>("seq", 0));
    std::chrono::duration<double> slept{0};
    std::thread waiter([&] {
      const auto start = std::chrono::steady_clock::now();
      const timespec ten_s = {10, 0};
      while (__atomic_load_n(word, __ATOMIC_ACQUIRE) == before) {
        syscall(SYS_futex, word, FUTEX_WAIT, before, &ten_s, nullptr, 0);
      }
      slept = std::chrono::steady_clock::now() - start;
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // let it fall asleep
    EXPECT_EQ(
        service_->Handle(
            protocol::EncodeRequest(Request{Op::kStepBatch, protocol::kVersion, ++id_, b}), owner_),
        "")
        << "no reply: the segment says it";
    waiter.join();
    EXPECT_LT(slept.count(), 5.0) << "woken, not timed out";
    saw_final |= ExpectSegmentHoldsStep(seg, Ok<protocol::StepBatchReply>(Op::kStepBatch, t), step,
                                        profiles);
  }
  EXPECT_TRUE(saw_final);
  // A signalled batch that fails is a reply; the segment keeps its batch.
  auto bad = Batch(twins.shm, std::vector<std::vector<int64_t>>(kN, {9, 0, 0, 0}));
  bad.shm_segment = made.shm->segment;
  bad.shm_signal = true;
  const protocol::ReplyBody refused = Call(Op::kStepBatch, bad);
  ASSERT_TRUE(std::holds_alternative<protocol::Error>(refused));
  EXPECT_THAT(std::get<protocol::Error>(refused).field, StartsWith("actions[0]"));
  EXPECT_EQ(seg.At<uint64_t>("seq", 0), 5u);
}

// A segment as a client that writes requests into it maps it (read-write).
class RequestingClient {
 public:
  explicit RequestingClient(const protocol::ShmReply& made) : bytes_(made.bytes) {
    for (const protocol::ShmArray& a : made.layout) arrays_[a.name] = a;
    fd_ = shm_open(made.name.c_str(), O_RDWR, 0);
    EXPECT_GE(fd_, 0) << made.name << ": " << std::strerror(errno);
    if (fd_ < 0) return;
    void* base = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
    EXPECT_NE(base, MAP_FAILED);
    if (base != MAP_FAILED) base_ = static_cast<char*>(base);
  }
  ~RequestingClient() {
    if (base_ != nullptr) munmap(base_, bytes_);
    if (fd_ >= 0) close(fd_);
  }
  RequestingClient(const RequestingClient&) = delete;
  RequestingClient& operator=(const RequestingClient&) = delete;
  bool ok() const { return base_ != nullptr; }
  bool Has(const std::string& name) const { return arrays_.count(name) != 0; }
  int fd() const { return fd_; }

  template <typename T>
  T* Array(const std::string& name) {
    return reinterpret_cast<T*>(base_ + arrays_.at(name).offset);
  }
  std::string Text(const std::string& name) {
    const protocol::ShmArray& a = arrays_.at(name);
    const char* p = base_ + a.offset;
    return std::string(p, strnlen(p, a.shape[0]));
  }
  uint64_t Seq() { return __atomic_load_n(Array<uint64_t>("seq"), __ATOMIC_ACQUIRE); }

  // Writes a request (actions [rows][width], resets, autoreset), bumps the request number,
  // wakes the server's thread and waits (at most 10 s) for the next batch number; whether
  // it came.
  bool Request(const std::vector<std::vector<int64_t>>& actions, const std::vector<uint8_t>& reset,
               uint8_t autoreset) {
    const protocol::ShmArray& a = arrays_.at("request_actions");
    const size_t width = a.shape[1];
    for (size_t i = 0; i < actions.size(); ++i) {
      for (size_t j = 0; j < width && j < actions[i].size(); ++j) {
        Array<int64_t>("request_actions")[i * width + j] = actions[i][j];
      }
    }
    std::memcpy(Array<uint8_t>("request_reset"), reset.data(), reset.size());
    *Array<uint8_t>("request_autoreset") = autoreset;
    return Send();
  }
  // Bumps the request number as it is, and waits as Request.
  bool Send() {
    const uint64_t before = Seq();
    __atomic_fetch_add(Array<uint64_t>("request"), 1, __ATOMIC_RELEASE);
    syscall(SYS_futex, Array<uint32_t>("request"), FUTEX_WAKE, 1, nullptr, nullptr, 0);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (Seq() == before && std::chrono::steady_clock::now() < deadline) {
      const timespec ms = {0, 1000000};
      syscall(SYS_futex, Array<uint32_t>("seq"), FUTEX_WAIT, static_cast<uint32_t>(before), &ms,
              nullptr, 0);
    }
    return Seq() == before + 1;
  }

 private:
  char* base_ = nullptr;
  int fd_ = -1;
  uint64_t bytes_ = 0;
  std::map<std::string, protocol::ShmArray> arrays_;
};

// Waits up to 5 s for `done`.
bool Eventually(const std::function<bool()>& done) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

// Requests written into the segment (no message at all) step the sessions it was made
// with exactly as step_batch requests do, and are answered through the segment.
TEST_F(StepBatchTest, RequestsThroughTheSegmentStepAsBatchesDo) {
  constexpr size_t kN = 3;
  EXPECT_EQ(Ok<protocol::HelloReply>(Op::kHello).limits.max_shm_request_threads, 64u);
  const Twins twins = MakeTwins(kN, "2", 7, /*requests=*/true);
  const protocol::StepBatchReply& made = twins.made;
  const std::vector<std::string> profiles = {"alpha", "beta"};
  ASSERT_TRUE(made.shm.has_value());
  EXPECT_TRUE(made.shm->requests);
  EXPECT_EQ(service_->ShmRequestThreads(), 1u);
  EXPECT_EQ(service_->Stats().shm_request_threads, 1u);
  RequestingClient client(*made.shm);
  ASSERT_TRUE(client.ok());
  MappedSegment seg(*made.shm);
  ASSERT_TRUE(seg.ok());
  const uint64_t requests_before = service_->Stats().requests;
  bool saw_final = false;
  for (int step = 0; step < 4; ++step) {
    auto [b, t] = TwinSteps(twins, step);
    std::vector<std::vector<int64_t>> actions;
    for (const Action& a : b.actions) actions.push_back(a.values);
    ASSERT_TRUE(client.Request(actions, std::vector<uint8_t>(kN, 0), /*same_step=*/1))
        << "step " << step;
    EXPECT_EQ(client.Text("error_code"), "") << client.Text("error_message");
    saw_final |= ExpectSegmentHoldsStep(seg, Ok<protocol::StepBatchReply>(Op::kStepBatch, t), step,
                                        profiles);
    // The first request unlinked the name (the client has mapped it).
    EXPECT_FALSE(NameExists(made.shm->name));
  }
  EXPECT_TRUE(saw_final);
  // Counted as step_batch requests (and the twins' four batches).
  EXPECT_EQ(service_->Stats().requests - requests_before, 4u + 4u);
  // A reset through the segment (autoreset none): the entry's episode restarts.
  ASSERT_TRUE(client.Request(std::vector<std::vector<int64_t>>(kN, {0, 0, 0, 0}), {1, 0, 0}, 0));
  EXPECT_EQ(client.Text("error_code"), "");
  EXPECT_EQ(seg.At<uint8_t>("reset", 0), 1);
  EXPECT_EQ(seg.At<uint64_t>("info.step", 0), 0u);
}

// Garbage a client writes into its segment is an error written back into it, naming the
// array and row; nothing moves, nothing outside the segment is read or written, and the
// segment goes on serving.
TEST_F(StepBatchTest, GarbageInTheRequestAreaIsAnErrorNamingTheArray) {
  constexpr size_t kN = 3;
  const Twins twins = MakeTwins(kN, "5", 7, /*requests=*/true);
  ASSERT_TRUE(twins.made.shm.has_value() && twins.made.shm->requests);
  RequestingClient client(*twins.made.shm);
  ASSERT_TRUE(client.ok());
  MappedSegment seg(*twins.made.shm);
  ASSERT_TRUE(seg.ok());
  const std::vector<std::vector<int64_t>> good(kN, {1, 0, 1, 0});
  const std::vector<uint8_t> steps(kN, 0);
  struct Case {
    std::vector<std::vector<int64_t>> actions;
    std::vector<uint8_t> reset;
    uint8_t autoreset;
    std::string code, field;
  };
  const std::vector<Case> cases = {
      {good, steps, 9, "INVALID_ARGUMENT", "request_autoreset"},
      {good, {0, 0, 255}, 0, "INVALID_ARGUMENT", "request_reset[2]"},
      {{{1, 0, 1, 0}, {9, 0, 0, 0}, {1, 0, 1, 0}},
       steps,
       0,
       "INVALID_ARGUMENT",
       "request_actions[1][0]"},
      {{{1, 0, 1, 0}, {1, 0, 1, 0}, {0, 0, 0, -1}},
       steps,
       0,
       "INVALID_ARGUMENT",
       "request_actions[2][3]"},
      {{{INT64_MIN, INT64_MAX, 0, 0}, {1, 0, 1, 0}, {1, 0, 1, 0}},
       steps,
       0,
       "INVALID_ARGUMENT",
       "request_actions[0][0]"},
  };
  uint64_t seq = client.Seq();
  for (const Case& c : cases) {
    ASSERT_TRUE(client.Request(c.actions, c.reset, c.autoreset)) << c.field;
    EXPECT_EQ(client.Seq(), ++seq);
    EXPECT_EQ(client.Text("error_code"), c.code) << c.field;
    EXPECT_EQ(client.Text("error_field"), c.field);
    EXPECT_THAT(client.Text("error_message"), StartsWith(c.field));
  }
  // Nothing moved: the twins, stepped alike only now, give the same step.
  auto [b, t] = TwinSteps(twins, 0);
  std::vector<std::vector<int64_t>> actions;
  for (const Action& a : b.actions) actions.push_back(a.values);
  ASSERT_TRUE(client.Request(actions, steps, 1));
  EXPECT_EQ(client.Text("error_code"), "");
  const auto want = Ok<protocol::StepBatchReply>(Op::kStepBatch, t);
  for (size_t i = 0; i < kN; ++i) {
    ExpectSameResult(seg.Result(i, false, {"alpha", "beta"}), want.results[i], false,
                     StrCat("entry ", i));
  }
  // A step of a session whose episode ended is refused on its entry.
  for (int step = 0; step < 6; ++step) ASSERT_TRUE(client.Request(good, steps, 0));
  EXPECT_EQ(client.Text("error_code"), "FAILED_PRECONDITION");
  EXPECT_EQ(client.Text("error_field"), "sessions[0]");
}

// Request threads are bounded over all connections; a segment past the bound takes no
// requests (its making reply says so); a thread ends when its segment goes (a session
// closed, the connection gone, the Service destroyed) or its file is shrunk.
TEST_F(StepBatchTest, RequestThreadsAreBoundedAndEndWithTheirSegment) {
  ServiceOptions options;
  options.max_shm_request_threads = 1;
  MakeService(options);
  const Twins first = MakeTwins(2, "5", 1, /*requests=*/true);
  ASSERT_TRUE(first.made.shm.has_value());
  EXPECT_TRUE(first.made.shm->requests);
  const Twins second = MakeTwins(2, "5", 1, /*requests=*/true);
  ASSERT_TRUE(second.made.shm.has_value());
  EXPECT_FALSE(second.made.shm->requests) << "no thread left";
  RequestingClient without(*second.made.shm);
  EXPECT_FALSE(without.Has("request")) << "a segment without requests has no request area";
  EXPECT_EQ(service_->ShmRequestThreads(), 1u);
  // Closing one of its sessions frees the segment and ends its thread.
  Ok<protocol::CloseReply>(Op::kClose, protocol::CloseRequest{first.shm[1]});
  EXPECT_TRUE(Eventually([&] { return service_->ShmRequestThreads() == 0; }));
  // The thread is free again: another connection's segment gets it, and that connection
  // going ends it.
  owner_ = "connection-b";
  const Twins theirs = MakeTwins(2, "5", 1, /*requests=*/true);
  ASSERT_TRUE(theirs.made.shm.has_value());
  EXPECT_TRUE(theirs.made.shm->requests);
  EXPECT_EQ(service_->CloseSessionsOf("connection-b"), 4u);
  EXPECT_TRUE(Eventually([&] { return service_->ShmRequestThreads() == 0; }));
  // A segment whose file is shrunk (a process of the server's user can) is freed, not
  // read: no fault, the thread ends, the handle names nothing.
  owner_ = "connection-c";
  const Twins shrunk = MakeTwins(2, "5", 1, /*requests=*/true);
  ASSERT_TRUE(shrunk.made.shm.has_value() && shrunk.made.shm->requests);
  {
    RequestingClient client(*shrunk.made.shm);
    ASSERT_TRUE(client.ok());
    ASSERT_EQ(ftruncate(client.fd(), 0), 0);
  }
  EXPECT_TRUE(Eventually([&] { return service_->ShmRequestThreads() == 0; }));
  auto [b, t] = TwinSteps(shrunk, 0);
  Err(Op::kStepBatch, b, absl::StatusCode::kNotFound, "shm");
  // A thread waiting when the Service is destroyed ends with it (the test would hang).
  owner_ = "connection-d";
  const Twins last = MakeTwins(2, "5", 1, /*requests=*/true);
  ASSERT_TRUE(last.made.shm.has_value() && last.made.shm->requests);
  const auto start = std::chrono::steady_clock::now();
  service_.reset();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
}

TEST_F(StepBatchTest, SegmentsBelongToTheirConnectionAndGoWithTheirSessions) {
  const protocol::SessionId a = Make(), b = Make();
  auto batch = Batch({a, b}, {{0, 0, 0, 0}, {0, 0, 0, 0}});
  batch.reset = {1, 1};
  batch.shm_new = true;
  auto made = Ok<protocol::StepBatchReply>(Op::kStepBatch, batch);
  ASSERT_TRUE(made.shm.has_value());
  const std::string handle = made.shm->segment;
  // Another connection, with sessions of the same shape, cannot name it.
  owner_ = "connection-b";
  const protocol::SessionId c = Make(), d = Make();
  auto theirs = Batch({c, d}, {{0, 0, 0, 0}, {0, 0, 0, 0}});
  theirs.reset = {1, 1};
  theirs.shm_segment = handle;
  auto e = Err(Op::kStepBatch, theirs, absl::StatusCode::kNotFound, "shm");
  EXPECT_THAT(e.message, HasSubstr("no such shared-memory segment on this connection"));
  // Its sessions going with their connection take their segments along (names included).
  auto mine = theirs;
  mine.shm_segment.clear();
  mine.shm_new = true;
  auto made_b = Ok<protocol::StepBatchReply>(Op::kStepBatch, mine);
  ASSERT_TRUE(made_b.shm.has_value());
  EXPECT_TRUE(NameExists(made_b.shm->name));
  EXPECT_EQ(Ok<protocol::StatsReply>(Op::kStats).shm_segments, 2u);
  EXPECT_EQ(service_->CloseSessionsOf("connection-b"), 2u);
  EXPECT_FALSE(NameExists(made_b.shm->name));
  EXPECT_EQ(Ok<protocol::StatsReply>(Op::kStats).shm_segments, 1u);
  // Closing one session of a batch frees its segment (and its name).
  owner_ = "connection-a";
  EXPECT_TRUE(NameExists(made.shm->name));
  Ok<protocol::CloseReply>(Op::kClose, protocol::CloseRequest{a});
  EXPECT_FALSE(NameExists(made.shm->name));
  auto again = Batch({b}, {{0, 0, 0, 0}});
  again.reset = {1};
  again.shm_segment = handle;
  Err(Op::kStepBatch, again, absl::StatusCode::kNotFound, "shm");
  auto stats = Ok<protocol::StatsReply>(Op::kStats);
  EXPECT_EQ(stats.shm_segments, 0u);
  EXPECT_EQ(stats.shm_bytes, 0u);
}

// Counts what the service charges to the memory budget, and refuses past a limit.
class BudgetProvider : public testing::FakeProvider {
 public:
  explicit BudgetProvider(uint64_t budget) : budget_(budget) {}
  absl::Status Charge(uint64_t bytes) override {
    if (charged + bytes > budget_) return absl::ResourceExhaustedError("over the budget");
    charged += bytes;
    return absl::OkStatus();
  }
  void Uncharge(uint64_t bytes) override { charged -= bytes; }
  std::atomic<uint64_t> charged{0};

 private:
  uint64_t budget_;
};

TEST_F(StepBatchTest, SegmentsAreBoundedAndChargedToTheMemoryBudget) {
  ServiceOptions options;
  options.max_shm_segments_per_connection = 2;
  options.clock = [this] { return now_; };
  auto provider = std::make_shared<BudgetProvider>(uint64_t{1} << 30);
  service_ = std::make_unique<Service>(options, provider, &pool_);
  EXPECT_EQ(Ok<protocol::HelloReply>(Op::kHello).limits.max_shm_bytes, options.max_shm_bytes);
  std::vector<protocol::SessionId> s;
  for (int i = 0; i < 3; ++i) s.push_back(Make());
  auto ask = [&](const protocol::SessionId& id) {
    auto b = Batch({id}, {{0, 0, 0, 0}});
    b.reset = {1};
    b.shm_new = true;
    return b;
  };
  auto one = Ok<protocol::StepBatchReply>(Op::kStepBatch, ask(s[0]));
  Ok<protocol::StepBatchReply>(Op::kStepBatch, ask(s[1]));
  EXPECT_EQ(provider->charged.load(), 2 * one.shm->bytes);
  auto e = Err(Op::kStepBatch, ask(s[2]), absl::StatusCode::kResourceExhausted, "shm");
  EXPECT_THAT(e.message, HasSubstr("limit per connection"));
  // A batch larger than its segment, or of other spaces, is refused before anything moves.
  const protocol::SessionId wide = Make({{"num_regions", "5"}});
  auto bigger = Batch({s[0], s[1]}, {{0, 0, 0, 0}, {0, 0, 0, 0}});
  bigger.reset = {1, 1};
  bigger.shm_segment = one.shm->segment;
  Err(Op::kStepBatch, bigger, absl::StatusCode::kInvalidArgument, "shm");
  auto other = Batch({wide}, {{0, 0, 0, 0, 0}});
  other.reset = {1};
  other.shm_segment = one.shm->segment;
  Err(Op::kStepBatch, other, absl::StatusCode::kInvalidArgument, "shm");
  // Freed segments give their bytes back.
  Ok<protocol::CloseReply>(Op::kClose, protocol::CloseRequest{s[0]});
  Ok<protocol::CloseReply>(Op::kClose, protocol::CloseRequest{s[1]});
  EXPECT_EQ(provider->charged.load(), 0u);

  // The budget says no: nothing held, nothing charged.
  provider = std::make_shared<BudgetProvider>(1000);
  service_ = std::make_unique<Service>(options, provider, &pool_);
  const protocol::SessionId x = Make();
  e = Err(Op::kStepBatch, ask(x), absl::StatusCode::kResourceExhausted, "shm");
  EXPECT_THAT(e.message, HasSubstr("over the budget"));
  EXPECT_EQ(Ok<protocol::StatsReply>(Op::kStats).shm_bytes, 0u);
  // Nor does the server's shared memory limit; 0 turns shared memory off.
  options.max_shm_bytes = 1000;
  MakeService(options);
  const protocol::SessionId y = Make();
  e = Err(Op::kStepBatch, ask(y), absl::StatusCode::kResourceExhausted, "shm");
  EXPECT_THAT(e.message, HasSubstr("--max-shm-mib"));
  options.max_shm_bytes = 0;
  MakeService(options);
  EXPECT_EQ(Ok<protocol::HelloReply>(Op::kHello).limits.max_shm_bytes, 0u);
  const protocol::SessionId z = Make();
  Err(Op::kStepBatch, ask(z), absl::StatusCode::kFailedPrecondition, "shm");
  // Nothing moved: z was never reset.
  Err(Op::kStep, protocol::StepRequest{z, Action{{0, 0, 0, 0}}},
      absl::StatusCode::kFailedPrecondition, "session");
}

TEST_F(StepBatchTest, ATruncatedSegmentIsAnErrorNotACrash) {
  const protocol::SessionId a = Make();
  auto b = Batch({a}, {{0, 0, 0, 0}});
  b.reset = {1};
  b.shm_new = true;
  auto made = Ok<protocol::StepBatchReply>(Op::kStepBatch, b);
  ASSERT_TRUE(made.shm.has_value());
  const int fd = shm_open(made.shm->name.c_str(), O_RDWR, 0);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, 0), 0);  // what a hostile process of the server's user could do
  close(fd);
  b.shm_new = false;
  b.shm_segment = made.shm->segment;
  auto e = Err(Op::kStepBatch, b, absl::StatusCode::kFailedPrecondition, "shm");
  EXPECT_THAT(e.message, HasSubstr("truncated"));
  EXPECT_EQ(Ok<protocol::StatsReply>(Op::kStats).shm_segments, 0u);
}

// A client may shrink a segment's file between the server's size check and its next
// access (the race a hostile client won in a soak run: SIGBUS in RequestWord). Any access
// to a shrunk segment reads zeros or writes nowhere shared, and the segment then reads as
// not intact; a fault outside every segment still kills.
TEST(ShmBatchGuardTest, AnAccessToASegmentShrunkUnderItIsNoFault) {
  const ShmBatchShape shape{
      .rows = 4, .obs = 8, .tiers = 2, .regions = 4, .mask = 8, .mask_columns = 0, .action = 4};
  absl::StatusOr<std::unique_ptr<ShmBatch>> batch = ShmBatch::Create(shape, /*requests=*/true);
  ASSERT_TRUE(batch.ok()) << batch.status();
  const int fd = shm_open((*batch)->name().c_str(), O_RDWR, 0);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, 0), 0);
  close(fd);
  EXPECT_EQ((*batch)->RequestWord(), 0u);  // faulted before the guard: SIGBUS
  (*batch)->Publish(7, /*has_final=*/false, /*summary=*/0);
  EXPECT_FALSE((*batch)->Intact());
  batch->reset();  // unmaps, unguards

  EXPECT_DEATH(
      {
        char path[] = "/tmp/tiergym-sigbus-XXXXXX";
        const int file = mkstemp(path);
        unlink(path);
        if (file < 0 || ftruncate(file, 4096) != 0) std::abort();
        auto* page = static_cast<volatile char*>(
            mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, file, 0));
        if (ftruncate(file, 0) != 0) std::abort();
        (void)page[0];  // not a segment's: the default action
      },
      "");
}

}  // namespace
}  // namespace tiergym::env

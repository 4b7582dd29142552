// The session manager (env/server/service.h) on a fake environment: every operation,
// every refusal with its code and field, limits, idle reclamation, and step_batch
// (parallel, all-or-nothing checks, autoreset) against stepping the sessions one by one.
#include "env/server/service.h"

#include <chrono>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/env/fake_env.h"
#include "tests/env/msgpack_builder.h"

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
    protocol::ReplyBody b = Call(op, std::move(body));
    if (auto* e = std::get_if<protocol::Error>(&b)) {
      ADD_FAILURE() << "error reply: " << e->message;
      return T{};
    }
    return std::get<T>(b);
  }
  protocol::Error Err(Op op, protocol::RequestBody body, absl::StatusCode code,
                      const std::string& field) {
    protocol::ReplyBody b = Call(op, std::move(body));
    auto* e = std::get_if<protocol::Error>(&b);
    if (e == nullptr) {
      ADD_FAILURE() << "expected an error reply";
      return {};
    }
    EXPECT_EQ(e->code, code) << e->message;
    EXPECT_EQ(e->field, field) << e->message;
    EXPECT_THAT(e->message, StartsWith(field + ": "));
    return *e;
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
    m.push_back(Err(Op::kEstimate, protocol::EstimateRequest{s, {}, "alpha", hbm},
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

// Whether `s` is well-formed UTF-8 (lead and continuation bytes; what decoders demand).
bool IsUtf8(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    const size_t len = c < 0x80         ? 1
                       : (c >> 5) == 6  ? 2
                       : (c >> 4) == 14 ? 3
                       : (c >> 3) == 30 ? 4
                                        : 0;
    if (len == 0 || i + len > s.size()) return false;
    for (size_t k = 1; k < len; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) & 0xc0) != 0x80) return false;
    }
    i += len;
  }
  return true;
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
      EXPECT_TRUE(IsUtf8(e.message)) << e.message;
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
  auto e =
      Ok<protocol::EstimateReply>(Op::kEstimate, protocol::EstimateRequest{s, {}, "alpha", hbm});
  EXPECT_EQ(e.runtime_ns, 500.0);
  EXPECT_EQ(e.default_runtime_ns, 1000.0);
  e = Ok<protocol::EstimateReply>(Op::kEstimate,
                                  protocol::EstimateRequest{"", protocol::ConfigMap{}, "1", hbm});
  EXPECT_EQ(e.runtime_ns, 500.0);  // profile by index
  Err(Op::kEstimate, protocol::EstimateRequest{s, {}, "gamma", hbm}, absl::StatusCode::kNotFound,
      "profile");
  Err(Op::kEstimate, protocol::EstimateRequest{s, {}, "alpha", "{\"default\": 3}"},
      absl::StatusCode::kInvalidArgument, "placement");
  Err(Op::kEstimate,
      protocol::EstimateRequest{"", protocol::ConfigMap{{"bogus", "1"}}, "alpha", hbm},
      absl::StatusCode::kInvalidArgument, "config.bogus");
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

}  // namespace
}  // namespace tiergym::env

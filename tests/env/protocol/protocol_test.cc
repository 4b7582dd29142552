// The protocol codec (env/protocol/protocol.h) without sockets: every request and reply
// round-trips, and every malformed payload is refused with a code and the field at fault.
#include "env/protocol/protocol.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/env/msgpack_builder.h"

namespace tiergym::env::protocol {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;
using namespace tiergym::testing::mp;  // NOLINT: the builder's one-letter names

// The error of decoding `payload`; fails the test when it decodes.
Error DecodeError(const std::string& payload) {
  DecodedRequest d = DecodeRequest(payload);
  EXPECT_TRUE(d.error.has_value()) << "decoded without error";
  return d.error.value_or(Error{});
}

void ExpectError(const std::string& payload, absl::StatusCode code, const std::string& field,
                 const std::string& detail = "") {
  Error e = DecodeError(payload);
  EXPECT_EQ(e.code, code) << e.message;
  EXPECT_EQ(e.field, field) << e.message;
  EXPECT_THAT(e.message, StartsWith(field + ": "));
  if (!detail.empty()) {
    EXPECT_THAT(e.message, HasSubstr(detail));
  }
}

Request MustDecode(const std::string& payload) {
  DecodedRequest d = DecodeRequest(payload);
  EXPECT_FALSE(d.error.has_value()) << d.error->message;
  return d.request;
}

StepResult SampleResult(int tiers, int regions, float base) {
  StepResult r;
  for (int i = 0; i < regions * 4 + 3; ++i) r.observation.push_back(base + 0.25f * i);
  r.reward = 0.125 * base;
  r.terminated = base > 1;
  r.truncated = false;
  r.info.profile = base > 1 ? "lulesh" : "minife";
  r.info.step = static_cast<uint64_t>(base * 10);
  r.info.interval_ns = 1e6 + base;
  r.info.default_interval_ns = 2e6;
  r.info.migration_ns = 3.5;
  r.info.migrated_bytes = 4096;
  r.info.elapsed_ns = 5e6;
  r.info.default_elapsed_ns = 6e6;
  r.info.default_total_ns = 7e8;
  for (int t = 0; t < tiers; ++t) r.info.tier_used_bytes.push_back(1000u * (t + 1));
  r.info.refused_regions = {3, 1};
  for (int i = 0; i < regions * tiers; ++i) r.info.action_mask.push_back(i % 3 != 0);
  return r;
}

void ExpectSameResult(const StepResult& a, const StepResult& b) {
  EXPECT_EQ(a.observation, b.observation);
  EXPECT_EQ(a.info.profile, b.info.profile);
  EXPECT_EQ(a.info.step, b.info.step);
  EXPECT_EQ(a.info.interval_ns, b.info.interval_ns);
  EXPECT_EQ(a.info.default_interval_ns, b.info.default_interval_ns);
  EXPECT_EQ(a.info.migration_ns, b.info.migration_ns);
  EXPECT_EQ(a.info.migrated_bytes, b.info.migrated_bytes);
  EXPECT_EQ(a.info.elapsed_ns, b.info.elapsed_ns);
  EXPECT_EQ(a.info.default_elapsed_ns, b.info.default_elapsed_ns);
  EXPECT_EQ(a.info.default_total_ns, b.info.default_total_ns);
  EXPECT_EQ(a.info.tier_used_bytes, b.info.tier_used_bytes);
  EXPECT_EQ(a.info.refused_regions, b.info.refused_regions);
  EXPECT_EQ(a.info.action_mask, b.info.action_mask);
}

// --- Requests round-trip -------------------------------------------------------------------

TEST(ProtocolRequestTest, EveryOpRoundTrips) {
  Request hello{Op::kHello, kVersion, 7, std::monostate{}};
  Request d = MustDecode(EncodeRequest(hello));
  EXPECT_EQ(d.op, Op::kHello);
  EXPECT_EQ(d.id, 7u);

  Request make{Op::kMake, kVersion, std::nullopt,
               MakeRequest{kEnvId, {{"num_regions", "16"}, {"profiles", "minife,lulesh"}}}};
  d = MustDecode(EncodeRequest(make));
  EXPECT_FALSE(d.id.has_value());
  ASSERT_TRUE(std::holds_alternative<MakeRequest>(d.body));
  EXPECT_EQ(std::get<MakeRequest>(d.body).env, kEnvId);
  EXPECT_EQ(std::get<MakeRequest>(d.body).config, std::get<MakeRequest>(make.body).config);

  ResetRequest rr{"s12", 99, ResetOptions{"lulesh"}};
  d = MustDecode(EncodeRequest(Request{Op::kReset, kVersion, 1, rr}));
  ASSERT_TRUE(std::holds_alternative<ResetRequest>(d.body));
  EXPECT_EQ(std::get<ResetRequest>(d.body).session, "s12");
  EXPECT_EQ(std::get<ResetRequest>(d.body).seed, 99u);
  EXPECT_EQ(std::get<ResetRequest>(d.body).options.profile, "lulesh");
  // Without a seed the generator goes on: an absent seed must not read as the seed 0.
  ResetRequest unseeded;
  unseeded.session = "s12";
  d = MustDecode(EncodeRequest(Request{Op::kReset, kVersion, 1, unseeded}));
  ASSERT_TRUE(std::holds_alternative<ResetRequest>(d.body));
  EXPECT_FALSE(std::get<ResetRequest>(d.body).seed.has_value());

  StepRequest sr{"s12", Action{{0, 1, 1, 0}}};
  d = MustDecode(EncodeRequest(Request{Op::kStep, kVersion, 2, sr}));
  ASSERT_TRUE(std::holds_alternative<StepRequest>(d.body));
  EXPECT_THAT(std::get<StepRequest>(d.body).action.values, ElementsAre(0, 1, 1, 0));

  StepBatchRequest br;
  br.sessions = {"s3", "s4", "s5"};
  br.actions = {Action{{0, 1}}, Action{{1, 1}}, Action{{1, 0}}};
  br.reset = {0, 1, 0};
  br.seeds = {std::nullopt, 42, std::nullopt};
  br.options = {ResetOptions{}, ResetOptions{"1"}, ResetOptions{}};
  br.autoreset = Autoreset::kSameStep;
  d = MustDecode(EncodeRequest(Request{Op::kStepBatch, kVersion, 3, br}));
  ASSERT_TRUE(std::holds_alternative<StepBatchRequest>(d.body));
  const StepBatchRequest& b = std::get<StepBatchRequest>(d.body);
  EXPECT_THAT(b.sessions, ElementsAre("s3", "s4", "s5"));
  ASSERT_EQ(b.actions.size(), 3u);
  EXPECT_THAT(b.actions[2].values, ElementsAre(1, 0));
  EXPECT_THAT(b.reset, ElementsAre(0, 1, 0));
  EXPECT_EQ(b.seeds[1], 42u);
  EXPECT_FALSE(b.seeds[0].has_value());
  EXPECT_EQ(b.options[1].profile, "1");
  EXPECT_EQ(b.autoreset, Autoreset::kSameStep);

  d = MustDecode(EncodeRequest(Request{Op::kFork, kVersion, 5, ForkRequest{"s12"}}));
  ASSERT_TRUE(std::holds_alternative<ForkRequest>(d.body));
  EXPECT_EQ(std::get<ForkRequest>(d.body).session, "s12");

  EstimateRequest er{"", ConfigMap{{"machine", "knl"}}, "minife", "{\"default\": \"ddr\"}", {}};
  d = MustDecode(EncodeRequest(Request{Op::kEstimate, kVersion, 4, er}));
  ASSERT_TRUE(std::holds_alternative<EstimateRequest>(d.body));
  EXPECT_EQ(std::get<EstimateRequest>(d.body).profile, "minife");
  EXPECT_EQ(std::get<EstimateRequest>(d.body).placement_json, er.placement_json);
  EXPECT_EQ(std::get<EstimateRequest>(d.body).config, er.config);
  er.placement_json.clear();
  er.placement = Placement{"ddr", {{4096, 8192, "hbm"}}, {}};
  d = MustDecode(EncodeRequest(Request{Op::kEstimate, kVersion, 4, er}));
  EXPECT_EQ(std::get<EstimateRequest>(d.body).placement, er.placement);
  er.placement = Placement{"ddr", {}, {{"hbm", 0.25}}};
  d = MustDecode(EncodeRequest(Request{Op::kEstimate, kVersion, 4, er}));
  EXPECT_EQ(std::get<EstimateRequest>(d.body).placement, er.placement);
  // Bounds as hex text, as in placement files; wrong parts named by path.
  d = MustDecode(
      Req("estimate",
          {{"profile", S("minife")},
           {"placement",
            Map({{"default", S("ddr")},
                 {"ranges",
                  Arr({Map({{"start", S("0x1000")}, {"end", U(8192)}, {"tier", S("hbm")}})})}})}}));
  EXPECT_EQ(std::get<EstimateRequest>(d.body).placement->ranges[0].start, 4096u);
  ExpectError(
      Req("estimate",
          {{"profile", S("minife")},
           {"placement",
            Map({{"default", S("ddr")},
                 {"ranges",
                  Arr({Map({{"start", S("0x1zz")}, {"end", U(8192)}, {"tier", S("hbm")}})})}})}}),
      absl::StatusCode::kInvalidArgument, "placement.ranges[0].start");
  ExpectError(Req("estimate", {{"profile", S("minife")},
                               {"placement", Map({{"default", S("ddr")}, {"tiers", U(1)}})}}),
              absl::StatusCode::kInvalidArgument, "placement.tiers");

  d = MustDecode(EncodeRequest(Request{Op::kClose, kVersion, 5, CloseRequest{"s9"}}));
  EXPECT_EQ(std::get<CloseRequest>(d.body).session, "s9");
  d = MustDecode(EncodeRequest(Request{Op::kStats, kVersion, 6, std::monostate{}}));
  EXPECT_EQ(d.op, Op::kStats);
  d = MustDecode(EncodeRequest(Request{Op::kList, kVersion, 6, std::monostate{}}));
  EXPECT_EQ(d.op, Op::kList);
}

TEST(ProtocolRequestTest, ActionsInEveryAcceptedForm) {
  auto action_of = [](const std::string& a) {
    Request r = MustDecode(Req("step", {{"session", S("s1")}, {"action", a}}));
    return std::get<StepRequest>(r.body).action.values;
  };
  EXPECT_THAT(action_of(I(5)), ElementsAre(5));
  EXPECT_THAT(action_of(Arr({U(0), I(-1), U(2)})), ElementsAre(0, -1, 2));
  EXPECT_THAT(action_of(Nd<int32_t>("int32", {3}, {2, 0, 1})), ElementsAre(2, 0, 1));
  EXPECT_THAT(action_of(Nd<uint8_t>("uint8", {2}, {1, 255})), ElementsAre(1, 255));
  EXPECT_THAT(action_of(Nd<int64_t>("int64", {}, {4})), ElementsAre(4));

  // Batch actions as a list of actions, and as a 1-D array for move mode.
  Request r = MustDecode(Req(
      "step_batch", {{"sessions", Arr({S("a"), S("b")})}, {"actions", Arr({Arr({U(1)}), I(3)})}}));
  EXPECT_THAT(std::get<StepBatchRequest>(r.body).actions[1].values, ElementsAre(3));
  r = MustDecode(Req("step_batch", {{"sessions", Arr({S("a"), S("b")})},
                                    {"actions", Nd<int64_t>("int64", {2}, {7, 8})}}));
  EXPECT_THAT(std::get<StepBatchRequest>(r.body).actions[1].values, ElementsAre(8));
}

TEST(ProtocolRequestTest, ConfigValuesKeepTheirTypesAndListsStayLists) {
  Request r = MustDecode(
      Req("make", {{"env", S(kEnvId)},
                   {"config", Map({{"num_regions", U(16)},
                                   {"history_decay", F(0.25)},
                                   {"steps", I(-1)},
                                   {"flag", B(true)},
                                   {"machine", S("knl")},
                                   {"profiles", Arr({S("minife"), S("/data/a,b")})}})}}));
  const ConfigMap& c = std::get<MakeRequest>(r.body).config;
  EXPECT_EQ(c.at("num_regions"), ConfigValue(16));
  EXPECT_EQ(c.at("history_decay"), ConfigValue(0.25));
  EXPECT_EQ(c.at("steps"), ConfigValue(-1));
  EXPECT_EQ(c.at("flag"), ConfigValue(true));
  EXPECT_EQ(c.at("machine"), ConfigValue("knl"));
  // An item may hold a comma: nothing is joined or split on the way.
  EXPECT_EQ(c.at("profiles"), ConfigValue(ConfigValue::List{"minife", "/data/a,b"}));
  // And back: the client's encoder writes the same types.
  Request again = MustDecode(EncodeRequest(r));
  EXPECT_EQ(std::get<MakeRequest>(again.body).config, c);
  // A list may pass one value's 4096 bytes: 256 profile directories of 80 bytes (a
  // training pool of tiergym.datasets).
  ConfigValue::List pool;
  std::vector<std::string> items;
  for (int i = 0; i < 256; ++i) {
    pool.push_back("/root/.cache/tiergym/datasets-v1/knl-seed1-s20000/procedural-v1-" +
                   std::to_string(i) + "/profile");
    items.push_back(S(pool.back()));
  }
  r = MustDecode(Req("make", {{"env", S(kEnvId)}, {"config", Map({{"profiles", Arr(items)}})}}));
  EXPECT_EQ(std::get<MakeRequest>(r.body).config.at("profiles"), ConfigValue(pool));
}

TEST(ProtocolRequestTest, OtherVersionsDecodeSoThatHelloCanAnswer) {
  Request r = MustDecode(Map({{"v", U(1)}, {"op", S("hello")}}));
  EXPECT_EQ(r.version, 1u);
}

// --- Malformed requests ---------------------------------------------------------------------

TEST(ProtocolMalformedTest, NotMsgpack) {
  ExpectError("\xc1", absl::StatusCode::kInvalidArgument, kPayloadField, "not msgpack");
  ExpectError("", absl::StatusCode::kInvalidArgument, kPayloadField);
  ExpectError("hello world", absl::StatusCode::kInvalidArgument, kPayloadField);
}

TEST(ProtocolMalformedTest, TruncatedMessage) {
  const std::string full = Req("step", {{"session", S("s1")}, {"action", Arr({U(1), U(0)})}});
  ExpectError(full.substr(0, full.size() - 1), absl::StatusCode::kInvalidArgument, kPayloadField,
              "ends in the middle");
}

TEST(ProtocolMalformedTest, TrailingBytes) {
  ExpectError(Req("hello") + U(1), absl::StatusCode::kInvalidArgument, kPayloadField,
              "after the end");
}

TEST(ProtocolMalformedTest, NotAMap) {
  ExpectError(Arr({S("hello")}), absl::StatusCode::kInvalidArgument, kPayloadField,
              "expected a map, got array");
  ExpectError(U(3), absl::StatusCode::kInvalidArgument, kPayloadField);
}

TEST(ProtocolMalformedTest, NonStringKey) {
  std::string m = internal::Packed([](auto& pk) { pk.pack_map(1); }) + U(1) + U(2);
  ExpectError(m, absl::StatusCode::kInvalidArgument, kPayloadField, "keys must be strings");
}

TEST(ProtocolMalformedTest, MissingFields) {
  ExpectError(Map({{"op", S("hello")}}), absl::StatusCode::kInvalidArgument, "v", "missing");
  ExpectError(Map({{"v", U(1)}}), absl::StatusCode::kInvalidArgument, "op", "missing");
  ExpectError(Req("step", {{"action", U(1)}}), absl::StatusCode::kInvalidArgument, "session");
  ExpectError(Req("step", {{"session", S("s1")}}), absl::StatusCode::kInvalidArgument, "action");
  ExpectError(Req("make"), absl::StatusCode::kInvalidArgument, "env");
  ExpectError(Req("reset"), absl::StatusCode::kInvalidArgument, "session");
  ExpectError(Req("close"), absl::StatusCode::kInvalidArgument, "session");
  ExpectError(Req("estimate", {{"profile", S("x")}}), absl::StatusCode::kInvalidArgument,
              "placement");
  ExpectError(Req("step_batch", {{"sessions", Arr({S("a")})}}), absl::StatusCode::kInvalidArgument,
              "actions");
  ExpectError(Req("step", {{"session", Nil()}, {"action", U(1)}}),
              absl::StatusCode::kInvalidArgument, "session", "missing");
}

TEST(ProtocolMalformedTest, WrongTypes) {
  ExpectError(Map({{"v", S("1")}, {"op", S("hello")}}), absl::StatusCode::kInvalidArgument, "v",
              "expected an unsigned integer, got str");
  ExpectError(Map({{"v", U(1)}, {"op", U(3)}}), absl::StatusCode::kInvalidArgument, "op",
              "expected a string, got integer");
  ExpectError(Req("hello", {{"id", S("x")}}), absl::StatusCode::kInvalidArgument, "id");
  ExpectError(Req("step", {{"session", U(7)}, {"action", U(1)}}),
              absl::StatusCode::kInvalidArgument, "session", "got integer");
  ExpectError(Req("step", {{"session", S("")}, {"action", U(1)}}),
              absl::StatusCode::kInvalidArgument, "session", "1 to 64 characters, got 0");
  ExpectError(Req("step", {{"session", S(std::string(65, 'a'))}, {"action", U(1)}}),
              absl::StatusCode::kInvalidArgument, "session", "1 to 64 characters, got 65");
  ExpectError(Req("step", {{"session", S("s1")}, {"action", S("left")}}),
              absl::StatusCode::kInvalidArgument, "action", "got str");
  ExpectError(Req("step", {{"session", S("s1")}, {"action", Arr({U(1), F(0.5)})}}),
              absl::StatusCode::kInvalidArgument, "action[1]", "got float");
  ExpectError(Req("step", {{"session", S("s1")}, {"action", U(uint64_t{1} << 63)}}),
              absl::StatusCode::kInvalidArgument, "action", "int64 range");
  ExpectError(Req("reset", {{"session", S("s1")}, {"seed", F(1.5)}}),
              absl::StatusCode::kInvalidArgument, "seed");
  ExpectError(Req("reset", {{"session", S("s1")}, {"options", Map({{"profile", F(1)}})}}),
              absl::StatusCode::kInvalidArgument, "options.profile");
  ExpectError(Req("reset", {{"session", S("s1")}, {"options", S("lulesh")}}),
              absl::StatusCode::kInvalidArgument, "options", "expected a map");
  ExpectError(Req("make", {{"env", S(kEnvId)}, {"config", Map({{"num_regions", Map({})}})}}),
              absl::StatusCode::kInvalidArgument, "config.num_regions");
  ExpectError(Req("make", {{"env", S(kEnvId)}, {"config", Map({{"profiles", Arr({U(3)})}})}}),
              absl::StatusCode::kInvalidArgument, "config.profiles[0]", "expected a string");
  ExpectError(Req("make", {{"env", S(kEnvId)}, {"config", Arr({})}}),
              absl::StatusCode::kInvalidArgument, "config", "expected a map");
}

TEST(ProtocolMalformedTest, UnknownOpAndUnknownKeys) {
  ExpectError(Req("teleport"), absl::StatusCode::kUnimplemented, "op", "unknown op \"teleport\"");
  ExpectError(Req("hello", {{"colour", S("red")}}), absl::StatusCode::kInvalidArgument, "colour",
              "unknown key");
  ExpectError(Req("reset", {{"session", S("s1")}, {"sed", U(3)}}),
              absl::StatusCode::kInvalidArgument, "sed", "unknown key");
  ExpectError(Req("reset", {{"session", S("s1")}, {"options", Map({{"profil", S("x")}})}}),
              absl::StatusCode::kInvalidArgument, "options.profil", "unknown key");
  // Keys that are not plain names are quoted, so the field is never empty and never holds
  // the ": " that ends it in the message (the fuzzer's find: {"": 118, ...}).
  ExpectError(Map({{"", U(118)}, {"v", U(2)}, {"op", S("hello")}}),
              absl::StatusCode::kInvalidArgument, "[\"\"]", "unknown key");
  ExpectError(Req("hello", {{"a: b", U(1)}}), absl::StatusCode::kInvalidArgument, "[\"a\\x3a b\"]",
              "unknown key");
  ExpectError(Req("reset", {{"session", S("s1")}, {"options", Map({{"say \"hi\"", U(1)}})}}),
              absl::StatusCode::kInvalidArgument, "options[\"say \\x22hi\\x22\"]", "unknown key");
}

TEST(ProtocolMalformedTest, BadArrays) {
  auto step = [](const std::string& action) {
    return Req("step", {{"session", S("s1")}, {"action", action}});
  };
  ExpectError(step(Nd<float>("float32", {2}, {1, 0})), absl::StatusCode::kInvalidArgument,
              "action.dtype", "integer dtype");
  ExpectError(step(Nd<int64_t>("complex128", {1}, {1})), absl::StatusCode::kInvalidArgument,
              "action.dtype", "unknown dtype");
  ExpectError(step(Nd<int64_t>("int64", {3}, {1, 0})), absl::StatusCode::kInvalidArgument,
              "action.data", "16 bytes for 3 elements");
  ExpectError(step(Nd<int64_t>("int64", {2, 1}, {1, 0})), absl::StatusCode::kInvalidArgument,
              "action.shape", "at most 1 dimension");
  ExpectError(step(Map({{"dtype", S("int64")}, {"shape", Arr({U(1)})}, {"data", S("12345678")}})),
              absl::StatusCode::kInvalidArgument, "action.data", "expected bin");
  ExpectError(step(Map({{"dtype", S("int64")}, {"shape", Arr({U(1)})}})),
              absl::StatusCode::kInvalidArgument, "action.data", "missing");
  ExpectError(step(Nd<uint64_t>("uint64", {1}, {~uint64_t{0}})), absl::StatusCode::kInvalidArgument,
              "action[0]", "int64 range");
  ExpectError(step(Map({{"dtype", S("int64")},
                        {"shape", Arr({U(1), U(1u << 31), U(1u << 31)})},
                        {"data", Bin("")}})),
              absl::StatusCode::kInvalidArgument, "action.shape", "too many elements");
}

TEST(ProtocolMalformedTest, BadBatches) {
  auto batch = [](std::vector<std::pair<std::string, std::string>> m) {
    return Req("step_batch", m);
  };
  const std::string two = Arr({S("a"), S("b")});
  ExpectError(batch({{"sessions", Arr({})}, {"actions", Arr({})}}),
              absl::StatusCode::kInvalidArgument, "sessions", "no sessions");
  ExpectError(batch({{"sessions", two}, {"actions", Arr({U(1)})}}),
              absl::StatusCode::kInvalidArgument, "actions", "1 actions for 2 sessions");
  ExpectError(batch({{"sessions", two}, {"actions", Nd<int64_t>("int64", {3, 1}, {1, 1, 1})}}),
              absl::StatusCode::kInvalidArgument, "actions.shape", "3 rows for 2 sessions");
  ExpectError(batch({{"sessions", Arr({S("a"), U(2)})}, {"actions", Arr({U(1), U(1)})}}),
              absl::StatusCode::kInvalidArgument, "sessions[1]");
  ExpectError(batch({{"sessions", two}, {"actions", Arr({U(1), Arr({U(1), S("x")})})}}),
              absl::StatusCode::kInvalidArgument, "actions[1][1]");
  ExpectError(batch({{"sessions", two}, {"actions", Arr({U(1), U(1)})}, {"reset", Arr({B(true)})}}),
              absl::StatusCode::kInvalidArgument, "reset", "1 entries for 2 sessions");
  ExpectError(batch({{"sessions", two},
                     {"actions", Arr({U(1), U(1)})},
                     {"reset", Nd<uint8_t>("bool", {2}, {1, 2})}}),
              absl::StatusCode::kInvalidArgument, "reset[1]", "0 or 1");
  ExpectError(
      batch({{"sessions", two}, {"actions", Arr({U(1), U(1)})}, {"seeds", Arr({Nil(), I(-1)})}}),
      absl::StatusCode::kInvalidArgument, "seeds[1]", ">= 0");
  ExpectError(batch({{"sessions", two},
                     {"actions", Arr({U(1), U(1)})},
                     {"options", Arr({Nil(), Map({{"x", U(1)}})})}}),
              absl::StatusCode::kInvalidArgument, "options[1].x", "unknown key");
  ExpectError(batch({{"sessions", two}, {"actions", Arr({U(1), U(1)})}, {"autoreset", S("later")}}),
              absl::StatusCode::kInvalidArgument, "autoreset", "\"later\"");
  // The ready signal stands for a reply only to batches naming a segment: the reply that
  // makes one carries its name.
  for (const std::string& shm : {B(true), Nil()}) {
    ExpectError(batch({{"sessions", two},
                       {"actions", Arr({U(1), U(1)})},
                       {"shm", shm},
                       {"shm_signal", B(true)}}),
                absl::StatusCode::kInvalidArgument, "shm_signal", "only with shm naming a segment");
  }
  ExpectError(batch({{"sessions", two},
                     {"actions", Arr({U(1), U(1)})},
                     {"shm", S(std::string(32, 'a'))},
                     {"shm_signal", U(1)}}),
              absl::StatusCode::kInvalidArgument, "shm_signal");
  const Request signalled = MustDecode(batch({{"sessions", two},
                                              {"actions", Arr({U(1), U(1)})},
                                              {"shm", S(std::string(32, 'a'))},
                                              {"shm_signal", B(true)}}));
  EXPECT_TRUE(std::get<StepBatchRequest>(signalled.body).shm_signal);
  // Requests through the segment are asked for by the batch that makes it.
  for (const std::string& shm : {S(std::string(32, 'a')), Nil()}) {
    ExpectError(batch({{"sessions", two},
                       {"actions", Arr({U(1), U(1)})},
                       {"shm", shm},
                       {"shm_requests", B(true)}}),
                absl::StatusCode::kInvalidArgument, "shm_requests", "only with shm: true");
  }
  ExpectError(batch({{"sessions", two},
                     {"actions", Arr({U(1), U(1)})},
                     {"shm", B(true)},
                     {"shm_requests", U(1)}}),
              absl::StatusCode::kInvalidArgument, "shm_requests");
  const Request asked = MustDecode(batch({{"sessions", two},
                                          {"actions", Arr({U(1), U(1)})},
                                          {"shm", B(true)},
                                          {"shm_requests", B(true)}}));
  EXPECT_TRUE(std::get<StepBatchRequest>(asked.body).shm_requests);
  // And back: the encoder writes it only beside shm: true.
  StepBatchRequest again = std::get<StepBatchRequest>(asked.body);
  const Request round = MustDecode(EncodeRequest(Request{Op::kStepBatch, kVersion, 3, again}));
  EXPECT_TRUE(std::get<StepBatchRequest>(round.body).shm_requests);
}

TEST(ProtocolMalformedTest, OversizedBatchIsResourceExhausted) {
  std::vector<std::string> ids(5, S("a"));
  DecodeLimits limits;
  limits.max_batch = 4;
  DecodedRequest d = DecodeRequest(
      Req("step_batch",
          {{"sessions", Arr(ids)}, {"actions", Arr(std::vector<std::string>(5, U(0)))}}),
      limits);
  ASSERT_TRUE(d.error.has_value());
  EXPECT_EQ(d.error->code, absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(d.error->field, "sessions");
}

TEST(ProtocolMalformedTest, DeclaredSizesBeyondThePayloadAreRefusedWithoutAllocating) {
  // array32 announcing 2^32 - 1 elements in a 5-byte message.
  ExpectError(std::string("\xdd\xff\xff\xff\xff", 5), absl::StatusCode::kResourceExhausted,
              kPayloadField);
  // map32 likewise.
  ExpectError(std::string("\xdf\xff\xff\xff\xff", 5), absl::StatusCode::kResourceExhausted,
              kPayloadField);
  // A bin32 of 4 GiB in a short message is simply incomplete (nothing is allocated for it).
  ExpectError(
      Req("step", {{"session", S("s1")}, {"action", std::string("\xc6\xff\xff\xff\xff", 5)}}),
      absl::StatusCode::kInvalidArgument, kPayloadField, "ends in the middle");
}

TEST(ProtocolMalformedTest, EstimateTakesSessionOrConfig) {
  ExpectError(
      Req("estimate",
          {{"session", S("s1")}, {"config", Map({})}, {"profile", S("a")}, {"placement", S("{}")}}),
      absl::StatusCode::kInvalidArgument, "config", "not both");
  ExpectError(Req("estimate", {{"session", S("")}, {"profile", S("a")}, {"placement", S("{}")}}),
              absl::StatusCode::kInvalidArgument, "session");
}

// The strict pass: what no request may hold, whatever its op, named by field path; and the
// error text never carries the offending bytes raw.
TEST(ProtocolStrictTest, DuplicateKeysBadUtf8ExtAndOverlongNamesAreInvalidArguments) {
  const std::string ext = std::string("\xd4\x01\x00", 3);  // fixext 1
  const std::string bad = "mach\xff\xfeine";
  struct Case {
    std::string payload, field, detail;
  };
  const std::vector<Case> cases = {
      {Map({{"v", U(2)}, {"op", S("hello")}, {"op", S("stats")}}), "op", "more than once"},
      {Map({{"id", U(1)}, {"v", U(2)}, {"op", S("hello")}, {"id", U(2)}}), "id", "more than once"},
      {Req("make", {{"env", S(kEnvId)},
                    {"config", Map({{"steps", U(1)}, {"num_regions", U(2)}, {"steps", U(3)}})}}),
       "config.steps", "more than once"},
      {Req("make", {{"env", S(kEnvId)}, {"config", Map({{"machine", S(bad)}})}}), "config.machine",
       "not valid UTF-8"},
      {Req("make", {{"env", S(kEnvId)}, {"config", Map({{bad, S("knl")}})}}),
       "config[\"mach\\xff\\xfeine\"]", "not valid UTF-8"},
      {Req("make", {{"env", S("\xc0\xaf")}}), "env", "not valid UTF-8"},      // overlong '/'
      {Req("make", {{"env", S("\xed\xa0\x80")}}), "env", "not valid UTF-8"},  // a surrogate
      {Req("hello", {{"id", ext}}), "id", "ext"},
      {Req("step", {{"session", S("s1")}, {"action", Arr({U(1), ext})}}), "action[1]", "ext"},
      {Req("make", {{"env", S(kEnvId)}, {"config", Map({{"machine", ext}})}}), "config.machine",
       "ext"},
      {Req("make", {{"env", S(kEnvId)}, {"config", Map({{std::string(65, 'k'), U(1)}})}}),
       "config[\"" + std::string(64, 'k') + "...\"]", "at most 64"},
      {Req("make", {{"env", S(kEnvId)}, {"config", Map({{"machine", S(std::string(5000, 'm'))}})}}),
       "config.machine", "at most 4096"},
      {Req("make", {{"env", S(kEnvId)},
                    {"config", Map({{"profiles", Arr({S("a"), S(std::string(5000, 'p'))})}})}}),
       "config.profiles[1]", "at most 4096"},
      {Req("make",
           {{"env", S(kEnvId)},
            {"config",
             Map({{"profiles", Arr(std::vector<std::string>(70, S(std::string(4000, 'p'))))}})}}),
       "config.profiles[65]", "the list passes 262144 bytes"},
      {Req("make", {{"env", S(std::string(300, 'e'))}}), "env", "at most 256"},
      {Req("reset",
           {{"session", S("s1")}, {"options", Map({{"profile", S(std::string(300, 'p'))}})}}),
       "options.profile", "at most 256"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.field);
    const Error e = DecodeError(c.payload);
    EXPECT_EQ(e.code, absl::StatusCode::kInvalidArgument) << e.message;
    EXPECT_EQ(e.field, c.field) << e.message;
    EXPECT_THAT(e.message, HasSubstr(c.detail));
    EXPECT_TRUE(IsUtf8(e.field) && IsUtf8(e.message)) << e.message;
    EXPECT_EQ(e.message.find('\xff'), std::string::npos);
  }
  // The id of a message whose id is given twice is not trusted for the reply.
  DecodedRequest d =
      DecodeRequest(Map({{"id", U(1)}, {"v", U(2)}, {"op", S("hello")}, {"id", U(2)}}));
  EXPECT_FALSE(d.request.id.has_value());
  // Echoed names are escaped: an unknown op or dtype with raw bytes.
  Error e = DecodeError(Req("\x01\x02 \\\xe2\x82\xac"));
  EXPECT_EQ(e.code, absl::StatusCode::kUnimplemented);
  EXPECT_THAT(e.message, HasSubstr("\\x01\\x02 \\x5c\\xe2\\x82\\xac"));
}

TEST(ProtocolMalformedTest, TheIdIsKeptWhenTheRestFails) {
  DecodedRequest d = DecodeRequest(Map({{"id", U(41)}, {"v", U(1)}, {"op", S("nope")}}));
  ASSERT_TRUE(d.error.has_value());
  EXPECT_EQ(d.request.id, 41u);
}

// --- Replies round-trip -------------------------------------------------------------------

TEST(ProtocolReplyTest, StepAndResetRoundTrip) {
  StepResult r = SampleResult(2, 3, 0.5f);
  absl::StatusOr<Reply> d = DecodeReply(EncodeReply(Reply{5, StepReply{r}}), Op::kStep);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->id, 5u);
  ASSERT_TRUE(std::holds_alternative<StepReply>(d->body));
  const StepResult& got = std::get<StepReply>(d->body).result;
  ExpectSameResult(r, got);
  EXPECT_EQ(got.reward, r.reward);
  EXPECT_EQ(got.terminated, r.terminated);

  d = DecodeReply(EncodeReply(Reply{std::nullopt, ResetReply{r}}), Op::kReset);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_FALSE(d->id.has_value());
  ExpectSameResult(r, std::get<ResetReply>(d->body).result);
}

TEST(ProtocolReplyTest, BatchRoundTripsWithFinals) {
  StepBatchReply b;
  b.results = {SampleResult(3, 2, 0.5f), SampleResult(3, 2, 2.0f)};
  b.results[1].info.refused_regions = {};
  b.was_reset = {0, 1};
  b.finals = {b.results[0], SampleResult(3, 2, 4.0f)};
  absl::StatusOr<Reply> d = DecodeReply(EncodeReply(Reply{9, b}), Op::kStepBatch);
  ASSERT_TRUE(d.ok()) << d.status();
  const StepBatchReply& got = std::get<StepBatchReply>(d->body);
  ASSERT_EQ(got.results.size(), 2u);
  ASSERT_EQ(got.finals.size(), 2u);
  for (int i = 0; i < 2; ++i) {
    ExpectSameResult(b.results[i], got.results[i]);
    ExpectSameResult(b.finals[i], got.finals[i]);
    EXPECT_EQ(b.results[i].reward, got.results[i].reward);
    EXPECT_EQ(b.results[i].terminated, got.results[i].terminated);
  }
  EXPECT_THAT(got.was_reset, ElementsAre(0, 1));
}

TEST(ProtocolReplyTest, MakeHelloListStatsEstimateCloseRoundTrip) {
  MakeReply m;
  m.session = "0123456789abcdef0123456789abcdef";
  m.spec.observation = Space{Space::kBox, {259}, 0, 1, 0};
  m.spec.action = Space{Space::kMultiDiscrete, {64}, 0, 1, 2};
  m.spec.tiers = {"ddr", "hbm"};
  m.spec.profiles = {"minife"};
  m.spec.num_regions = 64;
  m.spec.obs_global_offset = 256;
  m.spec.tier_capacity_bytes = {uint64_t{96} << 30, uint64_t{16} << 30};
  m.spec.tier_migration_gbps = {4.5, 3.25};
  m.spec.tier_bandwidth_gbps = {90, 400};
  for (uint64_t r = 0; r <= 64; ++r) {
    m.spec.region_bounds.push_back(r << 21);
    if (r > 0 && r < 64) m.spec.region_bounds.push_back(r << 21);
  }
  m.config = {{"num_regions", "64"}};
  absl::StatusOr<Reply> d = DecodeReply(EncodeReply(Reply{1, m}), Op::kMake);
  ASSERT_TRUE(d.ok()) << d.status();
  const MakeReply& gm = std::get<MakeReply>(d->body);
  EXPECT_EQ(gm.session, m.session);
  EXPECT_EQ(gm.spec.observation.shape, m.spec.observation.shape);
  EXPECT_EQ(gm.spec.action.kind, Space::kMultiDiscrete);
  EXPECT_EQ(gm.spec.action.n, 2);
  EXPECT_EQ(gm.spec.tiers, m.spec.tiers);
  EXPECT_EQ(gm.spec.obs_global_offset, 256);
  EXPECT_EQ(gm.spec.tier_capacity_bytes, m.spec.tier_capacity_bytes);
  EXPECT_EQ(gm.spec.tier_migration_gbps, m.spec.tier_migration_gbps);
  EXPECT_EQ(gm.spec.tier_bandwidth_gbps, m.spec.tier_bandwidth_gbps);
  EXPECT_EQ(gm.spec.region_bounds, m.spec.region_bounds);
  EXPECT_EQ(gm.config, m.config);
  // A reply whose region bounds do not have the announced shape is refused, by field.
  m.spec.region_bounds.resize(10);
  d = DecodeReply(EncodeReply(Reply{1, m}), Op::kMake);
  ASSERT_FALSE(d.ok());
  EXPECT_THAT(std::string(d.status().message()), HasSubstr("spec.region_bounds"));

  HelloReply h{kVersion,
               "tiergym 0.1.0",
               {kEnvId},
               Limits{.max_sessions = 10,
                      .max_message_bytes = 20,
                      .max_batch = 30,
                      .idle_timeout_s = 1.5,
                      .threads = 2}};
  d = DecodeReply(EncodeReply(Reply{2, h}), Op::kHello);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(std::get<HelloReply>(d->body).limits.max_batch, 30u);
  EXPECT_EQ(std::get<HelloReply>(d->body).limits.idle_timeout_s, 1.5);
  EXPECT_EQ(std::get<HelloReply>(d->body).limits.max_shm_request_threads, 0u);
  // Requests through shared memory are offered only beside shared memory.
  h.limits.max_shm_request_threads = 8;
  d = DecodeReply(EncodeReply(Reply{2, h}), Op::kHello);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(std::get<HelloReply>(d->body).limits.max_shm_request_threads, 0u);
  h.limits.max_shm_bytes = 1 << 20;
  d = DecodeReply(EncodeReply(Reply{2, h}), Op::kHello);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(std::get<HelloReply>(d->body).limits.max_shm_request_threads, 8u);

  ListReply l{{EnvDescription{kEnvId, "placement", {ConfigKey{"steps", "100", "intervals"}}}}};
  d = DecodeReply(EncodeReply(Reply{3, l}), Op::kList);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(std::get<ListReply>(d->body).envs[0].config_keys[0].default_value, "100");

  // A server older than the co-scheduling nodes lists its one environment without `op`.
  d = DecodeReply(Map({{"v", U(2)},
                       {"ok", B(true)},
                       {"id", U(5)},
                       {"envs", Arr({Map({{"id", S(kEnvId)},
                                          {"description", S("placement")},
                                          {"config_keys", Arr({})}})})}}),
                  Op::kList);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(std::get<ListReply>(d->body).envs[0].op, "make");

  StatsReply s;
  s.sessions = 4;
  s.rss_bytes = 1 << 20;
  s.ops = {{"step", 12}};
  d = DecodeReply(EncodeReply(Reply{4, s}), Op::kStats);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(std::get<StatsReply>(d->body).sessions, 4u);
  EXPECT_EQ(std::get<StatsReply>(d->body).ops.at("step"), 12u);

  d = DecodeReply(EncodeReply(Reply{5, EstimateReply{2.0, 3.0}}), Op::kEstimate);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(std::get<EstimateReply>(d->body).default_runtime_ns, 3.0);

  d = DecodeReply(EncodeReply(Reply{6, CloseReply{}}), Op::kClose);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_TRUE(std::holds_alternative<CloseReply>(d->body));
  EXPECT_EQ(PeekReplyId(EncodeReply(Reply{6, CloseReply{}})), 6u);
}

TEST(ProtocolReplyTest, ErrorsRoundTripWithCodeAndField) {
  Error e = MakeError(absl::StatusCode::kNotFound, "session", "12 not found");
  EXPECT_EQ(e.message, "session: 12 not found");
  absl::StatusOr<Reply> d = DecodeReply(EncodeReply(Reply{8, e}), Op::kStep);
  ASSERT_TRUE(d.ok()) << d.status();
  ASSERT_TRUE(std::holds_alternative<Error>(d->body));
  EXPECT_EQ(std::get<Error>(d->body).code, absl::StatusCode::kNotFound);
  EXPECT_EQ(std::get<Error>(d->body).field, "session");
  EXPECT_EQ(std::get<Error>(d->body).message, "session: 12 not found");
  // Messages already naming the field are kept.
  EXPECT_EQ(MakeError(absl::StatusCode::kInvalidArgument, "action", "action[3]: too big").message,
            "action[3]: too big");
}

TEST(ProtocolRequestTest, PeekRequestOpReadsOnlyTheOp) {
  EXPECT_EQ(PeekRequestOp(Req("step", {{"session", S("s1")}})), Op::kStep);
  EXPECT_EQ(PeekRequestOp(Req("make")), Op::kMake);
  EXPECT_FALSE(PeekRequestOp(Req("fly")).has_value());
  EXPECT_FALSE(PeekRequestOp(Map({{"v", U(1)}})).has_value());
  EXPECT_FALSE(PeekRequestOp("\xc1").has_value());
}

TEST(ProtocolReplyTest, CodeNamesAreAbslNames) {
  EXPECT_EQ(CodeName(absl::StatusCode::kResourceExhausted), "RESOURCE_EXHAUSTED");
  EXPECT_EQ(ParseCodeName("FAILED_PRECONDITION"), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(ParseCodeName("NOPE"), absl::StatusCode::kUnknown);
}

}  // namespace
}  // namespace tiergym::env::protocol

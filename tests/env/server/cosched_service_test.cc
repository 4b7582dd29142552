// The co-scheduling ops (cosched_make, cosched_reset, cosched_step; env/PROTOCOL.md
// "Co-scheduling") through the session manager (env/server/service.h) on real nodes
// (env/provider/cosched_provider.h): the same episode as the node in process, bit for bit;
// names resolved only within the operator's roots; every refusal with its code and field;
// ownership, kinds of session, limits and the memory budget.
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "env/client/client.h"
#include "env/cosched/cosched_env.h"
#include "env/provider/cosched_provider.h"
#include "env/server/service.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/env/fake_env.h"
#include "tests/env/msgpack_builder.h"
#include "tests/env/reply_checks.h"
#include "tests/env/running_server.h"
#include "tests/test_root.h"

namespace tiergym::env {
namespace {

using protocol::Op;
using protocol::Reply;
using protocol::Request;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;
using ::tiergym::testing::SmallProfileDir;
using ::tiergym::testing::TestRoot;
namespace mp = tiergym::testing::mp;

std::string CurvesDir() { return std::string(TIERGYM_SOURCE_DIR) + "/estimator/contention/data"; }

// A fake provider whose memory budget can be closed.
class BudgetProvider : public testing::FakeProvider {
 public:
  absl::Status Charge(uint64_t bytes) override {
    if (!open) return absl::ResourceExhaustedError("over the budget (test)");
    charged += bytes;
    return absl::OkStatus();
  }
  void Uncharge(uint64_t bytes) override { charged -= bytes; }
  bool open = true;
  uint64_t charged = 0;
};

class CoschedServiceTest : public ::testing::Test {
 protected:
  CoschedServiceTest() : pool_(2) {}

  void SetUp() override {
    minife_ = SmallProfileDir("minife", "knl");
    lulesh_ = SmallProfileDir("lulesh", "knl");
    MakeService(ServiceOptions{}, /*sensitivity=*/"");
  }

  void MakeService(ServiceOptions options, const std::string& default_sensitivity,
                   bool cosched = true) {
    provider_ = std::make_shared<BudgetProvider>();
    if (cosched) {
      CoschedProviderOptions co;
      co.data_dirs = {CurvesDir()};
      co.named_profiles = {{"minife", minife_}, {"lulesh", lulesh_}};
      co.default_sensitivity = default_sensitivity;
      options.cosched = std::make_shared<CoschedProvider>(co, provider_.get());
    }
    service_ = std::make_unique<Service>(options, provider_, &pool_);
  }

  protocol::ReplyBody Call(Op op, protocol::RequestBody body) {
    return testing::RoundTrip([&](const std::string& p) { return service_->Handle(p, owner_); },
                              Request{op, protocol::kVersion, ++id_, std::move(body)});
  }
  template <typename T>
  T Ok(Op op, protocol::RequestBody body) {
    return testing::OkBody<T>(Call(op, std::move(body)));
  }
  protocol::Error Err(Op op, protocol::RequestBody body, absl::StatusCode code,
                      const std::string& field) {
    return testing::ErrorBody(Call(op, std::move(body)), code, field);
  }

  static ConfigMap Config() {
    return {{"tenants", ConfigValue(ConfigValue::List{"minife", "lulesh"})},
            {"sensitivity", "curves.csv"},
            {"num_regions", "8"},
            {"steps", "12"},
            {"tier_capacity_mib", "hbm:256"},
            {"tenant_start_steps", "0,2"}};
  }
  protocol::CoschedMakeReply MakeNode(ConfigMap config = Config()) {
    return Ok<protocol::CoschedMakeReply>(Op::kCoschedMake, protocol::CoschedMakeRequest{config});
  }

  ThreadPool pool_;
  std::string minife_, lulesh_;
  std::shared_ptr<BudgetProvider> provider_;
  std::unique_ptr<Service> service_;
  uint64_t id_ = 0;
  std::string owner_ = "connection-a";
};

TEST_F(CoschedServiceTest, ANodeOverTheProtocolIsTheNodeInProcessBitForBit) {
  const protocol::CoschedMakeReply made = MakeNode();
  ASSERT_EQ(made.tenants, (std::vector<std::string>{"minife", "lulesh"}));
  EXPECT_EQ(made.session.size(), 32u);
  EXPECT_EQ(made.config.at("tenant_start_steps"), "0,2");
  EXPECT_EQ(made.config.at("start_jitter_steps"), "0");  // a default, in force

  ConfigMap local = Config();
  local["tenants"] = ConfigValue(ConfigValue::List{minife_, lulesh_});
  local["sensitivity"] = CurvesDir() + "/curves.csv";
  absl::StatusOr<CoschedConfig> config = ParseCoschedConfig(local);
  ASSERT_TRUE(config.ok()) << config.status();
  absl::StatusOr<std::shared_ptr<const CoschedAssets>> assets = CoschedAssets::Load(*config);
  ASSERT_TRUE(assets.ok()) << assets.status();
  absl::StatusOr<std::unique_ptr<CoschedEnv>> node = CoschedEnv::Create(*assets);
  ASSERT_TRUE(node.ok()) << node.status();
  const EnvSpec& spec = (*assets)->tenant_spec();
  EXPECT_EQ(made.spec.observation.shape, spec.observation.shape);
  EXPECT_EQ(made.spec.tiers, spec.tiers);
  // A profile run by two tenants: its region bounds once.
  ConfigMap twice = Config();
  twice["tenants"] = "minife,minife";
  twice.erase("tenant_start_steps");
  const protocol::CoschedMakeReply doubled = MakeNode(twice);
  EXPECT_EQ(doubled.tenants, (std::vector<std::string>{"minife", "minife#2"}));
  EXPECT_EQ(doubled.spec.region_bounds.size(),
            doubled.spec.profiles.size() * static_cast<size_t>(doubled.spec.num_regions) * 2);

  auto same = [](const protocol::CoschedStepReply& wire, const NodeStep& here) {
    ASSERT_EQ(wire.tenants.size(), here.tenants.size());
    for (size_t i = 0; i < here.tenants.size(); ++i) {
      const protocol::CoschedTenant& w = wire.tenants[i];
      const TenantStep& h = here.tenants[i];
      EXPECT_EQ(w.result.observation, h.observation) << i;
      EXPECT_EQ(w.result.reward, h.reward) << i;  // exactly: the same doubles
      EXPECT_EQ(w.result.terminated, h.terminated);
      EXPECT_EQ(w.active, h.active);
      EXPECT_EQ(w.waiting, h.waiting);
      EXPECT_EQ(w.result.info.interval_ns, h.info.interval_ns);
      EXPECT_EQ(w.result.info.refused_regions, h.info.refused_regions);
      EXPECT_EQ(w.result.info.action_mask, h.info.action_mask);
      EXPECT_EQ(w.solo_interval_ns, h.solo_interval_ns);
      EXPECT_EQ(w.slowdown, h.slowdown);
      EXPECT_EQ(w.interference_gbps, h.interference_gbps);
    }
    EXPECT_EQ(wire.step, here.step);
    EXPECT_EQ(wire.elapsed_ns, here.elapsed_ns);
    EXPECT_EQ(wire.tier_used_bytes, here.tier_used_bytes);
    EXPECT_EQ(wire.tier_bandwidth_gbps, here.tier_bandwidth_gbps);
    EXPECT_EQ(wire.done, here.done);
  };

  for (uint64_t seed : {1u, 2u}) {
    protocol::CoschedStepReply wire = Ok<protocol::CoschedStepReply>(
        Op::kCoschedReset, protocol::CoschedResetRequest{made.session, seed});
    absl::StatusOr<NodeStep> here = (*node)->Reset(seed);
    ASSERT_TRUE(here.ok());
    same(wire, *here);
    std::mt19937_64 rng(seed);
    int steps = 0;
    while (!here->done) {
      std::vector<Action> actions(2);
      for (size_t t = 0; t < 2; ++t) {
        if (rng() % 5 == 0) continue;  // nil: keep
        for (int r = 0; r < spec.num_regions; ++r) {
          actions[t].values.push_back(static_cast<int64_t>(rng() % spec.tiers.size()));
        }
      }
      wire = Ok<protocol::CoschedStepReply>(Op::kCoschedStep,
                                            protocol::CoschedStepRequest{made.session, actions});
      here = (*node)->Step(actions);
      ASSERT_TRUE(here.ok()) << here.status();
      same(wire, *here);
      ASSERT_LT(++steps, 100);
    }
    EXPECT_TRUE(wire.done);
    // The episode is over: a step needs a reset first.
    Err(Op::kCoschedStep, protocol::CoschedStepRequest{made.session, {{}, {}}},
        absl::StatusCode::kFailedPrecondition, "session");
  }
}

// make, reset and step (with actions) drive a node as cosched_make, cosched_reset and
// cosched_step, their older spelling (answered in this protocol version, gone in the next),
// do: the same node steps, bit for bit.
TEST_F(CoschedServiceTest, MakeResetAndStepDriveANodeAsTheCoschedOpsDo) {
  const protocol::CoschedMakeReply old = MakeNode();
  const auto made =
      Ok<protocol::MakeReply>(Op::kMake, protocol::MakeRequest{protocol::kCoschedEnvId, Config()});
  EXPECT_EQ(made.tenants, old.tenants);
  EXPECT_EQ(made.config, old.config);
  EXPECT_EQ(made.spec.observation.shape, old.spec.observation.shape);
  EXPECT_EQ(made.spec.profiles, old.spec.profiles);
  EXPECT_EQ(made.spec.region_bounds, old.spec.region_bounds);
  auto same = [](const protocol::CoschedStepReply& a, const protocol::CoschedStepReply& b) {
    ASSERT_EQ(a.tenants.size(), b.tenants.size());
    for (size_t i = 0; i < a.tenants.size(); ++i) {
      EXPECT_EQ(a.tenants[i].result.observation, b.tenants[i].result.observation);
      EXPECT_EQ(a.tenants[i].result.reward, b.tenants[i].result.reward);
      EXPECT_EQ(a.tenants[i].slowdown, b.tenants[i].slowdown);
    }
    EXPECT_EQ(a.step, b.step);
    EXPECT_EQ(a.elapsed_ns, b.elapsed_ns);
    EXPECT_EQ(a.done, b.done);
  };
  same(Ok<protocol::CoschedStepReply>(Op::kReset, protocol::ResetRequest{made.session, 3, {}}),
       Ok<protocol::CoschedStepReply>(Op::kCoschedReset,
                                      protocol::CoschedResetRequest{old.session, 3}));
  const std::vector<Action> actions = {Action{std::vector<int64_t>(8, 1)}, Action{}};
  for (int t = 0; t < 3; ++t) {
    same(
        Ok<protocol::CoschedStepReply>(Op::kStep, protocol::StepRequest{made.session, {}, actions}),
        Ok<protocol::CoschedStepReply>(Op::kCoschedStep,
                                       protocol::CoschedStepRequest{old.session, actions}));
  }
  // A bad tenant's action is refused on its path, as cosched_step refuses it.
  const std::vector<Action> bad = {Action{}, Action{{9}}};
  Err(Op::kStep, protocol::StepRequest{made.session, {}, bad}, absl::StatusCode::kInvalidArgument,
      "actions[1]");
}

TEST_F(CoschedServiceTest, NamesResolveOnlyWithinTheOperatorsRoots) {
  ConfigMap c = Config();
  c["tenants"] = ConfigValue(ConfigValue::List{"minife", TestRoot()});  // not served
  protocol::Error e = Err(Op::kCoschedMake, protocol::CoschedMakeRequest{c},
                          absl::StatusCode::kNotFound, "config.tenants");
  EXPECT_THAT(e.message, Not(HasSubstr(minife_)));
  c = Config();
  c["tenants"] = "minife,nosuch";
  Err(Op::kCoschedMake, protocol::CoschedMakeRequest{c}, absl::StatusCode::kNotFound,
      "config.tenants");
  c = Config();
  c["sensitivity"] = "/etc/passwd";
  e = Err(Op::kCoschedMake, protocol::CoschedMakeRequest{c}, absl::StatusCode::kNotFound,
          "config.sensitivity");
  EXPECT_THAT(e.message, Not(HasSubstr("passwd:")));
  c["sensitivity"] = "../../CMakeLists.txt";
  Err(Op::kCoschedMake, protocol::CoschedMakeRequest{c}, absl::StatusCode::kNotFound,
      "config.sensitivity");
  c = Config();
  c["machine"] = "/etc/hostname";
  Err(Op::kCoschedMake, protocol::CoschedMakeRequest{c}, absl::StatusCode::kNotFound,
      "config.machine");
  // No curves named and none served: required.
  c = Config();
  c.erase("sensitivity");
  e = Err(Op::kCoschedMake, protocol::CoschedMakeRequest{c}, absl::StatusCode::kInvalidArgument,
          "config.sensitivity");
  EXPECT_THAT(e.message, HasSubstr("--sensitivity"));
  // ... unless the operator serves some.
  MakeService(ServiceOptions{}, CurvesDir() + "/curves.csv");
  EXPECT_EQ(MakeNode(c).tenants.size(), 2u);
}

TEST_F(CoschedServiceTest, ConfigurationRefusalsNameTheirKey) {
  ConfigMap c = Config();
  c["profiles"] = "minife";  // make's, not a node's
  Err(Op::kCoschedMake, protocol::CoschedMakeRequest{c}, absl::StatusCode::kInvalidArgument,
      "config.profiles");
  c = Config();
  c.erase("tenants");
  Err(Op::kCoschedMake, protocol::CoschedMakeRequest{c}, absl::StatusCode::kInvalidArgument,
      "config.tenants");
  c = Config();
  c["tenant_start_steps"] = "0";  // one for two tenants
  Err(Op::kCoschedMake, protocol::CoschedMakeRequest{c}, absl::StatusCode::kInvalidArgument,
      "config.tenant_start_steps");
  c = Config();
  c["num_regions"] = "-3";
  Err(Op::kCoschedMake, protocol::CoschedMakeRequest{c}, absl::StatusCode::kInvalidArgument,
      "config.num_regions");
  EXPECT_EQ(service_->Stats().sessions, 0u);
  EXPECT_EQ(provider_->charged, 0u);  // nothing held after a refusal
}

TEST_F(CoschedServiceTest, ActionRefusalsNameTheTenantAndMoveNothing) {
  const protocol::CoschedMakeReply made = MakeNode();
  Err(Op::kCoschedStep, protocol::CoschedStepRequest{made.session, {{}, {}}},
      absl::StatusCode::kFailedPrecondition, "session");  // before reset
  const protocol::CoschedStepReply first = Ok<protocol::CoschedStepReply>(
      Op::kCoschedReset, protocol::CoschedResetRequest{made.session, 4});
  Err(Op::kCoschedStep, protocol::CoschedStepRequest{made.session, {{}}},
      absl::StatusCode::kInvalidArgument, "actions");
  std::vector<Action> bad(2);
  bad[0].values.assign(8, 0);
  bad[1].values.assign(8, 0);
  bad[0].values[3] = 7;  // no tier 7
  protocol::Error e = Err(Op::kCoschedStep, protocol::CoschedStepRequest{made.session, bad},
                          absl::StatusCode::kInvalidArgument, "actions[0][3]");
  // Tenant 1 waits until step 2: its action is checked all the same, then ignored.
  bad[0].values[3] = 0;
  bad[1].values[5] = 9;
  e = Err(Op::kCoschedStep, protocol::CoschedStepRequest{made.session, bad},
          absl::StatusCode::kInvalidArgument, "actions[1][5]");
  bad[1].values[5] = 0;
  bad[0].values[3] = 0;
  bad[0].values.resize(3);  // too short
  e = Err(Op::kCoschedStep, protocol::CoschedStepRequest{made.session, bad},
          absl::StatusCode::kInvalidArgument, "actions[0]");
  // Nothing moved: the first step is the first step.
  const protocol::CoschedStepReply step = Ok<protocol::CoschedStepReply>(
      Op::kCoschedStep, protocol::CoschedStepRequest{made.session, {{}, {}}});
  EXPECT_EQ(step.step, first.step + 1);
  // Malformed on the wire: decoded strictly, on the field.
  const std::string payload =
      mp::Req("cosched_step",
              {{"session", mp::S(made.session)}, {"actions", mp::Arr({mp::Nil(), mp::S("x")})}});
  absl::StatusOr<Reply> r =
      protocol::DecodeReply(service_->Handle(payload, owner_), Op::kCoschedStep);
  ASSERT_TRUE(r.ok());
  auto* err = std::get_if<protocol::Error>(&r->body);
  ASSERT_NE(err, nullptr);
  EXPECT_EQ(err->code, absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(err->field, "actions[1]");
}

TEST_F(CoschedServiceTest, HelloAndListDescribeTheNodesAndTheirKeys) {
  const auto hello = Ok<protocol::HelloReply>(Op::kHello, std::monostate{});
  EXPECT_THAT(hello.envs, ::testing::ElementsAre(protocol::kEnvId, protocol::kCoschedEnvId));
  const auto list = Ok<protocol::ListReply>(Op::kList, std::monostate{});
  ASSERT_EQ(list.envs.size(), 2u);
  EXPECT_EQ(list.envs[0].op, "make");
  const protocol::EnvDescription& node = list.envs[1];
  EXPECT_EQ(node.id, protocol::kCoschedEnvId);
  EXPECT_EQ(node.op, "make");
  std::vector<std::string> names;
  for (const ConfigKey& k : node.config_keys) {
    names.push_back(k.name);
    EXPECT_FALSE(k.help.empty()) << k.name;
  }
  EXPECT_EQ(names.size(), CoschedConfigKeys().size());
  for (const char* key : {"tenants", "tenant_start_steps", "tenant_read_pct",
                          "contention_max_passes", "sensitivity", "num_regions", "machine"}) {
    EXPECT_THAT(names, ::testing::Contains(key));
  }
  EXPECT_THAT(names, ::testing::Not(::testing::Contains("profiles")));
  // The keys are the ones make takes for the node (and cosched_make, its older spelling).
  Err(Op::kMake, protocol::MakeRequest{protocol::kCoschedEnvId, {{"profiles", "minife"}}},
      absl::StatusCode::kInvalidArgument, "config.profiles");
  // Without co-scheduling, neither lists it, make names it unknown and cosched_make is
  // unimplemented.
  MakeService(ServiceOptions{}, "", /*cosched=*/false);
  EXPECT_THAT(Ok<protocol::HelloReply>(Op::kHello, std::monostate{}).envs,
              ::testing::ElementsAre(protocol::kEnvId));
  EXPECT_EQ(Ok<protocol::ListReply>(Op::kList, std::monostate{}).envs.size(), 1u);
  Err(Op::kMake, protocol::MakeRequest{protocol::kCoschedEnvId, Config()},
      absl::StatusCode::kNotFound, "env");
  Err(Op::kCoschedMake, protocol::CoschedMakeRequest{Config()}, absl::StatusCode::kUnimplemented,
      "op");
}

TEST_F(CoschedServiceTest, NodesAreOwnedSessionsOfTheirOwnKind) {
  const protocol::CoschedMakeReply made = MakeNode();
  const protocol::SessionId plain =
      Ok<protocol::MakeReply>(Op::kMake, protocol::MakeRequest{protocol::kEnvId, {}}).session;
  // A node is stepped with its tenants' actions, not one action; it takes no step_batch
  // and no estimate; a plain session takes no tenants' actions and no cosched_*.
  Ok<protocol::CoschedStepReply>(Op::kReset, protocol::ResetRequest{made.session, 1, {}});
  Err(Op::kStep, protocol::StepRequest{made.session, Action{{0}}},
      absl::StatusCode::kFailedPrecondition, "action");
  protocol::StepBatchRequest batch;
  batch.sessions = {made.session};
  batch.actions = {Action{{0}}};
  Err(Op::kStepBatch, batch, absl::StatusCode::kFailedPrecondition, "sessions[0]");
  protocol::EstimateRequest estimate;
  estimate.session = made.session;
  estimate.profile = "minife";
  estimate.placement_json = R"({"default": "ddr"})";
  Err(Op::kEstimate, estimate, absl::StatusCode::kFailedPrecondition, "session");
  Ok<protocol::ResetReply>(Op::kReset, protocol::ResetRequest{plain, 1, {}});
  Err(Op::kStep, protocol::StepRequest{plain, {}, {Action{{0}}, Action{{0}}}},
      absl::StatusCode::kFailedPrecondition, "actions");
  Err(Op::kCoschedReset, protocol::CoschedResetRequest{plain, 1},
      absl::StatusCode::kFailedPrecondition, "session");
  // Another connection's node is no node at all.
  owner_ = "connection-b";
  Err(Op::kCoschedReset, protocol::CoschedResetRequest{made.session, 1},
      absl::StatusCode::kNotFound, "session");
  Err(Op::kClose, protocol::CloseRequest{made.session}, absl::StatusCode::kNotFound, "session");
  owner_ = "connection-a";
  EXPECT_GT(provider_->charged, 0u);
  Ok<protocol::CloseReply>(Op::kClose, protocol::CloseRequest{made.session});
  EXPECT_EQ(provider_->charged, 0u);  // the node's charge given back
  Err(Op::kCoschedReset, protocol::CoschedResetRequest{made.session, 1},
      absl::StatusCode::kNotFound, "session");
  // A connection's nodes go with it.
  MakeNode();
  EXPECT_EQ(service_->CloseSessionsOf(owner_), 2u);
  EXPECT_EQ(provider_->charged, 0u);
}

TEST_F(CoschedServiceTest, LimitsAndTheMemoryBudget) {
  ServiceOptions options;
  options.max_sessions_per_connection = 1;
  MakeService(options, "");
  MakeNode();
  protocol::Error e = Err(Op::kCoschedMake, protocol::CoschedMakeRequest{Config()},
                          absl::StatusCode::kResourceExhausted, "op");
  EXPECT_THAT(e.message, HasSubstr("per connection"));
  MakeService(ServiceOptions{}, "");
  provider_->open = false;
  e = Err(Op::kCoschedMake, protocol::CoschedMakeRequest{Config()},
          absl::StatusCode::kResourceExhausted, "config");
  EXPECT_THAT(e.message, HasSubstr("co-scheduling node"));
  EXPECT_EQ(service_->Stats().sessions, 0u);
  // A server without co-scheduling says so.
  MakeService(ServiceOptions{}, "", /*cosched=*/false);
  Err(Op::kCoschedMake, protocol::CoschedMakeRequest{Config()}, absl::StatusCode::kUnimplemented,
      "op");
}

TEST_F(CoschedServiceTest, NodesSharingProfilesAreChargedTheirIndexesOnce) {
  const protocol::CoschedMakeReply first = MakeNode();
  const uint64_t one = provider_->charged;
  // The same tenants again: only the node's own tables are charged, the profiles' indexes
  // are shared (ProfileCache) and already paid for.
  const protocol::CoschedMakeReply second = MakeNode();
  const uint64_t two = provider_->charged;
  EXPECT_GT(two, one);
  EXPECT_LT(two - one, one / 4) << "the second node was charged the shared indexes again";
  // A node running a profile as two tenants pays its index once, and nothing more here.
  ConfigMap more = Config();
  more["tenants"] = ConfigValue(ConfigValue::List{"minife", "lulesh", "lulesh"});
  more["tenant_start_steps"] = "0,2,3";
  const protocol::CoschedMakeReply third = MakeNode(more);
  EXPECT_LT(provider_->charged - two, one / 4);
  // The indexes' charge goes with the last node that uses them.
  Ok<protocol::CloseReply>(Op::kClose, protocol::CloseRequest{first.session});
  Ok<protocol::CloseReply>(Op::kClose, protocol::CloseRequest{third.session});
  EXPECT_GT(provider_->charged, (two - one) * 3 / 2) << "the indexes were given back too soon";
  Ok<protocol::CloseReply>(Op::kClose, protocol::CloseRequest{second.session});
  EXPECT_EQ(provider_->charged, 0u);
  // A refused node holds nothing: the next one pays the indexes in full again.
  provider_->open = false;
  Err(Op::kCoschedMake, protocol::CoschedMakeRequest{Config()},
      absl::StatusCode::kResourceExhausted, "config");
  provider_->open = true;
  MakeNode();
  EXPECT_EQ(provider_->charged, one);
}

// The C++ client (env/client) drives a node on a real server over ZeroMQ: the same
// episode as the service gives in process, and the server's refusals as statuses.
TEST_F(CoschedServiceTest, TheCppClientDrivesANodeOverZeroMq) {
  ServiceOptions service;
  CoschedProviderOptions co;
  co.data_dirs = {CurvesDir()};
  co.named_profiles = {{"minife", minife_}, {"lulesh", lulesh_}};
  auto budget = std::make_shared<BudgetProvider>();
  service.cosched = std::make_shared<CoschedProvider>(co, budget.get());
  std::filesystem::create_directories(TestRoot());  // removed when the tests end
  ServerOptions so;
  so.endpoint = "ipc://" + TestRoot() + "/cosched.sock";
  so.threads = 1;
  testing::RunningServer server(so, service, budget);
  ASSERT_NE(server.get(), nullptr);
  {
    absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect({server.endpoint(), 30});
    ASSERT_TRUE(client.ok()) << client.status();
    absl::StatusOr<protocol::CoschedMakeReply> made = (*client)->CoschedMake(Config());
    ASSERT_TRUE(made.ok()) << made.status();
    EXPECT_EQ(made->tenants, (std::vector<std::string>{"minife", "lulesh"}));
    const protocol::CoschedMakeReply here = MakeNode();  // the same node, in process
    absl::StatusOr<protocol::CoschedStepReply> a = (*client)->CoschedReset(made->session, 9);
    ASSERT_TRUE(a.ok()) << a.status();
    protocol::CoschedStepReply b = Ok<protocol::CoschedStepReply>(
        Op::kCoschedReset, protocol::CoschedResetRequest{here.session, 9});
    std::mt19937_64 rng(9);
    int steps = 0;
    while (!b.done) {
      ASSERT_EQ(a->tenants.size(), b.tenants.size());
      for (size_t i = 0; i < b.tenants.size(); ++i) {
        EXPECT_EQ(a->tenants[i].result.observation, b.tenants[i].result.observation);
        EXPECT_EQ(a->tenants[i].result.reward, b.tenants[i].result.reward);
      }
      std::vector<Action> actions(2);
      for (Action& act : actions) {
        for (int r = 0; r < here.spec.num_regions; ++r) {
          act.values.push_back(static_cast<int64_t>(rng() % here.spec.tiers.size()));
        }
      }
      a = (*client)->CoschedStep(made->session, actions);
      ASSERT_TRUE(a.ok()) << a.status();
      b = Ok<protocol::CoschedStepReply>(Op::kCoschedStep,
                                         protocol::CoschedStepRequest{here.session, actions});
      ASSERT_LT(++steps, 100);
    }
    EXPECT_TRUE(a->done);
    absl::StatusOr<protocol::CoschedStepReply> late =
        (*client)->CoschedStep(made->session, {{}, {}});
    EXPECT_EQ(late.status().code(), absl::StatusCode::kFailedPrecondition);
    ConfigMap bad = Config();
    bad["tenants"] = "nosuch";
    EXPECT_EQ((*client)->CoschedMake(bad).status().code(), absl::StatusCode::kNotFound);
    EXPECT_TRUE((*client)->Close(made->session).ok());
  }
}

}  // namespace
}  // namespace tiergym::env

// The C++ client through the loss of its server: without `reconnect` the call that meets
// it fails at once (not after its timeout); with it, a step reports the interrupted
// episode as truncated with the reason, the sessions are made again on the server now at
// the endpoint (the caller's handles keep working), and when no server comes back the call
// fails saying so.
#include "env/client/client.h"

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/env/fake_env.h"
#include "tests/env/running_server.h"

namespace tiergym::env {
namespace {

using ::testing::HasSubstr;
using testing::RunningServer;
using testing::TempDir;

class ClientReconnectTest : public ::testing::Test {
 protected:
  void SetUp() override {
    endpoint_ = "ipc://" + TempDir("client-reconnect") + "/s.sock";
    Start();
  }
  void Start() {
    ServerOptions o;
    o.endpoint = endpoint_;
    server_ = std::make_unique<RunningServer>(o, ServiceOptions{},
                                              std::make_shared<testing::FakeProvider>());
  }
  std::unique_ptr<Client> Connect(bool reconnect, double give_up_s = 20) {
    ClientOptions o;
    o.endpoint = endpoint_;
    o.timeout_s = 30;
    o.reconnect = reconnect;
    o.reconnect_give_up_s = give_up_s;
    o.reconnect_max_backoff_s = 0.2;
    absl::StatusOr<std::unique_ptr<Client>> c = Client::Connect(o);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? std::move(*c) : nullptr;
  }

  std::string endpoint_;
  std::unique_ptr<RunningServer> server_;
};

const Action kAction = Action{{1, 0, 1, 0}};

TEST_F(ClientReconnectTest, WithoutReconnectTheLossIsUnavailableAtOnce) {
  std::unique_ptr<Client> c = Connect(false);
  ASSERT_NE(c, nullptr);
  absl::StatusOr<protocol::MakeReply> m = c->Make({});
  ASSERT_TRUE(m.ok()) << m.status();
  server_.reset();
  Start();  // a new server at the same endpoint does not bring the sessions back
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<StepResult> r = c->Step(m->session, kAction);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable) << r.status();
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("sessions are gone"));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

TEST_F(ClientReconnectTest, AStepReportsTheInterruptedEpisodeAndTheSessionsAreMadeAgain) {
  std::unique_ptr<Client> c = Connect(true);
  ASSERT_NE(c, nullptr);
  absl::StatusOr<protocol::MakeReply> a = c->Make({{"steps", "50"}});
  absl::StatusOr<protocol::MakeReply> b = c->Make({{"num_regions", "4"}});
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE(c->Reset(a->session, 7).ok());
  absl::StatusOr<StepResult> before = c->Step(a->session, kAction);
  ASSERT_TRUE(before.ok()) << before.status();
  EXPECT_TRUE(c->interrupted().empty());
  // The server goes; another comes up at the same endpoint a moment later.
  server_.reset();
  std::thread later([this] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    Start();
  });
  absl::StatusOr<StepResult> cut = c->Step(a->session, kAction);
  later.join();
  ASSERT_TRUE(cut.ok()) << cut.status();
  EXPECT_TRUE(cut->truncated);
  EXPECT_FALSE(cut->terminated);
  EXPECT_EQ(cut->reward, 0);
  EXPECT_EQ(cut->observation, before->observation);  // the last one seen
  EXPECT_THAT(c->interrupted(), HasSubstr("server lost"));
  EXPECT_EQ(c->interrupted_episodes(), 2u);  // both sessions' episodes
  EXPECT_EQ(c->reconnections(), 1u);
  // The same handles work on the new server: an ordinary episode.
  absl::StatusOr<StepResult> first = c->Reset(a->session, 7);
  ASSERT_TRUE(first.ok()) << first.status();
  absl::StatusOr<StepResult> next = c->Step(a->session, kAction);
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_FALSE(next->truncated);
  EXPECT_EQ(next->observation, before->observation);  // same seed, same episode
  EXPECT_TRUE(c->interrupted().empty());
  ASSERT_TRUE(c->Reset(b->session, 1).ok());
  absl::StatusOr<protocol::StatsReply> stats = c->Stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->sessions, 2u);
  EXPECT_TRUE(c->Close(a->session).ok());
  EXPECT_TRUE(c->Close(b->session).ok());
  EXPECT_EQ(c->Stats()->sessions, 0u);
}

TEST_F(ClientReconnectTest, ABatchIsTruncatedWholeAndResetsGoOnAsIfNothingHappened) {
  std::unique_ptr<Client> c = Connect(true);
  ASSERT_NE(c, nullptr);
  absl::StatusOr<protocol::MakeReply> a = c->Make({});
  absl::StatusOr<protocol::MakeReply> b = c->Make({});
  ASSERT_TRUE(a.ok() && b.ok());
  protocol::StepBatchRequest batch;
  batch.sessions = {a->session, b->session};
  batch.actions = {kAction, kAction};
  batch.reset = {1, 1};
  ASSERT_TRUE(c->StepBatch(batch).ok());
  server_.reset();
  Start();
  batch.reset = {0, 0};
  absl::StatusOr<protocol::StepBatchReply> cut = c->StepBatch(batch);
  ASSERT_TRUE(cut.ok()) << cut.status();
  ASSERT_EQ(cut->results.size(), 2u);
  EXPECT_TRUE(cut->results[0].truncated && cut->results[1].truncated);
  EXPECT_FALSE(c->interrupted().empty());
  batch.reset = {1, 1};
  absl::StatusOr<protocol::StepBatchReply> again = c->StepBatch(batch);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_FALSE(again->results[0].truncated);
  // A reset that meets the loss is done again on the new server.
  server_.reset();
  Start();
  EXPECT_TRUE(c->Reset(a->session, 3).ok());
  EXPECT_TRUE(c->interrupted().empty());
  EXPECT_EQ(c->reconnections(), 2u);
}

TEST_F(ClientReconnectTest, WhenNoServerComesBackTheCallSaysSo) {
  std::unique_ptr<Client> c = Connect(true, /*give_up_s=*/0.5);
  ASSERT_NE(c, nullptr);
  absl::StatusOr<protocol::MakeReply> m = c->Make({});
  ASSERT_TRUE(m.ok());
  server_.reset();
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<StepResult> r = c->Step(m->session, kAction);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable) << r.status();
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("did not come back within 0.5 s"));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

}  // namespace
}  // namespace tiergym::env

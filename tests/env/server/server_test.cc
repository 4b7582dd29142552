// The server over real ZeroMQ sockets: malformed requests on one connection get error
// replies naming the field while other connections are served; REQ and DEALER clients;
// ordering of pipelined requests; endpoints; shutdown; the C++ client's timeouts; and an
// end-to-end session over ipc:// on a real (synthetic) profile, in-process and through
// the `tiergym serve` binary.
#include "env/server/server.h"

#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <thread>

#include "env/client/client.h"
#include "env/provider/placement_provider.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/env/fake_env.h"
#include "tests/env/msgpack_builder.h"
#include "tests/env/provider_budget.h"
#include "tests/env/running_server.h"
#include "traces/base/field_status.h"
#include "traces/machine.h"
#include "traces/synth/app_model.h"
#include "traces/synth/generator.h"
#include "zmq.hpp"

namespace tiergym::env {
namespace {

namespace fs = std::filesystem;
namespace mp = tiergym::testing::mp;
using ::testing::HasSubstr;
using ::testing::StartsWith;

using testing::RunningServer;
using testing::TempDir;

// A raw DEALER connection for payloads no client library would send.
class RawConnection {
 public:
  explicit RawConnection(const std::string& endpoint,
                         zmq::socket_type type = zmq::socket_type::dealer)
      : socket_(context_, type) {
    socket_.set(zmq::sockopt::linger, 0);
    socket_.set(zmq::sockopt::rcvtimeo, 10000);
    socket_.connect(endpoint);
  }
  void Send(const std::string& payload) {
    socket_.send(zmq::buffer(payload), zmq::send_flags::none);
  }
  std::string Receive() {
    zmq::message_t m;
    const auto got = socket_.recv(m, zmq::recv_flags::none);
    EXPECT_TRUE(got.has_value()) << "no reply within 10 s";
    return m.to_string();
  }
  std::string Ask(const std::string& payload) {
    Send(payload);
    return Receive();
  }
  // The next message within `timeout_ms`, or nullopt.
  std::optional<std::string> TryReceive(int timeout_ms) {
    zmq::pollitem_t item = {socket_.handle(), 0, ZMQ_POLLIN, 0};
    if (zmq::poll(&item, 1, std::chrono::milliseconds(timeout_ms)) == 0) return std::nullopt;
    zmq::message_t m;
    if (!socket_.recv(m, zmq::recv_flags::dontwait)) return std::nullopt;
    return m.to_string();
  }
  zmq::socket_t& socket() { return socket_; }

 private:
  zmq::context_t context_{1};
  zmq::socket_t socket_;
};

protocol::Error ErrorOf(const std::string& reply) {
  absl::StatusOr<protocol::Reply> r = protocol::DecodeReply(reply, protocol::Op::kStep);
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok() || !std::holds_alternative<protocol::Error>(r->body)) {
    ADD_FAILURE() << "not an error reply";
    return {};
  }
  return std::get<protocol::Error>(r->body);
}

// Parameter: ServerOptions::inline_quick_requests (quick requests answered by the I/O
// thread when no worker is busy, or every request through a worker).
class FakeServerTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    dir_ = TempDir("server-test");
    ServerOptions options;
    options.endpoint = "ipc://" + dir_ + "/s.sock";
    options.threads = 3;
    options.inline_quick_requests = GetParam();
    ServiceOptions service;
    service.max_message_bytes = 4096;
    server_ = std::make_unique<RunningServer>(options, service,
                                              std::make_shared<testing::FakeProvider>());
  }
  void TearDown() override {
    server_.reset();
    fs::remove_all(dir_);
  }
  std::unique_ptr<Client> Connect() {
    absl::StatusOr<std::unique_ptr<Client>> c = Client::Connect({server_->endpoint(), 10});
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? std::move(*c) : nullptr;
  }

  std::string dir_;
  std::unique_ptr<RunningServer> server_;
};

TEST_P(FakeServerTest, EveryMalformedRequestGetsAnErrorNamingTheFieldAndOthersAreStillServed) {
  std::unique_ptr<Client> good = Connect();
  ASSERT_NE(good, nullptr);
  absl::StatusOr<protocol::MakeReply> made = good->Make({{"steps", "100"}});
  ASSERT_TRUE(made.ok()) << made.status();
  const protocol::SessionId s = made->session;
  ASSERT_TRUE(good->Reset(s, 1).ok());

  RawConnection bad(server_->endpoint());
  struct Case {
    std::string what, payload;
    absl::StatusCode code;
    std::string field;
  };
  // The bad connection's own session, and the good one's, which it may not touch.
  absl::StatusOr<protocol::Reply> bad_made = protocol::DecodeReply(
      bad.Ask(mp::Req("make", {{"env", mp::S(protocol::kEnvId)},
                               {"config", mp::Map({{"steps", mp::U(100)}})}})),
      protocol::Op::kMake);
  ASSERT_TRUE(bad_made.ok()) << bad_made.status();
  ASSERT_TRUE(std::holds_alternative<protocol::MakeReply>(bad_made->body));
  const std::string sid = mp::S(std::get<protocol::MakeReply>(bad_made->body).session);
  bad.Ask(mp::Req("reset", {{"session", sid}}));
  const std::vector<Case> cases = {
      {"not msgpack", "\xc1\xc1 garbage", absl::StatusCode::kInvalidArgument,
       protocol::kPayloadField},
      {"truncated", mp::Req("step", {{"session", sid}}).substr(0, 9),
       absl::StatusCode::kInvalidArgument, protocol::kPayloadField},
      {"not a map", mp::Arr({mp::S("step")}), absl::StatusCode::kInvalidArgument,
       protocol::kPayloadField},
      {"wrong type", mp::Req("step", {{"session", mp::U(1)}, {"action", mp::U(0)}}),
       absl::StatusCode::kInvalidArgument, "session"},
      {"wrong action type", mp::Req("step", {{"session", sid}, {"action", mp::S("up")}}),
       absl::StatusCode::kInvalidArgument, "action"},
      {"unknown op", mp::Req("jump"), absl::StatusCode::kUnimplemented, "op"},
      {"unknown key", mp::Req("stats", {{"verbose", mp::B(true)}}),
       absl::StatusCode::kInvalidArgument, "verbose"},
      {"unknown session",
       mp::Req("step", {{"session", mp::S(std::string(32, '0'))}, {"action", mp::Arr({})}}),
       absl::StatusCode::kNotFound, "session"},
      {"another connection's session",
       mp::Req("step", {{"session", mp::S(s)},
                        {"action", mp::Arr({mp::U(1), mp::U(0), mp::U(0), mp::U(1)})}}),
       absl::StatusCode::kNotFound, "session"},
      {"wrong action shape",
       mp::Req("step", {{"session", sid}, {"action", mp::Arr({mp::U(0), mp::U(1)})}}),
       absl::StatusCode::kInvalidArgument, "action"},
      {"out-of-range value",
       mp::Req("step", {{"session", sid}, {"action", mp::Nd<int64_t>("int64", {4}, {0, 1, 1, 5})}}),
       absl::StatusCode::kInvalidArgument, "action[3]"},
      {"negative value",
       mp::Req("step",
               {{"session", sid}, {"action", mp::Arr({mp::U(0), mp::I(-2), mp::U(0), mp::U(0)})}}),
       absl::StatusCode::kInvalidArgument, "action[1]"},
      {"oversized", mp::Req("hello", {{"pad", mp::Bin(std::string(5000, 'x'))}}),
       absl::StatusCode::kResourceExhausted, protocol::kPayloadField},
      {"missing field", mp::Req("reset"), absl::StatusCode::kInvalidArgument, "session"},
      {"missing version", mp::Map({{"op", mp::S("list")}}), absl::StatusCode::kInvalidArgument,
       "v"},
      {"other version", mp::Map({{"v", mp::U(7)}, {"op", mp::S("list")}}),
       absl::StatusCode::kFailedPrecondition, "v"},
      {"bad config",
       mp::Req("make", {{"env", mp::S(protocol::kEnvId)},
                        {"config", mp::Map({{"num_regions", mp::I(-3)}})}}),
       absl::StatusCode::kInvalidArgument, "config.num_regions"},
      {"unknown env", mp::Req("make", {{"env", mp::S("tiergym/Other-v0")}}),
       absl::StatusCode::kNotFound, "env"},
  };
  uint64_t expected_step = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    const protocol::Error e = ErrorOf(bad.Ask(c.payload));
    EXPECT_EQ(e.code, c.code) << e.message;
    EXPECT_EQ(e.field, c.field) << e.message;
    EXPECT_THAT(e.message, StartsWith(c.field + ": "));
    // The well-behaved client's session goes on, undisturbed.
    absl::StatusOr<StepResult> r = good->Step(s, Action{{1, 0, 0, 1}});
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->info.step, ++expected_step);
  }
  absl::StatusOr<protocol::StatsReply> stats = good->Stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->errors, cases.size());
}

TEST_P(FakeServerTest, ReqSocketsWorkToo) {
  RawConnection req(server_->endpoint(), zmq::socket_type::req);
  absl::StatusOr<protocol::Reply> r =
      protocol::DecodeReply(req.Ask(mp::Req("hello", {{"id", mp::U(5)}})), protocol::Op::kHello);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->id, 5u);
  EXPECT_TRUE(std::holds_alternative<protocol::HelloReply>(r->body));
}

TEST_P(FakeServerTest, PipelinedRequestsOfOneConnectionAreHandledInOrder) {
  RawConnection pipe(server_->endpoint());
  absl::StatusOr<protocol::Reply> made_reply = protocol::DecodeReply(
      pipe.Ask(mp::Req("make", {{"env", mp::S(protocol::kEnvId)},
                                {"config", mp::Map({{"steps", mp::U(1000)}})}})),
      protocol::Op::kMake);
  ASSERT_TRUE(made_reply.ok()) << made_reply.status();
  const protocol::MakeReply* made = std::get_if<protocol::MakeReply>(&made_reply->body);
  ASSERT_NE(made, nullptr);
  ASSERT_TRUE(std::holds_alternative<protocol::ResetReply>(
      protocol::DecodeReply(pipe.Ask(mp::Req("reset", {{"session", mp::S(made->session)}})),
                            protocol::Op::kReset)
          ->body));
  constexpr int kN = 50;
  for (int i = 0; i < kN; ++i) {
    pipe.Send(mp::Req("step", {{"id", mp::U(i)},
                               {"session", mp::S(made->session)},
                               {"action", mp::Arr({mp::U(i % 2), mp::U(0), mp::U(0), mp::U(0)})}}));
  }
  for (int i = 0; i < kN; ++i) {
    absl::StatusOr<protocol::Reply> r = protocol::DecodeReply(pipe.Receive(), protocol::Op::kStep);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->id, static_cast<uint64_t>(i));
    ASSERT_TRUE(std::holds_alternative<protocol::StepReply>(r->body));
    EXPECT_EQ(std::get<protocol::StepReply>(r->body).result.info.step,
              static_cast<uint64_t>(i + 1));
  }
}

TEST_P(FakeServerTest, ManyClientsAtOnce) {
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&, t] {
      absl::StatusOr<std::unique_ptr<Client>> c = Client::Connect({server_->endpoint(), 10});
      if (!c.ok()) return void(failures.fetch_add(1));
      absl::StatusOr<protocol::MakeReply> m = (*c)->Make({{"steps", "20"}});
      if (!m.ok() || !(*c)->Reset(m->session, t).ok()) return void(failures.fetch_add(1));
      for (int i = 0; i < 20; ++i) {
        absl::StatusOr<StepResult> r = (*c)->Step(m->session, Action{{t % 2, 1, 0, 1}});
        if (!r.ok() || r->info.step != static_cast<uint64_t>(i + 1)) failures.fetch_add(1);
      }
      if (!(*c)->Close(m->session).ok()) failures.fetch_add(1);
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST_P(FakeServerTest, AnIpcPathInUseIsRefusedAndRemovedAfterShutdown) {
  const std::string path = dir_ + "/s.sock";
  EXPECT_TRUE(fs::exists(path));
  ServerOptions o;
  o.endpoint = "ipc://" + path;
  absl::StatusOr<std::unique_ptr<Server>> second =
      Server::Create(o, {}, std::make_shared<testing::FakeProvider>());
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
  server_.reset();
  EXPECT_FALSE(fs::exists(path));
  // A stale file (no one listening) does not stop a new server.
  std::ofstream(path) << "stale";
  second = Server::Create(o, {}, std::make_shared<testing::FakeProvider>());
  EXPECT_TRUE(second.ok()) << second.status();
}

// A connection that goes away takes its sessions with it, at once: no orphans until the
// idle timeout.
TEST_P(FakeServerTest, SessionsOfAConnectionThatGoesAwayAreClosedAtOnce) {
  std::unique_ptr<Client> watcher = Connect();
  ASSERT_NE(watcher, nullptr);
  for (int round = 0; round < 3; ++round) {
    {
      RawConnection doomed(server_->endpoint());
      for (int i = 0; i < 4; ++i) {
        absl::StatusOr<protocol::Reply> r = protocol::DecodeReply(
            doomed.Ask(mp::Req("make", {{"env", mp::S(protocol::kEnvId)}})), protocol::Op::kMake);
        ASSERT_TRUE(r.ok() && std::holds_alternative<protocol::MakeReply>(r->body));
      }
    }  // the socket closes
    absl::StatusOr<protocol::StatsReply> stats;
    for (int i = 0; i < 200; ++i) {
      stats = watcher->Stats();
      ASSERT_TRUE(stats.ok()) << stats.status();
      if (stats->sessions == 0) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EXPECT_EQ(stats->sessions, 0u) << "not reclaimed within 2 s";
    EXPECT_EQ(stats->sessions_reclaimed, 4u * (round + 1));
  }
}

// A raw ZMTP 3 peer (NULL mechanism, DEALER) on an ipc endpoint: a plain Unix socket, so
// that each frame reaches the server as it is sent (a ZeroMQ socket keeps a message's
// parts until the last one).
class RawZmtpPeer {
 public:
  explicit RawZmtpPeer(const std::string& endpoint) {
    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    const std::string path = endpoint.substr(std::string("ipc://").size());
    std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path.c_str());
    const timeval timeout{10, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) return;
    std::string greeting(64, '\0');
    greeting[0] = '\xff';
    greeting[9] = '\x7f';
    greeting[10] = '\x03';
    greeting[11] = '\x01';  // ZMTP 3.1: heartbeats
    greeting.replace(12, 4, "NULL");
    const std::string ready = std::string("\x05READY\x0bSocket-Type\0\0\0\x06", 22) + "DEALER";
    char theirs[64];
    connected_ = Send(greeting) && ::recv(fd_, theirs, sizeof theirs, MSG_WAITALL) == 64 &&
                 Send(std::string(1, '\x04') + static_cast<char>(ready.size()) + ready);
  }
  ~RawZmtpPeer() { ::close(fd_); }
  bool connected() const { return connected_; }
  // One data frame; false once the server has dropped the connection.
  bool SendFrame(const std::string& body, bool more) {
    std::string frame(1, static_cast<char>(2 | (more ? 1 : 0)));
    for (int shift = 56; shift >= 0; shift -= 8) {
      frame += static_cast<char>((body.size() >> shift) & 255);
    }
    return Send(frame + body);
  }

 private:
  bool Send(const std::string& bytes) {
    size_t sent = 0;
    while (sent < bytes.size()) {
      const ssize_t n = ::send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) return false;
      sent += static_cast<size_t>(n);
    }
    return true;
  }
  int fd_ = -1;
  bool connected_ = false;
};

// ZeroMQ holds a message whole until its last frame arrives, and ZMQ_MAXMSGSIZE bounds
// frames, not messages: a peer whose message never ends (frames with MORE, forever) would
// grow the server without bound. The server drops such a connection once the message
// passes its size limit (4 KiB + 1 MiB here) or 64 frames, and serves everyone else.
TEST_P(FakeServerTest, AMessageWhosePartsNeverEndLosesItsConnection) {
  std::unique_ptr<Client> other = Connect();
  ASSERT_NE(other, nullptr);
  for (const size_t frame_bytes : {size_t{64} << 10, size_t{0}}) {
    RawZmtpPeer peer(server_->endpoint());
    ASSERT_TRUE(peer.connected());
    size_t sent = 0, frames = 0;
    const std::string frame(frame_bytes, 'x');
    while (frames < 100'000 && peer.SendFrame(frame, /*more=*/true)) {
      sent += frame_bytes;
      ++frames;
    }
    EXPECT_LT(frames, 100'000u) << "the server still reads a message of " << sent << " bytes";
    // What it took is the limit, plus what the kernel's socket buffers held.
    EXPECT_LT(sent, size_t{4} << 20) << frames << " frames of " << frame_bytes << " bytes";
    EXPECT_TRUE(other->Stats().ok());
  }
  // A well-formed peer on the same path is served as before.
  RawConnection fine(server_->endpoint(), zmq::socket_type::req);
  EXPECT_THAT(fine.Ask(mp::Req("hello", {})), HasSubstr("protocol"));
}

// A peer that falls silent without closing its connection (it answers no heartbeat and
// reads nothing, as a host that vanished) loses its sessions after three heartbeat
// intervals.
TEST(ServerHeartbeatTest, SessionsOfAPeerThatFallsSilentAreReclaimedAfterThreeHeartbeats) {
  const std::string dir = TempDir("heartbeat");
  ServerOptions options;
  options.endpoint = "ipc://" + dir + "/s.sock";
  options.heartbeat_s = 0.2;
  RunningServer server(options, ServiceOptions{}, std::make_shared<testing::FakeProvider>());
  absl::StatusOr<std::unique_ptr<Client>> watcher = Client::Connect({server.endpoint(), 10});
  ASSERT_TRUE(watcher.ok()) << watcher.status();
  RawZmtpPeer silent(server.endpoint());
  ASSERT_TRUE(silent.connected());
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(silent.SendFrame(mp::Req("make", {{"env", mp::S(protocol::kEnvId)}}), false));
  }
  const auto start = std::chrono::steady_clock::now();
  uint64_t made = 0, open = 1;
  while (std::chrono::steady_clock::now() - start < std::chrono::seconds(10)) {
    absl::StatusOr<protocol::StatsReply> stats = (*watcher)->Stats();
    ASSERT_TRUE(stats.ok()) << stats.status();
    made = stats->sessions_made;
    open = stats->sessions;
    if (made == 3 && open == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const double took_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(made, 3u);
  EXPECT_EQ(open, 0u) << "sessions of the silent peer still open after " << took_s << " s";
  EXPECT_LT(took_s, 5.0);
  server.Stop();
  fs::remove_all(dir);
}

// A client that pipelines without reading: its replies wait in a bounded outbox, then are
// dropped and counted; every request is either answered or counted, nothing is lost
// silently, and other connections are served meanwhile.
TEST(ServerBackpressureTest, AConnectionThatDoesNotReadCannotHoldTheServer) {
  const std::string dir = TempDir("backpressure");
  ServerOptions options;
  options.endpoint = "ipc://" + dir + "/s.sock";
  options.max_queued_reply_bytes = 16 << 10;
  RunningServer server(options, ServiceOptions{}, std::make_shared<testing::FakeProvider>());
  RawConnection greedy(server.endpoint());
  greedy.socket().set(zmq::sockopt::rcvhwm, 1);
  greedy.socket().set(zmq::sockopt::rcvbuf, 4096);
  constexpr int kSent = 4000;
  for (int i = 0; i < kSent; ++i) {
    greedy.Send(mp::Req("hello", {{"id", mp::U(i)}}));
  }
  absl::StatusOr<std::unique_ptr<Client>> other = Client::Connect({server.endpoint(), 10});
  ASSERT_TRUE(other.ok()) << other.status();
  absl::StatusOr<protocol::StatsReply> stats;
  int received = 0;
  for (int i = 0; i < 1000; ++i) {
    stats = (*other)->Stats();
    ASSERT_TRUE(stats.ok()) << stats.status();  // served while the greedy one hogs
    if (stats->replies_dropped > 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_GT(stats->replies_dropped, 0u);
  // Now it reads: every request was answered or counted as dropped.
  while (std::optional<std::string> r = greedy.TryReceive(1000)) ++received;
  stats = (*other)->Stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(received + stats->replies_dropped, static_cast<uint64_t>(kSent))
      << received << " received, " << stats->replies_dropped << " dropped";
  fs::remove_all(dir);
}

// The outboxes of all connections together are bounded too.
TEST(ServerBackpressureTest, ManyConnectionsThatDoNotReadShareOneBound) {
  const std::string dir = TempDir("backpressure-total");
  ServerOptions options;
  options.endpoint = "ipc://" + dir + "/s.sock";
  options.max_queued_reply_bytes = 1 << 20;
  options.max_queued_reply_bytes_total = 32 << 10;
  RunningServer server(options, ServiceOptions{}, std::make_shared<testing::FakeProvider>());
  constexpr int kConnections = 3, kSent = 3000;
  std::vector<std::unique_ptr<RawConnection>> greedy;
  for (int c = 0; c < kConnections; ++c) {
    greedy.push_back(std::make_unique<RawConnection>(server.endpoint()));
    greedy.back()->socket().set(zmq::sockopt::rcvhwm, 1);
    greedy.back()->socket().set(zmq::sockopt::rcvbuf, 4096);
    for (int i = 0; i < kSent; ++i) greedy.back()->Send(mp::Req("hello", {{"id", mp::U(i)}}));
  }
  absl::StatusOr<std::unique_ptr<Client>> other = Client::Connect({server.endpoint(), 10});
  ASSERT_TRUE(other.ok()) << other.status();
  absl::StatusOr<protocol::StatsReply> stats;
  for (int i = 0; i < 1000; ++i) {
    stats = (*other)->Stats();
    ASSERT_TRUE(stats.ok()) << stats.status();
    if (stats->replies_dropped > 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_GT(stats->replies_dropped, 0u);
  uint64_t received = 0;
  for (auto& g : greedy) {
    while (std::optional<std::string> r = g->TryReceive(1000)) ++received;
  }
  stats = (*other)->Stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(received + stats->replies_dropped, uint64_t{kConnections} * kSent);
  fs::remove_all(dir);
}

// make and estimate run on their own workers: a slow load holds up neither hello, stats
// and close nor the steps of sessions already made.
TEST(ServerFairnessTest, ALoadNeverHoldsUpOtherRequests) {
  const std::string dir = TempDir("fairness");
  ServerOptions options;
  options.endpoint = "ipc://" + dir + "/s.sock";
  options.threads = 1;
  options.load_threads = 1;
  RunningServer server(options, ServiceOptions{}, std::make_shared<testing::FakeProvider>());
  absl::StatusOr<std::unique_ptr<Client>> b = Client::Connect({server.endpoint(), 10});
  ASSERT_TRUE(b.ok()) << b.status();
  absl::StatusOr<protocol::MakeReply> made = (*b)->Make({{"steps", "100"}});
  ASSERT_TRUE(made.ok());
  ASSERT_TRUE((*b)->Reset(made->session, 1).ok());
  RawConnection a(server.endpoint());
  a.Send(mp::Req(
      "make", {{"env", mp::S(protocol::kEnvId)}, {"config", mp::Map({{"load_ms", mp::U(2000)}})}}));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE((*b)->Stats().ok());
  for (int i = 0; i < 20; ++i) ASSERT_TRUE((*b)->Step(made->session, Action{{1, 0, 0, 0}}).ok());
  EXPECT_TRUE((*b)->Close(made->session).ok());
  absl::StatusOr<std::unique_ptr<Client>> c = Client::Connect({server.endpoint(), 10});
  EXPECT_TRUE(c.ok());
  const double waited_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(waited_s, 1.0) << "other requests waited for the load";
  absl::StatusOr<protocol::Reply> r = protocol::DecodeReply(a.Receive(), protocol::Op::kMake);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(std::holds_alternative<protocol::MakeReply>(r->body));
  fs::remove_all(dir);
}

// Stop() ends Run() within the drain time even while a load runs; Drained() says so, and
// `tiergym serve` then exits without waiting for it.
TEST(ServerFairnessTest, StopReturnsWithinTheDrainTimeWhateverIsInFlight) {
  const std::string dir = TempDir("drain");
  ServerOptions options;
  options.endpoint = "ipc://" + dir + "/s.sock";
  options.drain_timeout_s = 0.5;
  absl::StatusOr<std::unique_ptr<Server>> server =
      Server::Create(options, ServiceOptions{}, std::make_shared<testing::FakeProvider>());
  ASSERT_TRUE(server.ok());
  std::thread run([&] { EXPECT_TRUE((*server)->Run().ok()); });
  RawConnection a((*server)->endpoint());
  a.Send(mp::Req(
      "make", {{"env", mp::S(protocol::kEnvId)}, {"config", mp::Map({{"load_ms", mp::U(2500)}})}}));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const auto start = std::chrono::steady_clock::now();
  (*server)->Stop();
  run.join();
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 1.5);
  EXPECT_FALSE((*server)->Drained());
  server->reset();  // waits for the load
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(InlineAndHandoff, FakeServerTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "Inline" : "ViaWorkers";
                         });

TEST(ServerEndpointTest, PortZeroPicksAFreePortAndABusyPortIsRefused) {
  ServerOptions o;
  o.endpoint = "tcp://127.0.0.1:0";
  RunningServer a(o, {}, std::make_shared<testing::FakeProvider>());
  ASSERT_NE(a.get(), nullptr);
  EXPECT_THAT(a.endpoint(), StartsWith("tcp://127.0.0.1:"));
  EXPECT_NE(a.endpoint(), "tcp://127.0.0.1:0");
  o.endpoint = a.endpoint();
  absl::StatusOr<std::unique_ptr<Server>> b =
      Server::Create(o, {}, std::make_shared<testing::FakeProvider>());
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(b.status().message()), HasSubstr("address in use"));
  o.endpoint = "carrier-pigeon://home";
  b = Server::Create(o, {}, std::make_shared<testing::FakeProvider>());
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ClientTimeoutTest, NoServerIsDeadlineExceededNotAHang) {
  const std::string dir = TempDir("no-server");
  absl::StatusOr<std::unique_ptr<Client>> c =
      Client::Connect({"ipc://" + dir + "/nobody.sock", 0.3});
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("nobody.sock"));
  fs::remove_all(dir);
}

// The connection's monitor reports the server gone: the next call fails at once, not after
// its timeout.
TEST(ClientTimeoutTest, AServerThatStopsIsUnavailableForTheNextCallAtOnce) {
  const std::string dir = TempDir("stopping");
  ServerOptions o;
  o.endpoint = "ipc://" + dir + "/s.sock";
  auto server = std::make_unique<RunningServer>(o, ServiceOptions{},
                                                std::make_shared<testing::FakeProvider>());
  absl::StatusOr<std::unique_ptr<Client>> c = Client::Connect({server->endpoint(), 30});
  ASSERT_TRUE(c.ok()) << c.status();
  server.reset();
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<protocol::StatsReply> s = (*c)->Stats();
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kUnavailable) << s.status();
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("went away"));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  fs::remove_all(dir);
}

// --- End to end on a real profile ----------------------------------------------------------

class EndToEndTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(TempDir("e2e"));
    absl::StatusOr<synth::AppModel> app = synth::LoadAppModel("minife");
    ASSERT_TRUE(app.ok()) << app.status();
    absl::StatusOr<Machine> knl = LoadMachine("knl");
    ASSERT_TRUE(knl.ok());
    synth::SynthOptions o;
    o.target_samples = 20000;
    o.chunks_per_phase = 40;
    o.measured_runs = false;
    absl::StatusOr<synth::SynthProfile> p = synth::GenerateProfile(*app, *knl, o);
    ASSERT_TRUE(p.ok()) << p.status();
    ASSERT_TRUE(synth::WriteSynthProfile(*p, *dir_, TraceFormat::kBinary).ok());
  }
  static void TearDownTestSuite() {
    fs::remove_all(*dir_);
    delete dir_;
  }
  static std::string ProfileDir() { return *dir_ + "/minife/profile"; }
  // The bytes of the index of ProfileDir() for placements defaulting to `tier`, built apart
  // as a server's provider builds it (an estimator of a ProfileCache, the knl machine).
  static uint64_t IndexBytes(const std::string& tier) {
    ProfileCache cache;
    absl::StatusOr<Machine> knl = LoadMachine("knl");
    EXPECT_TRUE(knl.ok()) << knl.status();
    if (!knl.ok()) return 0;
    absl::StatusOr<std::shared_ptr<Estimator>> estimator = cache.Get(ProfileDir(), *knl, 1'000'000);
    EXPECT_TRUE(estimator.ok()) << estimator.status();
    if (!estimator.ok()) return 0;
    absl::StatusOr<std::shared_ptr<const EstimatorIndex>> index = (*estimator)->IndexFor(tier);
    EXPECT_TRUE(index.ok()) << index.status();
    return index.ok() ? (*index)->MemoryBytes() : 0;
  }

  static std::string* dir_;
};
std::string* EndToEndTest::dir_ = nullptr;

// One whole episode through a client; returns the sum of rewards and checks invariants.
double RunEpisode(Client& c, const protocol::SessionId& session, uint64_t seed, int64_t tier,
                  std::vector<std::vector<float>>* observations = nullptr) {
  absl::StatusOr<StepResult> r = c.Reset(session, seed);
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok()) return NAN;
  if (observations) observations->push_back(r->observation);
  double total = 0;
  const size_t regions = r->info.action_mask.size() / r->info.tier_used_bytes.size();
  for (int i = 0; i < 1000; ++i) {
    r = c.Step(session, Action{std::vector<int64_t>(regions, tier)});
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok()) return NAN;
    for (float v : r->observation) {
      EXPECT_GE(v, 0.0f);
      EXPECT_LE(v, 1.0f);
    }
    if (observations) observations->push_back(r->observation);
    total += r->reward;
    if (r->terminated || r->truncated) {
      // The return is the fractional speedup: time saved over the default run's total.
      EXPECT_NEAR(total, (r->info.default_total_ns - r->info.elapsed_ns) / r->info.default_total_ns,
                  1e-9);
      return total;
    }
  }
  ADD_FAILURE() << "the episode did not end";
  return NAN;
}

// `tiergym serve --machine` and the like: the server's defaults for keys a session does
// not give, reported by `list`, overridden by what a session gives.
TEST_F(EndToEndTest, ServerDefaultsApplyToSessionsThatNameNoValue) {
  PlacementProviderOptions po;
  po.default_profiles = {ProfileDir()};
  po.default_config = {{"num_regions", "8"}};
  PlacementProvider provider(po);
  const auto& keys = provider.ConfigKeys();
  auto key = std::find_if(keys.begin(), keys.end(),
                          [](const ConfigKey& k) { return k.name == "num_regions"; });
  ASSERT_NE(key, keys.end());
  EXPECT_EQ(key->default_value, "8");
  absl::StatusOr<std::unique_ptr<SessionEnv>> by_default = provider.Make({});
  ASSERT_TRUE(by_default.ok()) << by_default.status();
  EXPECT_EQ((*by_default)->spec().num_regions, 8);
  absl::StatusOr<std::unique_ptr<SessionEnv>> own = provider.Make({{"num_regions", "4"}});
  ASSERT_TRUE(own.ok()) << own.status();
  EXPECT_EQ((*own)->spec().num_regions, 4);
  // A default machine the profiles were not recorded on fails with the profile's reason.
  po.default_config = {{"machine", "disagg"}};
  PlacementProvider wrong(po);
  absl::StatusOr<std::unique_ptr<SessionEnv>> refused = wrong.Make({});
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("has no run for tier 'remote'"));
}

// Clients name data; the operator decides what names mean. Paths outside the data
// directories (symbolic links included), FIFOs, devices and /proc are refused, all with the
// same NotFound whatever exists, and no message carries a server path or file content.
TEST_F(EndToEndTest, ClientsReadOnlyWhatTheOperatorNamed) {
  const std::string data = *dir_ + "/data";
  fs::create_directories(data + "/machines");
  fs::create_directories(data + "/prof");
  fs::create_directories(data + "/leaky");
  absl::StatusOr<Machine> knl = LoadMachine("knl");
  ASSERT_TRUE(knl.ok());
  std::ofstream(data + "/machines/small.json") << MachineToJson(*knl);
  for (const auto& e : fs::directory_iterator(ProfileDir())) {
    fs::copy_file(e.path(), data + "/prof/" + e.path().filename().string(),
                  fs::copy_options::overwrite_existing);
  }
  const std::string secret = *dir_ + "/secret.json";
  std::ofstream(secret) << "{\"password\": \"hunter2\"}\n";
  fs::remove(data + "/escape.json");
  fs::create_symlink(secret, data + "/escape.json");
  fs::remove(data + "/outside");
  fs::create_directory_symlink(ProfileDir(), data + "/outside");
  fs::remove(data + "/leaky/a.tgt");
  fs::create_symlink(fs::directory_iterator(ProfileDir())->path(), data + "/leaky/a.tgt");
  fs::remove(data + "/fifo.json");
  ASSERT_EQ(mkfifo((data + "/fifo.json").c_str(), 0600), 0);

  PlacementProviderOptions po;
  po.default_profiles = {ProfileDir()};
  po.named_profiles = {{"minife", ProfileDir()}};
  po.data_dirs = {data};
  po.default_config = {{"num_regions", "4"}, {"steps", "4"}};
  PlacementProvider provider(po);

  // Allowed: served names, presets, files and directories inside the data directory.
  for (const auto& config : std::vector<ConfigMap>{
           {{"profiles", "minife"}},
           {{"profiles", ProfileDir()}},  // the operator's own path, spelt out
           {{"profiles", "prof"}, {"machine", "machines/small.json"}},
           {{"profiles", "./prof/"}, {"machine", "knl"}},
           {{"profiles", data + "/prof"}, {"machine", data + "/machines/small.json"}}}) {
    absl::StatusOr<std::unique_ptr<SessionEnv>> env = provider.Make(config);
    EXPECT_TRUE(env.ok()) << ConfigValueText(config.begin()->second) << ": " << env.status();
  }
  // Refused, each the same way.
  const std::vector<std::pair<std::string, std::string>> refused = {
      {"machine", "/etc/passwd"},
      {"machine", "/proc/self/environ"},
      {"machine", "/dev/zero"},
      {"machine", "../secret.json"},
      {"machine", "escape.json"},
      {"machine", "fifo.json"},
      {"machine", "no-such-file.json"},
      {"machine", secret},
      {"machine", std::string(5000, 'a')},
      {"interference", "/etc/passwd"},
      {"interference", "escape.json"},
      {"interference", "fifo.json"},
      {"interference", "/proc/self/fd/1"},
      {"calibration", "/etc/passwd"},
      {"calibration", "escape.json"},
      {"calibration", "fifo.json"},
      {"calibration", "no-such-file.json"},
      {"profiles", "/etc"},
      {"profiles", "outside"},
      {"profiles", "leaky"},
      {"profiles", "../data/prof"},
      {"profiles", "/proc/self/cwd"},
      {"profiles", "no-such-dir"},
  };
  for (const auto& [key, value] : refused) {
    absl::StatusOr<std::unique_ptr<SessionEnv>> env = provider.Make({{key, value}});
    ASSERT_FALSE(env.ok()) << key << "=" << value;
    EXPECT_EQ(env.status().code(), absl::StatusCode::kNotFound)
        << key << "=" << value << ": " << env.status();
    const std::string message(env.status().message());
    EXPECT_THAT(message, HasSubstr("config key '" + key + "'"));
    if (value.find(*dir_) == std::string::npos) {  // the client's own name is quoted
      EXPECT_THAT(message, ::testing::Not(HasSubstr(*dir_))) << message;
    }
    EXPECT_THAT(message, ::testing::Not(HasSubstr("hunter2"))) << message;
    EXPECT_THAT(message, ::testing::Not(HasSubstr("root:"))) << message;
  }
  // Whether a file exists outside the roots does not change the answer.
  auto message_of = [&](const std::string& value) {
    absl::StatusOr<std::unique_ptr<SessionEnv>> env = provider.Make({{"machine", value}});
    std::string m(env.status().message());
    return m.substr(m.find("\" is"));
  };
  EXPECT_EQ(message_of(secret), message_of(*dir_ + "/no-such.json"));
  EXPECT_EQ(message_of("escape.json"), message_of("no-such.json"));
  // A server whose owner trusts every path ("/", as the Python client's private servers)
  // still reads only regular data files: no /proc, no devices, no FIFOs.
  po.data_dirs = {"/"};
  PlacementProvider trusting(po);
  for (const std::string& value :
       {std::string("/proc/self/environ"), std::string("/dev/zero"), data + "/fifo.json",
        std::string("/sys/kernel/mm/transparent_hugepage/enabled")}) {
    absl::StatusOr<std::unique_ptr<SessionEnv>> env = trusting.Make({{"machine", value}});
    ASSERT_FALSE(env.ok()) << value;
    EXPECT_EQ(env.status().code(), absl::StatusCode::kNotFound) << env.status();
  }
  EXPECT_TRUE(trusting.Make({{"machine", data + "/machines/small.json"}}).ok());
  po.data_dirs = {data};
  // Errors of files inside the roots name them as clients do, not by server path.
  std::ofstream(data + "/machines/bad.json") << "{\"name\": 7}";
  absl::StatusOr<std::unique_ptr<SessionEnv>> bad =
      provider.Make({{"machine", "machines/bad.json"}});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), ::testing::Not(HasSubstr(data)));
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("data-dir:"));
}

// One request cannot exhaust the server's memory: a configuration's cost is estimated
// before anything is built, refused over the budget (naming both figures), and a refused
// or failed configuration leaves nothing behind, so the same make can be retried.
TEST_F(EndToEndTest, AConfigurationOverTheMemoryBudgetIsRefusedBeforeItIsBuilt) {
  PlacementProviderOptions po;
  po.default_profiles = {ProfileDir()};
  PlacementProvider provider(po);
  const auto start = std::chrono::steady_clock::now();
  for (int attempt = 0; attempt < 2; ++attempt) {
    absl::StatusOr<std::unique_ptr<SessionEnv>> huge =
        provider.Make({{"num_regions", "65536"}, {"steps", "1000000"}});
    ASSERT_FALSE(huge.ok());
    EXPECT_EQ(huge.status().code(), absl::StatusCode::kResourceExhausted) << huge.status();
    EXPECT_THAT(std::string(huge.status().message()), HasSubstr("budget of 2048.0 MiB"));
    EXPECT_THAT(std::string(huge.status().message()), HasSubstr("needs about 250"));
  }
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 1.0);
  EXPECT_EQ(provider.GetStats().asset_sets, 0u);
  EXPECT_TRUE(provider.Make({{"num_regions", "8"}, {"steps", "10"}}).ok());
}

// A configuration wrong in itself gets its own error, whatever it would cost: the spec is
// made from the configuration before its cost is weighed or a profile is read.
TEST_F(EndToEndTest, AWrongConfigurationIsRefusedForWhatIsWrongBeforeItsCost) {
  PlacementProviderOptions po;
  po.default_profiles = {ProfileDir()};
  PlacementProvider provider(po);
  absl::StatusOr<std::unique_ptr<SessionEnv>> wrong = provider.Make(
      {{"num_regions", "65536"}, {"steps", "1000000"}, {"tier_capacity_mib", "nvm:100"}});
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kInvalidArgument) << wrong.status();
  EXPECT_THAT(std::string(wrong.status().message()), HasSubstr("has no tier 'nvm'"));
  EXPECT_EQ(ErrorField(wrong.status()), "tier_capacity_mib");
  EXPECT_EQ(provider.GetStats().asset_sets, 0u);
}

TEST_F(EndToEndTest, UnusedAssetSetsMakeRoomForNewOnes) {
  PlacementProviderOptions po;
  po.default_profiles = {ProfileDir()};
  po.max_asset_bytes = 40 << 20;
  PlacementProvider provider(po);
  // 1024 regions x 1000 intervals x (a float share + 2 tier costs): about 20 MB each.
  absl::StatusOr<std::unique_ptr<SessionEnv>> a =
      provider.Make({{"num_regions", "1024"}, {"steps", "1000"}});
  ASSERT_TRUE(a.ok()) << a.status();
  absl::StatusOr<std::unique_ptr<SessionEnv>> b =
      provider.Make({{"num_regions", "1024"}, {"steps", "999"}});
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), absl::StatusCode::kResourceExhausted) << b.status();
  a->reset();  // the first configuration is no longer used: it makes room
  b = provider.Make({{"num_regions", "1024"}, {"steps", "999"}});
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(provider.GetStats().asset_sets, 1u);
  EXPECT_LE(provider.GetStats().asset_bytes, po.max_asset_bytes);
}

// Trim() frees configurations no session uses (after unused_asset_timeout_s), never the
// server's default one.
TEST_F(EndToEndTest, TrimFreesUnusedConfigurationsButTheDefault) {
  PlacementProviderOptions po;
  po.default_profiles = {ProfileDir()};
  po.unused_asset_timeout_s = 0;
  PlacementProvider provider(po);
  ASSERT_TRUE(provider.Make({}).ok());
  absl::StatusOr<std::unique_ptr<SessionEnv>> used = provider.Make({{"num_regions", "16"}});
  ASSERT_TRUE(provider.Make({{"num_regions", "32"}}).ok());  // made and dropped
  ASSERT_TRUE(used.ok());
  EXPECT_EQ(provider.GetStats().asset_sets, 3u);
  provider.Trim();
  EXPECT_EQ(provider.GetStats().asset_sets, 2u);  // the default and the one in use
  used->reset();
  provider.Trim();
  EXPECT_EQ(provider.GetStats().asset_sets, 1u);
  EXPECT_TRUE(provider.Make({}).ok());
}

TEST_F(EndToEndTest, AnEpisodeOverIpcInProcess) {
  ServerOptions o;
  o.endpoint = "ipc://" + *dir_ + "/e2e.sock";
  PlacementProviderOptions po;
  po.default_profiles = {ProfileDir()};
  po.named_profiles = {{"minife", ProfileDir()}};
  RunningServer server(o, ServiceOptions{}, std::make_shared<PlacementProvider>(po));
  absl::StatusOr<std::unique_ptr<Client>> c = Client::Connect({server.endpoint(), 60});
  ASSERT_TRUE(c.ok()) << c.status();
  Client& client = **c;

  absl::StatusOr<protocol::ListReply> list = client.List();
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(list->envs[0].id, protocol::kEnvId);

  absl::StatusOr<protocol::MakeReply> a = client.Make({{"num_regions", "8"}, {"steps", "10"}});
  ASSERT_TRUE(a.ok()) << a.status();
  absl::StatusOr<protocol::MakeReply> b =
      client.Make({{"num_regions", "8"}, {"steps", "10"}, {"profiles", "minife"}});
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(a->spec.tiers, (std::vector<std::string>{"ddr", "hbm"}));
  EXPECT_EQ(a->spec.profiles, (std::vector<std::string>{"minife"}));

  std::vector<std::vector<float>> obs_a, obs_b;
  const double hbm = RunEpisode(client, a->session, 4, 1, &obs_a);
  RunEpisode(client, b->session, 4, 1, &obs_b);
  EXPECT_EQ(obs_a, obs_b);  // same seed, same actions: the same episode
  EXPECT_GT(hbm, 0.0);      // all of minife in HBM beats DDR
  EXPECT_NEAR(RunEpisode(client, a->session, 5, 0), 0.0, 1e-12);  // staying on DDR saves nothing

  // The batched path gives what stepping one by one gives.
  ASSERT_TRUE(client.Reset(a->session, 9).ok());
  ASSERT_TRUE(client.Reset(b->session, 9).ok());
  protocol::StepBatchRequest batch;
  batch.sessions = {a->session, b->session};
  batch.actions = {Action{{1, 1, 1, 1, 0, 0, 0, 0}}, Action{{1, 1, 1, 1, 0, 0, 0, 0}}};
  absl::StatusOr<protocol::StepBatchReply> br = client.StepBatch(batch);
  ASSERT_TRUE(br.ok()) << br.status();
  EXPECT_EQ(br->results[0].observation, br->results[1].observation);
  EXPECT_EQ(br->results[0].reward, br->results[1].reward);

  protocol::EstimateRequest e;
  e.session = a->session;
  e.profile = "minife";
  e.placement_json = R"({"default": "hbm"})";
  absl::StatusOr<protocol::EstimateReply> est = client.Estimate(e);
  ASSERT_TRUE(est.ok()) << est.status();
  EXPECT_LT(est->runtime_ns, est->default_runtime_ns);

  absl::StatusOr<StepResult> wrong = client.Step(a->session, Action{{1, 1}});
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(wrong.status().message()), StartsWith("action: expected 8 values"));

  absl::StatusOr<protocol::StatsReply> stats = client.Stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->sessions, 2u);
  EXPECT_EQ(stats->asset_sets, 1u);  // two sessions, one configuration loaded once
  EXPECT_TRUE(client.Close(a->session).ok());
  EXPECT_EQ(client.Close(a->session).code(), absl::StatusCode::kNotFound);
}

// An estimate of a placement whose default tier is not the configuration's builds an index
// of its own, which the profile's estimator then holds (with the server's default
// configuration, for good): the server's asset_bytes, what its memory budget counts, grows
// by that index's bytes, once.
TEST_F(EndToEndTest, AnIndexAnEstimateBuildsCountsInTheServersAssetBytes) {
  ServerOptions o;
  o.endpoint = "ipc://" + *dir_ + "/index.sock";
  PlacementProviderOptions po;
  po.default_profiles = {ProfileDir()};
  RunningServer server(o, ServiceOptions{}, std::make_shared<PlacementProvider>(po));
  absl::StatusOr<std::unique_ptr<Client>> c = Client::Connect({server.endpoint(), 60});
  ASSERT_TRUE(c.ok()) << c.status();
  Client& client = **c;
  absl::StatusOr<protocol::MakeReply> a = client.Make({{"num_regions", "8"}, {"steps", "10"}});
  ASSERT_TRUE(a.ok()) << a.status();
  absl::StatusOr<protocol::StatsReply> before = client.Stats();
  ASSERT_TRUE(before.ok()) << before.status();
  protocol::EstimateRequest e;
  e.session = a->session;
  e.profile = "minife";
  e.placement_json = R"({"default": "hbm"})";
  for (int twice = 0; twice < 2; ++twice) {
    absl::StatusOr<protocol::EstimateReply> est = client.Estimate(e);
    ASSERT_TRUE(est.ok()) << est.status();
    absl::StatusOr<protocol::StatsReply> after = client.Stats();
    ASSERT_TRUE(after.ok()) << after.status();
    EXPECT_EQ(after->asset_bytes - before->asset_bytes, IndexBytes("hbm")) << "estimate " << twice;
  }
}

// With less room left in the memory budget than that index takes, the estimate is refused
// before anything is built, naming the budget, and the server goes on: estimates of
// placements on the configuration's default tier still answer, and the refused one does
// once there is room.
TEST_F(EndToEndTest, AnEstimateWhoseIndexDoesNotFitTheServersBudgetIsRefused) {
  const uint64_t budget = uint64_t{256} << 20;
  ServerOptions o;
  o.endpoint = "ipc://" + *dir_ + "/index-budget.sock";
  PlacementProviderOptions po;
  po.default_profiles = {ProfileDir()};
  po.max_asset_bytes = budget;
  auto provider = std::make_shared<PlacementProvider>(po);
  ServiceOptions so;
  so.max_asset_bytes = budget;
  RunningServer server(o, so, provider);
  absl::StatusOr<std::unique_ptr<Client>> c = Client::Connect({server.endpoint(), 60});
  ASSERT_TRUE(c.ok()) << c.status();
  Client& client = **c;
  absl::StatusOr<protocol::MakeReply> a = client.Make({{"num_regions", "8"}, {"steps", "10"}});
  ASSERT_TRUE(a.ok()) << a.status();
  absl::StatusOr<protocol::StatsReply> held = client.Stats();
  ASSERT_TRUE(held.ok()) << held.status();
  const uint64_t index_bytes = IndexBytes("hbm");
  ASSERT_GT(index_bytes, 2048u);
  // Everything but room for half the index taken (as by other clients).
  const uint64_t taken = testing::FreeBytes(*provider, budget) - index_bytes / 2;
  ASSERT_TRUE(provider->Charge(taken).ok());

  protocol::EstimateRequest e;
  e.session = a->session;
  e.profile = "minife";
  e.placement_json = R"({"default": "hbm"})";
  absl::StatusOr<protocol::EstimateReply> refused = client.Estimate(e);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted) << refused.status();
  const std::string message(refused.status().message());
  EXPECT_THAT(message, StartsWith("placement: "));
  EXPECT_THAT(message, HasSubstr("an index of profile 'minife'"));
  EXPECT_THAT(message, HasSubstr("memory budget of 256.0 MiB (--max-asset-mib)"));
  absl::StatusOr<protocol::StatsReply> after = client.Stats();
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(after->asset_bytes, held->asset_bytes);  // nothing built

  // The server goes on: the configuration's own index answers, by session or configuration.
  protocol::EstimateRequest base = e;
  base.placement_json = R"({"default": "ddr", "fractions": {"hbm": 0.5}})";
  absl::StatusOr<protocol::EstimateReply> est = client.Estimate(base);
  ASSERT_TRUE(est.ok()) << est.status();
  EXPECT_LT(est->runtime_ns, est->default_runtime_ns);
  base.session = "";
  base.config = protocol::ConfigMap{{"num_regions", "8"}, {"steps", "10"}};
  EXPECT_TRUE(client.Estimate(base).ok());
  provider->Uncharge(taken);
  ASSERT_TRUE(client.Estimate(e).ok());
  after = client.Stats();
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(after->asset_bytes - held->asset_bytes, index_bytes);
}

TEST_F(EndToEndTest, TheServeCommandServesUntilSigterm) {
  const std::string sock = *dir_ + "/cli.sock";
  const std::string out = *dir_ + "/serve.out";
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    FILE* f = freopen(out.c_str(), "w", stdout);
    (void)f;
    execl((std::string(TIERGYM_BIN_DIR) + "/tiergym").c_str(), "tiergym", "serve", "--endpoint",
          ("ipc://" + sock).c_str(), "--profiles", ProfileDir().c_str(), "--threads", "2",
          "--quiet", static_cast<char*>(nullptr));
    _exit(127);
  }
  // The line appears once the server serves (loading the profile takes a moment).
  std::string line;
  for (int i = 0; i < 600 && line.empty(); ++i) {
    std::ifstream in(out);
    std::getline(in, line);
    if (line.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(line, "listening on ipc://" + sock);
  absl::StatusOr<std::unique_ptr<Client>> c = Client::Connect({"ipc://" + sock, 60});
  ASSERT_TRUE(c.ok()) << c.status();
  absl::StatusOr<protocol::MakeReply> m = (*c)->Make({{"steps", "5"}});
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_TRUE(std::isfinite(RunEpisode(**c, m->session, 1, 1)));
  kill(pid, SIGTERM);
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_FALSE(fs::exists(sock));
}

}  // namespace
}  // namespace tiergym::env

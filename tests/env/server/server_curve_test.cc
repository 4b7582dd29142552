// The server with CURVE (ZeroMQ's authentication and encryption): the allowed client is
// served; a client without keys, with a key pair not allowed, with another server key, or
// replaying an allowed client's recorded handshake gets no reply at all and reaches no
// session; and a tcp:// endpoint other than loopback is refused without CURVE unless it is
// opened on purpose.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <string>
#include <thread>

#include "env/client/client.h"
#include "env/curve/curve_keys.h"
#include "env/server/server.h"
#include "env/server/zmtp_guard.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/env/fake_env.h"
#include "tests/env/msgpack_builder.h"
#include "tests/env/running_server.h"
#include "zmq.hpp"

namespace tiergym::env {
namespace {

namespace mp = tiergym::testing::mp;
using ::testing::HasSubstr;
using testing::RunningServer;

CurveKeyPair Pair() {
  absl::StatusOr<CurveKeyPair> k = MakeCurveKeyPair();
  EXPECT_TRUE(k.ok()) << k.status();
  return *k;
}

ClientOptions Options(const std::string& endpoint, const CurveKeyPair& server,
                      const CurveKeyPair& own, double timeout_s = 10) {
  ClientOptions o;
  o.endpoint = endpoint;
  o.timeout_s = timeout_s;
  o.curve_server_key = server.public_key;
  o.curve_public_key = own.public_key;
  o.curve_secret_key = own.secret_key;
  return o;
}

// A DEALER with any keys (or none), sending raw requests.
class Stranger {
 public:
  Stranger(const std::string& endpoint, const CurveKeyPair* server, const CurveKeyPair* own)
      : socket_(context_, zmq::socket_type::dealer) {
    socket_.set(zmq::sockopt::linger, 0);
    if (server != nullptr) {
      socket_.set(zmq::sockopt::curve_serverkey, CurveKeyBytes(server->public_key));
      socket_.set(zmq::sockopt::curve_publickey, CurveKeyBytes(own->public_key));
      socket_.set(zmq::sockopt::curve_secretkey, CurveKeyBytes(own->secret_key));
    }
    socket_.connect(endpoint);
  }
  // Whether anything comes back to `hello` and `make` within `ms` (they may not even be
  // sent: ZeroMQ drops the pipe of a connection whose handshake failed).
  bool AnswerWithin(int ms) {
    (void)socket_.send(zmq::buffer(mp::Req("hello", {})), zmq::send_flags::dontwait);
    (void)socket_.send(zmq::buffer(mp::Req("make", {{"env", mp::S(protocol::kEnvId)}})),
                       zmq::send_flags::dontwait);
    zmq::pollitem_t item = {socket_.handle(), 0, ZMQ_POLLIN, 0};
    return zmq::poll(&item, 1, std::chrono::milliseconds(ms)) > 0;
  }

 private:
  zmq::context_t context_{1};
  zmq::socket_t socket_;
};

class CurveServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!CurveAvailable()) GTEST_SKIP() << "this libzmq has no CURVE";
    server_keys_ = Pair();
    allowed_ = Pair();
    ServerOptions options;
    options.endpoint = "tcp://127.0.0.1:0";
    options.curve_secret_key = server_keys_.secret_key;
    options.curve_allowed_clients = {allowed_.public_key};
    ServiceOptions service;
    service.max_message_bytes = 4096;  // the guard's bound: 2 x (4 KiB + 1 MiB)
    server_ = std::make_unique<RunningServer>(options, service,
                                              std::make_shared<testing::FakeProvider>());
    ASSERT_NE(server_->get(), nullptr);
    absl::StatusOr<std::unique_ptr<Client>> c =
        Client::Connect(Options(server_->endpoint(), server_keys_, allowed_));
    ASSERT_TRUE(c.ok()) << c.status();
    watcher_ = std::move(*c);
  }

  // Requests the service has handled so far (this stats request included).
  uint64_t Requests() {
    absl::StatusOr<protocol::StatsReply> s = watcher_->Stats();
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? s->requests : 0;
  }

  CurveKeyPair server_keys_, allowed_;
  std::unique_ptr<RunningServer> server_;
  std::unique_ptr<Client> watcher_;
};

TEST_F(CurveServerTest, TheAllowedClientIsServed) {
  absl::StatusOr<std::unique_ptr<Client>> c =
      Client::Connect(Options(server_->endpoint(), server_keys_, allowed_));
  ASSERT_TRUE(c.ok()) << c.status();
  absl::StatusOr<protocol::MakeReply> m = (*c)->Make({});
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_TRUE((*c)->Reset(m->session, 1).ok());
  absl::StatusOr<StepResult> r = (*c)->Step(m->session, Action{{1, 0, 1, 0}});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->observation.size(), 6u);
}

TEST_F(CurveServerTest, StrangersGetNoReplyAtAllAndReachNothing) {
  const uint64_t before = Requests();
  const CurveKeyPair stranger = Pair(), impostor_server = Pair();
  // No keys (the NULL mechanism), a key pair not allowed, the allowed client's pair with
  // another server's public key, and a stranger claiming the allowed public key with its
  // own secret key.
  CurveKeyPair claimed = stranger;
  claimed.public_key = allowed_.public_key;
  Stranger none(server_->endpoint(), nullptr, nullptr);
  Stranger wrong(server_->endpoint(), &server_keys_, &stranger);
  Stranger other_server(server_->endpoint(), &impostor_server, &allowed_);
  Stranger claiming(server_->endpoint(), &server_keys_, &claimed);
  EXPECT_FALSE(none.AnswerWithin(1000));
  EXPECT_FALSE(wrong.AnswerWithin(300));
  EXPECT_FALSE(other_server.AnswerWithin(300));
  EXPECT_FALSE(claiming.AnswerWithin(300));
  // Not one of their requests reached the service (only the next stats request did).
  EXPECT_EQ(Requests(), before + 1);
  EXPECT_GE(server_->get()->curve_refused(), 1u);
}

TEST_F(CurveServerTest, TheClientSaysWhyItIsRefused) {
  absl::StatusOr<std::unique_ptr<Client>> c =
      Client::Connect(Options(server_->endpoint(), server_keys_, Pair()));
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kPermissionDenied) << c.status();
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("--curve-clients"));
  ClientOptions plain;
  plain.endpoint = server_->endpoint();
  plain.timeout_s = 10;
  c = Client::Connect(plain);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().code(), absl::StatusCode::kDeadlineExceeded) << c.status();
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("CURVE"));
}

// A relay between a client and the server that records what the client sends.
class RecordingRelay {
 public:
  explicit RecordingRelay(int server_port) : server_port_(server_port) {
    listener_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    EXPECT_EQ(listen(listener_, 1), 0);
    socklen_t len = sizeof addr;
    getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { Relay(); });
  }
  ~RecordingRelay() {
    stop_ = true;
    thread_.join();
    close(listener_);
  }
  int port() const { return port_; }
  std::string recorded() {
    std::lock_guard<std::mutex> lock(mu_);
    return recorded_;
  }

 private:
  void Relay() {
    pollfd accept_fd = {listener_, POLLIN, 0};
    while (!stop_ && poll(&accept_fd, 1, 50) == 0) {
    }
    if (stop_) return;
    const int client = accept(listener_, nullptr, nullptr);
    const int server = ConnectTo(server_port_);
    pollfd fds[2] = {{client, POLLIN, 0}, {server, POLLIN, 0}};
    char buf[65536];
    while (!stop_) {
      if (poll(fds, 2, 50) <= 0) continue;
      for (int i = 0; i < 2; ++i) {
        if ((fds[i].revents & (POLLIN | POLLHUP)) == 0) continue;
        const ssize_t n = read(fds[i].fd, buf, sizeof buf);
        if (n <= 0) {
          stop_ = true;
          break;
        }
        if (i == 0) {
          std::lock_guard<std::mutex> lock(mu_);
          recorded_.append(buf, static_cast<size_t>(n));
        }
        (void)!write(fds[1 - i].fd, buf, static_cast<size_t>(n));
      }
    }
    close(client);
    close(server);
  }

 public:
  static int ConnectTo(int port) {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(port));
    EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    return fd;
  }

 private:
  int server_port_;
  int listener_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::string recorded_;
  std::thread thread_;
};

int PortOf(const std::string& endpoint) {
  return std::stoi(endpoint.substr(endpoint.rfind(':') + 1));
}

// CURVE's server cookie and fresh transient keys make a recorded handshake worthless: bytes
// an allowed client once sent (handshake, then encrypted hello and make), sent again on a
// new connection, get the server's greeting and WELCOME and then the connection closed:
// no READY, no reply, no request reaches the service.
TEST_F(CurveServerTest, AReplayedHandshakeGetsNothing) {
  std::string recorded;
  {
    RecordingRelay relay(PortOf(server_->endpoint()));
    absl::StatusOr<std::unique_ptr<Client>> c = Client::Connect(
        Options("tcp://127.0.0.1:" + std::to_string(relay.port()), server_keys_, allowed_));
    ASSERT_TRUE(c.ok()) << c.status();
    ASSERT_TRUE((*c)->Make({}).ok());
    recorded = relay.recorded();
  }
  ASSERT_GT(recorded.size(), 64u + 200u + 200u);  // greeting, HELLO, INITIATE, messages
  const uint64_t before = Requests();
  for (int round = 0; round < 2; ++round) {
    const int fd = RecordingRelay::ConnectTo(PortOf(server_->endpoint()));
    ASSERT_EQ(write(fd, recorded.data(), recorded.size()), static_cast<ssize_t>(recorded.size()));
    // Read what comes back until the server closes the connection.
    std::string back;
    char buf[4096];
    pollfd p = {fd, POLLIN, 0};
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    bool closed = false;
    while (std::chrono::steady_clock::now() < deadline && !closed) {
      if (poll(&p, 1, 100) <= 0) continue;
      const ssize_t n = read(fd, buf, sizeof buf);
      if (n <= 0) closed = true;
      if (n > 0) back.append(buf, static_cast<size_t>(n));
    }
    close(fd);
    EXPECT_TRUE(closed) << "the server kept a replaying connection open";
    // The greeting (64 bytes) and WELCOME (a 168-byte command: 2 + 168 bytes), no more.
    EXPECT_LE(back.size(), 64u + 2u + 168u) << "the server answered a replayed handshake";
    EXPECT_EQ(back.find("READY"), std::string::npos);
  }
  EXPECT_EQ(Requests(), before + 1);
}

// A connection whose message grows past the bound between two messages taken is dropped,
// although the frames' MORE flags are encrypted (zmtp_guard.h).
TEST_F(CurveServerTest, AnAllowedClientsEndlessMessageLosesItsConnection) {
  zmq::context_t context(1);
  zmq::socket_t s(context, zmq::socket_type::dealer);
  s.set(zmq::sockopt::linger, 0);
  s.set(zmq::sockopt::curve_serverkey, CurveKeyBytes(server_keys_.public_key));
  s.set(zmq::sockopt::curve_publickey, CurveKeyBytes(allowed_.public_key));
  s.set(zmq::sockopt::curve_secretkey, CurveKeyBytes(allowed_.secret_key));
  s.connect(server_->endpoint());
  const uint64_t dropped_before = GuardedConnectionsDropped();
  // One message of 100 frames of 64 KiB (6.4 MiB): past twice the limit (4 KiB + 1 MiB).
  const std::string frame(64 << 10, 'x');
  for (int i = 0; i < 100; ++i) {
    s.send(zmq::buffer(frame), i + 1 < 100 ? zmq::send_flags::sndmore : zmq::send_flags::none);
  }
  // The server drops the connection, and serves the others.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  bool dropped = false;
  while (!dropped && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    absl::StatusOr<protocol::StatsReply> st = watcher_->Stats();
    ASSERT_TRUE(st.ok()) << st.status();
    dropped = GuardedConnectionsDropped() > dropped_before;
  }
  EXPECT_TRUE(dropped);
  // Messages read as they come are never near the bound: 200 requests of 3 KiB in a row.
  for (int i = 0; i < 200; ++i) {
    ASSERT_TRUE(watcher_->CallRaw(mp::Req("hello", {}) + std::string()).ok());
  }
  EXPECT_EQ(GuardedConnectionsDropped(), dropped_before + 1);
}

TEST(OpenEndpointTest, ANetworkEndpointWithoutCurveStartsOnlyWhenOpenedOnPurpose) {
  ServerOptions o;
  o.endpoint = "tcp://0.0.0.0:0";
  absl::StatusOr<std::unique_ptr<Server>> s =
      Server::Create(o, {}, std::make_shared<testing::FakeProvider>());
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("--insecure-open"));
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("--curve-key"));
  o.open_without_curve = true;
  s = Server::Create(o, {}, std::make_shared<testing::FakeProvider>());
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE((*s)->network_reachable());
  s->reset();
  // Loopback and ipc need nothing.
  for (const std::string endpoint : {"tcp://127.0.0.1:0", "tcp://[::1]:0", "tcp://lo:0"}) {
    ServerOptions local;
    local.endpoint = endpoint;
    s = Server::Create(local, {}, std::make_shared<testing::FakeProvider>());
    if (!s.ok() && endpoint.find("::1") != std::string::npos) continue;  // no IPv6 here
    ASSERT_TRUE(s.ok()) << endpoint << ": " << s.status();
    EXPECT_FALSE((*s)->network_reachable()) << endpoint;
  }
  if (!CurveAvailable()) return;
  ServerOptions curve;
  curve.endpoint = "tcp://0.0.0.0:0";
  curve.curve_secret_key = Pair().secret_key;
  curve.curve_allowed_clients = {Pair().public_key};
  s = Server::Create(curve, {}, std::make_shared<testing::FakeProvider>());
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE((*s)->network_reachable());
  curve.curve_allowed_clients.clear();
  EXPECT_EQ(Server::Create(curve, {}, std::make_shared<testing::FakeProvider>()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tiergym::env

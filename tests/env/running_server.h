// A real server (env/server/server.h) for the tests that drive it over ZeroMQ with the C++
// client: bound to an ipc endpoint in a directory of its own under TestRoot(), serving on a
// thread of the test until the RunningServer goes (stopped, joined, its directory removed).
//
//   absl::StatusOr<std::unique_ptr<RunningServer>> s = RunningServer::Start("fork", service,
//                                                                           provider);
//   Client::Connect({(*s)->endpoint(), 30});
#ifndef TIERGYM_TESTS_ENV_RUNNING_SERVER_H_
#define TIERGYM_TESTS_ENV_RUNNING_SERVER_H_

#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <utility>

#include "absl/status/statusor.h"
#include "env/server/server.h"
#include "gtest/gtest.h"
#include "tests/test_root.h"

namespace tiergym::env::testing {

class RunningServer {
 public:
  // A server of one worker thread at ipc://TestRoot()/NAME/s.sock (`name` distinct among
  // the program's running servers), serving until destroyed.
  static absl::StatusOr<std::unique_ptr<RunningServer>> Start(
      const std::string& name, ServiceOptions service, std::shared_ptr<EnvProvider> provider) {
    const std::string dir = ::tiergym::testing::TestRoot() + "/" + name;
    std::filesystem::create_directories(dir);
    ServerOptions options;
    options.endpoint = "ipc://" + dir + "/s.sock";
    options.threads = 1;
    absl::StatusOr<std::unique_ptr<Server>> server =
        Server::Create(options, std::move(service), std::move(provider));
    if (!server.ok()) return server.status();
    return std::unique_ptr<RunningServer>(new RunningServer(dir, *std::move(server)));
  }

  ~RunningServer() {
    server_->Stop();
    loop_.join();
    std::filesystem::remove_all(dir_);
  }
  RunningServer(const RunningServer&) = delete;
  RunningServer& operator=(const RunningServer&) = delete;

  std::string endpoint() const { return server_->endpoint(); }

 private:
  RunningServer(std::string dir, std::unique_ptr<Server> server)
      : dir_(std::move(dir)), server_(std::move(server)) {
    loop_ = std::thread([this] { EXPECT_TRUE(server_->Run().ok()); });
  }

  std::string dir_;
  std::unique_ptr<Server> server_;
  std::thread loop_;
};

}  // namespace tiergym::env::testing

#endif  // TIERGYM_TESTS_ENV_RUNNING_SERVER_H_

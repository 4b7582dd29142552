// What the socket tests share: a Server run on a background thread for the length of a
// scope, and a fresh temporary directory per test process.
#ifndef TIERGYM_TESTS_ENV_RUNNING_SERVER_H_
#define TIERGYM_TESTS_ENV_RUNNING_SERVER_H_

#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <utility>

#include "env/server/server.h"
#include "gtest/gtest.h"

namespace tiergym::env::testing {

// $TMPDIR/tiergym-TAG-PID, created.
inline std::string TempDir(const std::string& tag) {
  const std::filesystem::path p =
      std::filesystem::temp_directory_path() / ("tiergym-" + tag + "-" + std::to_string(getpid()));
  std::filesystem::create_directories(p);
  return p.string();
}

// A server on a background thread, stopped and joined at the end of the scope.
class RunningServer {
 public:
  RunningServer(ServerOptions options, ServiceOptions service,
                std::shared_ptr<EnvProvider> provider) {
    absl::StatusOr<std::unique_ptr<Server>> s =
        Server::Create(options, service, std::move(provider));
    EXPECT_TRUE(s.ok()) << s.status();
    if (!s.ok()) return;
    server_ = std::move(*s);
    thread_ = std::thread([this] { run_status_ = server_->Run(); });
  }
  ~RunningServer() { Stop(); }
  RunningServer(const RunningServer&) = delete;
  RunningServer& operator=(const RunningServer&) = delete;
  void Stop() {
    if (server_ == nullptr) return;
    server_->Stop();
    if (thread_.joinable()) thread_.join();
    EXPECT_TRUE(run_status_.ok()) << run_status_;
  }
  Server* get() { return server_.get(); }
  const std::string& endpoint() const { return server_->endpoint(); }

 private:
  std::unique_ptr<Server> server_;
  std::thread thread_;
  absl::Status run_status_;
};

}  // namespace tiergym::env::testing

#endif  // TIERGYM_TESTS_ENV_RUNNING_SERVER_H_

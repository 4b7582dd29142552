#include "env/server/serve_cli.h"

#include <signal.h>

#include <atomic>
#include <iostream>
#include <optional>
#include <thread>

#include "env/server/bundled_profiles.h"
#include "env/server/environment_provider.h"
#include "env/server/server.h"
#include "traces/util/args.h"
#include "traces/util/strings.h"

#ifndef TIERGYM_VERSION
#error "TIERGYM_VERSION comes from project(VERSION) in the top-level CMakeLists.txt"
#endif

namespace tiergym::env {
namespace {

constexpr char kEpilog[] =
    "Serves placement episodes (env/environment.h) to agents over ZeroMQ with msgpack\n"
    "messages; the protocol is env/PROTOCOL.md, clients are env/python/tiergym (Python,\n"
    "Gymnasium API) and env/client (C++). Prints 'listening on ENDPOINT' on stdout once it\n"
    "serves (with tcp://HOST:0, the port chosen). Without --profiles it serves the bundled\n"
    "synthetic profiles (minife, lulesh, nekbone, lammps on knl), generated on first use\n"
    "into $XDG_CACHE_HOME/tiergym or ~/.cache/tiergym. Stops cleanly on SIGINT/SIGTERM.\n"
    "\n"
    "Examples:\n"
    "  tiergym serve\n"
    "  tiergym serve --endpoint ipc:///tmp/tiergym.sock --threads 4\n"
    "  tiergym serve --endpoint tcp://127.0.0.1:0 --profiles "
    "data/minife/profile,data/lulesh/profile\n";

std::atomic<Server*> g_server{nullptr};

void OnSignal(int) {
  if (Server* s = g_server.load()) s->Stop();
}

int Fail(const absl::Status& status, int code) {
  std::cerr << "tiergym serve: " << status.message() << "\n";
  return code;
}

}  // namespace

std::string ServeCommandHelp() {
  return "  serve                  serve placement environments over ZeroMQ (env/PROTOCOL.md)\n";
}

int RunServeCommand(const std::vector<std::string>& args) {
  ArgParser p("tiergym serve", "Serve placement environments to agents over ZeroMQ/msgpack.");
  p.SetEpilog(kEpilog);
  p.AddOption("endpoint", "E", "tcp://HOST:PORT (PORT 0: a free port) or ipc://PATH",
              "tcp://127.0.0.1:5555");
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  p.AddOption("threads", "N", "worker threads", std::to_string(cores));
  p.AddOption("max-sessions", "N", "open sessions at most", "4096");
  p.AddOption("idle-timeout", "S", "close sessions idle this many seconds (0: never)", "600");
  p.AddOption("max-message-bytes", "N", "largest request accepted", std::to_string(64u << 20));
  p.AddOption("profiles", "DIRS",
              "comma-separated profile directories served (default: the bundled profiles)");
  p.AddOption("parent-pid", "PID", "stop when this process exits (private servers)", "0");
  p.AddOption("machine", "NAME|FILE",
              "the machine sessions get when they name none (knl, disagg or a JSON file; "
              "default knl): the one the served profiles were recorded on");
  p.AddFlag("quiet", "no progress on stderr");
  if (std::optional<int> rc = p.ParseOrExit(args)) return *rc;

  absl::StatusOr<uint64_t> threads = p.GetUint64("threads");
  if (!threads.ok()) return Fail(threads.status(), 2);
  if (*threads < 1 || *threads > 1024) {
    return Fail(absl::InvalidArgumentError("--threads: must be in [1, 1024]"), 2);
  }
  absl::StatusOr<uint64_t> max_sessions = p.GetUint64("max-sessions");
  if (!max_sessions.ok()) return Fail(max_sessions.status(), 2);
  absl::StatusOr<double> idle = p.GetDouble("idle-timeout");
  if (!idle.ok()) return Fail(idle.status(), 2);
  if (*idle < 0) return Fail(absl::InvalidArgumentError("--idle-timeout: must be >= 0"), 2);
  absl::StatusOr<uint64_t> max_bytes = p.GetUint64("max-message-bytes");
  if (!max_bytes.ok()) return Fail(max_bytes.status(), 2);
  if (*max_bytes < 1024 || *max_bytes > (uint64_t{1} << 31)) {
    return Fail(absl::InvalidArgumentError("--max-message-bytes: must be in [1024, 2^31]"), 2);
  }
  absl::StatusOr<uint64_t> parent = p.GetUint64("parent-pid");
  if (!parent.ok()) return Fail(parent.status(), 2);
  const bool quiet = p.Flag("quiet");

  absl::StatusOr<std::vector<ServedProfile>> profiles;
  if (p.Given("profiles")) {
    profiles = ProfilesFromDirs(p.Get("profiles"));
    if (!profiles.ok()) return Fail(profiles.status(), 2);
  } else {
    absl::StatusOr<std::string> cache = DefaultCacheDir();
    if (!cache.ok()) return Fail(cache.status(), 1);
    profiles = EnsureBundledProfiles(*cache, [&](const std::string& line) {
      if (!quiet) std::cerr << "tiergym serve: " << line << "\n";
    });
    if (!profiles.ok()) return Fail(profiles.status(), 1);
  }
  EnvironmentProviderOptions po;
  if (p.Given("machine")) po.default_config["machine"] = p.Get("machine");
  for (const ServedProfile& sp : *profiles) {
    po.default_profiles.push_back(sp.dir);
    po.named_profiles[sp.name] = sp.dir;
  }
  auto provider = std::make_shared<EnvironmentProvider>(po);
  // Load the default configuration now: a bad profile fails here, and the first session
  // does not wait for it.
  if (absl::StatusOr<std::unique_ptr<SessionEnv>> env = provider->Make({}); !env.ok()) {
    return Fail(absl::Status(env.status().code(), StrCat("cannot load the served profiles: ",
                                                         env.status().message())),
                1);
  }

  ServerOptions so;
  so.endpoint = p.Get("endpoint");
  so.threads = static_cast<int>(*threads);
  so.parent_pid = static_cast<int>(*parent);
  ServiceOptions service;
  service.server_name = "tiergym " TIERGYM_VERSION;
  service.max_sessions = *max_sessions;
  service.idle_timeout_s = *idle;
  service.max_message_bytes = *max_bytes;
  absl::StatusOr<std::unique_ptr<Server>> server = Server::Create(so, service, provider);
  if (!server.ok()) return Fail(server.status(), 1);

  g_server.store(server->get());
  struct sigaction sa = {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);

  if (!quiet) {
    std::cerr << "tiergym serve: " << profiles->size() << " profiles:";
    for (const ServedProfile& sp : *profiles) std::cerr << " " << sp.name;
    std::cerr << "; " << *threads << " threads\n";
  }
  std::cout << "listening on " << (*server)->endpoint() << std::endl;
  absl::Status run = (*server)->Run();
  g_server.store(nullptr);
  if (!quiet) {
    const protocol::StatsReply st = (*server)->service().Stats();
    std::cerr << "tiergym serve: stopped after " << st.requests << " requests, " << st.sessions_made
              << " sessions\n";
  }
  if (!run.ok()) return Fail(run, 1);
  return 0;
}

}  // namespace tiergym::env

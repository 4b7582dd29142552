#include "env/cli/serve_cli.h"

#include <malloc.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <thread>

#include "env/curve/curve_keys.h"
#include "env/provider/bundled_profiles.h"
#include "env/provider/cosched_provider.h"
#include "env/provider/data_roots.h"
#include "env/provider/placement_provider.h"
#include "env/server/server.h"
#include "traces/base/args.h"
#include "traces/base/exit_status.h"
#include "traces/base/strings.h"

#ifndef TIERGYM_VERSION
#error "TIERGYM_VERSION comes from project(VERSION) in the top-level CMakeLists.txt"
#endif

namespace tiergym::env {
namespace {

constexpr std::string_view kCommand = "tiergym serve";

constexpr char kEpilog[] =
    "Serves placement episodes (env/environment.h) to agents over ZeroMQ with msgpack\n"
    "messages; the protocol is env/PROTOCOL.md, clients are env/python/tiergym (Python,\n"
    "Gymnasium API) and env/client (C++). Prints 'listening on ENDPOINT' on stdout once it\n"
    "serves (with tcp://HOST:0, the port chosen). Without --profiles it serves the bundled\n"
    "synthetic profiles (minife, lulesh, nekbone, lammps on knl), generated on first use\n"
    "into $XDG_CACHE_HOME/tiergym or ~/.cache/tiergym. Stops cleanly on SIGINT/SIGTERM.\n"
    "Clients read only what --profiles, --data-dir and the machine presets serve, drive only\n"
    "their own connection's sessions, and stay within the limits above (env/README.md,\n"
    "Security model). Clients on this machine may take batch results through shared memory\n"
    "(segments of mode 0600 in /dev/shm, within --max-shm-mib).\n"
    "With --curve-key and --curve-clients only the listed clients get in (ZeroMQ's CURVE:\n"
    "authenticated and encrypted; keys from `tiergym keygen`). A tcp:// endpoint other than\n"
    "loopback is refused without them, unless --insecure-open says to serve it open.\n"
    "\n"
    "Examples:\n"
    "  tiergym serve\n"
    "  tiergym serve --endpoint ipc:///tmp/tiergym.sock --threads 4\n"
    "  tiergym serve --endpoint tcp://127.0.0.1:0 --profiles "
    "data/minife/profile,data/lulesh/profile\n"
    "  tiergym serve --endpoint tcp://0.0.0.0:5555 --curve-key ~/.config/tiergym/curve/"
    "server.key_secret --curve-clients ~/.config/tiergym/curve/learner.key\n";

// Descriptors kept for what the server opens besides its connections: profiles and
// configuration files, shared-memory segments, ZeroMQ's own.
constexpr uint64_t kSpareDescriptors = 512;

// Raises the soft limit on open files so that `connections` fit beside the spare ones;
// returns how many connections fit (fewer when the hard limit is lower, which is said).
size_t FitDescriptors(uint64_t connections, bool quiet) {
  rlimit limit = {};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return connections;
  const rlim_t want = connections + kSpareDescriptors;
  if (limit.rlim_cur < want) {
    limit.rlim_cur = std::min<rlim_t>(want, limit.rlim_max);
    setrlimit(RLIMIT_NOFILE, &limit);
    getrlimit(RLIMIT_NOFILE, &limit);
  }
  if (limit.rlim_cur >= want) return connections;
  const uint64_t fit = limit.rlim_cur > 2 * kSpareDescriptors ? limit.rlim_cur - kSpareDescriptors
                                                              : limit.rlim_cur / 2;
  if (!quiet) {
    std::cerr << "tiergym serve: the open-file limit is " << limit.rlim_cur
              << " (ulimit -n): " << fit << " connections at most, not " << connections << "\n";
  }
  return fit;
}

std::atomic<Server*> g_server{nullptr};

void OnSignal(int) {
  if (Server* s = g_server.load()) s->Stop();
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
  p.AddOption("max-connections", "N",
              "open client connections at most; one more is closed as it is accepted (the "
              "client retries later); the descriptor limit is raised to fit",
              "1024");
  p.AddOption("max-sessions-per-connection", "N", "open sessions of one connection at most",
              "1024");
  p.AddOption("load-threads", "N",
              "worker threads for make and estimate, which may load assets (others never wait "
              "for a load)",
              "1");
  p.AddOption("heartbeat", "S",
              "ZMTP heartbeat interval; a peer silent for 3 intervals is dropped and its "
              "sessions closed (0: none)",
              "10");
  p.AddOption("idle-timeout", "S", "close sessions idle this many seconds (0: never)", "600");
  p.AddOption("max-asset-mib", "MIB",
              "memory for loaded configurations and sessions; a configuration whose estimated "
              "cost does not fit is refused before it is built (0: no budget)",
              "2048");
  p.AddOption("max-shm-mib", "MIB",
              "shared memory for the step_batch results of clients on this machine, over all "
              "connections (charged to --max-asset-mib too; 0: no shared memory, results "
              "travel in the replies)",
              "256");
  p.AddOption("max-shm-request-threads", "N",
              "segments taking their clients' steps through shared memory (one server thread "
              "each, woken by a futex) at most over all connections; beyond, segments carry "
              "results only (0: requests travel in messages)",
              "64");
  p.AddOption("unused-asset-timeout", "S",
              "free a loaded configuration no session has used for this long (the default "
              "configuration stays loaded)",
              "30");
  p.AddOption("max-message-bytes", "N", "largest request accepted", std::to_string(64u << 20));
  p.AddOption("profiles", "DIRS",
              "comma-separated profile directories served (default: the bundled profiles)");
  p.AddOption("data-dir", "DIRS",
              "comma-separated directories whose profile directories, machine files and "
              "interference schedules clients may name (relative to the directory, or absolute "
              "inside it); default none: clients name only served profiles and machine presets");
  p.AddOption("parent-pid", "PID", "stop when this process exits (private servers)", "0");
  p.AddOption(
      "machine", "NAME|FILE",
      "the machine sessions get when they name none (knl, disagg or a JSON file; "
      "default knl): the one the served profiles were recorded on (the bundled profiles are "
      "recorded on the preset named here)");
  p.AddOption("sensitivity", "FILE",
              "the sensitivity curves (curves.csv) of co-scheduling nodes "
              "(tiergym/CoschedNode-v0) that name none; default none: they must name curves "
              "in a data directory");
  p.AddOption("curve-key", "FILE",
              "require CURVE (ZeroMQ's authentication and encryption) with this secret "
              "certificate of the server (NAME.key_secret from `tiergym keygen`; it must be "
              "its owner's alone, mode 0600, or the server does not start); clients need "
              "the public NAME.key");
  p.AddOption("curve-clients", "PATH",
              "with --curve-key: the clients allowed, as public certificates (a directory "
              "of NAME.key files, or one file; or Z85 keys one per line); others get no "
              "reply at all");
  p.AddFlag("insecure-open",
            "serve a tcp:// endpoint reachable from other machines without CURVE (anyone "
            "who reaches it is a client, the traffic is in the clear; said at start); "
            "without it such an endpoint is refused");
  p.AddFlag("quiet", "no progress on stderr");
  if (std::optional<int> rc = p.ParseOrExit(args)) return *rc;

  absl::StatusOr<uint64_t> threads = p.GetUint64("threads");
  if (!threads.ok()) return Fail(threads.status(), kExitUsage, kCommand);
  if (*threads < 1 || *threads > 1024) {
    return Fail(absl::InvalidArgumentError("--threads: must be in [1, 1024]"), kExitUsage,
                kCommand);
  }
  absl::StatusOr<uint64_t> max_sessions = p.GetUint64("max-sessions");
  if (!max_sessions.ok()) return Fail(max_sessions.status(), kExitUsage, kCommand);
  absl::StatusOr<uint64_t> max_connections = p.GetUint64("max-connections");
  if (!max_connections.ok()) return Fail(max_connections.status(), kExitUsage, kCommand);
  if (*max_connections < 1 || *max_connections > 1'000'000) {
    return Fail(absl::InvalidArgumentError("--max-connections: must be in [1, 1000000]"),
                kExitUsage, kCommand);
  }
  absl::StatusOr<uint64_t> per_connection = p.GetUint64("max-sessions-per-connection");
  if (!per_connection.ok()) return Fail(per_connection.status(), kExitUsage, kCommand);
  absl::StatusOr<uint64_t> load_threads = p.GetUint64("load-threads");
  if (!load_threads.ok()) return Fail(load_threads.status(), kExitUsage, kCommand);
  if (*load_threads < 1 || *load_threads > 64) {
    return Fail(absl::InvalidArgumentError("--load-threads: must be in [1, 64]"), kExitUsage,
                kCommand);
  }
  absl::StatusOr<double> heartbeat = p.GetDouble("heartbeat");
  if (!heartbeat.ok()) return Fail(heartbeat.status(), kExitUsage, kCommand);
  if (*heartbeat < 0 || *heartbeat > 3600) {
    return Fail(absl::InvalidArgumentError("--heartbeat: must be in [0, 3600]"), kExitUsage,
                kCommand);
  }
  absl::StatusOr<double> idle = p.GetDouble("idle-timeout");
  if (!idle.ok()) return Fail(idle.status(), kExitUsage, kCommand);
  if (*idle < 0)
    return Fail(absl::InvalidArgumentError("--idle-timeout: must be >= 0"), kExitUsage, kCommand);
  absl::StatusOr<uint64_t> max_bytes = p.GetUint64("max-message-bytes");
  if (!max_bytes.ok()) return Fail(max_bytes.status(), kExitUsage, kCommand);
  if (*max_bytes < 1024 || *max_bytes > (uint64_t{1} << 31)) {
    return Fail(absl::InvalidArgumentError("--max-message-bytes: must be in [1024, 2^31]"),
                kExitUsage, kCommand);
  }
  absl::StatusOr<uint64_t> shm_threads = p.GetUint64("max-shm-request-threads");
  if (!shm_threads.ok()) return Fail(shm_threads.status(), kExitUsage, kCommand);
  if (*shm_threads > 4096) {
    return Fail(absl::InvalidArgumentError("--max-shm-request-threads: must be at most 4096"),
                kExitUsage, kCommand);
  }
  absl::StatusOr<uint64_t> shm_mib = p.GetUint64("max-shm-mib");
  if (!shm_mib.ok()) return Fail(shm_mib.status(), kExitUsage, kCommand);
  if (*shm_mib > (uint64_t{1} << 30)) {
    return Fail(absl::InvalidArgumentError("--max-shm-mib: must be at most 2^30"), kExitUsage,
                kCommand);
  }
  absl::StatusOr<uint64_t> asset_mib = p.GetUint64("max-asset-mib");
  if (!asset_mib.ok()) return Fail(asset_mib.status(), kExitUsage, kCommand);
  if (*asset_mib > (uint64_t{1} << 30)) {
    return Fail(absl::InvalidArgumentError("--max-asset-mib: must be at most 2^30"), kExitUsage,
                kCommand);
  }
  absl::StatusOr<double> unused_assets = p.GetDouble("unused-asset-timeout");
  if (!unused_assets.ok()) return Fail(unused_assets.status(), kExitUsage, kCommand);
  if (*unused_assets < 0) {
    return Fail(absl::InvalidArgumentError("--unused-asset-timeout: must be >= 0"), kExitUsage,
                kCommand);
  }
  absl::StatusOr<uint64_t> parent = p.GetUint64("parent-pid");
  if (!parent.ok()) return Fail(parent.status(), kExitUsage, kCommand);
  const bool quiet = p.Flag("quiet");
  CurveKeyPair curve_keys;
  std::vector<std::string> curve_clients;
  if (p.Given("curve-key") != p.Given("curve-clients")) {
    return Fail(absl::InvalidArgumentError(
                    "--curve-key and --curve-clients go together: the server's secret "
                    "certificate and the public keys of the clients it lets in"),
                kExitUsage, kCommand);
  }
  if (p.Given("curve-key")) {
    absl::StatusOr<CurveKeyPair> keys = ReadCurveCertificate(p.Get("curve-key"), true);
    if (!keys.ok()) {
      return Fail(
          absl::Status(keys.status().code(), StrCat("--curve-key ", keys.status().message())),
          kExitFailed, kCommand);
    }
    curve_keys = *keys;
    absl::StatusOr<std::vector<std::string>> clients = ReadAllowedCurveKeys(p.Get("curve-clients"));
    if (!clients.ok()) {
      return Fail(absl::Status(clients.status().code(),
                               StrCat("--curve-clients ", clients.status().message())),
                  kExitFailed, kCommand);
    }
    curve_clients = std::move(*clients);
  }

  absl::StatusOr<std::vector<ServedProfile>> profiles;
  if (p.Given("profiles")) {
    profiles = ProfilesFromDirs(p.Get("profiles"));
    if (!profiles.ok()) return Fail(profiles.status(), kExitUsage, kCommand);
  } else {
    absl::StatusOr<std::string> cache = DefaultCacheDir();
    if (!cache.ok()) return Fail(cache.status(), kExitFailed, kCommand);
    // The bundled profiles recorded on the machine sessions get (a preset; knl for a file).
    std::string machine = "knl";
    if (p.Given("machine") && p.Get("machine").find_first_of("/.") == std::string::npos) {
      machine = p.Get("machine");
    }
    profiles = EnsureBundledProfiles(
        *cache,
        [&](const std::string& line) {
          if (!quiet) std::cerr << "tiergym serve: " << line << "\n";
        },
        machine);
    if (!profiles.ok()) return Fail(profiles.status(), kExitFailed, kCommand);
  }
  PlacementProviderOptions po;
  po.max_asset_bytes = *asset_mib << 20;
  po.unused_asset_timeout_s = *unused_assets;
  if (p.Given("machine")) po.default_config["machine"] = p.Get("machine");
  if (p.Given("data-dir")) {
    const std::string dirs = p.Get("data-dir");  // SplitFields views into it
    for (std::string_view dir : SplitFields(dirs, ',')) {
      if (!dir.empty()) po.data_dirs.emplace_back(dir);
    }
    DataRootsOptions check;
    check.data_dirs = po.data_dirs;
    if (absl::StatusOr<DataRoots> roots = DataRoots::Create(check); !roots.ok()) {
      return Fail(roots.status(), kExitUsage, kCommand);
    }
  }
  for (const ServedProfile& sp : *profiles) {
    po.default_profiles.push_back(sp.dir);
    po.named_profiles[sp.name] = sp.dir;
  }
  auto provider = std::make_shared<PlacementProvider>(po);
  // Load the default configuration now: a bad profile fails here, and the first session
  // does not wait for it.
  if (absl::StatusOr<std::unique_ptr<SessionEnv>> env = provider->Make({}); !env.ok()) {
    return Fail(absl::Status(env.status().code(),
                             StrCat("cannot load the served profiles: ", env.status().message())),
                kExitFailed, kCommand);
  }

  // Blocks of 128 KiB and more (message frames, cost tables) are mapped on their own and
  // returned to the system when freed. glibc would otherwise raise this threshold to the
  // size of each mapped block freed (up to 32 MiB), after which such blocks come from the
  // heaps of the threads that made them, where what clients sent lingers after they left.
  mallopt(M_MMAP_THRESHOLD, 128 << 10);

  ServerOptions so;
  so.endpoint = p.Get("endpoint");
  so.threads = static_cast<int>(*threads);
  so.load_threads = static_cast<int>(*load_threads);
  so.heartbeat_s = *heartbeat;
  so.parent_pid = static_cast<int>(*parent);
  so.max_connections = FitDescriptors(*max_connections, quiet);
  so.curve_secret_key = curve_keys.secret_key;
  so.curve_allowed_clients = curve_clients;
  so.open_without_curve = p.Flag("insecure-open");
  ServiceOptions service;
  service.server_name = "tiergym " TIERGYM_VERSION;
  service.max_sessions = *max_sessions;
  service.max_sessions_per_connection = *per_connection;
  service.max_asset_bytes = po.max_asset_bytes;
  service.idle_timeout_s = *idle;
  service.max_message_bytes = *max_bytes;
  service.max_shm_bytes = *shm_mib << 20;
  service.max_shm_request_threads = *shm_threads;
  // Co-scheduling nodes: the same data, profiles, defaults and memory budget as make's.
  CoschedProviderOptions co;
  co.data_dirs = po.data_dirs;
  co.named_profiles = po.named_profiles;
  co.default_config = po.default_config;
  if (p.Given("sensitivity")) {
    co.default_sensitivity = p.Get("sensitivity");
    if (absl::Status s = DataRoots::CheckRegularFile(co.default_sensitivity, uint64_t{16} << 20,
                                                     "--sensitivity");
        !s.ok()) {
      return Fail(s, kExitUsage, kCommand);
    }
  }
  service.cosched = std::make_shared<CoschedProvider>(co, provider.get());
  absl::StatusOr<std::unique_ptr<Server>> server = Server::Create(so, service, provider);
  if (!server.ok()) return Fail(server.status(), kExitFailed, kCommand);

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
  if (!curve_keys.secret_key.empty()) {
    if (!quiet) {
      std::cerr << "tiergym serve: CURVE required: " << curve_clients.size()
                << " client key(s) allowed; the server's public key is " << curve_keys.public_key
                << "\n";
    }
  } else if ((*server)->network_reachable()) {
    // Said whatever --quiet says.
    std::cerr << "tiergym serve: WARNING: " << (*server)->endpoint()
              << " is reachable from other machines and OPEN (--insecure-open): no CURVE, "
                 "anyone who reaches it is a client and the traffic is in the clear\n";
  }
  std::cout << "listening on " << (*server)->endpoint() << std::endl;
  absl::Status run = (*server)->Run();
  g_server.store(nullptr);
  if (!quiet) {
    const protocol::StatsReply st = (*server)->service().Stats();
    std::cerr << "tiergym serve: stopped after " << st.requests << " requests, " << st.sessions_made
              << " sessions\n";
  }
  if (!run.ok()) return Fail(run, kExitFailed, kCommand);
  if (!(*server)->Drained()) {
    // A worker is still busy (a long load): destroying the server would wait for it.
    // Requests were answered or refused; exit now, as SIGTERM asked.
    if (!quiet) std::cerr << "tiergym serve: a request was still running; exiting without it\n";
    const std::string endpoint = (*server)->endpoint();
    if (endpoint.rfind("ipc://", 0) == 0) unlink(endpoint.substr(6).c_str());
    std::cout.flush();
    std::cerr.flush();
    std::_Exit(0);
  }
  return 0;
}

}  // namespace tiergym::env

#include "env/cli/keygen_cli.h"

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <optional>
#include <system_error>

#include "env/curve/curve_keys.h"
#include "traces/base/args.h"
#include "traces/base/exit_status.h"
#include "traces/base/strings.h"

namespace tiergym::env {
namespace {

constexpr std::string_view kCommand = "tiergym keygen";

constexpr char kEpilog[] =
    "Writes DIR/NAME.key, the public certificate (give it to the other side), and\n"
    "DIR/NAME.key_secret, the secret one (mode 0600, in a directory of mode 0700: keep it\n"
    "yours), in the format of ZeroMQ's own tools (pyzmq's zmq.auth reads them too). Prints\n"
    "the public key. The keys are libzmq's (zmq_curve_keypair, libsodium's generator).\n"
    "\n"
    "A server and its learners, each with a key pair:\n"
    "  tiergym keygen server\n"
    "  tiergym keygen learner\n"
    "  tiergym serve --endpoint tcp://0.0.0.0:5555 \\\n"
    "      --curve-key ~/.config/tiergym/curve/server.key_secret \\\n"
    "      --curve-clients ~/.config/tiergym/curve/learner.key\n"
    "  # Python learners (on any node that has the two files):\n"
    "  #   tiergym.TierEnv(address=\"tcp://NODE:5555\", curve={\n"
    "  #       \"server_key\": \"~/.config/tiergym/curve/server.key\",\n"
    "  #       \"key\": \"~/.config/tiergym/curve/learner.key_secret\"})\n"
    "--curve-clients also takes a directory: every NAME.key in it is let in.\n";

// $XDG_CONFIG_HOME/tiergym/curve, or ~/.config/tiergym/curve.
std::string DefaultKeyDir() {
  if (const char* xdg = std::getenv("XDG_CONFIG_HOME"); xdg != nullptr && xdg[0] == '/') {
    return StrCat(xdg, "/tiergym/curve");
  }
  const char* home = std::getenv("HOME");
  return StrCat(home != nullptr && home[0] != '\0' ? home : ".", "/.config/tiergym/curve");
}

}  // namespace

std::string KeygenCommandHelp() {
  return "  keygen                 make a CURVE key pair for `tiergym serve --curve-key` and "
         "its clients\n";
}

int RunKeygenCommand(const std::vector<std::string>& args) {
  ArgParser p("tiergym keygen",
              "Make a CURVE key pair (certificate files NAME.key and "
              "NAME.key_secret).");
  p.SetEpilog(kEpilog);
  p.AddPositional("NAME", "the pair's name, e.g. server or learner");
  p.AddOption("dir", "DIR", "where the certificates go (created, mode 0700)", DefaultKeyDir());
  p.AddFlag("force", "replace an existing pair of that name");
  if (std::optional<int> rc = p.ParseOrExit(args)) return *rc;

  absl::StatusOr<CurveKeyPair> keys = MakeCurveKeyPair();
  if (!keys.ok()) return Fail(keys.status(), kExitFailed, kCommand);
  const std::string dir = p.Get("dir");
  const std::filesystem::path parent = std::filesystem::path(dir).parent_path();
  std::error_code ec;
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  if (ec) {
    return Fail(absl::UnavailableError(StrCat(parent.string(), ": ", ec.message())), kExitFailed,
                kCommand);
  }
  const std::string name = p.Positional("NAME");
  if (absl::Status s = WriteCurveCertificates(dir, name, *keys, p.Flag("force"), kCommand);
      !s.ok()) {
    return Fail(s, s.code() == absl::StatusCode::kInvalidArgument ? kExitUsage : kExitFailed,
                kCommand);
  }
  std::cout << "wrote " << dir << "/" << name << ".key (public: give it to the other side)\n"
            << "      " << dir << "/" << name << ".key_secret (secret, mode 0600: keep it yours)\n"
            << "public key: " << keys->public_key << "\n";
  return kExitOk;
}

}  // namespace tiergym::env

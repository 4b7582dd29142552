// `tiergym serve`: the environment server on a ZeroMQ endpoint (env/PROTOCOL.md). Returns
// the process exit code (0 after a clean SIGINT/SIGTERM shutdown, 1 on failure, 2 on a
// usage error). Prints "listening on ENDPOINT" on stdout once it serves.
#ifndef TIERGYM_ENV_CLI_SERVE_CLI_H_
#define TIERGYM_ENV_CLI_SERVE_CLI_H_

#include <string>
#include <vector>

namespace tiergym::env {

int RunServeCommand(const std::vector<std::string>& args);
std::string ServeCommandHelp();

}  // namespace tiergym::env

#endif  // TIERGYM_ENV_CLI_SERVE_CLI_H_

// `tiergym keygen`: makes a CURVE key pair (env/curve/curve_keys.h) for `tiergym serve
// --curve-key` and its clients.
#ifndef TIERGYM_ENV_CLI_KEYGEN_CLI_H_
#define TIERGYM_ENV_CLI_KEYGEN_CLI_H_

#include <string>
#include <vector>

namespace tiergym::env {

// The command's line in `tiergym --help`.
std::string KeygenCommandHelp();

// Runs `tiergym keygen` with the arguments after "keygen"; returns the exit status.
int RunKeygenCommand(const std::vector<std::string>& args);

}  // namespace tiergym::env

#endif  // TIERGYM_ENV_CLI_KEYGEN_CLI_H_

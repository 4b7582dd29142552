// The exit statuses every tiergym program uses, and the one way the command lines report a
// failed status: "PREFIX: MESSAGE" on standard error.
//
//   0  success
//   1  the input was refused or the run failed (the message names the file, line or field
//      and the rule)
//   2  a usage error (unknown option, missing argument)
#ifndef TIERGYM_TRACES_BASE_EXIT_STATUS_H_
#define TIERGYM_TRACES_BASE_EXIT_STATUS_H_

#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"

namespace tiergym {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailed = 1;
inline constexpr int kExitUsage = 2;

// Prints "PREFIX: MESSAGE" to standard error and returns `code`.
int Fail(const absl::Status& status, int code = kExitFailed, std::string_view prefix = "error");

// Prints the status's message alone (usage errors carry their own context) and returns
// kExitUsage.
int UsageFail(const absl::Status& status);

// One subcommand of a program: its name and what runs it with the arguments after it.
using Command = std::pair<std::string, std::function<int(const std::vector<std::string>&)>>;

// The main() of a program made of subcommands (`tiergym`, `tiergym-prof`): `--help`, `-h`
// and `help` print `usage` and return kExitOk, `--version` prints "PROGRAM VERSION", a
// known command runs with the remaining arguments and its status is returned; no command
// or an unknown one prints `usage` to standard error and returns kExitUsage.
int RunCommand(std::string_view program, std::string_view version, const std::string& usage,
               const std::vector<Command>& commands, int argc, char** argv);

}  // namespace tiergym

#endif  // TIERGYM_TRACES_BASE_EXIT_STATUS_H_

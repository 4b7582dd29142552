// The exit statuses every tiergym program uses, and the one way the command lines report a
// failed status: "PREFIX: MESSAGE" on standard error.
//
//   0  success
//   1  the input was refused or the run failed (the message names the file, line or field
//      and the rule)
//   2  a usage error (unknown option, missing argument)
#ifndef TIERGYM_TRACES_BASE_EXIT_STATUS_H_
#define TIERGYM_TRACES_BASE_EXIT_STATUS_H_

#include <string_view>

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

}  // namespace tiergym

#endif  // TIERGYM_TRACES_BASE_EXIT_STATUS_H_

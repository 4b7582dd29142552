// Running the project's Python helper scripts (scripts/*.py: plots) from the commands.
//
// The scripts live in the source tree's scripts/ directory (fixed at build time; the
// TIERGYM_SCRIPTS_DIR environment variable overrides it) and run under Debian's
// /usr/bin/python3, which has python3-matplotlib (TIERGYM_PYTHON overrides it). The data
// goes to the script's standard input; its messages go to the caller's stderr.
#ifndef TIERGYM_TRACES_BASE_SCRIPT_H_
#define TIERGYM_TRACES_BASE_SCRIPT_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"

namespace tiergym {

// Runs `python3 SCRIPTS_DIR/script args...` with `input` on its standard input. NotFound
// when the script is missing (the message says how to point at it); Internal when it
// cannot be started or exits with a non-zero status.
absl::Status RunScript(std::string_view script, const std::vector<std::string>& args,
                       std::string_view input);

}  // namespace tiergym

#endif  // TIERGYM_TRACES_BASE_SCRIPT_H_

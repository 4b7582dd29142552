// `tiergym trace SUBCOMMAND ...`: info, validate, convert and synth on trace files and
// profile directories. Called by the tiergym main program; returns the process exit code
// (0 success, 1 the input was refused or an operation failed, 2 a usage error) and prints
// results on stdout and errors on stderr.
#ifndef TIERGYM_TRACES_CLI_TRACE_CLI_H_
#define TIERGYM_TRACES_CLI_TRACE_CLI_H_

#include <string>
#include <vector>

namespace tiergym {

// `args` are the arguments after "trace".
int RunTraceCommand(const std::vector<std::string>& args);

// One line per subcommand, for `tiergym --help`.
std::string TraceCommandsHelp();

}  // namespace tiergym

#endif  // TIERGYM_TRACES_CLI_TRACE_CLI_H_

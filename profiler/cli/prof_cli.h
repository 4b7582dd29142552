// The subcommands of `tiergym-prof`: record, interfere, contentiousness, sweep and
// run-placed. Each takes the arguments after its name and returns the process exit code
// (0 success, 1 the run or an input failed, 2 a usage error), printing results on stdout
// and errors (with what to do about them) on stderr.
#ifndef TIERGYM_PROFILER_CLI_PROF_CLI_H_
#define TIERGYM_PROFILER_CLI_PROF_CLI_H_

#include <string>
#include <vector>

namespace tiergym::prof {

int RunRecordCommand(const std::vector<std::string>& args);
// tiergym-prof profile: record, project onto a machine, check, print how to serve.
int RunProfileCommand(const std::vector<std::string>& args);
int RunInterfereCommand(const std::vector<std::string>& args);
int RunContentiousnessCommand(const std::vector<std::string>& args);
int RunSweepCommand(const std::vector<std::string>& args);
int RunPlacedCommand(const std::vector<std::string>& args);

// One line per subcommand, for `tiergym-prof --help`.
std::string ProfCommandsHelp();

// Rewrites the short option `-o X` as `--output X` (before any `--`), since the shared
// argument parser only knows long options.
std::vector<std::string> ExpandShortOptions(const std::vector<std::string>& args);

}  // namespace tiergym::prof

#endif  // TIERGYM_PROFILER_CLI_PROF_CLI_H_

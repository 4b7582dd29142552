// `tiergym-import-mckernel DUMP... -o OUT`: converts the PEBS dumps of one McKernel run
// (kernel_patches/) into one trace. The lead folds it into `tiergym-prof import-mckernel`
// through RunImportMckernelCommand(). Prints a summary on stdout and errors on stderr;
// nothing is written unless every dump parses and the trace builds.
#ifndef TIERGYM_PROFILER_CLI_IMPORT_CLI_H_
#define TIERGYM_PROFILER_CLI_IMPORT_CLI_H_

#include <string>
#include <string_view>
#include <vector>

namespace tiergym::mckernel {

// `args` are the arguments after the command name; `command` names the command in the
// usage and in error messages (e.g. "tiergym-prof import-mckernel"). Returns the exit
// status: 0 success, 1 a dump was refused or the output could not be written, 2 a usage
// error.
int RunImportMckernelCommand(const std::vector<std::string>& args,
                             std::string_view command = "tiergym-import-mckernel");

}  // namespace tiergym::mckernel

#endif  // TIERGYM_PROFILER_CLI_IMPORT_CLI_H_

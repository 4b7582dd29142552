// The `tiergym-prof` command: the profiler's subcommands (prof_cli.h). Deployable on an
// HPC node on its own: it links tiergym_traces, libpfm4, libnuma and Abseil only.
#include <string>
#include <vector>

#include "profiler/cli/import_cli.h"
#include "profiler/cli/prof_cli.h"
#include "traces/base/exit_status.h"

#ifndef TIERGYM_VERSION
#error "TIERGYM_VERSION comes from project(VERSION) in the top-level CMakeLists.txt"
#endif

namespace {

constexpr char kVersion[] = TIERGYM_VERSION;

std::string Usage() {
  return "usage: tiergym-prof COMMAND [options] [-- CMD ARGS]\n\n"
         "tiergym-prof: record memory-access traces and contention data for tiergym.\n\n"
         "commands:\n" +
         tiergym::prof::ProfCommandsHelp() +
         "\nRun 'tiergym-prof COMMAND --help' for the options of one command.\n";
}

}  // namespace

int main(int argc, char** argv) {
  return tiergym::RunCommand("tiergym-prof", kVersion, Usage(),
                             {{"record", tiergym::prof::RunRecordCommand},
                              {"profile", tiergym::prof::RunProfileCommand},
                              {"interfere", tiergym::prof::RunInterfereCommand},
                              {"run-placed", tiergym::prof::RunPlacedCommand},
                              {"sweep", tiergym::prof::RunSweepCommand},
                              {"contentiousness", tiergym::prof::RunContentiousnessCommand},
                              {"import-mckernel",
                               [](const std::vector<std::string>& rest) {
                                 return tiergym::mckernel::RunImportMckernelCommand(
                                     rest, "tiergym-prof import-mckernel");
                               }}},
                             argc, argv);
}

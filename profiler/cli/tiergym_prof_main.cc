// The `tiergym-prof` command: the profiler's subcommands (prof_cli.h). Deployable on an
// HPC node on its own: it links tiergym_traces, libpfm4, libnuma and Abseil only.
#include <iostream>
#include <string>
#include <vector>

#include "profiler/cli/import_cli.h"
#include "profiler/cli/prof_cli.h"

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
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) {
    std::cerr << Usage();
    return 2;
  }
  const std::string command = args[0];
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  if (command == "--help" || command == "-h" || command == "help") {
    std::cout << Usage();
    return 0;
  }
  if (command == "--version") {
    std::cout << "tiergym-prof " << kVersion << "\n";
    return 0;
  }
  if (command == "record") return tiergym::prof::RunRecordCommand(rest);
  if (command == "interfere") return tiergym::prof::RunInterfereCommand(rest);
  if (command == "run-placed") return tiergym::prof::RunPlacedCommand(rest);
  if (command == "sweep") return tiergym::prof::RunSweepCommand(rest);
  if (command == "contentiousness") return tiergym::prof::RunContentiousnessCommand(rest);
  if (command == "import-mckernel") {
    return tiergym::mckernel::RunImportMckernelCommand(rest, "tiergym-prof import-mckernel");
  }
  std::cerr << "tiergym-prof: unknown command '" << command << "'\n\n" << Usage();
  return 2;
}

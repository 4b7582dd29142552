// The `tiergym` command: dispatches to the subcommands of each library.
#include <iostream>
#include <string>
#include <vector>

#include "env/cli/serve_cli.h"
#include "estimator/cli/contention_cli.h"
#include "estimator/cli/estimator_cli.h"
#include "traces/cli/trace_cli.h"

#ifndef TIERGYM_VERSION
#error "TIERGYM_VERSION comes from project(VERSION) in the top-level CMakeLists.txt"
#endif

namespace {

constexpr char kVersion[] = TIERGYM_VERSION;

std::string Usage() {
  return std::string(
             "usage: tiergym COMMAND [SUBCOMMAND] [options]\n\n"
             "tiergym: reinforcement-learning environment for heterogeneous-memory data "
             "placement.\n\ncommands:\n") +
         tiergym::TraceCommandsHelp() + tiergym::EstimatorCommandsHelp() +
         tiergym::ContentionCommandsHelp() + tiergym::env::ServeCommandHelp() +
         "\nRun 'tiergym COMMAND SUBCOMMAND --help' for the options of one command.\n";
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
    std::cout << "tiergym " << kVersion << "\n";
    return 0;
  }
  if (command == "trace") return tiergym::RunTraceCommand(rest);
  if (command == "estimate") return tiergym::RunEstimateCommand(rest);
  if (command == "validate") return tiergym::RunValidateCommand(rest);
  if (command == "calibrate") return tiergym::RunCalibrateCommand(rest);
  if (command == "contention") return tiergym::RunContentionCommand(rest);
  if (command == "serve") return tiergym::env::RunServeCommand(rest);
  std::cerr << "tiergym: unknown command '" << command << "'\n\n" << Usage();
  return 2;
}

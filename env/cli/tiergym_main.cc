// The `tiergym` command: dispatches to the subcommands of each library.
#include <string>

#include "env/cli/keygen_cli.h"
#include "env/cli/serve_cli.h"
#include "estimator/cli/contention_cli.h"
#include "estimator/cli/estimator_cli.h"
#include "traces/base/exit_status.h"
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
         tiergym::env::KeygenCommandHelp() +
         "\nRun 'tiergym COMMAND SUBCOMMAND --help' for the options of one command.\n";
}

}  // namespace

int main(int argc, char** argv) {
  return tiergym::RunCommand("tiergym", kVersion, Usage(),
                             {{"trace", tiergym::RunTraceCommand},
                              {"estimate", tiergym::RunEstimateCommand},
                              {"validate", tiergym::RunValidateCommand},
                              {"calibrate", tiergym::RunCalibrateCommand},
                              {"contention", tiergym::RunContentionCommand},
                              {"serve", tiergym::env::RunServeCommand},
                              {"keygen", tiergym::env::RunKeygenCommand}},
                             argc, argv);
}

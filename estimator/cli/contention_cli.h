// `tiergym contention validate|predict|synth`: the contention estimator's commands.
// validate predicts every measured pair with every method and prints the seed's Tables
// 1-3 (optionally plotting a family with its fits through scripts/plot_contention.py);
// predict answers one query; synth writes synthetic curves.csv, apps.csv and pairs.csv.
// See estimator/contention/CONTENTION.md and `tiergym contention SUBCOMMAND --help`.
#ifndef TIERGYM_ESTIMATOR_CLI_CONTENTION_CLI_H_
#define TIERGYM_ESTIMATOR_CLI_CONTENTION_CLI_H_

#include <string>
#include <vector>

namespace tiergym {

// Runs `tiergym contention ARGS...` (`args` exclude "tiergym contention"). Results on
// stdout, errors on stderr. Returns 0 on success, 1 when the input was refused or a
// runtime step failed, 2 on a usage error.
int RunContentionCommand(const std::vector<std::string>& args);

// The help lines of the command for `tiergym --help`.
std::string ContentionCommandsHelp();

}  // namespace tiergym

#endif  // TIERGYM_ESTIMATOR_CLI_CONTENTION_CLI_H_

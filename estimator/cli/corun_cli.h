// `tiergym validate --corun coruns.csv`: the composed (contention-aware) estimate of
// co-running applications against measured co-runs (traces/CORUN_CSV.md), next to the
// contention-blind estimate. Returns the process exit code (0 ok, 1 failure, 2 usage).
#ifndef TIERGYM_ESTIMATOR_CLI_CORUN_CLI_H_
#define TIERGYM_ESTIMATOR_CLI_CORUN_CLI_H_

#include <string>
#include <vector>

namespace tiergym {

// `args` exclude "tiergym validate" and hold --corun.
int RunCorunValidateCommand(const std::vector<std::string>& args);

}  // namespace tiergym

#endif  // TIERGYM_ESTIMATOR_CLI_CORUN_CLI_H_

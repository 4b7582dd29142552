// `tiergym estimate` and `tiergym validate`: runtime estimates of a profile under a
// placement, and their comparison with measured runs. Return the process exit code
// (0 ok, 1 failure, 2 usage error); results on stdout, errors on stderr.
#ifndef TIERGYM_ESTIMATOR_CLI_ESTIMATOR_CLI_H_
#define TIERGYM_ESTIMATOR_CLI_ESTIMATOR_CLI_H_

#include <string>
#include <vector>

namespace tiergym {

int RunEstimateCommand(const std::vector<std::string>& args);
int RunValidateCommand(const std::vector<std::string>& args);
// `tiergym calibrate`: not yet dispatched by env/tiergym_main.cc (the lead wires it).
int RunCalibrateCommand(const std::vector<std::string>& args);
std::string EstimatorCommandsHelp();

}  // namespace tiergym

#endif  // TIERGYM_ESTIMATOR_CLI_ESTIMATOR_CLI_H_

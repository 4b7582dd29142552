// `tiergym trace synth`: generates a synthetic profile (one sampled run per tier) and
// measured runs under mixed placements from an application model and a machine model.
// See traces/SYNTH.md.
#ifndef TIERGYM_TRACES_SYNTH_SYNTH_CLI_H_
#define TIERGYM_TRACES_SYNTH_SYNTH_CLI_H_

#include <string>
#include <vector>

namespace tiergym {

// `args` exclude "tiergym trace synth". Returns the exit code (0 ok, 1 failure, 2 usage)
// after printing errors on stderr.
int RunSynthCommand(const std::vector<std::string>& args);

}  // namespace tiergym

#endif  // TIERGYM_TRACES_SYNTH_SYNTH_CLI_H_

// `tiergym trace synth`: the command line of the synthetic profile generator.
//
// Generates a profile (one sampled trace per tier) and measured runs from an
// application model and a machine model, lists the bundled models or prints one.
// See traces/SYNTH.md and `tiergym trace synth --help`.
#ifndef TIERGYM_TRACES_CLI_SYNTH_CLI_H_
#define TIERGYM_TRACES_CLI_SYNTH_CLI_H_

#include <string>
#include <vector>

namespace tiergym::synth {

// Runs the command; `args` exclude "tiergym trace synth". Prints results on stdout,
// progress and errors on stderr. Returns 0 on success, 1 on a runtime failure (bad model
// file, write error), 2 on a usage error.
int RunSynthCommand(const std::vector<std::string>& args);

}  // namespace tiergym::synth

namespace tiergym {
using synth::RunSynthCommand;  // also reachable as tiergym::RunSynthCommand
}  // namespace tiergym

#endif  // TIERGYM_TRACES_CLI_SYNTH_CLI_H_

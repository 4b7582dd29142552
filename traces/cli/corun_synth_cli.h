// `tiergym trace corun`: synthetic co-runs, the applications of a co-run scenario sharing
// the synthetic machine, with ground truth from its time model (traces/synth/corun_synth.h).
// Writes coruns.csv (traces/CORUN_CSV.md), the tenants' placements and bandwidth.csv.
#ifndef TIERGYM_TRACES_CLI_CORUN_SYNTH_CLI_H_
#define TIERGYM_TRACES_CLI_CORUN_SYNTH_CLI_H_

#include <string>
#include <vector>

namespace tiergym::synth {

// Runs the command; `args` exclude "tiergym trace corun". Results on stdout, progress
// and errors on stderr. Returns 0 on success, 1 on a runtime failure, 2 on a usage error.
int RunCorunCommand(const std::vector<std::string>& args);

}  // namespace tiergym::synth

#endif  // TIERGYM_TRACES_CLI_CORUN_SYNTH_CLI_H_

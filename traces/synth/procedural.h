// Procedural application models: an application model (app_model.h) drawn from a seed.
//
// ProceduralAppModel(seed) draws arrays, phases, access mixes, hot sets that drift or
// switch, and a schedule from the documented distribution of traces/SYNTH.md section 11
// ("Procedural applications"), writes the model as JSON text and parses it like any model
// file, so a procedural model is an ordinary AppModel: `tiergym trace synth --app
// procedural:SEED` generates its profile, `--print-model procedural:SEED` prints it. The
// model is a pure function of (kProceduralVersion, seed): the same seed gives the same
// model on every platform (rng.h's generators, no std::*_distribution). When the
// distribution changes, kProceduralVersion does, and with it every procedural model's name
// (procedural-v<version>-<seed>), so that a profile cached under a name is never another
// model. Thread-safe: no shared state.
#ifndef TIERGYM_TRACES_SYNTH_PROCEDURAL_H_
#define TIERGYM_TRACES_SYNTH_PROCEDURAL_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "traces/synth/app_model.h"

namespace tiergym::synth {

// The version of the distribution (SYNTH.md section 11).
inline constexpr int kProceduralVersion = 1;
// What names a procedural model in LoadAppModel: "procedural:SEED".
inline constexpr std::string_view kProceduralPrefix = "procedural:";

// The name of the model of `seed`: "procedural-v1-42".
std::string ProceduralAppName(uint64_t seed);

// The JSON text of the model of `seed` (the format of SYNTH.md section 3.2).
std::string ProceduralAppJson(uint64_t seed);

// The model of `seed`, parsed and laid out. Never fails for a seed; a failure would be a
// bug in the generator (Internal, with the parser's message).
absl::StatusOr<AppModel> ProceduralAppModel(uint64_t seed);

// The seed of "procedural:SEED" (SEED a decimal integer below 2^64), std::nullopt when
// `name` does not start with kProceduralPrefix; InvalidArgument for a malformed seed.
absl::StatusOr<std::optional<uint64_t>> ParseProceduralName(std::string_view name);

}  // namespace tiergym::synth

#endif  // TIERGYM_TRACES_SYNTH_PROCEDURAL_H_

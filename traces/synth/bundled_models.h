// The JSON machine and application models bundled with tiergym (traces/synth/models/),
// compiled into the library by traces/CMakeLists.txt.
#ifndef TIERGYM_TRACES_SYNTH_BUNDLED_MODELS_H_
#define TIERGYM_TRACES_SYNTH_BUNDLED_MODELS_H_

#include <string_view>
#include <vector>

namespace tiergym::synth {

struct BundledModel {
  std::string_view name;  // file name without .json, e.g. "minife", "machine_knl"
  std::string_view json;
};

const std::vector<BundledModel>& BundledModels();

}  // namespace tiergym::synth

#endif  // TIERGYM_TRACES_SYNTH_BUNDLED_MODELS_H_

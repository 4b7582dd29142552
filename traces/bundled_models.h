// The JSON machine and application models bundled with tiergym (traces/synth/models/),
// compiled into the library by traces/CMakeLists.txt.
#ifndef TIERGYM_TRACES_BUNDLED_MODELS_H_
#define TIERGYM_TRACES_BUNDLED_MODELS_H_

#include <vector>

#include "traces/base/model_source.h"

namespace tiergym {

const std::vector<BundledModel>& BundledModels();

}  // namespace tiergym

#endif  // TIERGYM_TRACES_BUNDLED_MODELS_H_

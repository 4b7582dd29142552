// Where a model's JSON comes from: a document compiled into the program (BundledModel) or a
// file.
#ifndef TIERGYM_TRACES_BASE_MODEL_SOURCE_H_
#define TIERGYM_TRACES_BASE_MODEL_SOURCE_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace tiergym {

// A JSON document compiled into the program (traces/bundled_models.h lists them).
struct BundledModel {
  std::string_view name;  // file name without .json, e.g. "minife", "machine_knl"
  std::string_view json;
};

struct ModelSource {
  std::string text;
  std::string source;  // "<bundled>/NAME.json" or the file path, for error messages
};

// The bundled model `bundled` when it is not null, else the file `name_or_path`. When the
// file does not exist the NotFound error says that `name_or_path` is neither one of
// `choices` (the bundled names of this `kind`, e.g. "machine") nor a readable file.
absl::StatusOr<ModelSource> ReadModelSource(std::string_view name_or_path,
                                            const BundledModel* bundled, std::string_view kind,
                                            const std::vector<std::string>& choices);

}  // namespace tiergym

#endif  // TIERGYM_TRACES_BASE_MODEL_SOURCE_H_

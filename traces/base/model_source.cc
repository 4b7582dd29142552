#include "traces/base/model_source.h"

#include "absl/strings/str_join.h"
#include "traces/base/file.h"
#include "traces/base/strings.h"

namespace tiergym {

absl::StatusOr<ModelSource> ReadModelSource(std::string_view name_or_path,
                                            const BundledModel* bundled, std::string_view kind,
                                            const std::vector<std::string>& choices) {
  if (bundled != nullptr) {
    return ModelSource{std::string(bundled->json), StrCat("<bundled>/", bundled->name, ".json")};
  }
  const std::string path(name_or_path);
  absl::StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) {
    if (!absl::IsNotFound(text.status())) return text.status();
    const std::string names = absl::StrJoin(choices, ", ");
    return absl::NotFoundError(StrCat(kind, " \"", path, "\" is neither a bundled ", kind, " (",
                                      names, ") nor a readable file: ", text.status().message()));
  }
  return ModelSource{*std::move(text), path};
}

}  // namespace tiergym

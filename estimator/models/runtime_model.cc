#include "estimator/models/runtime_model.h"

#include <array>

#include "estimator/models/concurrent_model.h"
#include "estimator/models/paper_model.h"
#include "estimator/models/roofline_model.h"
#include "traces/base/strings.h"

namespace tiergym {
namespace {

struct Entry {
  Model model;
  const RuntimeModel* impl;
};

// Every model, once: the one place a name meets its implementation.
const std::array<Entry, 3>& Table() {
  static const PaperModel paper;
  static const ConcurrentModel concurrent;
  static const RooflineModel roofline;
  static const std::array<Entry, 3> table = {
      {{Model::kPaper, &paper}, {Model::kConcurrent, &concurrent}, {Model::kRoofline, &roofline}}};
  return table;
}

}  // namespace

const RuntimeModel* FindRuntimeModel(std::string_view name) {
  for (const Entry& e : Table()) {
    if (e.impl->name() == name) return e.impl;
  }
  return nullptr;
}

const RuntimeModel& RuntimeModelFor(Model model) {
  for (const Entry& e : Table()) {
    if (e.model == model) return *e.impl;
  }
  return *Table().front().impl;
}

std::string_view ModelName(Model model) { return RuntimeModelFor(model).name(); }

absl::StatusOr<Model> ParseModel(std::string_view name) {
  for (const Entry& e : Table()) {
    if (e.impl->name() == name) return e.model;
  }
  std::string known;
  for (const Entry& e : Table()) StrAppend(&known, known.empty() ? "" : ", ", e.impl->name());
  return absl::InvalidArgumentError(
      StrCat("unknown estimator model '", name, "' (known: ", known, ")"));
}

}  // namespace tiergym

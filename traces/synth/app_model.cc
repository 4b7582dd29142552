#include "traces/synth/app_model.h"

#include <cctype>
#include <cmath>
#include <initializer_list>
#include <optional>
#include <utility>

#include "traces/base/file.h"
#include "traces/base/model_source.h"
#include "traces/base/status_macros.h"
#include "traces/base/strings.h"
#include "traces/bundled_models.h"
#include "traces/synth/procedural.h"

namespace tiergym::synth {
namespace {

constexpr std::string_view kMachinePrefix = "machine_";
constexpr uint64_t kMmapAlign = 2ull << 20;  // mmap regions start on 2 MiB boundaries
constexpr uint64_t kMmapGap = 2ull << 20;    // and leave at least 2 MiB between them
constexpr uint64_t kHeapGap = 16 * kSynthPageBytes;
constexpr size_t kMaxScheduleInstances = 1000000;

uint64_t RoundUp(uint64_t v, uint64_t align) { return (v + align - 1) / align * align; }

bool IsSafeName(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.')) {
      return false;
    }
  }
  return s != "." && s != "..";
}

// A number member checked against [lo, hi]; the bounds are open where the flags say so.
absl::StatusOr<double> Number(json::ObjectReader& r, const json::Value& obj, std::string_view key,
                              std::optional<double> fallback, double lo, bool lo_open, double hi,
                              bool hi_open) {
  double v = 0;
  if (fallback.has_value()) {
    TG_ASSIGN_OR_RETURN(v, r.OptionalNumber(key, *fallback));
  } else {
    TG_ASSIGN_OR_RETURN(v, r.RequiredNumber(key));
  }
  const bool below = lo_open ? v <= lo : v < lo;
  const bool above = hi_open ? v >= hi : v > hi;
  if (!std::isfinite(v) || below || above) {
    std::string range = StrCat(lo_open ? "(" : "[", lo, ", ");
    if (std::isinf(hi)) {
      StrAppend(&range, "inf)");
    } else {
      StrAppend(&range, hi, hi_open ? ")" : "]");
    }
    return r.Error(key, obj.Find(key), StrCat("must be in ", range, ", got ", v));
  }
  return v;
}

constexpr double kInf = HUGE_VAL;

absl::StatusOr<ArrayAccess> ParseAccess(const AppModel& m, const json::Value& v,
                                        const std::string& source, const std::string& path) {
  TG_RETURN_IF_ERROR(json::OnlyKeys(
      v, source, path,
      {"array", "pattern", "weight", "hot_fraction", "hot_share", "hot_offset", "passes"}));
  json::ObjectReader r(v, source, path);
  ArrayAccess a;
  TG_ASSIGN_OR_RETURN(std::string array, r.RequiredString("array"));
  a.array = m.ArrayIndex(array);
  if (a.array < 0) {
    return r.Error("array", v.Find("array"),
                   StrCat("unknown array \"", array, "\" (not declared in \"arrays\")"));
  }
  TG_ASSIGN_OR_RETURN(std::string pattern, r.RequiredString("pattern"));
  if (pattern == "sequential") {
    a.pattern = AccessPattern::kSequential;
  } else if (pattern == "uniform") {
    a.pattern = AccessPattern::kUniform;
  } else if (pattern == "skewed") {
    a.pattern = AccessPattern::kSkewed;
  } else {
    return r.Error("pattern", v.Find("pattern"),
                   StrCat("unknown pattern \"", pattern,
                          "\"; expected \"sequential\", \"uniform\" or \"skewed\""));
  }
  TG_ASSIGN_OR_RETURN(a.weight, Number(r, v, "weight", 1.0, 0, true, kInf, true));
  const bool skewed = a.pattern == AccessPattern::kSkewed;
  const bool sequential = a.pattern == AccessPattern::kSequential;
  for (std::string_view key : {"hot_fraction", "hot_share", "hot_offset"}) {
    if (!skewed && r.Has(key)) {
      return r.Error(key, v.Find(key), "only applies to the \"skewed\" pattern");
    }
  }
  if (!sequential && r.Has("passes")) {
    return r.Error("passes", v.Find("passes"), "only applies to the \"sequential\" pattern");
  }
  if (skewed) {
    TG_ASSIGN_OR_RETURN(a.hot_fraction, Number(r, v, "hot_fraction", 0.1, 0, true, 1, false));
    TG_ASSIGN_OR_RETURN(a.hot_share, Number(r, v, "hot_share", 0.9, 0, false, 1, false));
    TG_ASSIGN_OR_RETURN(a.hot_offset, Number(r, v, "hot_offset", 0.0, 0, false, 1, true));
    if (a.hot_offset + a.hot_fraction > 1 + 1e-12) {
      return r.Error("hot_offset", v.Find("hot_offset"),
                     "hot_offset + hot_fraction must not exceed 1");
    }
  }
  if (sequential) {
    TG_ASSIGN_OR_RETURN(a.passes, Number(r, v, "passes", 1.0, 0, true, 1e6, false));
  }
  TG_RETURN_IF_ERROR(r.NoOtherKeys());
  return a;
}

absl::StatusOr<PhaseSpec> ParsePhase(const AppModel& m, const json::Value& v,
                                     const std::string& source, const std::string& path) {
  TG_RETURN_IF_ERROR(
      json::OnlyKeys(v, source, path,
                     {"name", "description", "instructions", "mpki", "compute_gips", "mlp",
                      "imbalance", "overlap", "read_pct", "serial", "accesses"}));
  json::ObjectReader r(v, source, path);
  PhaseSpec p;
  TG_ASSIGN_OR_RETURN(p.name, r.RequiredString("name"));
  if (p.name.empty()) return r.Error("name", v.Find("name"), "must not be empty");
  TG_ASSIGN_OR_RETURN(std::string description, r.OptionalString("description", ""));
  (void)description;
  TG_ASSIGN_OR_RETURN(p.instructions, r.RequiredUint64("instructions"));
  if (p.instructions == 0) {
    return r.Error("instructions", v.Find("instructions"), "must be > 0");
  }
  TG_ASSIGN_OR_RETURN(p.mpki, Number(r, v, "mpki", std::nullopt, 0, false, 1000, false));
  TG_ASSIGN_OR_RETURN(p.compute_gips,
                      Number(r, v, "compute_gips", std::nullopt, 0, true, kInf, true));
  TG_ASSIGN_OR_RETURN(p.mlp, Number(r, v, "mlp", 1.0, 0, true, 1e6, false));
  TG_ASSIGN_OR_RETURN(p.imbalance, Number(r, v, "imbalance", 0.0, 0, false, 10, false));
  TG_ASSIGN_OR_RETURN(p.overlap, Number(r, v, "overlap", 0.5, 0, false, 1, false));
  TG_ASSIGN_OR_RETURN(p.read_pct, Number(r, v, "read_pct", 100.0, 0, false, 100, false));
  TG_ASSIGN_OR_RETURN(p.serial, r.OptionalBool("serial", false));
  TG_ASSIGN_OR_RETURN(const json::Value* accesses, r.RequiredArray("accesses"));
  if (accesses->array().empty() && p.mpki > 0) {
    return r.Error("accesses", accesses, "a phase with mpki > 0 needs at least one access");
  }
  for (size_t i = 0; i < accesses->array().size(); ++i) {
    TG_ASSIGN_OR_RETURN(ArrayAccess a, ParseAccess(m, accesses->array()[i], source,
                                                   StrCat(path, ".accesses[", i, "]")));
    p.accesses.push_back(a);
  }
  TG_RETURN_IF_ERROR(r.NoOtherKeys());
  return p;
}

// Expands schedule items (phase names, or {"repeat": N, "phases": [...]}) into `out`.
absl::Status ExpandSchedule(const AppModel& m, const json::Value& items, const std::string& source,
                            const std::string& path, std::vector<int>& out) {
  for (size_t i = 0; i < items.array().size(); ++i) {
    const json::Value& item = items.array()[i];
    const std::string item_path = StrCat(path, "[", i, "]");
    if (item.is_string()) {
      int phase = -1;
      for (size_t p = 0; p < m.phases.size(); ++p) {
        if (m.phases[p].name == item.string()) phase = static_cast<int>(p);
      }
      if (phase < 0) {
        return absl::InvalidArgumentError(StrCat(source, ":", item.line(), ":", item.column(), ": ",
                                                 item_path, ": unknown phase \"", item.string(),
                                                 "\""));
      }
      if (out.size() >= kMaxScheduleInstances) {
        return absl::InvalidArgumentError(StrCat(source, ":", item.line(), ":", item.column(), ": ",
                                                 item_path, ": schedule expands to more than ",
                                                 kMaxScheduleInstances, " phase instances"));
      }
      out.push_back(phase);
      continue;
    }
    json::ObjectReader r(item, source, item_path);
    if (!item.is_object()) {
      return r.Error("", &item, "expected a phase name or {\"repeat\": N, \"phases\": [...]}");
    }
    TG_ASSIGN_OR_RETURN(uint64_t repeat, r.RequiredUint64("repeat"));
    if (repeat == 0 || repeat > kMaxScheduleInstances) {
      return r.Error("repeat", item.Find("repeat"),
                     StrCat("must be in [1, ", kMaxScheduleInstances, "]"));
    }
    TG_ASSIGN_OR_RETURN(const json::Value* phases, r.RequiredArray("phases"));
    if (phases->array().empty()) return r.Error("phases", phases, "must not be empty");
    TG_RETURN_IF_ERROR(r.NoOtherKeys());
    std::vector<int> body;
    TG_RETURN_IF_ERROR(ExpandSchedule(m, *phases, source, r.MemberPath("phases"), body));
    if (body.size() * repeat + out.size() > kMaxScheduleInstances) {
      return r.Error(
          "repeat", item.Find("repeat"),
          StrCat("schedule expands to more than ", kMaxScheduleInstances, " phase instances"));
    }
    for (uint64_t k = 0; k < repeat; ++k) out.insert(out.end(), body.begin(), body.end());
  }
  return absl::OkStatus();
}

void LayOut(AppModel& m) {
  uint64_t mmap_cursor = kMmapBase;
  uint64_t heap_cursor = kHeapBase;
  for (ArraySpec& a : m.arrays) {
    if (a.heap) {
      a.start_address = heap_cursor;
      heap_cursor = RoundUp(a.start_address + a.size_bytes, kSynthPageBytes) + kHeapGap;
    } else {
      a.start_address = mmap_cursor;
      mmap_cursor = RoundUp(a.start_address + a.size_bytes, kMmapAlign) + kMmapGap;
    }
  }
}

}  // namespace

int AppModel::ArrayIndex(std::string_view array_name) const {
  for (size_t i = 0; i < arrays.size(); ++i) {
    if (arrays[i].name == array_name) return static_cast<int>(i);
  }
  return -1;
}

uint64_t AppModel::FootprintBytes() const {
  uint64_t total = 0;
  for (const ArraySpec& a : arrays) total += RoundUp(a.size_bytes, kSynthPageBytes);
  return total;
}

absl::StatusOr<AppModel> ParseAppModel(std::string_view json_text, std::string_view source) {
  TG_ASSIGN_OR_RETURN(json::Value root, json::Parse(json_text, source));
  const std::string src(source);
  TG_RETURN_IF_ERROR(
      json::OnlyKeys(root, src, "",
                     {"name", "description", "threads", "noise", "instruction_jitter",
                      "barrier_spin_gips", "arrays", "phases", "schedule"}));
  json::ObjectReader r(root, src, "");
  AppModel m;
  TG_ASSIGN_OR_RETURN(m.name, r.RequiredString("name"));
  if (!IsSafeName(m.name)) {
    return r.Error("name", root.Find("name"),
                   "may only hold letters, digits, '_', '-' and '.' (it names a directory)");
  }
  TG_ASSIGN_OR_RETURN(m.description, r.OptionalString("description", ""));
  TG_ASSIGN_OR_RETURN(double threads, Number(r, root, "threads", 1.0, 1, false, 1 << 20, false));
  if (threads != std::floor(threads)) {
    return r.Error("threads", root.Find("threads"), "must be an integer");
  }
  m.threads = static_cast<int>(threads);
  TG_ASSIGN_OR_RETURN(m.noise, Number(r, root, "noise", 0.005, 0, false, 0.2, false));
  TG_ASSIGN_OR_RETURN(m.instruction_jitter,
                      Number(r, root, "instruction_jitter", 0.002, 0, false, 0.2, false));
  TG_ASSIGN_OR_RETURN(m.barrier_spin_gips,
                      Number(r, root, "barrier_spin_gips", 0.0, 0, false, 1e4, false));

  TG_ASSIGN_OR_RETURN(const json::Value* arrays, r.RequiredArray("arrays"));
  if (arrays->array().empty()) return r.Error("arrays", arrays, "must not be empty");
  for (size_t i = 0; i < arrays->array().size(); ++i) {
    const json::Value& av = arrays->array()[i];
    TG_RETURN_IF_ERROR(json::OnlyKeys(av, src, StrCat("arrays[", i, "]"),
                                      {"name", "size_bytes", "region", "description"}));
    json::ObjectReader ar(av, src, StrCat("arrays[", i, "]"));
    ArraySpec a;
    TG_ASSIGN_OR_RETURN(a.name, ar.RequiredString("name"));
    if (a.name.empty()) return ar.Error("name", av.Find("name"), "must not be empty");
    if (m.ArrayIndex(a.name) >= 0) {
      return ar.Error("name", av.Find("name"), StrCat("duplicate array \"", a.name, "\""));
    }
    const json::Value* size = av.Find("size_bytes");
    if (size != nullptr && size->is_number() && size->number() <= 0) {
      return ar.Error("size_bytes", size, "must be a positive integer");
    }
    TG_ASSIGN_OR_RETURN(a.size_bytes, ar.RequiredUint64("size_bytes"));
    if (a.size_bytes == 0 || a.size_bytes > (1ull << 44)) {
      return ar.Error("size_bytes", size, "must be in [1, 2^44]");
    }
    TG_ASSIGN_OR_RETURN(std::string region, ar.OptionalString("region", "mmap"));
    if (region != "mmap" && region != "heap") {
      return ar.Error("region", av.Find("region"), "must be \"mmap\" or \"heap\"");
    }
    a.heap = region == "heap";
    TG_ASSIGN_OR_RETURN(std::string description, ar.OptionalString("description", ""));
    (void)description;
    TG_RETURN_IF_ERROR(ar.NoOtherKeys());
    m.arrays.push_back(std::move(a));
  }

  TG_ASSIGN_OR_RETURN(const json::Value* phases, r.RequiredArray("phases"));
  if (phases->array().empty()) return r.Error("phases", phases, "must not be empty");
  for (size_t i = 0; i < phases->array().size(); ++i) {
    const json::Value& pv = phases->array()[i];
    TG_ASSIGN_OR_RETURN(PhaseSpec p, ParsePhase(m, pv, src, StrCat("phases[", i, "]")));
    for (const PhaseSpec& q : m.phases) {
      if (q.name == p.name) {
        return json::ObjectReader(pv, src, StrCat("phases[", i, "]"))
            .Error("name", pv.Find("name"), StrCat("duplicate phase \"", p.name, "\""));
      }
    }
    m.phases.push_back(std::move(p));
  }

  TG_ASSIGN_OR_RETURN(const json::Value* schedule, r.OptionalMember("schedule"));
  if (schedule == nullptr) {
    for (size_t p = 0; p < m.phases.size(); ++p) m.schedule.push_back(static_cast<int>(p));
  } else {
    if (!schedule->is_array()) return r.Error("schedule", schedule, "expected an array");
    TG_RETURN_IF_ERROR(ExpandSchedule(m, *schedule, src, "schedule", m.schedule));
    if (m.schedule.empty()) return r.Error("schedule", schedule, "must not be empty");
  }
  TG_RETURN_IF_ERROR(r.NoOtherKeys());
  LayOut(m);
  m.json = std::move(root);
  return m;
}

std::vector<std::string> BundledAppNames() {
  std::vector<std::string> names;
  for (const BundledModel& b : BundledModels()) {
    if (!b.name.starts_with(kMachinePrefix)) names.emplace_back(b.name);
  }
  return names;
}

absl::StatusOr<std::string> BundledModelText(std::string_view name) {
  TG_ASSIGN_OR_RETURN(std::optional<uint64_t> procedural, ParseProceduralName(name));
  if (procedural) return ProceduralAppJson(*procedural);
  for (const BundledModel& b : BundledModels()) {
    if (b.name == name ||
        (b.name.starts_with(kMachinePrefix) && b.name.substr(kMachinePrefix.size()) == name)) {
      return std::string(b.json);
    }
  }
  std::string names;
  for (const BundledModel& b : BundledModels()) StrAppend(&names, " ", b.name);
  return absl::NotFoundError(StrCat("no bundled model named \"", name, "\"; bundled:", names));
}

absl::StatusOr<AppModel> LoadAppModel(std::string_view name_or_path) {
  TG_ASSIGN_OR_RETURN(std::optional<uint64_t> procedural, ParseProceduralName(name_or_path));
  if (procedural) return ProceduralAppModel(*procedural);
  const BundledModel* bundled = nullptr;
  for (const BundledModel& b : BundledModels()) {
    if (!b.name.starts_with(kMachinePrefix) && b.name == name_or_path) bundled = &b;
  }
  TG_ASSIGN_OR_RETURN(ModelSource model, ReadModelSource(name_or_path, bundled, "application model",
                                                         BundledAppNames()));
  return ParseAppModel(model.text, model.source);
}

void WriteJsonValue(const json::Value& v, json::Writer& w) {
  switch (v.type()) {
    case json::Value::Type::kNull:
      w.Null();
      break;
    case json::Value::Type::kBool:
      w.Bool(v.bool_value());
      break;
    case json::Value::Type::kNumber:
      if (std::optional<uint64_t> u = v.AsUint64(); u.has_value()) {
        w.Uint(*u);
      } else {
        w.Double(v.number());
      }
      break;
    case json::Value::Type::kString:
      w.String(v.string());
      break;
    case json::Value::Type::kArray:
      w.BeginArray();
      for (const json::Value& e : v.array()) WriteJsonValue(e, w);
      w.EndArray();
      break;
    case json::Value::Type::kObject:
      w.BeginObject();
      for (const auto& [key, e] : v.object()) {
        w.Key(key);
        WriteJsonValue(e, w);
      }
      w.EndObject();
      break;
  }
}

}  // namespace tiergym::synth

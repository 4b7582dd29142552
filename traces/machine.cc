#include "traces/machine.h"

#include <cctype>
#include <cmath>
#include <initializer_list>
#include <optional>
#include <utility>

#include "traces/base/file.h"
#include "traces/base/json.h"
#include "traces/base/model_source.h"
#include "traces/base/status_macros.h"
#include "traces/base/strings.h"
#include "traces/bundled_models.h"

namespace tiergym {
namespace {

constexpr std::string_view kMachinePrefix = "machine_";

// A number member that must lie in [lo, hi] (inclusive unless `lo_open`).
absl::StatusOr<double> CheckedNumber(json::ObjectReader& r, const json::Value& obj,
                                     std::string_view key, std::optional<double> fallback,
                                     double lo, bool lo_open) {
  double v = 0;
  if (fallback.has_value()) {
    TG_ASSIGN_OR_RETURN(v, r.OptionalNumber(key, *fallback));
  } else {
    TG_ASSIGN_OR_RETURN(v, r.RequiredNumber(key));
  }
  if (!std::isfinite(v) || (lo_open ? v <= lo : v < lo)) {
    return r.Error(key, obj.Find(key), StrCat("must be ", lo_open ? "> " : ">= ", lo));
  }
  return v;
}

absl::StatusOr<int> CheckedInt(json::ObjectReader& r, const json::Value& obj, std::string_view key,
                               int fallback, int lo) {
  TG_ASSIGN_OR_RETURN(double v, r.OptionalNumber(key, fallback));
  if (v != std::floor(v) || v < lo || v > 1e9) {
    return r.Error(key, obj.Find(key), StrCat("must be an integer >= ", lo));
  }
  return static_cast<int>(v);
}

absl::StatusOr<TierSpec> ParseTier(const json::Value& v, const std::string& source,
                                   const std::string& path) {
  TG_RETURN_IF_ERROR(json::OnlyKeys(
      v, source, path,
      {"name", "capacity_bytes", "bandwidth_gbps", "latency_ns", "migration_gbps", "numa_node"}));
  json::ObjectReader r(v, source, path);
  TierSpec t;
  TG_ASSIGN_OR_RETURN(t.name, r.RequiredString("name"));
  if (t.name.empty()) return r.Error("name", v.Find("name"), "must not be empty");
  for (char c : t.name) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-')) {
      return r.Error("name", v.Find("name"),
                     "may only hold letters, digits, '_' and '-' (it names files)");
    }
  }
  TG_ASSIGN_OR_RETURN(t.capacity_bytes, r.RequiredUint64("capacity_bytes"));
  if (t.capacity_bytes == 0) {
    return r.Error("capacity_bytes", v.Find("capacity_bytes"), "must be > 0");
  }
  TG_ASSIGN_OR_RETURN(t.bandwidth_gbps,
                      CheckedNumber(r, v, "bandwidth_gbps", std::nullopt, 0, true));
  TG_ASSIGN_OR_RETURN(t.latency_ns, CheckedNumber(r, v, "latency_ns", std::nullopt, 0, true));
  TG_ASSIGN_OR_RETURN(t.migration_gbps,
                      CheckedNumber(r, v, "migration_gbps", std::nullopt, 0, true));
  TG_ASSIGN_OR_RETURN(t.numa_node, CheckedInt(r, v, "numa_node", -1, -1));
  TG_RETURN_IF_ERROR(r.NoOtherKeys());
  return t;
}

}  // namespace

const TierSpec* Machine::Find(std::string_view tier_name) const {
  for (const TierSpec& t : tiers) {
    if (t.name == tier_name) return &t;
  }
  return nullptr;
}

int Machine::IndexOf(std::string_view tier_name) const {
  for (size_t i = 0; i < tiers.size(); ++i) {
    if (tiers[i].name == tier_name) return static_cast<int>(i);
  }
  return -1;
}

absl::StatusOr<Machine> ParseMachine(std::string_view json_text, std::string_view source) {
  TG_ASSIGN_OR_RETURN(json::Value root, json::Parse(json_text, source));
  const std::string src(source);
  TG_RETURN_IF_ERROR(json::OnlyKeys(
      root, src, "", {"name", "description", "cores", "cache_line_bytes", "pebs_event", "tiers"}));
  json::ObjectReader r(root, src, "");
  Machine m;
  TG_ASSIGN_OR_RETURN(m.name, r.RequiredString("name"));
  TG_ASSIGN_OR_RETURN(m.description, r.OptionalString("description", ""));
  TG_ASSIGN_OR_RETURN(m.cores, CheckedInt(r, root, "cores", 1, 1));
  TG_ASSIGN_OR_RETURN(m.cache_line_bytes,
                      CheckedNumber(r, root, "cache_line_bytes", 64.0, 0, true));
  TG_ASSIGN_OR_RETURN(m.pebs_event, r.OptionalString("pebs_event", m.pebs_event));
  TG_ASSIGN_OR_RETURN(const json::Value* tiers, r.RequiredArray("tiers"));
  if (tiers->array().empty()) {
    return r.Error("tiers", tiers, "a machine needs at least one tier");
  }
  for (size_t i = 0; i < tiers->array().size(); ++i) {
    const json::Value& tv = tiers->array()[i];
    TG_ASSIGN_OR_RETURN(TierSpec t, ParseTier(tv, src, StrCat("tiers[", i, "]")));
    if (m.Find(t.name) != nullptr) {
      return json::ObjectReader(tv, src, StrCat("tiers[", i, "]"))
          .Error("name", tv.Find("name"), StrCat("duplicate tier name \"", t.name, "\""));
    }
    m.tiers.push_back(std::move(t));
  }
  TG_RETURN_IF_ERROR(r.NoOtherKeys());
  return m;
}

std::vector<std::string> BundledMachineNames() {
  std::vector<std::string> names;
  for (const BundledModel& b : BundledModels()) {
    if (b.name.starts_with(kMachinePrefix)) {
      names.emplace_back(b.name.substr(kMachinePrefix.size()));
    }
  }
  return names;
}

absl::StatusOr<Machine> LoadMachine(std::string_view name_or_path) {
  const BundledModel* bundled = nullptr;
  for (const BundledModel& b : BundledModels()) {
    if (!b.name.starts_with(kMachinePrefix)) continue;
    if (b.name == name_or_path || b.name.substr(kMachinePrefix.size()) == name_or_path) {
      bundled = &b;
    }
  }
  TG_ASSIGN_OR_RETURN(ModelSource model,
                      ReadModelSource(name_or_path, bundled, "machine", BundledMachineNames()));
  return ParseMachine(model.text, model.source);
}

std::string MachineToJson(const Machine& m) {
  json::Writer w(2);
  w.BeginObject();
  w.Key("name");
  w.String(m.name);
  if (!m.description.empty()) {
    w.Key("description");
    w.String(m.description);
  }
  w.Key("cores");
  w.Int(m.cores);
  w.Key("cache_line_bytes");
  w.Double(m.cache_line_bytes);
  w.Key("pebs_event");
  w.String(m.pebs_event);
  w.Key("tiers");
  w.BeginArray();
  for (const TierSpec& t : m.tiers) {
    w.BeginObject();
    w.Key("name");
    w.String(t.name);
    w.Key("capacity_bytes");
    w.Uint(t.capacity_bytes);
    w.Key("bandwidth_gbps");
    w.Double(t.bandwidth_gbps);
    w.Key("latency_ns");
    w.Double(t.latency_ns);
    w.Key("migration_gbps");
    w.Double(t.migration_gbps);
    w.Key("numa_node");
    w.Int(t.numa_node);
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  return w.Take();
}

}  // namespace tiergym

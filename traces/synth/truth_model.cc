#include "traces/synth/truth_model.h"

#include <algorithm>
#include <cmath>

#include "traces/base/json.h"
#include "traces/base/model_source.h"
#include "traces/base/status_macros.h"
#include "traces/base/strings.h"

namespace tiergym::synth {
namespace {

absl::Status InRange(json::ObjectReader& r, std::string_view key, double v, double lo, double hi) {
  if (v >= lo && v <= hi) return absl::OkStatus();
  return r.Error(key, nullptr, StrCat("must be in [", lo, ", ", hi, "]"));
}

}  // namespace

absl::Status SetQueueingLike(TruthModel& truth, std::string_view machine_name,
                             std::string_view tier_name) {
  TG_ASSIGN_OR_RETURN(Machine machine, LoadMachine(machine_name));
  const TierSpec* tier = machine.Find(tier_name);
  if (tier == nullptr) {
    return absl::InvalidArgumentError(
        StrCat("machine ", machine.name, " has no tier \"", tier_name, "\""));
  }
  if (tier->curves.empty()) {
    return absl::InvalidArgumentError(StrCat("tier \"", tier_name, "\" of machine ", machine.name,
                                             " has no measured curves to queue along"));
  }
  truth.queueing_like = *tier;
  truth.queueing_machine = std::string(machine_name);
  return absl::OkStatus();
}

double TruthModel::DriftOf(std::string_view tier) const {
  for (const auto& [name, drift] : instruction_drift) {
    if (name == tier) return drift;
  }
  return 0;
}

absl::StatusOr<TruthModel> ParseTruthModel(std::string_view json_text, std::string_view source) {
  TG_ASSIGN_OR_RETURN(json::Value doc, json::Parse(json_text, source));
  json::ObjectReader r(doc, std::string(source), "");
  TG_RETURN_IF_ERROR(r.CheckIsObject());
  TG_RETURN_IF_ERROR(r.OnlyKeys({"name", "description", "tier_overlap", "limit_smoothness",
                                 "compute_overlap", "queueing_like", "instruction_drift"}));
  TruthModel t;
  TG_ASSIGN_OR_RETURN(t.name, r.RequiredString("name"));
  if (t.name.empty()) return r.Error("name", nullptr, "must not be empty");
  TG_ASSIGN_OR_RETURN(t.description, r.OptionalString("description", ""));
  TG_ASSIGN_OR_RETURN(t.tier_overlap, r.OptionalNumber("tier_overlap", 1));
  TG_RETURN_IF_ERROR(InRange(r, "tier_overlap", t.tier_overlap, 0, 1));
  TG_ASSIGN_OR_RETURN(t.limit_smoothness, r.OptionalNumber("limit_smoothness", 0));
  if (t.limit_smoothness != 0) {
    TG_RETURN_IF_ERROR(InRange(r, "limit_smoothness", t.limit_smoothness, 1, 64));
  }
  if (r.Has("compute_overlap")) {
    TG_ASSIGN_OR_RETURN(double o, r.RequiredNumber("compute_overlap"));
    TG_RETURN_IF_ERROR(InRange(r, "compute_overlap", o, 0, 1));
    t.compute_overlap = o;
  }
  TG_ASSIGN_OR_RETURN(const json::Value* queueing, r.OptionalMember("queueing_like"));
  if (queueing != nullptr) {
    json::ObjectReader q(*queueing, std::string(source), "queueing_like");
    TG_RETURN_IF_ERROR(q.CheckIsObject());
    TG_RETURN_IF_ERROR(q.OnlyKeys({"machine", "tier"}));
    TG_ASSIGN_OR_RETURN(std::string machine_name, q.RequiredString("machine"));
    TG_ASSIGN_OR_RETURN(std::string tier, q.RequiredString("tier"));
    if (absl::Status s = SetQueueingLike(t, machine_name, tier); !s.ok()) {
      return q.Error("machine", queueing->Find("machine"), std::string(s.message()));
    }
  }
  TG_ASSIGN_OR_RETURN(const json::Value* drift, r.OptionalMember("instruction_drift"));
  if (drift != nullptr) {
    json::ObjectReader d(*drift, std::string(source), "instruction_drift");
    TG_RETURN_IF_ERROR(d.CheckIsObject());
    for (const auto& [tier, value] : drift->object()) {
      if (!value.is_number()) return d.Error(tier, &value, "must be a number");
      TG_RETURN_IF_ERROR(InRange(d, tier, value.number(), -0.5, 1));
      t.instruction_drift.emplace_back(tier, value.number());
    }
  }
  return t;
}

const std::vector<TruthModel>& BundledTruths() {
  static const auto* members = new std::vector<TruthModel>([] {
    std::vector<TruthModel> m;
    auto add = [&](std::string name, std::string description) -> TruthModel& {
      TruthModel& t = m.emplace_back();
      t.name = std::move(name);
      t.description = std::move(description);
      return t;
    };
    add("spec",
        "the spec model: tiers transfer concurrently, hard latency/bandwidth limit, the "
        "phases' compute overlaps, queueing only along measured curves, no drift");
    add("overlap", "the tiers' bandwidth-bound times overlap by 70 %").tier_overlap = 0.7;
    add("smooth", "latency- and bandwidth-bound times combine smoothly (p = 4)").limit_smoothness =
        4;
    add("hiding", "compute hides 85 % of the shorter of compute and memory time").compute_overlap =
        0.85;
    add("exposed", "compute hides 25 % of the shorter of compute and memory time").compute_overlap =
        0.25;
    // The bundled xeonmax's ddr tier always loads and has curves.
    auto queue_like_ddr5 = [](TruthModel& t) { (void)SetQueueingLike(t, "xeonmax", "ddr"); };
    queue_like_ddr5(add("queueing",
                        "tiers without measured curves queue along the measured DDR5 curves "
                        "of xeonmax's ddr tier (Mess; up to 2.1x their idle latency)"));
    add("drift", "instruction counts differ per device: 2 % more on hbm, 3 % on cxl, 6 % on remote")
        .instruction_drift = {{"hbm", 0.02}, {"cxl", 0.03}, {"remote", 0.06}};
    TruthModel& a = add("mixed-a",
                        "tiers overlap by 80 %, smooth limit (p = 4), queueing along DDR5, "
                        "drift (1 % hbm, 2 % cxl, 4 % remote); the phases' compute overlaps");
    a.tier_overlap = 0.8;
    a.limit_smoothness = 4;
    queue_like_ddr5(a);
    a.instruction_drift = {{"hbm", 0.01}, {"cxl", 0.02}, {"remote", 0.04}};
    TruthModel b = a;
    b.name = "mixed-b";
    b.description = "mixed-a with the tiers overlapping by 60 % and compute hiding 80 %";
    b.tier_overlap = 0.6;
    b.compute_overlap = 0.8;
    m.push_back(std::move(b));
    return m;
  }());
  return *members;
}

std::vector<std::string> BundledTruthNames() {
  std::vector<std::string> names;
  for (const TruthModel& t : BundledTruths()) names.push_back(t.name);
  return names;
}

absl::StatusOr<TruthModel> LoadTruthModel(std::string_view name_or_path) {
  for (const TruthModel& t : BundledTruths()) {
    if (t.name == name_or_path) return t;
  }
  TG_ASSIGN_OR_RETURN(ModelSource model,
                      ReadModelSource(name_or_path, nullptr, "truth model", BundledTruthNames()));
  return ParseTruthModel(model.text, model.source);
}

std::string TruthModelToJson(const TruthModel& t) {
  json::Writer w(2);
  w.BeginObject();
  w.Key("name");
  w.String(t.name);
  if (!t.description.empty()) {
    w.Key("description");
    w.String(t.description);
  }
  w.Key("tier_overlap");
  w.Double(t.tier_overlap);
  w.Key("limit_smoothness");
  w.Double(t.limit_smoothness);
  if (t.compute_overlap) {
    w.Key("compute_overlap");
    w.Double(*t.compute_overlap);
  }
  if (t.queueing_like) {
    w.Key("queueing_like");
    w.BeginObject();
    w.Key("machine");
    w.String(t.queueing_machine);
    w.Key("tier");
    w.String(t.queueing_like->name);
    w.EndObject();
  }
  if (!t.instruction_drift.empty()) {
    w.Key("instruction_drift");
    w.BeginObject();
    for (const auto& [tier, drift] : t.instruction_drift) {
      w.Key(tier);
      w.Double(drift);
    }
    w.EndObject();
  }
  w.EndObject();
  std::string text = w.Take();
  text.push_back('\n');
  return text;
}

LoadCurve TruthCurveAt(const TruthModel& truth, const TierSpec& tier, double read_pct) {
  return tier.CurveAt(read_pct, truth.queueing_like ? &*truth.queueing_like : nullptr);
}

}  // namespace tiergym::synth

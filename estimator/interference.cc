#include "estimator/interference.h"

#include <algorithm>
#include <filesystem>

#include "estimator/contention/sensitivity_csv.h"
#include "traces/base/file.h"
#include "traces/base/json.h"
#include "traces/base/status_macros.h"
#include "traces/base/strings.h"

namespace tiergym {

absl::StatusOr<InterferenceSchedule> ParseInterferenceSchedule(std::string_view json_text,
                                                               const std::string& source) {
  TG_ASSIGN_OR_RETURN(json::Value root, json::Parse(json_text, source));
  json::ObjectReader r(root, source, "");
  TG_RETURN_IF_ERROR(r.OnlyKeys({"sensitivity", "schedule"}));
  InterferenceSchedule out;
  TG_ASSIGN_OR_RETURN(const json::Value* sens, r.RequiredObject("sensitivity"));
  json::ObjectReader s(*sens, source, "sensitivity");
  TG_RETURN_IF_ERROR(s.OnlyKeys({"curves", "app", "method"}));
  TG_ASSIGN_OR_RETURN(out.curves_path, s.RequiredString("curves"));
  TG_ASSIGN_OR_RETURN(out.app, s.OptionalString("app", ""));
  TG_ASSIGN_OR_RETURN(out.method, s.OptionalString("method", out.method));
  if (auto m = contention::ParseMethod(out.method); !m.ok()) {
    return s.Error("method", sens->Find("method"), std::string(m.status().message()));
  }
  TG_ASSIGN_OR_RETURN(const json::Value* schedule, r.RequiredArray("schedule"));
  for (size_t i = 0; i < schedule->array().size(); ++i) {
    const json::Value& e = schedule->array()[i];
    const std::string path = StrCat("schedule[", i, "]");
    json::ObjectReader er(e, source, path);
    TG_RETURN_IF_ERROR(er.OnlyKeys({"tier", "from", "to", "co_runners"}));
    InterferenceEntry entry;
    TG_ASSIGN_OR_RETURN(entry.tier, er.RequiredString("tier"));
    TG_ASSIGN_OR_RETURN(entry.from, er.OptionalNumber("from", 0.0));
    TG_ASSIGN_OR_RETURN(entry.to, er.OptionalNumber("to", 1.0));
    if (!(entry.from >= 0 && entry.from < entry.to && entry.to <= 1)) {
      return er.Error("from", e.Find("from") ? e.Find("from") : &e,
                      "need 0 <= from < to <= 1 (fractions of the run)");
    }
    TG_ASSIGN_OR_RETURN(const json::Value* runners, er.RequiredArray("co_runners"));
    for (size_t j = 0; j < runners->array().size(); ++j) {
      const json::Value& c = runners->array()[j];
      json::ObjectReader cr(c, source, StrCat(path, ".co_runners[", j, "]"));
      TG_RETURN_IF_ERROR(cr.OnlyKeys({"bandwidth_gbps", "read_pct"}));
      contention::CoRunner co;
      TG_ASSIGN_OR_RETURN(co.bandwidth_gbps, cr.RequiredNumber("bandwidth_gbps"));
      TG_ASSIGN_OR_RETURN(co.read_pct, cr.OptionalNumber("read_pct", 100.0));
      if (!(co.bandwidth_gbps >= 0 && co.bandwidth_gbps < 1e6)) {
        return cr.Error("bandwidth_gbps", c.Find("bandwidth_gbps"), "must be in [0, 1e6) GB/s");
      }
      if (!(co.read_pct >= 0 && co.read_pct <= 100)) {
        return cr.Error("read_pct", c.Find("read_pct"), "must be in [0, 100]");
      }
      entry.interference.co_runners.push_back(co);
    }
    out.entries.push_back(std::move(entry));
  }
  return out;
}

absl::StatusOr<InterferenceSchedule> ReadInterferenceSchedule(const std::string& path) {
  TG_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  TG_ASSIGN_OR_RETURN(InterferenceSchedule s, ParseInterferenceSchedule(text, path));
  const std::filesystem::path curves(s.curves_path);
  if (curves.is_relative()) {
    s.curves_path = (std::filesystem::path(path).parent_path() / curves).string();
  }
  return s;
}

absl::StatusOr<InterferenceComposer> InterferenceComposer::Create(
    const InterferenceSchedule& schedule, const std::vector<std::string>& devices,
    const std::string& default_app) {
  TG_ASSIGN_OR_RETURN(std::vector<contention::SensitivityFamily> families,
                      contention::ReadCurvesCsv(schedule.curves_path));
  const std::string app = schedule.app.empty() ? default_app : schedule.app;
  const contention::SensitivityFamily* family = contention::FindFamily(families, app);
  if (family == nullptr) {
    return absl::NotFoundError(
        StrCat(schedule.curves_path, ": no sensitivity curves for app '", app, "'"));
  }
  TG_ASSIGN_OR_RETURN(contention::Method method, contention::ParseMethod(schedule.method));
  TG_ASSIGN_OR_RETURN(contention::ContentionModel model,
                      contention::ContentionModel::Create(*family, method));
  InterferenceComposer c(std::move(model));
  std::vector<int> device_of_entry;
  for (size_t i = 0; i < schedule.entries.size(); ++i) {
    const auto it = std::find(devices.begin(), devices.end(), schedule.entries[i].tier);
    if (it == devices.end()) {
      return absl::InvalidArgumentError(StrCat(
          "schedule[", i, "]: tier '", schedule.entries[i].tier, "' has no run in the profile"));
    }
    device_of_entry.push_back(static_cast<int>(it - devices.begin()));
  }
  c.cuts_ = {0.0, 1.0};
  for (const InterferenceEntry& e : schedule.entries) {
    c.cuts_.push_back(e.from);
    c.cuts_.push_back(e.to);
  }
  std::sort(c.cuts_.begin(), c.cuts_.end());
  c.cuts_.erase(std::unique(c.cuts_.begin(), c.cuts_.end()), c.cuts_.end());
  for (size_t p = 0; p + 1 < c.cuts_.size(); ++p) {
    const double mid = (c.cuts_[p] + c.cuts_[p + 1]) / 2;
    std::vector<contention::Interference> per_device(devices.size());
    for (size_t i = 0; i < schedule.entries.size(); ++i) {
      const InterferenceEntry& e = schedule.entries[i];
      if (e.from <= mid && mid < e.to) {
        auto& runners = per_device[device_of_entry[i]].co_runners;
        runners.insert(runners.end(), e.interference.co_runners.begin(),
                       e.interference.co_runners.end());
      }
    }
    std::vector<double> factors, bandwidth;
    for (const contention::Interference& in : per_device) {
      factors.push_back(c.model_.Slowdown(in));
      bandwidth.push_back(in.TotalBandwidthGbps());
    }
    c.factors_.push_back(std::move(factors));
    c.bandwidth_.push_back(std::move(bandwidth));
  }
  return c;
}

std::vector<double> InterferenceComposer::FactorsAt(double x) const {
  size_t p = std::upper_bound(cuts_.begin(), cuts_.end(), x) - cuts_.begin();
  p = std::clamp<size_t>(p, 1, factors_.size()) - 1;
  return factors_[p];
}

std::vector<double> InterferenceComposer::BandwidthAt(double x) const {
  size_t p = std::upper_bound(cuts_.begin(), cuts_.end(), x) - cuts_.begin();
  p = std::clamp<size_t>(p, 1, bandwidth_.size()) - 1;
  return bandwidth_[p];
}

double InterferenceComposer::IntervalNs(const PlacementState& state, uint64_t from,
                                        uint64_t to) const {
  double sum = 0;
  ForEachPiece(
      state.index().total_instructions(), from, to, [&](uint64_t lo, uint64_t hi, size_t p) {
        // Pieces without co-runners take the plain path (and its cached block
        // corrections).
        const bool contended =
            std::any_of(factors_[p].begin(), factors_[p].end(), [](double f) { return f != 1.0; });
        sum += contended ? state.IntervalNs(lo, hi, factors_[p]) : state.IntervalNs(lo, hi);
      });
  return sum;
}

GroupCostModel::Costs InterferenceComposer::IntervalCosts(const GroupCostModel& model,
                                                          uint64_t from, uint64_t to) const {
  GroupCostModel::Costs sum;
  ForEachPiece(model.index().total_instructions(), from, to,
               [&](uint64_t lo, uint64_t hi, size_t p) {
                 sum.Add(model.IntervalCosts(lo, hi, factors_[p]));
               });
  return sum;
}

}  // namespace tiergym

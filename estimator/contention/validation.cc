#include "estimator/contention/validation.h"

#include <cmath>
#include <map>
#include <set>
#include <vector>

#include "traces/base/csv_table.h"
#include "traces/base/strings.h"

namespace tiergym::contention {

std::vector<Method> StandardMethods() {
  std::vector<Method> methods;
  for (Smoothing s : {Smoothing::kPoly2, Smoothing::kLinear, Smoothing::kInterpolation}) {
    for (PointSet p : {PointSet::kAll, PointSet::kSampled}) {
      Method m;
      m.smoothing = s;
      m.points = p;
      m.curve = CurveChoice::kRight;
      methods.push_back(m);
      for (double pct : {50.0, 75.0, 100.0}) {
        m.curve = CurveChoice::kStatic;
        m.static_read_pct = pct;
        methods.push_back(m);
      }
      m.curve = CurveChoice::kEstimated;
      m.static_read_pct = Method().static_read_pct;
      methods.push_back(m);
    }
  }
  return methods;
}

absl::StatusOr<ValidationReport> Validate(const std::vector<SensitivityFamily>& families,
                                          const std::vector<AppBandwidth>& apps,
                                          const std::vector<MeasuredPair>& pairs,
                                          const std::vector<Method>& methods,
                                          const std::string& pairs_path) {
  // Resolve every pair first, so that a bad pair is reported before any work.
  std::vector<const SensitivityFamily*> targets;
  std::vector<Interference> interference;
  std::set<std::string> target_names;
  for (const MeasuredPair& pair : pairs) {
    const SensitivityFamily* family = FindFamily(families, pair.target);
    if (family == nullptr) {
      return RuleError(pairs_path, pair.line, "unknown-target",
                       StrCat("target \"", pair.target, "\" has no curves"));
    }
    const AppBandwidth* app = FindApp(apps, pair.interferer);
    if (app == nullptr) {
      return RuleError(
          pairs_path, pair.line, "unknown-interferer",
          StrCat("interferer \"", pair.interferer, "\" has no solo bandwidth in the apps file"));
    }
    targets.push_back(family);
    interference.push_back(Interference{{CoRunner{app->total_gbps(), app->read_pct()}}});
    target_names.insert(pair.target);
  }
  ValidationReport report;
  report.targets = target_names.size();
  for (const Method& method : methods) {
    std::map<const SensitivityFamily*, ContentionModel> models;
    std::string failure;
    for (const SensitivityFamily* family : targets) {
      if (models.count(family) != 0) continue;
      absl::StatusOr<ContentionModel> model = ContentionModel::Create(*family, method);
      if (!model.ok()) {
        failure = std::string(model.status().message());
        break;
      }
      models.emplace(family, *std::move(model));
    }
    if (!failure.empty()) {
      report.skipped.push_back({method, failure});
      continue;
    }
    ValidationRow row;
    row.method = method;
    row.pairs = pairs.size();
    std::vector<double> errors;
    errors.reserve(pairs.size());
    double sum = 0;
    for (size_t i = 0; i < pairs.size(); ++i) {
      const double predicted = models.at(targets[i]).NormalizedPerf(interference[i]);
      errors.push_back(100.0 * std::fabs(predicted - pairs[i].normalized_perf));
      sum += errors.back();
      row.max = std::max(row.max, errors.back());
    }
    const double n = static_cast<double>(errors.size());
    if (n > 0) row.mean = sum / n;
    if (n > 1) {
      double squares = 0;
      for (double e : errors) squares += (e - row.mean) * (e - row.mean);
      row.sd = std::sqrt(squares / (n - 1));
    }
    for (const auto& [family, model] : models) row.cost += model.ProfilingCost();
    if (!models.empty()) row.cost /= static_cast<double>(models.size());
    report.rows.push_back(row);
  }
  return report;
}

}  // namespace tiergym::contention

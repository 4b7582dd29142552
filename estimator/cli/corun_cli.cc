#include "estimator/cli/corun_cli.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <optional>

#include "estimator/contention/contention_model.h"
#include "estimator/contention/sensitivity_csv.h"
#include "estimator/contention/synth/contention_synth.h"
#include "estimator/corun.h"
#include "estimator/estimator.h"
#include "traces/base/args.h"
#include "traces/base/exit_status.h"
#include "traces/base/json.h"
#include "traces/base/script.h"
#include "traces/base/strings.h"
#include "traces/corun_runs.h"
#include "traces/machine.h"
#include "traces/placement.h"

namespace tiergym {
namespace {

// The three estimates reported, in column order.
constexpr const char* kKinds[] = {"blind", "solo-rates", "composed"};
constexpr size_t kBlind = 0, kSoloRates = 1, kComposed = 2;

double ErrorPct(double estimated, uint64_t measured) {
  return 100.0 * std::fabs(estimated - static_cast<double>(measured)) /
         static_cast<double>(measured);
}

struct Row {
  const CorunRun* run = nullptr;
  double estimated[3] = {0, 0, 0};
  std::vector<std::string> devices;   // of the tenant's profile
  std::vector<double> mean_slowdown;  // per device
};

struct ScenarioResult {
  std::string name;
  std::vector<Row> rows;
  int iterations = 0;
  bool converged = false;
};

// Everything loaded once per command.
class Context {
 public:
  Context(std::string profiles, std::string curves, contention::Method method, bool quiet)
      : profiles_(std::move(profiles)),
        curves_(std::move(curves)),
        method_(method),
        quiet_(quiet) {}

  absl::StatusOr<const Machine*> MachineOf(const std::string& name) {
    auto it = machines_.find(name);
    if (it == machines_.end()) {
      absl::StatusOr<Machine> m = LoadMachine(name);
      if (!m.ok()) return m.status();
      it = machines_.emplace(name, *std::move(m)).first;
    }
    return &it->second;
  }

  absl::StatusOr<Estimator*> EstimatorOf(const std::string& app, const Machine& machine) {
    const std::string key = StrCat(machine.name, "/", app);
    auto it = estimators_.find(key);
    if (it == estimators_.end()) {
      const std::string dir = (std::filesystem::path(profiles_) / app / "profile").string();
      absl::StatusOr<Profile> profile = LoadProfile(dir);
      if (!profile.ok()) return profile.status();
      absl::StatusOr<std::unique_ptr<Estimator>> e =
          Estimator::Create(*std::move(profile), RecommendedEstimatorOptions(machine));
      if (!e.ok()) return e.status();
      it = estimators_.emplace(key, *std::move(e)).first;
    }
    return it->second.get();
  }

  // The sensitivity of `app` to co-runners on `tier`: the --curves family, or a synthetic
  // campaign on that tier of the machine (cached per machine and tier).
  absl::StatusOr<contention::ContentionModel> Sensitivity(const std::string& app,
                                                          const Machine& machine,
                                                          const std::string& tier,
                                                          const std::vector<CorunRun>& runs) {
    const std::string key = curves_.empty() ? StrCat(machine.name, "/", tier) : curves_;
    auto it = families_.find(key);
    if (it == families_.end()) {
      std::vector<contention::SensitivityFamily> families;
      if (!curves_.empty()) {
        absl::StatusOr<std::vector<contention::SensitivityFamily>> f =
            contention::ReadCurvesCsv(curves_);
        if (!f.ok()) return f.status();
        families = *std::move(f);
      } else {
        contention::ContentionSynthOptions o;
        o.machine = machine.name;
        o.tier = tier;
        o.apps.clear();
        std::map<std::string, double> apps;
        for (const CorunRun& r : runs) apps.emplace(r.app, r.read_pct);
        for (const auto& [name, read] : apps) o.apps.push_back({name, read});
        o.interferer_scales = {1.0};
        // Co-runners share the node: the campaign's interference reaches the tier's peak.
        const TierSpec* t = machine.Find(tier);
        if (t != nullptr) o.link_read_gbps = t->bandwidth_gbps;
        if (!quiet_) {
          std::cerr << "validate --corun: synthetic sensitivity curves on " << machine.name << " "
                    << tier << " (tiergym contention synth --machine " << machine.name << " --tier "
                    << tier << ", the link at the tier's peak)\n";
        }
        absl::StatusOr<contention::ContentionData> data = contention::SynthesizeContentionData(o);
        if (!data.ok()) {
          return absl::Status(data.status().code(),
                              StrCat(data.status().message(),
                                     " (give --curves for applications that are not bundled)"));
        }
        families = std::move(data->families);
      }
      it = families_.emplace(key, std::move(families)).first;
    }
    const contention::SensitivityFamily* family = contention::FindFamily(it->second, app);
    if (family == nullptr) {
      return absl::NotFoundError(StrCat("no sensitivity curves for app '", app, "' (",
                                        curves_.empty() ? key : curves_, ")"));
    }
    return contention::ContentionModel::Create(*family, method_);
  }

 private:
  std::string profiles_, curves_;
  contention::Method method_;
  bool quiet_;
  std::map<std::string, Machine> machines_;
  std::map<std::string, std::unique_ptr<Estimator>> estimators_;
  std::map<std::string, std::vector<contention::SensitivityFamily>> families_;
};

absl::StatusOr<ScenarioResult> EstimateScenario(Context& context, const std::string& scenario,
                                                const std::vector<const CorunRun*>& rows,
                                                const std::vector<CorunRun>& all,
                                                const CorunEstimateOptions& base) {
  ScenarioResult result;
  result.name = scenario;
  const auto where = [&](const CorunRun& r, const absl::Status& s) {
    return absl::Status(s.code(), StrCat("scenario ", scenario, ", tenant ", r.tenant, " (line ",
                                         r.line, "): ", s.message()));
  };
  absl::StatusOr<const Machine*> machine = context.MachineOf(rows.front()->machine);
  if (!machine.ok()) return where(*rows.front(), machine.status());
  std::vector<CorunTenantInput> inputs;
  for (const CorunRun* r : rows) {
    absl::StatusOr<Placement> placement = ReadPlacement(r->placement_path);
    if (!placement.ok()) return where(*r, placement.status());
    absl::StatusOr<Estimator*> estimator = context.EstimatorOf(r->app, **machine);
    if (!estimator.ok()) return where(*r, estimator.status());
    absl::StatusOr<std::shared_ptr<const EstimatorIndex>> index =
        (*estimator)->IndexFor(placement->default_tier);
    if (!index.ok()) return where(*r, index.status());
    absl::StatusOr<ResolvedPlacement> resolved = (*index)->Resolve(*placement);
    if (!resolved.ok()) return where(*r, resolved.status());
    CorunTenantInput in;
    in.name = r->tenant;
    in.index = *index;
    in.placement = *resolved;
    in.start_ns = static_cast<double>(r->start_ns);
    in.read_pct = r->read_pct;
    in.misses_per_sample = CorunMissesPerSample((*estimator)->profile());
    for (const std::string& device : (*index)->devices()) {
      absl::StatusOr<contention::ContentionModel> model =
          context.Sensitivity(r->app, **machine, device, all);
      if (!model.ok()) return where(*r, model.status());
      in.sensitivity.emplace_back(*std::move(model));
    }
    inputs.push_back(std::move(in));
  }
  CorunEstimateOptions one_pass = base;
  one_pass.fixed_point = false;
  absl::StatusOr<CorunEstimate> solo_rates = EstimateCorun(inputs, one_pass);
  if (!solo_rates.ok()) return solo_rates.status();
  absl::StatusOr<CorunEstimate> composed = EstimateCorun(inputs, base);
  if (!composed.ok()) return composed.status();
  result.iterations = composed->iterations;
  result.converged = composed->converged;
  for (size_t i = 0; i < rows.size(); ++i) {
    Row row;
    row.run = rows[i];
    row.estimated[kBlind] = composed->tenants[i].blind_ns;
    row.estimated[kSoloRates] = solo_rates->tenants[i].composed_ns;
    row.estimated[kComposed] = composed->tenants[i].composed_ns;
    row.devices = inputs[i].index->devices();
    row.mean_slowdown = composed->tenants[i].mean_slowdown;
    result.rows.push_back(std::move(row));
  }
  return result;
}

struct Summary {
  double mean[3] = {0, 0, 0}, max[3] = {0, 0, 0};
};

Summary Summarise(const std::vector<const Row*>& rows) {
  Summary s;
  for (const Row* r : rows) {
    for (size_t k = 0; k < 3; ++k) {
      const double e = ErrorPct(r->estimated[k], r->run->runtime_ns);
      s.mean[k] += e / static_cast<double>(rows.size());
      s.max[k] = std::max(s.max[k], e);
    }
  }
  return s;
}

void WriteSummary(json::Writer& w, const Summary& s) {
  w.Key("models");
  w.BeginObject();
  for (size_t k = 0; k < 3; ++k) {
    w.Key(kKinds[k]);
    w.BeginObject();
    w.Key("mean_error_pct");
    w.Double(s.mean[k]);
    w.Key("max_error_pct");
    w.Double(s.max[k]);
    w.EndObject();
  }
  w.EndObject();
}

}  // namespace

int RunCorunValidateCommand(const std::vector<std::string>& args) {
  ArgParser p("tiergym validate --corun",
              "Estimate every tenant of every co-run scenario of a co-runs CSV (applications "
              "sharing one node; traces/CORUN_CSV.md) with the composed estimate: its "
              "differential-trace estimate with each tier's time scaled by the contention "
              "estimator's slowdown under the other tenants' bandwidth on that tier, "
              "derived from their own profiles and placements and iterated to a fixed point "
              "(estimator/README.md, \"Co-runs\"). Reports each estimate's error against the "
              "measured runtime, next to the contention-blind estimate's.");
  p.AddOption("corun", "FILE", "co-runs CSV (tiergym trace corun writes one)");
  p.AddOption("profiles", "DIR",
              "profiles of the applications: DIR/<app>/profile (tiergym trace synth --out DIR)");
  p.AddOption("curves", "FILE",
              "sensitivity curves (curves.csv) for every tier; default: a synthetic campaign "
              "per tier of the machine (tiergym contention synth --tier T, with interference "
              "up to the tier's peak)");
  p.AddOption("method", "M", "contention method (tiergym contention predict --help)",
              "linear/all/right");
  p.AddOption("model", "paper|concurrent|roofline", "runtime estimator model", "roofline");
  p.AddOption("pieces", "N", "pieces per phase of each tenant's timeline", "4");
  p.AddFlag("json", "print one JSON object on stdout");
  p.AddOption("plot", "FILE.png",
              "also draw measured vs estimated runtime per tenant (needs python3-matplotlib)");
  p.AddFlag("quiet", "no progress on stderr");
  p.SetEpilog(
      "Estimates: blind (no co-runners), solo-rates (one pass, co-runners at their\n"
      "contention-blind bandwidth, the contention paper's rule), composed (fixed point:\n"
      "co-runners at their slowed bandwidth and timing). error_pct = 100 * |estimated -\n"
      "measured| / measured.\n"
      "JSON output: {runs: [{name: SCENARIO/TENANT, scenario, tenant, app, measured_ns,\n"
      "solo_measured_ns, estimated_ns, error_pct, mean_slowdown: {TIER: x},\n"
      "models: {blind|solo-rates|composed: {estimated_ns, error_pct}}}], scenarios:\n"
      "[{scenario, tenants, iterations, converged, models: {..: {mean_error_pct,\n"
      "max_error_pct}}}], models: {..}, model, mean_error_pct, max_error_pct} (the last two:\n"
      "composed).");
  if (std::optional<int> rc = p.ParseOrExit(args)) return *rc;
  for (const char* required : {"corun", "profiles"}) {
    if (absl::Status s = p.Require(required); !s.ok()) return UsageFail(s);
  }
  absl::StatusOr<contention::Method> method = contention::ParseMethod(p.Get("method"));
  if (!method.ok()) return UsageFail(method.status());
  absl::StatusOr<Model> model = ParseModel(p.Get("model"));
  if (!model.ok()) return UsageFail(model.status());
  absl::StatusOr<uint64_t> pieces = p.GetUint64("pieces");
  if (!pieces.ok() || *pieces < 1 || *pieces > 1000) {
    return UsageFail(absl::InvalidArgumentError(
        StrCat("--pieces must be an integer in [1, 1000], not '", p.Get("pieces"), "'")));
  }
  absl::StatusOr<std::vector<CorunRun>> runs = ReadCorunRuns(p.Get("corun"));
  if (!runs.ok()) return Fail(runs.status());
  if (runs->empty()) {
    return Fail(absl::InvalidArgumentError(StrCat(p.Get("corun"), ": no co-runs")));
  }
  std::vector<std::string> order;
  std::map<std::string, std::vector<const CorunRun*>> by_scenario;
  for (const CorunRun& r : *runs) {
    if (!by_scenario.contains(r.scenario)) order.push_back(r.scenario);
    by_scenario[r.scenario].push_back(&r);
  }
  Context context(p.Get("profiles"), p.Get("curves"), *method, p.Flag("quiet"));
  CorunEstimateOptions options;
  options.model = *model;
  options.pieces_per_phase = static_cast<int>(*pieces);
  std::vector<ScenarioResult> results;
  for (const std::string& name : order) {
    absl::StatusOr<const Machine*> machine = context.MachineOf(by_scenario[name].front()->machine);
    if (!machine.ok()) return Fail(machine.status());
    options.cache_line_bytes = (*machine)->cache_line_bytes;
    absl::StatusOr<ScenarioResult> r =
        EstimateScenario(context, name, by_scenario[name], *runs, options);
    if (!r.ok()) {
      return Fail(
          absl::Status(r.status().code(), StrCat(p.Get("corun"), ": ", r.status().message())));
    }
    if (!p.Flag("quiet")) {
      std::cerr << "validate --corun: " << name << ": " << r->rows.size() << " tenants, "
                << r->iterations << " passes to the fixed point"
                << (r->converged ? "" : " (not converged)") << "\n";
    }
    results.push_back(*std::move(r));
  }

  std::vector<const Row*> all_rows;
  for (const ScenarioResult& s : results) {
    for (const Row& r : s.rows) all_rows.push_back(&r);
  }
  const Summary total = Summarise(all_rows);
  json::Writer w;
  w.BeginObject();
  w.Key("runs");
  w.BeginArray();
  for (const Row* r : all_rows) {
    w.BeginObject();
    w.Key("name");
    w.String(StrCat(r->run->scenario, "/", r->run->tenant));
    w.Key("scenario");
    w.String(r->run->scenario);
    w.Key("tenant");
    w.String(r->run->tenant);
    w.Key("app");
    w.String(r->run->app);
    w.Key("measured_ns");
    w.Uint(r->run->runtime_ns);
    w.Key("solo_measured_ns");
    w.Uint(r->run->solo_runtime_ns);
    w.Key("estimated_ns");
    w.Double(std::round(r->estimated[kComposed]));
    w.Key("error_pct");
    w.Double(ErrorPct(r->estimated[kComposed], r->run->runtime_ns));
    w.Key("mean_slowdown");
    w.BeginObject();
    for (size_t d = 0; d < r->mean_slowdown.size() && d < r->devices.size(); ++d) {
      w.Key(r->devices[d]);
      w.Double(r->mean_slowdown[d]);
    }
    w.EndObject();
    w.Key("models");
    w.BeginObject();
    for (size_t k = 0; k < 3; ++k) {
      w.Key(kKinds[k]);
      w.BeginObject();
      w.Key("estimated_ns");
      w.Double(std::round(r->estimated[k]));
      w.Key("error_pct");
      w.Double(ErrorPct(r->estimated[k], r->run->runtime_ns));
      w.EndObject();
    }
    w.EndObject();
    w.EndObject();
  }
  w.EndArray();
  w.Key("scenarios");
  w.BeginArray();
  std::vector<Summary> per_scenario;
  for (const ScenarioResult& s : results) {
    std::vector<const Row*> rows;
    for (const Row& r : s.rows) rows.push_back(&r);
    per_scenario.push_back(Summarise(rows));
    w.BeginObject();
    w.Key("scenario");
    w.String(s.name);
    w.Key("tenants");
    w.Uint(s.rows.size());
    w.Key("iterations");
    w.Int(s.iterations);
    w.Key("converged");
    w.Bool(s.converged);
    WriteSummary(w, per_scenario.back());
    w.EndObject();
  }
  w.EndArray();
  WriteSummary(w, total);
  w.Key("model");
  w.String("composed");
  w.Key("mean_error_pct");
  w.Double(total.mean[kComposed]);
  w.Key("max_error_pct");
  w.Double(total.max[kComposed]);
  w.EndObject();
  const std::string json_text = w.Take();

  if (p.Flag("json")) {
    std::cout << json_text << "\n";
  } else {
    std::printf("%-18s %-9s %11s %11s %11s %8s %11s %8s %11s %8s\n", "scenario", "tenant",
                "measured", "alone", "blind", "error", "solo-rates", "error", "composed", "error");
    for (const Row* r : all_rows) {
      std::printf("%-18s %-9s %10.3fs %10.3fs", r->run->scenario.c_str(), r->run->tenant.c_str(),
                  static_cast<double>(r->run->runtime_ns) / 1e9,
                  static_cast<double>(r->run->solo_runtime_ns) / 1e9);
      for (double estimated : r->estimated) {
        std::printf(" %10.3fs %7.2f%%", estimated / 1e9, ErrorPct(estimated, r->run->runtime_ns));
      }
      std::printf("\n");
    }
    std::printf("\nper scenario, mean / max error (%%):\n");
    std::printf("%-18s %7s %17s %17s %17s %s\n", "scenario", "tenants", "blind", "solo-rates",
                "composed", "passes");
    for (size_t i = 0; i < results.size(); ++i) {
      const Summary& s = per_scenario[i];
      std::printf("%-18s %7zu", results[i].name.c_str(), results[i].rows.size());
      for (size_t k = 0; k < 3; ++k) std::printf(" %7.2f / %7.2f", s.mean[k], s.max[k]);
      std::printf(" %d%s\n", results[i].iterations, results[i].converged ? "" : " (not converged)");
    }
    for (size_t k = 0; k < 3; ++k) {
      std::printf("%zu tenants, %s estimate: mean error %.2f %%, max error %.2f %%\n",
                  all_rows.size(), kKinds[k], total.mean[k], total.max[k]);
    }
  }
  if (p.Given("plot")) {
    if (absl::Status s = RunScript("plot_validation.py",
                                   {"-", "--out", p.Get("plot"), "--title",
                                    "co-runs: measured vs estimated runtime per tenant"},
                                   json_text);
        !s.ok()) {
      return Fail(s);
    }
    std::cerr << "wrote " << p.Get("plot") << "\n";
  }
  return kExitOk;
}

}  // namespace tiergym

#include "estimator/estimator_cli.h"

#include <cmath>
#include <cstdio>
#include <iostream>
#include <optional>
#include <string_view>

#include "estimator/replay_estimator.h"
#include "traces/measured_runs.h"
#include "traces/trace_summary.h"
#include "traces/util/args.h"
#include "traces/util/json.h"
#include "traces/util/strings.h"

namespace tiergym {
namespace {

void AddEstimateOptions(ArgParser& p) {
  p.AddOption("profile", "DIR", "profile directory: one trace per device");
  p.AddOption("window", "INSTRUCTIONS", "window length in base-run instructions", "1000000");
  p.AddFlag("no-phasemarks", "treat the whole run as one phase (the paper's ablation)");
  p.AddFlag("json", "print one JSON object on stdout");
}

// Parses the options both commands share plus the required option `required`;
// returns the exit code when the command should stop (--help, a usage error).
std::optional<int> ParseArgs(ArgParser& p, const std::vector<std::string>& args,
                             std::string_view required, EstimateOptions* options) {
  if (std::optional<int> rc = p.ParseOrExit(args)) return rc;
  absl::Status s = p.Require("profile");
  if (s.ok()) s = p.Require(required);
  auto window = p.GetUint64("window");
  if (s.ok() && !window.ok()) s = window.status();
  if (s.ok() && *window == 0) s = absl::InvalidArgumentError("--window must be positive");
  if (!s.ok()) {
    std::cerr << s.message() << "\n";
    return 2;
  }
  options->window_instructions = *window;
  options->use_phasemarks = !p.Flag("no-phasemarks");
  return std::nullopt;
}

int Fail(const absl::Status& s) {
  std::cerr << "error: " << s.message() << "\n";
  return 1;
}

}  // namespace

std::string EstimatorCommandsHelp() {
  return "  estimate               estimate a profile's runtime under a placement\n"
         "  validate               compare estimates with measured runs (runs.csv)\n";
}

int RunEstimateCommand(const std::vector<std::string>& args) {
  ArgParser p("tiergym estimate",
              "Estimate the runtime of an application under a placement from its profile "
              "(one sampled run per device), with the differential-trace estimator.");
  AddEstimateOptions(p);
  p.AddOption("placement", "FILE", "placement JSON (ranges or fractions)");
  p.SetEpilog(
      "JSON output: {runtime_ns, devices: [..], device_runtime_ns: [..], access_share: [..],\n"
      "time_share: [..], phases: [{phase, estimated_ns, measured_ns: [..], windows}]};\n"
      "per-device lists follow `devices`.");
  EstimateOptions options;
  if (std::optional<int> rc = ParseArgs(p, args, "placement", &options)) return *rc;
  auto profile = LoadProfile(p.Get("profile"));
  if (!profile.ok()) return Fail(profile.status());
  auto placement = ReadPlacement(p.Get("placement"));
  if (!placement.ok()) return Fail(placement.status());
  auto est = EstimateByReplay(*profile, *placement, options);
  if (!est.ok()) return Fail(est.status());
  if (p.Flag("json")) {
    json::Writer w;
    w.BeginObject();
    w.Key("runtime_ns");
    w.Double(std::round(est->runtime_ns));
    w.Key("devices");
    w.BeginArray();
    for (const auto& d : est->devices) w.String(d);
    w.EndArray();
    w.Key("device_runtime_ns");
    w.BeginArray();
    for (uint64_t v : est->device_runtime_ns) w.Uint(v);
    w.EndArray();
    w.Key("access_share");
    w.BeginArray();
    for (double v : est->access_share) w.Double(v);
    w.EndArray();
    w.Key("time_share");
    w.BeginArray();
    for (double v : est->time_share) w.Double(v);
    w.EndArray();
    w.Key("phases");
    w.BeginArray();
    for (const PhaseEstimate& ph : est->phases) {
      w.BeginObject();
      w.Key("phase");
      w.Uint(ph.phase);
      w.Key("estimated_ns");
      w.Double(std::round(ph.estimated_ns));
      w.Key("measured_ns");
      w.BeginArray();
      for (uint64_t v : ph.measured_ns) w.Uint(v);
      w.EndArray();
      w.Key("windows");
      w.Uint(ph.windows);
      w.EndObject();
    }
    w.EndArray();
    w.EndObject();
    std::cout << w.Take() << "\n";
    return 0;
  }
  std::cout << "estimated runtime " << FormatDuration(static_cast<uint64_t>(est->runtime_ns))
            << " for " << p.Get("placement") << "\n";
  for (size_t d = 0; d < est->devices.size(); ++d) {
    char line[200];
    std::snprintf(line, sizeof line,
                  "  %-8s all-on-device run %12s   accesses %5.1f %%   time %5.1f %%\n",
                  est->devices[d].c_str(), FormatDuration(est->device_runtime_ns[d]).c_str(),
                  100 * est->access_share[d], 100 * est->time_share[d]);
    std::cout << line;
  }
  const size_t shown = std::min<size_t>(est->phases.size(), 12);
  std::cout << "  per phase (estimated; measured on each device):\n";
  for (size_t i = 0; i < shown; ++i) {
    const PhaseEstimate& ph = est->phases[i];
    std::string measured;
    for (size_t d = 0; d < ph.measured_ns.size(); ++d) {
      StrAppend(&measured, d ? ", " : "", est->devices[d], " ", FormatDuration(ph.measured_ns[d]));
    }
    std::cout << "    phase " << ph.phase << ": "
              << FormatDuration(static_cast<uint64_t>(ph.estimated_ns)) << " (" << measured
              << ")\n";
  }
  if (shown < est->phases.size()) {
    std::cout << "    ... " << est->phases.size() - shown << " more phases (see --json)\n";
  }
  return 0;
}

int RunValidateCommand(const std::vector<std::string>& args) {
  ArgParser p("tiergym validate",
              "Estimate every measured run of runs.csv from the profile and report the error "
              "of each estimate against the measured runtime.");
  AddEstimateOptions(p);
  p.AddOption("runs", "FILE", "measured runs CSV (name,placement,runtime_ns)");
  p.SetEpilog(
      "JSON output: {\"runs\": [{name, measured_ns, estimated_ns, error_pct}],\n"
      "\"mean_error_pct\", \"max_error_pct\"}; error_pct = 100 * |estimated - measured| / "
      "measured.");
  EstimateOptions options;
  if (std::optional<int> rc = ParseArgs(p, args, "runs", &options)) return *rc;
  auto profile = LoadProfile(p.Get("profile"));
  if (!profile.ok()) return Fail(profile.status());
  auto runs = ReadMeasuredRunsWithPlacements(p.Get("runs"));
  if (!runs.ok()) return Fail(runs.status());
  json::Writer w;
  w.BeginObject();
  w.Key("runs");
  w.BeginArray();
  double sum = 0, max = 0;
  const bool as_json = p.Flag("json");
  if (!as_json) {
    std::printf("%-24s %14s %14s %9s\n", "run", "measured", "estimated", "error");
  }
  for (const auto& [run, placement] : *runs) {
    auto est = EstimateByReplay(*profile, placement, options);
    if (!est.ok()) return Fail(absl::Status(est.status().code(),
                                            StrCat(run.name, ": ", est.status().message())));
    const double measured = static_cast<double>(run.runtime_ns);
    const double error_pct = 100.0 * std::fabs(est->runtime_ns - measured) / measured;
    sum += error_pct;
    max = std::max(max, error_pct);
    w.BeginObject();
    w.Key("name");
    w.String(run.name);
    w.Key("measured_ns");
    w.Uint(run.runtime_ns);
    w.Key("estimated_ns");
    w.Double(std::round(est->runtime_ns));
    w.Key("error_pct");
    w.Double(error_pct);
    w.EndObject();
    if (!as_json) {
      std::printf("%-24s %14s %14s %8.2f%%\n", run.name.c_str(),
                  FormatDuration(run.runtime_ns).c_str(),
                  FormatDuration(static_cast<uint64_t>(est->runtime_ns)).c_str(), error_pct);
    }
  }
  w.EndArray();
  const double mean = runs->empty() ? 0.0 : sum / static_cast<double>(runs->size());
  w.Key("mean_error_pct");
  w.Double(mean);
  w.Key("max_error_pct");
  w.Double(max);
  w.EndObject();
  if (as_json) {
    std::cout << w.Take() << "\n";
  } else {
    std::printf("%zu runs: mean error %.2f %%, max error %.2f %%\n", runs->size(), mean, max);
  }
  return 0;
}

}  // namespace tiergym

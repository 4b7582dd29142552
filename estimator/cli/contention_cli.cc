#include "estimator/cli/contention_cli.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <optional>

#include "estimator/contention/contention_model.h"
#include "estimator/contention/sensitivity_csv.h"
#include "estimator/contention/smoothing.h"
#include "estimator/contention/synth/contention_synth.h"
#include "estimator/contention/validation.h"
#include "traces/base/args.h"
#include "traces/base/csv_table.h"
#include "traces/base/exit_status.h"
#include "traces/base/file.h"
#include "traces/base/json.h"
#include "traces/base/script.h"
#include "traces/base/status_macros.h"
#include "traces/base/strings.h"

namespace tiergym {
namespace {

using namespace contention;  // NOLINT(google-build-using-namespace): this file is its CLI

constexpr int kPlotSamples = 80;  // points per drawn fit

// "44", "10.75", "2.5": a cost without trailing zeros.
std::string FormatCost(double cost) {
  std::string s = FixedDecimal(cost, 2);
  while (s.back() == '0') s.pop_back();
  if (s.back() == '.') s.pop_back();
  return s;
}

std::string TableMethodName(Smoothing s) {
  switch (s) {
    case Smoothing::kPoly2:
      return "Polynomial";
    case Smoothing::kLinear:
      return "Linear";
    case Smoothing::kInterpolation:
      return "Interpolation";
  }
  return "?";
}

std::string TableCurveName(const Method& m) {
  if (m.IsMemgen()) return "75 (Memgen)";
  if (m.curve == CurveChoice::kRight) return "right curve";
  return CurveName(m);
}

// The plot's input: the family's measured points and, per smoothing, each curve's
// smoothed values from 0 to its largest interference.
absl::StatusOr<std::string> PlotData(const SensitivityFamily& family) {
  json::Writer w;
  w.BeginObject();
  w.Key("app");
  w.String(family.app);
  w.Key("curves");
  w.BeginArray();
  for (const SensitivityCurve& curve : family.curves) {
    w.BeginObject();
    w.Key("read_pct");
    w.Double(curve.read_pct);
    w.Key("points");
    w.BeginArray();
    for (const CurvePoint& p : curve.points) {
      w.BeginArray();
      w.Double(p.interference_gbps);
      w.Double(p.normalized_perf);
      w.EndArray();
    }
    w.EndArray();
    w.Key("fits");
    w.BeginObject();
    for (Smoothing s : {Smoothing::kLinear, Smoothing::kPoly2, Smoothing::kInterpolation}) {
      for (PointSet set : {PointSet::kAll, PointSet::kSampled}) {
        absl::StatusOr<SmoothedCurve> fit = SmoothCurve(curve, s, set);
        if (!fit.ok()) continue;  // too few points for this fit: not drawn
        w.Key(StrCat(SmoothingName(s), "/", PointSetName(set)));
        w.BeginArray();
        for (int i = 0; i <= kPlotSamples; ++i) {
          const double x = fit->max_gbps() * i / kPlotSamples;
          w.BeginArray();
          w.Double(x);
          w.Double(fit->Evaluate(x));
          w.EndArray();
        }
        w.EndArray();
      }
    }
    w.EndObject();
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  return w.Take();
}

// Runs scripts/plot_contention.py with the family's data on its standard input.
absl::Status Plot(const SensitivityFamily& family, const std::string& out_png) {
  TG_ASSIGN_OR_RETURN(std::string data, PlotData(family));
  return RunScript("plot_contention.py", {"--out", out_png, "-"}, data);
}

int ValidateCommand(const std::vector<std::string>& args) {
  ArgParser p(
      "tiergym contention validate",
      "Predict every measured pair with every method (smoothing x points x read "
      "curve, and Memgen) and print the prediction error in the layout of the contention paper's "
      "Tables 1-3.");
  p.AddOption("curves", "FILE", "sensitivity curves (curves.csv)");
  p.AddOption("apps", "FILE", "solo bandwidths (apps.csv)");
  p.AddOption("pairs", "FILE", "measured pairs (pairs.csv)");
  p.AddFlag("json", "print a JSON list of rows instead of the table");
  p.AddOption(
      "fit", "least-squares|robust|auto",
      "how the linear and poly2 rows fit their points (default least-squares, the "
      "paper's; robust: Tukey's biweight, which outlying measurements do not pull; "
      "auto: per curve, robust where the robust fit's residuals show an outlier (beyond 3.5 "
      "robust standard deviations), least squares elsewhere)");
  p.AddOption("plot", "FILE.png",
              "also draw one family with its smoothed fits (like the seed's Figure 4)");
  p.AddOption("plot-app", "NAME", "the family to draw (default: the first by name)");
  p.SetEpilog(
      "Error of one prediction: |predicted - measured| normalized performance, in percentage\n"
      "points; mean, SD (n - 1) and max over the pairs. Cost: distinct interference levels of\n"
      "the curves a method uses / 4 (one static curve of four points = 1), mean over targets.\n"
      "JSON output: [{smoothing: linear|poly2|interpolation, points: all|sampled,\n"
      "curve: right|50|75|100|estimated|memgen, mean, sd, max, cost}, ...]. A method the data\n"
      "cannot serve (e.g. no 75 % curve) is left out with a note on stderr.");
  if (std::optional<int> rc = p.ParseOrExit(args)) return *rc;
  for (const char* required : {"curves", "apps", "pairs"}) {
    if (absl::Status s = p.Require(required); !s.ok()) return UsageFail(s);
  }
  auto families = ReadCurvesCsv(p.Get("curves"));
  if (!families.ok()) return Fail(families.status());
  auto apps = ReadAppsCsv(p.Get("apps"));
  if (!apps.ok()) return Fail(apps.status());
  auto pairs = ReadPairsCsv(p.Get("pairs"));
  if (!pairs.ok()) return Fail(pairs.status());
  std::vector<Method> methods = StandardMethods();
  if (p.Given("fit")) {
    Fit fit = Fit::kLeastSquares;
    if (p.Get("fit") == "robust") {
      fit = Fit::kRobust;
    } else if (p.Get("fit") == "auto") {
      fit = Fit::kAuto;
    } else if (p.Get("fit") != "least-squares") {
      return UsageFail(absl::InvalidArgumentError(
          StrCat("--fit: unknown fit '", p.Get("fit"), "' (least-squares, robust or auto)")));
    }
    for (Method& m : methods) {
      if (m.smoothing != Smoothing::kInterpolation) m.fit = fit;
    }
  }
  auto report = Validate(*families, *apps, *pairs, methods, p.Get("pairs"));
  if (!report.ok()) return Fail(report.status());
  for (const SkippedMethod& s : report->skipped) {
    std::cerr << "note: method " << MethodName(s.method) << " left out: " << s.reason << "\n";
  }
  if (p.Given("plot")) {
    if (families->empty()) return Fail(absl::FailedPreconditionError("no family to plot"));
    const SensitivityFamily* family = &families->front();
    if (p.Given("plot-app")) {
      family = FindFamily(*families, p.Get("plot-app"));
      if (family == nullptr) {
        return Fail(absl::NotFoundError(
            StrCat("--plot-app ", p.Get("plot-app"), ": no such app in ", p.Get("curves"))));
      }
    }
    if (absl::Status s = Plot(*family, p.Get("plot")); !s.ok()) return Fail(s);
    std::cerr << "plot of " << family->app << " written to " << p.Get("plot") << "\n";
  }
  if (p.Flag("json")) {
    json::Writer w;
    w.BeginArray();
    for (const ValidationRow& row : report->rows) {
      w.BeginObject();
      w.Key("smoothing");
      w.String(SmoothingName(row.method.smoothing));
      w.Key("points");
      w.String(PointSetName(row.method.points));
      w.Key("curve");
      w.String(CurveName(row.method));
      w.Key("mean");
      w.Double(row.mean);
      w.Key("sd");
      w.Double(row.sd);
      w.Key("max");
      w.Double(row.max);
      w.Key("cost");
      w.Double(row.cost);
      w.EndObject();
    }
    w.EndArray();
    std::cout << w.Take() << "\n";
    return kExitOk;
  }
  std::printf(
      "Prediction error on %zu pairs (%zu targets), percentage points of normalized "
      "performance\n",
      pairs->size(), report->targets);
  std::printf("%-14s %-8s %-12s %7s %7s %7s %9s\n", "Method", "Points", "Read curve", "Mean", "SD",
              "Max", "Cost (x)");
  std::string last_method, last_points;
  for (const ValidationRow& row : report->rows) {
    const std::string method = TableMethodName(row.method.smoothing);
    const std::string points(PointSetName(row.method.points));
    const bool new_group = method != last_method || points != last_points;
    std::printf("%-14s %-8s %-12s %7.2f %7.2f %7.2f %9s\n",
                method != last_method ? method.c_str() : "", new_group ? points.c_str() : "",
                TableCurveName(row.method).c_str(), row.mean, row.sd, row.max,
                FormatCost(row.cost).c_str());
    last_method = method;
    last_points = points;
  }
  return kExitOk;
}

// Reads the repeated option `name` as numbers.
absl::StatusOr<std::vector<double>> Numbers(const ArgParser& p, std::string_view name) {
  std::vector<double> out;
  for (const std::string& v : p.GetAll(name)) {
    const std::optional<double> d = ParseFiniteNumber(v);
    if (!d.has_value()) {
      return absl::InvalidArgumentError(StrCat("--", name, " wants a number, got '", v, "'"));
    }
    out.push_back(*d);
  }
  return out;
}

int PredictCommand(const std::vector<std::string>& args) {
  ArgParser p("tiergym contention predict",
              "Predict an application's normalized performance while co-runners put the given "
              "bandwidth on its memory. Give --bandwidth and --read-pct once per co-runner; "
              "several co-runners act as one of their summed bandwidth and bandwidth-weighted "
              "read share.");
  p.AddOption("curves", "FILE", "sensitivity curves (curves.csv)");
  p.AddOption("app", "NAME", "the target application (a family of curves.csv)");
  p.AddRepeatedOption("bandwidth", "GBPS", "a co-runner's solo bandwidth, GB/s");
  p.AddRepeatedOption("read-pct", "R", "that co-runner's read share, percent");
  p.AddOption("method", "M",
              "SMOOTHING/POINTS/CURVE (linear|poly2|interpolation, all|sampled, "
              "right|estimated|50|75|100) or memgen",
              "linear/all/right");
  p.AddFlag("json", "print one JSON object");
  p.SetEpilog(
      "normalized_perf is the seed's prediction (solo runtime / runtime under interference);\n"
      "slowdown is the runtime factor the runtime estimator uses: 1 / the prediction from the\n"
      "curves made non-increasing and never above 1 (always >= 1).\n"
      "JSON output: {app, method, bandwidth_gbps, read_pct, normalized_perf, slowdown, cost,\n"
      "measured_max_gbps, beyond_measured} (bandwidth_gbps and read_pct: the co-runners\n"
      "combined; beyond_measured: more than the curves measured, where they hold their last\n"
      "value, with a note on stderr).");
  if (std::optional<int> rc = p.ParseOrExit(args)) return *rc;
  for (const char* required : {"curves", "app", "bandwidth", "read-pct"}) {
    if (absl::Status s = p.Require(required); !s.ok()) return UsageFail(s);
  }
  auto bandwidths = Numbers(p, "bandwidth");
  if (!bandwidths.ok()) return UsageFail(bandwidths.status());
  auto read_pcts = Numbers(p, "read-pct");
  if (!read_pcts.ok()) return UsageFail(read_pcts.status());
  if (bandwidths->size() != read_pcts->size()) {
    return UsageFail(absl::InvalidArgumentError(
        StrCat("tiergym contention predict: ", bandwidths->size(), " --bandwidth but ",
               read_pcts->size(), " --read-pct; give one of each per co-runner")));
  }
  Interference interference;
  for (size_t i = 0; i < bandwidths->size(); ++i) {
    interference.co_runners.push_back(CoRunner{(*bandwidths)[i], (*read_pcts)[i]});
  }
  if (absl::Status s = CheckInterference(interference); !s.ok()) return UsageFail(s);
  auto method = ParseMethod(p.Get("method"));
  if (!method.ok()) return UsageFail(method.status());

  auto families = ReadCurvesCsv(p.Get("curves"));
  if (!families.ok()) return Fail(families.status());
  const SensitivityFamily* family = FindFamily(*families, p.Get("app"));
  if (family == nullptr) {
    return Fail(absl::NotFoundError(
        StrCat("app \"", p.Get("app"), "\" has no curves in ", p.Get("curves"))));
  }
  auto model = ContentionModel::Create(*family, *method);
  if (!model.ok()) return Fail(model.status());
  const double perf = model->NormalizedPerf(interference);
  const double slowdown = model->Slowdown(interference);
  const double measured_max = model->MeasuredMaxGbps(interference);
  const bool beyond = interference.TotalBandwidthGbps() > measured_max;
  if (beyond) {
    std::cerr << "note: " << interference.TotalBandwidthGbps()
              << " GB/s lies beyond the largest interference measured on the curves used ("
              << measured_max
              << " GB/s): the curves hold their last value there, nothing is extrapolated; "
                 "measure the curves further to trust this prediction\n";
  }
  if (p.Flag("json")) {
    json::Writer w;
    w.BeginObject();
    w.Key("app");
    w.String(family->app);
    w.Key("method");
    w.String(MethodName(*method));
    w.Key("bandwidth_gbps");
    w.Double(interference.TotalBandwidthGbps());
    w.Key("read_pct");
    w.Double(interference.ReadPct());
    w.Key("normalized_perf");
    w.Double(perf);
    w.Key("slowdown");
    w.Double(slowdown);
    w.Key("cost");
    w.Double(model->ProfilingCost());
    w.Key("measured_max_gbps");
    w.Double(measured_max);
    w.Key("beyond_measured");
    w.Bool(beyond);
    w.EndObject();
    std::cout << w.Take() << "\n";
    return kExitOk;
  }
  std::printf("%s under %.2f GB/s with %.1f %% reads (%zu co-runner%s), method %s:\n",
              family->app.c_str(), interference.TotalBandwidthGbps(), interference.ReadPct(),
              interference.co_runners.size(), interference.co_runners.size() == 1 ? "" : "s",
              MethodName(*method).c_str());
  std::printf("  normalized performance %.4f\n  slowdown %.4fx\n", perf, slowdown);
  return kExitOk;
}

int SynthCommand(const std::vector<std::string>& args) {
  ArgParser p("tiergym contention synth",
              "Generate sensitivity curves, solo bandwidths and measured pairs for the "
              "synthetic applications (minife, lulesh, nekbone, lammps, hotset) from the "
              "contention model of estimator/contention/CONTENTION.md, with measurement noise "
              "and outliers. Writes DIR/curves.csv, DIR/apps.csv and DIR/pairs.csv.");
  p.AddOption("out", "DIR", "output directory (created if needed)");
  p.AddOption("seed", "N", "seed of every random stream", "1");
  p.AddOption("machine", "NAME|JSON", "machine (traces/SYNTH.md)", "knl");
  p.AddOption("tier", "NAME", "the contended tier (default: the machine's first tier)");
  if (std::optional<int> rc = p.ParseOrExit(args)) return *rc;
  if (absl::Status s = p.Require("out"); !s.ok()) return UsageFail(s);
  auto seed = p.GetUint64("seed");
  if (!seed.ok()) return UsageFail(seed.status());
  ContentionSynthOptions options;
  options.seed = *seed;
  options.machine = p.Get("machine");
  options.tier = p.Get("tier");
  auto data = SynthesizeContentionData(options);
  if (!data.ok()) return Fail(data.status());
  const std::string dir = p.Get("out");
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Fail(ErrnoStatus(ec.value(), StrCat("creating ", dir)));
  auto curves = CurvesCsvText(data->families);
  if (!curves.ok()) return Fail(curves.status());
  auto apps = AppsCsvText(data->apps);
  if (!apps.ok()) return Fail(apps.status());
  auto pairs = PairsCsvText(data->pairs);
  if (!pairs.ok()) return Fail(pairs.status());
  for (const auto& [name, text] :
       {std::pair<std::string, const std::string*>{"curves.csv", &*curves},
        {"apps.csv", &*apps},
        {"pairs.csv", &*pairs}}) {
    if (absl::Status s = WriteFileAtomically(StrCat(dir, "/", name), *text); !s.ok()) {
      return Fail(s);
    }
  }
  size_t points = 0;
  for (const SensitivityFamily& f : data->families) {
    for (const SensitivityCurve& c : f.curves) points += c.points.size();
  }
  std::printf(
      "wrote %s/curves.csv (%zu families, %zu measurements), apps.csv (%zu apps), "
      "pairs.csv (%zu pairs)\n",
      dir.c_str(), data->families.size(), points, data->apps.size(), data->pairs.size());
  return kExitOk;
}

}  // namespace

std::string ContentionCommandsHelp() {
  return "  contention validate    prediction error of each contention method (Tables 1-3)\n"
         "  contention predict     predict a slowdown under co-runners' memory bandwidth\n"
         "  contention synth       generate synthetic curves, solo bandwidths and pairs\n";
}

int RunContentionCommand(const std::vector<std::string>& args) {
  const std::string usage = "usage: tiergym contention {validate,predict,synth} ...\n\n" +
                            ContentionCommandsHelp() +
                            "\nRun 'tiergym contention SUBCOMMAND --help' for its options.\n";
  if (args.empty()) {
    std::cerr << usage;
    return kExitUsage;
  }
  const std::string& sub = args[0];
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  if (sub == "validate") return ValidateCommand(rest);
  if (sub == "predict") return PredictCommand(rest);
  if (sub == "synth") return SynthCommand(rest);
  if (sub == "--help" || sub == "-h" || sub == "help") {
    std::cout << usage;
    return kExitOk;
  }
  std::cerr << "tiergym contention: unknown subcommand '" << sub << "'\n\n" << usage;
  return kExitUsage;
}

}  // namespace tiergym

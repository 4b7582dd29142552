#include "traces/cli/trace_cli.h"

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <optional>
#include <vector>

#include "traces/base/args.h"
#include "traces/base/exit_status.h"
#include "traces/base/file.h"
#include "traces/base/json.h"
#include "traces/base/status_macros.h"
#include "traces/base/strings.h"
#include "traces/cli/corun_synth_cli.h"
#include "traces/cli/synth_cli.h"
#include "traces/machine.h"
#include "traces/profile.h"
#include "traces/projection.h"
#include "traces/trace_file.h"
#include "traces/trace_summary.h"

namespace tiergym {
namespace {

namespace fs = std::filesystem;

std::string SpreadText(const Profile& profile) {
  const InstructionSpread& s = profile.instruction_spread();
  return StrCat("instruction counts per phase differ between devices by ",
                FixedDecimal(100 * s.mean, 3), " % on average, at most ",
                FixedDecimal(100 * s.max, 3), " % (phase ", s.max_phase, ")");
}

void WriteSpreadJson(const Profile& profile, json::Writer& w) {
  const InstructionSpread& s = profile.instruction_spread();
  w.BeginObject();
  w.Key("mean");
  w.Double(s.mean);
  w.Key("max");
  w.Double(s.max);
  w.Key("max_phase");
  w.Uint(s.max_phase);
  w.Key("per_phase");
  w.BeginArray();
  for (double v : s.per_phase) w.Double(v);
  w.EndArray();
  w.EndObject();
}

int Info(const std::vector<std::string>& args) {
  ArgParser p("tiergym trace info",
              "Summarise a trace file, or every run of a profile directory: app, device, "
              "runtime, phases with their instructions and durations, samples, footprint and "
              "the address ranges touched.");
  p.AddPositional("PATH", "a trace (CSV v1 or binary .tgt) or a profile directory");
  p.AddFlag("json", "print one JSON object on stdout instead of text");
  p.AddOption("gap", "BYTES", "touched pages closer than this are reported as one address range",
              "1048576");
  p.AddOption("max-ranges", "N", "address ranges listed in the text report", "16");
  p.SetEpilog(
      "JSON output for a trace: {source, app, device, event, pebs_reset, page_size,\n"
      "runtime_ns, samples, threads, total_instructions, footprint_pages, footprint_bytes,\n"
      "phases: [{phase, start_ns, duration_ns, instructions, samples}],\n"
      "ranges: [{start, end, pages, samples}]} (start/end as hex strings).\n"
      "For a profile directory: {profile, app, devices: [..], phases,\n"
      "instruction_spread: {mean, max, max_phase, per_phase: [..]}, runs: [<trace object>..]};\n"
      "spreads are fractions ((max - min) / max of a phase's instruction counts).");
  if (std::optional<int> rc = p.ParseOrExit(args)) return *rc;
  SummaryOptions options;
  auto gap = p.GetUint64("gap");
  auto max_ranges = p.GetUint64("max-ranges");
  if (!gap.ok() || !max_ranges.ok()) {
    std::cerr << (gap.ok() ? max_ranges.status() : gap.status()).message() << "\n";
    return kExitUsage;
  }
  options.range_gap_bytes = *gap;
  auto profile = LoadProfile(p.Positional("PATH"));
  if (!profile.ok()) return Fail(profile.status());
  const bool is_dir = fs::is_directory(p.Positional("PATH"));
  if (p.Flag("json")) {
    json::Writer w;
    if (is_dir) {
      w.BeginObject();
      w.Key("profile");
      w.String(profile->name());
      w.Key("app");
      w.String(profile->app());
      w.Key("devices");
      w.BeginArray();
      for (const std::string& d : profile->devices()) w.String(d);
      w.EndArray();
      w.Key("phases");
      w.Uint(profile->num_phases());
      w.Key("instruction_spread");
      WriteSpreadJson(*profile, w);
      w.Key("runs");
      w.BeginArray();
    }
    for (const Trace& t : profile->runs()) WriteSummaryJson(Summarize(t, options), w);
    if (is_dir) {
      w.EndArray();
      w.EndObject();
    }
    std::cout << w.Take() << "\n";
    return kExitOk;
  }
  if (is_dir) {
    std::cout << "profile " << profile->name() << ": app "
              << (profile->app().empty() ? "(not given)" : profile->app()) << ", "
              << profile->runs().size() << " run(s), " << profile->num_phases() << " phases\n";
    for (const Trace& t : profile->runs()) {
      std::cout << "  " << t.metadata().device << ": " << FormatDuration(t.runtime_ns()) << ", "
                << t.num_samples() << " samples (" << t.source() << ")\n";
    }
    std::cout << "  " << SpreadText(*profile) << "\n\n";
  }
  for (const Trace& t : profile->runs()) {
    std::cout << FormatSummaryText(Summarize(t, options), *max_ranges) << "\n";
  }
  return kExitOk;
}

int Validate(const std::vector<std::string>& args) {
  ArgParser p("tiergym trace validate",
              "Check trace files against the trace CSV v1 rules (or the binary format's "
              "checksums and rules). For a directory, every trace file is checked and then "
              "the runs are checked to agree as a profile. Exit status 0 when everything is "
              "valid, 1 otherwise.");
  p.AddPositional("PATH", "a trace file or a profile directory");
  p.AddFlag("json", "print {valid, files: [{path, valid, error}], profile_error} on stdout");
  if (std::optional<int> rc = p.ParseOrExit(args)) return *rc;
  const std::string path = p.Positional("PATH");
  // A missing path or an empty directory is reported as the profile's error below.
  absl::StatusOr<std::vector<std::string>> listed = ListTraceFiles(path);
  const std::vector<std::string> files = listed.ok() ? *listed : std::vector<std::string>{};
  bool all_valid = !files.empty();
  json::Writer w;
  w.BeginObject();
  w.Key("files");
  w.BeginArray();
  std::vector<Trace> runs;
  for (const std::string& f : files) {
    auto t = LoadTrace(f);
    w.BeginObject();
    w.Key("path");
    w.String(f);
    w.Key("valid");
    w.Bool(t.ok());
    w.Key("error");
    if (t.ok()) {
      w.Null();
      if (!p.Flag("json")) {
        std::cout << "ok      " << f << ": device " << t->metadata().device << ", "
                  << t->num_samples() << " samples, " << t->num_phases() << " phases\n";
      }
      runs.push_back(*std::move(t));
    } else {
      all_valid = false;
      w.String(std::string(t.status().message()));
      if (!p.Flag("json")) std::cout << "INVALID " << t.status().message() << "\n";
    }
    w.EndObject();
  }
  w.EndArray();
  w.Key("profile_error");
  std::string profile_error;
  if (!listed.ok()) profile_error = std::string(listed.status().message());
  if (files.size() > 1 && all_valid) {
    auto profile = Profile::FromRuns(path, std::move(runs));
    if (!profile.ok()) {
      profile_error = std::string(profile.status().message());
    } else if (!p.Flag("json")) {
      std::cout << "ok      profile " << path << ": " << profile->runs().size() << " runs agree; "
                << SpreadText(*profile) << "\n";
    }
  }
  if (profile_error.empty()) {
    w.Null();
  } else {
    all_valid = false;
    w.String(profile_error);
    if (!p.Flag("json")) std::cout << "INVALID " << profile_error << "\n";
  }
  w.Key("valid");
  w.Bool(all_valid);
  w.EndObject();
  if (p.Flag("json")) std::cout << w.Take() << "\n";
  return all_valid ? kExitOk : kExitFailed;
}

absl::Status ConvertOne(const std::string& in, const std::string& out, TraceFormat format) {
  TG_ASSIGN_OR_RETURN(Trace t, LoadTrace(in));
  // Written into a device or through a link (`/dev/stdout`: the trace is the output), the
  // summary goes to standard error and names no size.
  const bool in_place = WritesInPlace(out);
  TG_RETURN_IF_ERROR(SaveTrace(t, out, format));
  std::ostream& note = in_place ? std::cerr : std::cout;
  note << "wrote " << out << " (" << (format == TraceFormat::kBinary ? "binary" : "CSV v1") << ", "
       << t.num_samples() << " samples";
  std::error_code ec;
  const uintmax_t bytes = fs::is_regular_file(out, ec) ? fs::file_size(out, ec) : 0;
  if (!ec && bytes > 0) note << ", " << FormatBytes(bytes);
  note << ")\n";
  return absl::OkStatus();
}

int Convert(const std::vector<std::string>& args) {
  ArgParser p("tiergym trace convert",
              "Convert a trace between CSV v1 and the binary format (traces/FORMAT.md), "
              "losslessly. With a profile directory as IN, converts every trace in it into "
              "the directory OUT.");
  p.AddPositional("IN", "a trace file or a profile directory");
  p.AddPositional("OUT", "the output file or directory");
  p.AddOption("format", "csv|bin",
              "output format; by default from OUT's extension (.tgt is binary, else CSV; "
              "binary for a directory)");
  if (std::optional<int> rc = p.ParseOrExit(args)) return *rc;
  const std::string in = p.Positional("IN"), out = p.Positional("OUT");
  const bool dir = fs::is_directory(in);
  TraceFormat format = dir ? TraceFormat::kBinary : FormatForPath(out);
  if (p.Given("format")) {
    if (p.Get("format") == "csv") {
      format = TraceFormat::kCsv;
    } else if (p.Get("format") == "bin") {
      format = TraceFormat::kBinary;
    } else {
      std::cerr << "tiergym trace convert: --format is csv or bin, not '" << p.Get("format")
                << "'\n";
      return kExitUsage;
    }
  }
  if (!dir) {
    absl::Status s = ConvertOne(in, out, format);
    return s.ok() ? kExitOk : Fail(s);
  }
  // Check the whole profile first so that a bad run does not leave a half-converted copy.
  auto profile = LoadProfile(in);
  if (!profile.ok()) return Fail(profile.status());
  std::error_code ec;
  fs::create_directories(out, ec);
  if (ec)
    return Fail(absl::PermissionDeniedError(StrCat("cannot create ", out, ": ", ec.message())));
  for (const Trace& t : profile->runs()) {
    fs::path target = fs::path(out) / fs::path(t.source()).filename();
    target.replace_extension(format == TraceFormat::kBinary ? ".tgt" : ".csv");
    absl::Status s = SaveTrace(t, target.string(), format);
    if (!s.ok()) return Fail(s);
    std::cout << "wrote " << target.string() << " (" << t.num_samples() << " samples)\n";
  }
  return kExitOk;
}

// OUT is replaced only when it is absent or a profile an earlier projection onto the same
// tiers wrote (a directory holding <tier>.csv or <tier>.tgt files only): a file, a device or
// a directory with anything else in it is refused, never removed.
absl::Status CheckReplaceableProfile(const fs::path& out, const std::vector<Trace>& tiers) {
  std::error_code ec;
  const fs::file_status st = fs::symlink_status(out, ec);
  if (!fs::exists(st)) return absl::OkStatus();
  if (!fs::is_directory(st)) {
    return absl::AlreadyExistsError(StrCat(
        out.string(), " exists and is not a profile directory: remove it or name another OUT"));
  }
  for (const fs::directory_entry& e : fs::directory_iterator(out, ec)) {
    const std::string name = e.path().filename().string();
    const bool tier_file = std::any_of(tiers.begin(), tiers.end(), [&name](const Trace& t) {
      return name == t.metadata().device + ".csv" || name == t.metadata().device + ".tgt";
    });
    if (!e.is_regular_file() || !tier_file) {
      return absl::AlreadyExistsError(
          StrCat(out.string(), " exists and holds ", name,
                 ", which no projection writes: remove it or name another OUT"));
    }
  }
  if (ec)
    return absl::PermissionDeniedError(StrCat("cannot list ", out.string(), ": ", ec.message()));
  return absl::OkStatus();
}

int Project(const std::vector<std::string>& args) {
  ArgParser p("tiergym trace project",
              "Turn one recorded trace (any machine, one memory) into a profile for the target "
              "machine: one trace per tier, with the recording's addresses, threads, phases "
              "and instructions, and times from the tiers' bandwidth and latency (or measured "
              "curves) and the recording's misses per window (model: traces/PROJECTION.md).");
  p.AddPositional("IN", "the recorded trace (CSV v1 or binary .tgt)");
  p.AddPositional("OUT", "the profile directory to write (one <tier>.csv or .tgt per tier)");
  p.AddOption("machine", "NAME|JSON", "the target machine (at least two tiers)", "knl");
  p.AddOption("recorded-tier", "TIER",
              "the tier whose memory the recording ran on (default: the trace's device if "
              "the machine has it, else the machine's first tier)");
  p.AddOption("misses-per-sample", "N",
              "LLC misses one sample stands for (default: the trace's pebs_reset, else 1)");
  p.AddOption("mlp", "N",
              "outstanding misses per thread; default: averaged over the prior "
              "(traces/PROJECTION.md)");
  p.AddOption("threads", "N",
              "threads of the program (default: the trace's tids holding at least a tenth of an "
              "even share of its samples)");
  p.AddOption("overlap", "F",
              "overlap of compute and memory time, 0..1; default: averaged over the prior");
  p.AddOption("prior", "KEY=V,...",
              "change the prior: stream_mlp, other_mlp, mlp_min, mlp_max, mlp_spread, "
              "mlp_unknown, overlap_min, overlap_max, compute_low, compute_high, "
              "time_tolerance (defaults in traces/PROJECTION.md)");
  p.AddOption("tails", "apart|in-window",
              "a phase's time after its last sample (a barrier wait): projected with the "
              "phase's work (apart) or as part of its last window",
              "apart");
  p.AddFlag("wall-time",
            "project a timer recording from its wall-clock times (default: each phase "
            "shortened to the CPU time its threads ran, removing the time they waited for "
            "a CPU on a busy recording machine)");
  p.AddOption("window", "N", "samples per projected window", "64");
  p.AddOption("format", "csv|bin", "output format", "csv");
  if (std::optional<int> rc = p.ParseOrExit(args)) return *rc;
  auto machine = LoadMachine(p.Get("machine"));
  if (!machine.ok()) return Fail(machine.status());
  auto recorded = LoadTrace(p.Positional("IN"));
  if (!recorded.ok()) return Fail(recorded.status());
  ProjectionOptions o;
  if (p.Given("recorded-tier")) o.recorded_tier = p.Get("recorded-tier");
  auto window = p.GetUint64("window");
  if (!window.ok() || *window == 0) {
    std::cerr << "tiergym trace project: --window takes a positive number of samples\n";
    return kExitUsage;
  }
  o.samples_per_window = static_cast<uint32_t>(*window);
  if (p.Given("mlp")) {
    auto mlp = p.GetDouble("mlp");
    if (!mlp.ok() || !(*mlp > 0)) {
      std::cerr << "tiergym trace project: --mlp takes a positive number\n";
      return kExitUsage;
    }
    o.mlp = *mlp;
  }
  if (p.Given("overlap")) {
    auto overlap = p.GetDouble("overlap");
    if (!overlap.ok() || !(*overlap >= 0 && *overlap <= 1)) {
      std::cerr << "tiergym trace project: --overlap takes a number in [0, 1]\n";
      return kExitUsage;
    }
    o.overlap = *overlap;
  }
  if (p.Given("prior")) {
    absl::Status s = ParseProjectionPrior(p.Get("prior"), &o.prior);
    if (!s.ok()) {
      std::cerr << "tiergym trace project: --prior: " << s.message() << "\n";
      return kExitUsage;
    }
  }
  const std::string tails = p.Get("tails");
  if (tails != "apart" && tails != "in-window") {
    std::cerr << "tiergym trace project: --tails is apart or in-window, not '" << tails << "'\n";
    return kExitUsage;
  }
  o.separate_tails = tails == "apart";
  o.cpu_time = !p.Flag("wall-time");
  if (p.Given("misses-per-sample")) {
    auto m = p.GetDouble("misses-per-sample");
    if (!m.ok()) return Fail(m.status());
    o.misses_per_sample = *m;
  }
  if (p.Given("threads")) {
    auto t = p.GetUint64("threads");
    if (!t.ok()) return Fail(t.status());
    o.threads = static_cast<int>(*t);
  }
  const std::string fmt = p.Get("format");
  if (fmt != "csv" && fmt != "bin") {
    std::cerr << "tiergym trace project: --format is csv or bin, not '" << fmt << "'\n";
    return kExitUsage;
  }
  auto traces = ProjectTrace(*recorded, *machine, o);
  if (!traces.ok()) return Fail(traces.status());
  // Written into a temporary directory first and renamed: a failure never leaves a
  // half-written profile at OUT.
  const fs::path out = p.Positional("OUT");
  if (absl::Status s = CheckReplaceableProfile(out, *traces); !s.ok()) return Fail(s);
  const fs::path tmp = out.string() + ".partial";
  std::error_code ec;
  fs::remove_all(tmp, ec);
  fs::create_directories(tmp, ec);
  if (ec) {
    return Fail(
        absl::PermissionDeniedError(StrCat("cannot create ", tmp.string(), ": ", ec.message())));
  }
  for (const Trace& t : *traces) {
    const fs::path file = tmp / (t.metadata().device + (fmt == "bin" ? ".tgt" : ".csv"));
    absl::Status s =
        SaveTrace(t, file.string(), fmt == "bin" ? TraceFormat::kBinary : TraceFormat::kCsv);
    if (!s.ok()) {
      fs::remove_all(tmp, ec);
      return Fail(s);
    }
  }
  if (fs::exists(out)) fs::remove_all(out, ec);
  fs::rename(tmp, out, ec);
  if (ec) {
    return Fail(absl::PermissionDeniedError(
        StrCat("cannot move ", tmp.string(), " to ", out.string(), ": ", ec.message())));
  }
  std::cout << "projected " << p.Positional("IN") << " (" << recorded->num_samples() << " samples, "
            << recorded->num_phases() << " phases) onto " << machine->name << ": " << out.string()
            << "\n";
  for (const Trace& t : *traces) {
    std::cout << "  " << t.metadata().device << ": runtime "
              << FixedDecimal(static_cast<double>(t.runtime_ns()) * 1e-9, 4) << " s\n";
  }
  return kExitOk;
}

}  // namespace

std::string TraceCommandsHelp() {
  return "  trace info PATH        summarise a trace or a profile directory\n"
         "  trace validate PATH    check traces against the format rules\n"
         "  trace convert IN OUT   convert between trace CSV v1 and binary (.tgt)\n"
         "  trace project IN OUT   a recorded trace -> a profile for a target machine\n"
         "  trace synth ...        generate a synthetic profile from an application model\n"
         "  trace corun ...        synthetic co-runs: applications sharing the machine\n";
}

int RunTraceCommand(const std::vector<std::string>& args) {
  const std::string usage =
      "usage: tiergym trace {info,validate,convert,project,synth,corun} ...\n\n" +
      TraceCommandsHelp() + "\nRun 'tiergym trace SUBCOMMAND --help' for its options.\n";
  if (args.empty()) {
    std::cerr << usage;
    return kExitUsage;
  }
  const std::string& sub = args[0];
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  if (sub == "info") return Info(rest);
  if (sub == "validate") return Validate(rest);
  if (sub == "convert") return Convert(rest);
  if (sub == "project") return Project(rest);
  if (sub == "synth") return synth::RunSynthCommand(rest);
  if (sub == "corun") return synth::RunCorunCommand(rest);
  if (sub == "--help" || sub == "-h" || sub == "help") {
    std::cout << usage;
    return kExitOk;
  }
  std::cerr << "tiergym trace: unknown subcommand '" << sub << "'\n\n" << usage;
  return kExitUsage;
}

}  // namespace tiergym

#include "profiler/cli/import_cli.h"

#include <algorithm>
#include <iostream>
#include <optional>

#include "profiler/mckernel/mckernel_dump.h"
#include "traces/base/args.h"
#include "traces/base/file.h"
#include "traces/base/strings.h"
#include "traces/trace_file.h"
#include "traces/trace_summary.h"

namespace tiergym::mckernel {
namespace {

constexpr int kExitOk = 0;
constexpr int kExitFailed = 1;
constexpr int kExitUsage = 2;

int UsageFailure(const absl::Status& s) {
  std::cerr << s.message() << "\n";
  return kExitUsage;
}

int Failure(const absl::Status& s) {
  std::cerr << "error: " << s.message() << "\n";
  return kExitFailed;
}

// The options that take a value, declared once for the parser and for SplitArguments().
struct ValueOption {
  const char* name;
  const char* value_name;
  const char* help;
  const char* fallback;
};
constexpr ValueOption kValueOptions[] = {
    {"output", "OUT", "the trace to write (also -o); .tgt is binary, else CSV v1", ""},
    {"device", "NAME", "the tier the whole run was placed on (required)", ""},
    {"app", "NAME", "the application; default: the EXEC of the first dump's name", ""},
    {"tsc-ghz", "F", "TSC rate in GHz (ticks per ns)", "1.4"},
    {"event", "NAME", "the sampled event", "MEM_UOPS_RETIRED:L2_MISS_LOADS"},
    {"pebs-reset", "N", "PEBS reset; default: the countdown in the first dump's name", ""},
    {"start-tsc", "TSC", "the TSC of time 0; default: the earliest TSC in the dumps", ""},
    {"maps", "PATH", "also write the mmap/munmap records as CSV (type,time_ns,tid,start,length)",
     ""},
    {"format", "csv|bin", "output format; default: from OUT's extension", ""},
};

// Splits the arguments into options (with their values) and dumps, so that options may
// come before, between or after the dumps (ArgParser's rest positional would take every
// argument after the first dump). -o becomes --output; after `--` everything is a dump.
void SplitArguments(const std::vector<std::string>& args, std::vector<std::string>& options,
                    std::vector<std::string>& dumps) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") {
      dumps.insert(dumps.end(), args.begin() + i + 1, args.end());
      return;
    }
    if (a.size() < 2 || a[0] != '-') {
      dumps.push_back(a);
      continue;
    }
    options.push_back(a == "-o" ? "--output" : a);
    const std::string name = options.back().substr(2);
    const bool takes_value = options.back().starts_with("--") &&
                             name.find('=') == std::string::npos &&
                             std::any_of(std::begin(kValueOptions), std::end(kValueOptions),
                                         [&](const ValueOption& o) { return name == o.name; });
    if (takes_value && i + 1 < args.size()) options.push_back(args[++i]);
  }
}

}  // namespace

int RunImportMckernelCommand(const std::vector<std::string>& args, std::string_view command) {
  const std::string cmd(command);
  std::vector<std::string> a, dump_paths;
  SplitArguments(args, a, dump_paths);

  ArgParser p(cmd,
              "Convert the PEBS dumps of one McKernel run (kernel_patches/: one dump per "
              "thread, named EXEC-PEBS-countdown-N-PEBS-buffer-B-pid-P-tid-T.dat) into one "
              "trace, CSV v1 or binary. Dumps are checked whole before anything is written.");
  p.AddRestPositional("DUMP",
                      "the dumps of one process, the thread that calls phasemark() first; "
                      "options may come before, between or after them");
  for (const ValueOption& o : kValueOptions) p.AddOption(o.name, o.value_name, o.help, o.fallback);
  p.AddFlag("spread",
            "spread each batch's samples evenly since the previous batch (time and "
            "instructions) instead of stamping them all with the batch's");
  p.SetEpilog(
      "Time 0 is the earliest TSC of any record, the end row the latest; phasemarks come\n"
      "from the first dump (at the batch harvested by each phasemark() call). Samples of\n"
      "other threads take the phase in effect at their time and the first thread's\n"
      "instruction progress. Layout and rules: kernel_patches/DUMP_FORMAT.md.\n"
      "Example:\n"
      "  " +
      cmd + " lulesh-PEBS-countdown-16-*.dat --device mcdram -o profile/mcdram.tgt");
  if (std::optional<int> rc = p.ParseOrExit(a)) return *rc;
  if (absl::Status s = p.Require("output"); !s.ok()) return UsageFailure(s);
  if (absl::Status s = p.Require("device"); !s.ok()) return UsageFailure(s);
  if (dump_paths.empty()) {
    std::cerr << cmd << ": no DUMP given (see '" << cmd << " --help')\n";
    return kExitUsage;
  }

  ImportOptions options;
  options.device = p.Get("device");
  options.app = p.Get("app");
  options.event = p.Get("event");
  options.spread_within_batch = p.Flag("spread");
  auto ghz = p.GetDouble("tsc-ghz");
  if (!ghz.ok()) return UsageFailure(ghz.status());
  if (!(*ghz > 0)) {
    std::cerr << cmd << ": --tsc-ghz must be positive\n";
    return kExitUsage;
  }
  options.tsc_ghz = *ghz;
  if (p.Given("pebs-reset")) {
    auto v = p.GetUint64("pebs-reset");
    if (!v.ok()) return UsageFailure(v.status());
    options.pebs_reset = *v;
  }
  if (p.Given("start-tsc")) {
    auto v = p.GetUint64("start-tsc");
    if (!v.ok()) return UsageFailure(v.status());
    options.start_tsc = *v;
  }
  const std::string out = p.Get("output");
  TraceFormat format = FormatForPath(out);
  if (p.Given("format")) {
    if (p.Get("format") == "csv") {
      format = TraceFormat::kCsv;
    } else if (p.Get("format") == "bin") {
      format = TraceFormat::kBinary;
    } else {
      std::cerr << cmd << ": --format is csv or bin, not '" << p.Get("format") << "'\n";
      return kExitUsage;
    }
  }

  std::vector<Dump> dumps;
  for (const std::string& path : dump_paths) {
    auto dump = ReadDump(path);
    if (!dump.ok()) return Failure(dump.status());
    dumps.push_back(*std::move(dump));
  }
  auto run = ImportDumps(dumps, options);
  if (!run.ok()) return Failure(run.status());
  if (absl::Status s = SaveTrace(run->trace, out, format); !s.ok()) return Failure(s);
  if (p.Given("maps")) {
    if (absl::Status s = WriteFileAtomically(p.Get("maps"), FormatVmaCsv(run->vmas)); !s.ok()) {
      return Failure(s);
    }
  }

  const Trace& t = run->trace;
  std::cout << "wrote " << out << " (" << (format == TraceFormat::kBinary ? "binary" : "CSV v1")
            << "): " << t.num_samples() << " samples from " << dumps.size() << " dump(s), "
            << t.num_phases() << " phase(s), runtime " << FormatDuration(t.runtime_ns()) << "; app "
            << (t.metadata().app.empty() ? "(not given)" : t.metadata().app) << ", device "
            << t.metadata().device << ", TSC " << options.tsc_ghz << " GHz\n";
  if (p.Given("maps")) {
    std::cout << "wrote " << p.Get("maps") << ": " << run->vmas.size()
              << " mmap/munmap record(s)\n";
  }
  return kExitOk;
}

}  // namespace tiergym::mckernel

#include "profiler/cli/prof_cli.h"

#include <sys/wait.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <iostream>
#include <optional>
#include <thread>

#include "absl/strings/str_join.h"
#include "profiler/contentiousness.h"
#include "profiler/event_presets.h"
#include "profiler/interference_generator.h"
#include "profiler/launcher.h"
#include "profiler/recorder.h"
#include "profiler/run_placed.h"
#include "profiler/sweep.h"
#include "traces/base/args.h"
#include "traces/base/exit_status.h"
#include "traces/base/status_macros.h"
#include "traces/base/strings.h"
#include "traces/machine.h"
#include "traces/profile.h"
#include "traces/projection.h"
#include "traces/trace_file.h"

namespace tiergym::prof {
namespace {

// The NUMA node of --device on --machine, or of --numa-node, into `node` (-1: unbound).
absl::Status ResolveNode(const ArgParser& p, std::string* device, int* node) {
  *device = p.Get("device");
  *node = -1;
  if (p.Given("numa-node")) {
    TG_ASSIGN_OR_RETURN(int64_t n, p.GetInt64("numa-node"));
    if (n < 0) return absl::InvalidArgumentError("--numa-node must be >= 0");
    *node = static_cast<int>(n);
  }
  if (p.Given("machine")) {
    if (device->empty()) {
      return absl::InvalidArgumentError("--machine needs --device NAME (one of its tiers)");
    }
    auto machine = LoadMachine(p.Get("machine"));
    if (!machine.ok()) return machine.status();
    const TierSpec* tier = machine->Find(*device);
    if (tier == nullptr) {
      const std::string names = absl::StrJoin(
          machine->tiers, ", ", [](std::string* out, const TierSpec& t) { out->append(t.name); });
      return absl::InvalidArgumentError(
          StrCat("machine ", machine->name, " has no tier '", *device, "' (tiers: ", names, ")"));
    }
    if (*node < 0) {
      if (tier->numa_node < 0) {
        return absl::InvalidArgumentError(
            StrCat("tier ", *device, " of machine ", machine->name,
                   " names no NUMA node (numa_node -1); give --numa-node N"));
      }
      *node = tier->numa_node;
    }
  }
  if (device->empty()) {
    if (*node < 0) {
      return absl::InvalidArgumentError(
          "name the tier the run is placed on: --device NAME [--machine knl|FILE] and/or "
          "--numa-node N");
    }
    *device = StrCat("node", *node);
  }
  return absl::OkStatus();
}

std::atomic<bool> g_interrupted{false};
void OnInterrupt(int) { g_interrupted = true; }

// The interference options every command that runs the generator takes.
void AddInterferenceOptions(ArgParser& p) {
  p.AddOption("threads", "N", "generator threads", "1");
  p.AddOption("cpus", "LIST", "pin the threads to these CPUs (e.g. 0-3,8)");
  p.AddOption("cpu-node", "N", "run the threads on the CPUs of NUMA node N");
  p.AddOption("mem-node", "N", "bind the buffers to NUMA node N (the target's memory)");
  p.AddOption("buffer-mb", "MB", "buffer per thread", "64");
  p.AddOption("slice-us", "MICROSECONDS", "duty-cycle slice", "1000");
}

absl::Status ReadInterferenceOptions(const ArgParser& p, InterferenceOptions* o) {
  TG_ASSIGN_OR_RETURN(uint64_t threads, p.GetUint64("threads"));
  TG_ASSIGN_OR_RETURN(uint64_t buffer_mb, p.GetUint64("buffer-mb"));
  TG_ASSIGN_OR_RETURN(uint64_t slice_us, p.GetUint64("slice-us"));
  o->threads = static_cast<int>(threads);
  o->buffer_bytes = buffer_mb << 20;
  o->slice_us = static_cast<uint32_t>(slice_us);
  if (p.Given("cpus")) {
    TG_ASSIGN_OR_RETURN(o->cpus, ParseCpuList(p.Get("cpus")));
  }
  if (p.Given("cpu-node")) {
    TG_ASSIGN_OR_RETURN(int64_t n, p.GetInt64("cpu-node"));
    o->cpu_node = static_cast<int>(n);
  }
  if (p.Given("mem-node")) {
    TG_ASSIGN_OR_RETURN(int64_t n, p.GetInt64("mem-node"));
    o->mem_node = static_cast<int>(n);
  }
  return absl::OkStatus();
}

}  // namespace

int RunInterfereCommand(const std::vector<std::string>& args) {
  ArgParser p("tiergym-prof interfere",
              "Stream memory at a target bandwidth and read share (the STREAM-derived "
              "interferer of Zacarias et al.): reads, and non-temporal stores for the write "
              "part, held at the target by duty-cycle throttling. Prints the achieved "
              "bandwidth every second.");
  p.AddOption("gbps", "GB/S", "target bandwidth over all threads (0: as fast as possible)", "0");
  p.AddOption("read-pct", "PCT", "share of the bytes that are reads, 50..100", "100");
  p.AddOption("duration", "SECONDS", "stop after this long (0: at SIGINT/SIGTERM)", "0");
  AddInterferenceOptions(p);
  p.AddFlag("json", "print one JSON object at the end instead of the summary line");
  p.SetEpilog(
      "The achieved bandwidth is what the generator moved (bytes read + bytes written) per\n"
      "second of wall time. JSON output: {seconds, gbps, read_share, read_bytes, write_bytes}.");
  if (std::optional<int> rc = p.ParseOrExit(args)) return *rc;
  InterferenceOptions o;
  auto gbps = p.GetDouble("gbps");
  auto read_pct = p.GetUint64("read-pct");
  auto duration = p.GetDouble("duration");
  for (const absl::Status& s :
       {gbps.status(), read_pct.status(), duration.status(), ReadInterferenceOptions(p, &o)}) {
    if (!s.ok()) return UsageFail(s);
  }
  o.target_gbps = *gbps;
  o.read_pct = static_cast<int>(*read_pct);
  auto gen = InterferenceGenerator::Start(o);
  if (!gen.ok()) return Fail(gen.status());
  g_interrupted = false;
  std::signal(SIGINT, OnInterrupt);
  std::signal(SIGTERM, OnInterrupt);
  const bool json_out = p.Flag("json");
  InterferenceStats last;
  double next_report = 1.0;
  while (!g_interrupted) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    const InterferenceStats now = (*gen)->Stats();
    if (*duration > 0 && now.seconds >= *duration) break;
    if (now.seconds >= next_report) {
      InterferenceStats interval;
      interval.seconds = now.seconds - last.seconds;
      interval.read_bytes = now.read_bytes - last.read_bytes;
      interval.write_bytes = now.write_bytes - last.write_bytes;
      if (!json_out) std::cout << FormatInterferenceLine(interval, now.seconds) << std::endl;
      last = now;
      next_report += 1.0;
    }
  }
  (*gen)->Stop();
  const InterferenceStats total = (*gen)->Stats();
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
  if (json_out) {
    std::cout << "{\"seconds\": " << total.seconds << ", \"gbps\": " << total.gbps()
              << ", \"read_share\": " << total.read_share()
              << ", \"read_bytes\": " << total.read_bytes
              << ", \"write_bytes\": " << total.write_bytes << "}\n";
  } else {
    std::cout << "total: " << FormatInterferenceLine(total, total.seconds) << " (target "
              << (o.target_gbps > 0 ? FixedDecimal(o.target_gbps, 3) + " GB/s"
                                    : std::string("maximum"))
              << ", read " << o.read_pct << " %)\n";
  }
  return kExitOk;
}

int RunContentiousnessCommand(const std::vector<std::string>& args) {
  ArgParser p("tiergym-prof contentiousness",
              "Run CMD solo and measure the read and write bandwidth it puts on the memory "
              "from the uncore memory-controller CAS counters (bytes = 64 x CAS; on KNL the "
              "MCDRAM EDC counters too); append a row to apps.csv.");
  p.AddOption("app", "NAME", "the row's app name (default: the command's file name)");
  p.AddOption("apps", "apps.csv", "append the row to this file (default: print only)");
  p.AddOption("numa-node", "N", "bind the command's memory to NUMA node N");
  p.AddOption("cpu-node", "N", "run the command on the CPUs of NUMA node N");
  p.AddRestPositional("CMD", "the command and its arguments, after --");
  p.SetEpilog(
      "Needs uncore PMUs (libpfm4: knl_unc_imc*, knl_unc_edc_eclk*, skx_unc_imc*, icx_unc_imc*,\n"
      "spr_unc_imc*) and root or kernel.perf_event_paranoid <= 0; without them it stops with\n"
      "\"skipped:\" and the reason (exit status 1). Run on an otherwise idle node: the\n"
      "counters see all traffic.");
  if (std::optional<int> rc = p.ParseOrExit(args)) return *rc;
  LaunchOptions launch;
  launch.argv = p.Rest();
  if (launch.argv.empty()) {
    return UsageFail(absl::InvalidArgumentError(
        "tiergym-prof contentiousness: no command (give it after --; see --help)"));
  }
  for (const char* name : {"numa-node", "cpu-node"}) {
    if (!p.Given(name)) continue;
    auto n = p.GetInt64(name);
    if (!n.ok()) return UsageFail(n.status());
    (std::string(name) == "numa-node" ? launch.membind_node : launch.cpu_node) =
        static_cast<int>(*n);
  }
  const std::string app =
      p.Given("app") ? p.Get("app") : std::filesystem::path(launch.argv[0]).filename().string();
  auto r = MeasureContentiousness(launch);
  if (!r.ok()) {
    if (r.status().code() == absl::StatusCode::kUnimplemented) {
      std::cerr << "skipped: " << r.status().message() << "\n";
      return kExitFailed;
    }
    return Fail(r.status());
  }
  const std::string boxes = absl::StrJoin(r->boxes, " ");
  std::cout << app << ": read " << FixedDecimal(r->read_gbps(), 4) << " GB/s, write "
            << FixedDecimal(r->write_gbps(), 4) << " GB/s over "
            << FixedDecimal(static_cast<double>(r->runtime_ns) / 1e9, 3) << " s ("
            << DescribeWaitStatus(r->wait_status) << "); CAS read " << r->read_cas << ", write "
            << r->write_cas;
  if (r->mcdram_read + r->mcdram_write > 0) {
    std::cout << " (MCDRAM read " << r->mcdram_read << ", write " << r->mcdram_write << ")";
  }
  std::cout << "\n  counters: " << boxes << "\n";
  if (p.Given("apps")) {
    absl::Status s = AppendAppsCsv(p.Get("apps"), app, r->read_gbps(), r->write_gbps());
    if (!s.ok()) return Fail(s);
    std::cout << "  appended to " << p.Get("apps") << "\n";
  }
  const int ws = r->wait_status;
  return (WIFEXITED(ws) && WEXITSTATUS(ws) == 0) ? kExitOk : kExitFailed;
}

int RunSweepCommand(const std::vector<std::string>& raw_args) {
  ArgParser p(
      "tiergym-prof sweep",
      "Measure CMD's sensitivity curves (Zacarias et al.): its runtime solo, then under the "
      "interference generator at LEVELS bandwidths from 10 % to 100 % of the "
      "generator's maximum, for each read share; writes curves.csv (normalized "
      "performance = solo runtime / runtime). Resumable: run it again to continue.");
  p.AddOption("output", "curves.csv", "curves file to append to (-o)");
  p.AddOption("app", "NAME", "the curves' app name (default: the command's file name)");
  p.AddOption("levels", "N", "bandwidth levels per read share", "16");
  p.AddOption("read-pcts", "LIST",
              "read shares in percent, e.g. 50,75,100 (default 50..100 step 5)");
  p.AddOption("solo-repeats", "N", "solo runs averaged into the reference", "3");
  p.AddOption("repeats", "N", "measurements per point", "1");
  p.AddOption("max-gbps", "GB/S", "the generator's maximum (default: measured per read share)");
  p.AddOption("calibrate-s", "SECONDS", "length of each maximum measurement", "1");
  AddInterferenceOptions(p);
  p.AddOption("target-mem-node", "N", "bind the target's memory to NUMA node N");
  p.AddOption("target-cpu-node", "N", "run the target on the CPUs of NUMA node N");
  p.AddOption("target-cpus", "LIST", "run the target on these CPUs");
  p.AddFlag("show-output", "let the target's standard output through (default: discarded)");
  p.AddFlag("no-progress", "no progress bar on stderr");
  p.AddRestPositional("CMD", "the target command and its arguments, after --");
  p.SetEpilog(
      "Zacarias et al.'s setting: the interferer on the other socket (--cpu-node 1) streams\n"
      "to the target's memory (--mem-node 0 --target-mem-node 0 --target-cpu-node 0). State\n"
      "beside the output: OUT.state.json (solo runtimes, calibrated maxima).");
  const std::vector<std::string> args = ExpandShortOptions(raw_args);
  if (std::optional<int> rc = p.ParseOrExit(args)) return *rc;
  SweepOptions o;
  o.command = p.Rest();
  if (o.command.empty()) {
    return UsageFail(absl::InvalidArgumentError(
        "tiergym-prof sweep: no target command (give it after --; see --help)"));
  }
  if (absl::Status s = p.Require("output"); !s.ok()) return UsageFail(s);
  o.output = p.Get("output");
  o.app = p.Get("app");
  o.show_target_output = p.Flag("show-output");
  o.progress = !p.Flag("no-progress");
  auto levels = p.GetUint64("levels");
  auto solo = p.GetUint64("solo-repeats");
  auto repeats = p.GetUint64("repeats");
  auto calibrate = p.GetDouble("calibrate-s");
  for (const absl::Status& s : {levels.status(), solo.status(), repeats.status(),
                                calibrate.status(), ReadInterferenceOptions(p, &o.interferer)}) {
    if (!s.ok()) return UsageFail(s);
  }
  o.levels = static_cast<int>(*levels);
  o.solo_repeats = static_cast<int>(*solo);
  o.repeats = static_cast<int>(*repeats);
  o.calibrate_seconds = *calibrate;
  if (p.Given("max-gbps")) {
    auto max = p.GetDouble("max-gbps");
    if (!max.ok() || *max <= 0) {
      return UsageFail(max.ok() ? absl::InvalidArgumentError("--max-gbps must be positive")
                                : max.status());
    }
    o.max_gbps = *max;
  }
  if (p.Given("read-pcts")) {
    auto list = ParseCpuList(p.Get("read-pcts"));  // the same "N,N-M" syntax
    if (!list.ok())
      return UsageFail(absl::InvalidArgumentError("--read-pcts: a list like 50,75,100"));
    o.read_pcts = *list;
  }
  for (const char* name : {"target-mem-node", "target-cpu-node"}) {
    if (!p.Given(name)) continue;
    auto n = p.GetInt64(name);
    if (!n.ok()) return UsageFail(n.status());
    (std::string(name) == "target-mem-node" ? o.target_mem_node : o.target_cpu_node) =
        static_cast<int>(*n);
  }
  if (p.Given("target-cpus")) {
    auto cpus = ParseCpuList(p.Get("target-cpus"));
    if (!cpus.ok()) return UsageFail(cpus.status());
    o.target_cpus = *cpus;
  }
  auto result = RunSweep(o);
  if (!result.ok()) return Fail(result.status());
  std::cout << "sweep " << o.output << ": solo " << FixedDecimal(result->solo_mean_ns / 1e9, 4)
            << " s, " << result->points_measured << " points measured, " << result->points_skipped
            << " already there\n";
  return kExitOk;
}

int RunPlacedCommand(const std::vector<std::string>& args) {
  ArgParser p("tiergym-prof run-placed",
              "Run CMD with a placement applied (pages of the placement's ranges moved to "
              "their tiers' NUMA nodes with move_pages, re-applied every interval and, with a "
              "schedule, when a phase begins), measure its runtime and append it to a "
              "measured-runs CSV.");
  p.AddOption("placement", "P.json", "placement (ranges; the default tier backs the rest)");
  p.AddOption("schedule", "S.json", "placements that take over at given phases");
  p.AddOption("machine", "knl|FILE", "machine description: the NUMA node of each tier");
  p.AddRepeatedOption("tier-node", "TIER=N", "NUMA node of a tier (adds to / overrides --machine)");
  p.AddOption("runs", "runs.csv", "append the run to this measured-runs CSV");
  p.AddOption("name", "NAME", "the run's name (default: the placement's file name)");
  p.AddOption("interval-ms", "MS", "how often the placement is applied again", "50");
  p.AddOption("phasemark-lib", "PATH", "the library whose phasemark() marks phases");
  p.AddFlag("aslr", "keep address-space randomisation (default: off, as when recording)");
  p.AddRestPositional("CMD", "the command and its arguments, after --");
  p.SetEpilog(
      "Schedule JSON: {\"steps\": [{\"from_phase\": 3, \"placement\": \"solve.json\"}, ...]}\n"
      "(from_phase increasing, paths relative to the schedule; --placement applies before\n"
      "the first step). On a single-node machine every tier maps to node 0: the calls are\n"
      "made and counted, and no page moves.");
  if (std::optional<int> rc = p.ParseOrExit(args)) return *rc;
  PlacedRunOptions o;
  o.command = p.Rest();
  if (o.command.empty()) {
    return UsageFail(absl::InvalidArgumentError(
        "tiergym-prof run-placed: no command to run (give it after --; see --help)"));
  }
  if (absl::Status s = p.Require("placement"); !s.ok()) return UsageFail(s);
  o.placement_path = p.Get("placement");
  o.schedule_path = p.Get("schedule");
  o.runs_csv = p.Get("runs");
  o.run_name = p.Get("name");
  o.keep_aslr = p.Flag("aslr");
  o.phasemark_lib = p.Get("phasemark-lib");
  auto interval = p.GetUint64("interval-ms");
  if (!interval.ok() || *interval == 0) {
    return UsageFail(interval.ok() ? absl::InvalidArgumentError("--interval-ms must be positive")
                                   : interval.status());
  }
  o.interval_ms = static_cast<uint32_t>(*interval);
  if (p.Given("machine")) {
    auto machine = LoadMachine(p.Get("machine"));
    if (!machine.ok()) return Fail(machine.status());
    for (const TierSpec& t : machine->tiers) {
      if (t.numa_node >= 0) o.tier_nodes[t.name] = t.numa_node;
    }
  }
  for (const std::string& spec : p.GetAll("tier-node")) {
    const size_t eq = spec.find('=');
    int node = -1;
    if (eq == std::string::npos || eq == 0 ||
        std::sscanf(spec.c_str() + eq + 1, "%d", &node) != 1 || node < 0) {
      return UsageFail(absl::InvalidArgumentError(
          StrCat("--tier-node '", spec, "' is not TIER=N (N a NUMA node)")));
    }
    o.tier_nodes[spec.substr(0, eq)] = node;
  }
  auto result = RunPlaced(o);
  if (!result.ok()) return Fail(result.status());
  const PlacedRunResult& r = *result;
  std::cout << "run " << r.run_name << ": runtime "
            << FixedDecimal(static_cast<double>(r.runtime_ns) / 1e9, 3) << " s (" << r.runtime_ns
            << " ns), " << DescribeWaitStatus(r.wait_status) << "\n"
            << "  placement applied " << r.applications << " times: pages " << r.counts.pages
            << ", moved " << r.counts.moved << ", already in place " << r.counts.in_place
            << ", not yet touched " << r.counts.absent << ", refused " << r.counts.failed << "\n";
  if (!o.schedule_path.empty()) {
    std::cout << "  phasemarks " << r.phases << ", schedule steps applied " << r.steps_applied
              << "\n";
  }
  if (!o.runs_csv.empty()) std::cout << "  appended to " << o.runs_csv << "\n";
  const int ws = r.wait_status;
  return (WIFEXITED(ws) && WEXITSTATUS(ws) == 0) ? kExitOk : kExitFailed;
}

std::vector<std::string> ExpandShortOptions(const std::vector<std::string>& args) {
  std::vector<std::string> out;
  bool done = false;
  for (const std::string& a : args) {
    if (a == "--") done = true;
    out.push_back(!done && a == "-o" ? std::string("--output") : a);
  }
  return out;
}

std::string ProfCommandsHelp() {
  return "  profile          a command -> a per-tier profile for a machine, ready to serve\n"
         "  record           record a sampled memory trace of a command (PEBS, software, timer)\n"
         "  interfere        generate memory bandwidth at a set level and read share\n"
         "  contentiousness  a command's solo read/write bandwidth from uncore CAS counters\n"
         "  sweep            a command's sensitivity curves under interference (curves.csv)\n"
         "  run-placed       run a command with a placement applied, append to runs.csv\n"
         "  import-mckernel  convert McKernel PEBS dumps into a trace\n";
}

int RunRecordCommand(const std::vector<std::string>& raw_args) {
  ArgParser p("tiergym-prof record",
              "Run CMD with all its memory on one tier and record its sampled memory "
              "accesses with phasemarks, as a trace CSV v1 (or binary) file; the address "
              "space layout goes beside it in OUT.mmaps.");
  p.AddOption("output", "OUT", "trace file to write (-o); .tgt means binary unless --format");
  p.AddOption("format", "csv|bin", "trace format (default from the extension of OUT)");
  p.AddOption("device", "NAME", "the tier the run is placed on (the trace's device)");
  p.AddOption("machine", "knl|FILE", "machine description giving the NUMA node of --device");
  p.AddOption("numa-node", "N", "bind the run's memory to NUMA node N (overrides --machine)");
  p.AddOption("cpu-node", "N", "run the command's threads on the CPUs of NUMA node N");
  p.AddOption("app", "NAME", "the trace's app name (default: the command's file name)");
  p.AddOption("backend", "pebs|software|timer|auto",
              "how to sample: PEBS; page faults (first touches, writes); CPU-time ticks decoded "
              "into reads and writes (timer, no PMU)",
              "auto");
  p.AddOption("event", "NAME", "libpfm4 PEBS event (default: the CPU model's preset)");
  p.AddOption("period", "N",
              "sample period: PEBS reset (default 2003), page faults (1), ns of CPU time "
              "(timer, default 100000)");
  p.AddOption("precise", "N", "precise_ip asked for PEBS (1..3)", "2");
  p.AddOption("ldlat", "CYCLES", "latency threshold of load-latency presets (SPR)", "128");
  p.AddRepeatedOption("phasemark-at", "SYMBOL",
                      "also mark a phase at each entry of SYMBOL (or PATH:SYMBOL)");
  p.AddOption("phasemark-lib", "PATH|none",
              "the library whose phasemark() is probed (default: the one CMD loads)");
  p.AddOption("mmap-pages", "N", "ring buffer data pages per CPU (power of two)", "512");
  p.AddFlag("no-inherit", "follow the first thread only (kernels before 6.12)");
  p.AddFlag("aslr", "keep address-space randomisation (default: off, for comparable runs)");
  p.AddOption("agent", "PATH", "software backend agent (default: ../lib/libtiergym_swsample.so)");
  p.AddOption("rearm-us", "MICROSECONDS",
              "software backend: write-protect interval (0: first touches only, no agent)",
              "10000");
  p.AddFlag("list-presets", "print the PEBS presets and the detected CPU's, then exit");
  p.AddRestPositional("CMD", "the command and its arguments, after --");
  p.SetEpilog(
      "Examples:\n"
      "  tiergym-prof record --device ddr --machine knl -o prof/ddr.csv -- ./app\n"
      "  tiergym-prof record --device hbm --numa-node 1 -o prof/hbm.csv -- ./app\n"
      "  tiergym-prof record --backend software --device ddr --numa-node 0 -o t.csv -- ./app\n"
      "Exit status 1 when the recording failed: the command ended by a signal or with a\n"
      "non-zero status, or its system calls failed with EFAULT (the trace is still written).");
  const std::vector<std::string> args = ExpandShortOptions(raw_args);
  if (std::optional<int> rc = p.ParseOrExit(args)) return *rc;
  if (p.Flag("list-presets")) {
    for (const EventPreset& e : EventPresets()) {
      std::cout << e.pmu << "\t" << e.event << (e.load_latency ? ":ldlat=N" : "") << "\t" << e.model
                << "\n";
    }
    auto pmu = ActiveCorePmu();
    std::cout << "this CPU: " << (pmu.ok() ? *pmu : std::string(pmu.status().message())) << "\n";
    return kExitOk;
  }
  RecordOptions o;
  o.command = p.Rest();
  if (o.command.empty())
    return UsageFail(absl::InvalidArgumentError(
        "tiergym-prof record: no command to record (give it after --; see --help)"));
  if (absl::Status s = p.Require("output"); !s.ok()) return UsageFail(s);
  o.output = p.Get("output");
  o.format = FormatForPath(o.output);
  if (p.Given("format")) {
    const std::string f = p.Get("format");
    if (f == "csv")
      o.format = TraceFormat::kCsv;
    else if (f == "bin")
      o.format = TraceFormat::kBinary;
    else
      return UsageFail(absl::InvalidArgumentError("--format must be csv or bin"));
  }
  absl::Status s = ResolveNode(p, &o.device, &o.numa_node);
  if (!s.ok()) return UsageFail(s);
  auto backend = ParseBackend(p.Get("backend"));
  if (!backend.ok()) return UsageFail(backend.status());
  o.backend = *backend;
  o.app = p.Get("app");
  o.event = p.Get("event");
  o.phasemark_at = p.GetAll("phasemark-at");
  o.phasemark_lib = p.Get("phasemark-lib");
  o.no_inherit = p.Flag("no-inherit");
  o.keep_aslr = p.Flag("aslr");
  o.agent_path = p.Get("agent");
  auto period = p.Given("period") ? p.GetUint64("period") : absl::StatusOr<uint64_t>(0);
  auto precise = p.GetUint64("precise");
  auto ldlat = p.GetUint64("ldlat");
  auto pages = p.GetUint64("mmap-pages");
  auto rearm = p.GetUint64("rearm-us");
  for (const auto* v : {&period, &precise, &ldlat, &pages, &rearm}) {
    if (!v->ok()) return UsageFail(v->status());
  }
  if (p.Given("period") && *period == 0)
    return UsageFail(absl::InvalidArgumentError("--period must be positive"));
  if (*precise > 3) return UsageFail(absl::InvalidArgumentError("--precise must be 0..3"));
  if (*pages == 0 || (*pages & (*pages - 1)) != 0) {
    return UsageFail(absl::InvalidArgumentError("--mmap-pages must be a power of two"));
  }
  o.period = *period;
  o.precise_ip = static_cast<int>(*precise);
  o.ldlat_cycles = static_cast<uint32_t>(*ldlat);
  o.ring_data_pages = *pages;
  if (*rearm > 10'000'000) {
    return UsageFail(absl::InvalidArgumentError("--rearm-us must be at most 10000000 (10 s)"));
  }
  o.rearm_interval_us = static_cast<uint32_t>(*rearm);
  if (p.Given("cpu-node")) {
    auto n = p.GetInt64("cpu-node");
    if (!n.ok()) return UsageFail(n.status());
    o.cpu_node = static_cast<int>(*n);
  }
  auto summary = RecordCommand(o);
  if (!summary.ok()) return Fail(summary.status());
  std::cerr << FormatRecordSummary(*summary);
  return summary->failure.empty() ? kExitOk : kExitFailed;
}

int RunProfileCommand(const std::vector<std::string>& raw_args) {
  namespace fs = std::filesystem;
  ArgParser p("tiergym-prof profile",
              "From a program to an environment in one command: record CMD (unmodified, on "
              "this machine's memory), project the recording onto the target machine's tiers "
              "(traces/PROJECTION.md), check the profile and print how to serve it.");
  p.AddOption("machine", "NAME|JSON", "the target machine (two tiers or more)", "xeonmax");
  p.AddOption("out", "DIR",
              "the directory to write (must not exist): DIR/profile/<tier>.csv, "
              "the recording in DIR/recording/");
  p.AddOption("app", "NAME", "the profile's app name (default: the command's file name)");
  p.AddOption("backend", "timer|software|pebs|auto", "how to record (tiergym-prof record)",
              "timer");
  p.AddOption("period", "N", "sample period (record --period)");
  p.AddRepeatedOption("phasemark-at", "SYMBOL",
                      "mark a phase at each entry of SYMBOL (or PATH:SYMBOL), e.g. the "
                      "program's timestep function");
  p.AddOption("mlp", "N",
              "projection: outstanding misses per thread (default: averaged over the prior, "
              "traces/PROJECTION.md)");
  p.AddOption("overlap", "F",
              "projection: overlap of compute and memory time, 0..1 (default: averaged over "
              "the prior)");
  p.AddRestPositional("CMD", "the command and its arguments, after --");
  p.SetEpilog(
      "Example:\n"
      "  tiergym-prof profile --machine xeonmax --out prof/melt \\\n"
      "      --phasemark-at /lib/x86_64-linux-gnu/liblammps.so.0:_ZN9LAMMPS_NS6Verlet3runEi \\\n"
      "      -- lmp -in in.melt -log none\n"
      "Exit status 0 with a profile written; 1 (nothing left at DIR) when the command, a\n"
      "symbol, the machine or the recording does not allow one; 2 on a usage error.");
  const std::vector<std::string> args = ExpandShortOptions(raw_args);
  if (std::optional<int> rc = p.ParseOrExit(args)) return *rc;
  if (p.Rest().empty()) {
    return UsageFail(absl::InvalidArgumentError(
        "tiergym-prof profile: no command to record (give it after --; see --help)"));
  }
  if (absl::Status s = p.Require("out"); !s.ok()) return UsageFail(s);
  auto machine = LoadMachine(p.Get("machine"));
  if (!machine.ok()) return Fail(machine.status());
  if (machine->tiers.size() < 2) {
    return Fail(absl::InvalidArgumentError(
        StrCat("machine '", machine->name,
               "' has one tier: an environment places data "
               "between tiers; give --machine a machine with two or more (knl, disagg, "
               "xeonmax, or a machine JSON, traces/SYNTH.md)")));
  }
  const fs::path out = p.Get("out");
  if (fs::exists(out)) {
    return Fail(absl::AlreadyExistsError(
        StrCat(out.string(), " exists: remove it or choose another --out")));
  }
  auto backend = ParseBackend(p.Get("backend"));
  if (!backend.ok()) return UsageFail(backend.status());
  ProjectionOptions po;
  if (p.Given("mlp")) {
    auto mlp = p.GetDouble("mlp");
    if (!mlp.ok() || !(*mlp > 0)) {
      return UsageFail(absl::InvalidArgumentError("--mlp takes a positive number"));
    }
    po.mlp = *mlp;
  }
  if (p.Given("overlap")) {
    auto overlap = p.GetDouble("overlap");
    if (!overlap.ok() || !(*overlap >= 0 && *overlap <= 1)) {
      return UsageFail(absl::InvalidArgumentError("--overlap takes a number in [0, 1]"));
    }
    po.overlap = *overlap;
  }

  // Everything goes to DIR.partial first, renamed to DIR once the profile has loaded: a
  // failure leaves nothing that looks like a profile.
  const fs::path partial = out.string() + ".partial";
  std::error_code ec;
  fs::remove_all(partial, ec);
  fs::create_directories(partial / "recording", ec);
  if (ec) {
    return Fail(absl::PermissionDeniedError(
        StrCat("cannot create ", (partial / "recording").string(), ": ", ec.message())));
  }
  auto fail = [&](const absl::Status& s) {
    fs::remove_all(partial, ec);
    std::cerr << "nothing written at " << out.string() << "\n";
    return Fail(s);
  };

  RecordOptions o;
  o.command = p.Rest();
  o.backend = *backend;
  o.device = machine->tiers[0].name;
  o.output = (partial / "recording" / (o.device + ".csv")).string();
  o.app = p.Get("app");
  o.phasemark_at = p.GetAll("phasemark-at");
  if (p.Given("period")) {
    auto period = p.GetUint64("period");
    if (!period.ok() || *period == 0) {
      return UsageFail(absl::InvalidArgumentError("--period must be a positive integer"));
    }
    o.period = *period;
  }
  std::cerr << "recording " << absl::StrJoin(o.command, " ") << " ...\n";
  auto summary = RecordCommand(o);
  if (!summary.ok()) return fail(summary.status());
  std::cerr << FormatRecordSummary(*summary);
  if (!summary->failure.empty()) {
    return fail(absl::FailedPreconditionError(
        StrCat("the recording failed: ", summary->failure,
               ". Make the command run to completion alone first (its arguments, its input files, "
               "its working directory)")));
  }
  auto recorded = LoadTrace(o.output);
  if (!recorded.ok()) return fail(recorded.status());
  if (recorded->num_samples() == 0) {
    return fail(absl::FailedPreconditionError(
        "the recording has no samples: the command ran too briefly or touched too little "
        "memory; record a longer run (a larger input) or use a smaller --period"));
  }
  auto traces = ProjectTrace(*recorded, *machine, po);
  if (!traces.ok()) return fail(traces.status());
  fs::create_directories(partial / "profile", ec);
  for (const Trace& t : *traces) {
    const fs::path file = partial / "profile" / (t.metadata().device + ".csv");
    if (absl::Status s = SaveTrace(t, file.string(), TraceFormat::kCsv); !s.ok()) return fail(s);
  }
  auto profile = LoadProfile((partial / "profile").string());
  if (!profile.ok()) return fail(profile.status());
  fs::rename(partial, out, ec);
  if (ec) {
    return fail(absl::PermissionDeniedError(
        StrCat("cannot rename ", partial.string(), " to ", out.string(), ": ", ec.message())));
  }
  const std::string dir = fs::absolute(out / "profile").string();
  std::cout << "profile written: " << dir << " (" << recorded->metadata().app << ", "
            << recorded->num_phases() << " phases, " << recorded->num_samples()
            << " samples; tiers";
  for (const Trace& t : *traces) {
    std::cout << " " << t.metadata().device << " "
              << FixedDecimal(static_cast<double>(t.runtime_ns()) * 1e-9, 3) << " s";
  }
  std::cout << " on " << machine->name << ")\n"
            << "serve it:   tiergym serve --machine " << p.Get("machine") << " --profiles " << dir
            << "\n"
            << R"(in Python:  gymnasium.make("tiergym/TierPlacement-v1", machine=")"
            << p.Get("machine") << R"(", profiles=[")" << dir << "\"])\n";
  return kExitOk;
}

}  // namespace tiergym::prof

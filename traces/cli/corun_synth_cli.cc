#include "traces/cli/corun_synth_cli.h"

#include <chrono>
#include <filesystem>
#include <iostream>
#include <optional>
#include <set>

#include "traces/base/args.h"
#include "traces/base/exit_status.h"
#include "traces/base/file.h"
#include "traces/base/strings.h"
#include "traces/corun_runs.h"
#include "traces/machine.h"
#include "traces/placement.h"
#include "traces/synth/corun_synth.h"

namespace tiergym::synth {
namespace {

constexpr std::string_view kCommand = "tiergym trace corun";

// "hbm 50 %, rest ddr", "all ddr".
std::string Describe(const Placement& p) {
  if (p.fractions.empty() && p.ranges.empty()) return StrCat("all ", p.default_tier);
  std::string out;
  for (const auto& [tier, f] : p.fractions)
    StrAppend(&out, tier, " ", FixedDecimal(100 * f, 0), " %, ");
  if (!p.ranges.empty()) StrAppend(&out, p.ranges.size(), " ranges, ");
  return StrCat(out, "rest ", p.default_tier);
}

}  // namespace

int RunCorunCommand(const std::vector<std::string>& args) {
  ArgParser p(std::string(kCommand),
              "Run co-run scenarios (several applications sharing the synthetic machine's "
              "memory tiers) through the machine's time model and write their measured "
              "runtimes: OUT/coruns.csv (traces/CORUN_CSV.md), OUT/placements/<scenario>/"
              "<tenant>.json and the tenants' bandwidth per tier and phase instance, "
              "OUT/bandwidth.csv. The ground truth never uses an estimator "
              "(traces/SYNTH.md, \"Co-runs\").");
  p.AddOption("machine", "knl|disagg", "machine whose bundled scenarios to run", "knl");
  p.AddRepeatedOption("scenario", "NAME", "run only this bundled scenario (repeatable)");
  p.AddOption("seed", "N", "seed of the runs' noise", "1");
  p.AddOption("chunks", "K", "chunks per phase instance of the time model", "200");
  p.AddOption("out", "DIR", "output directory (created if needed)");
  p.AddFlag("list", "list the machine's bundled scenarios and exit");
  p.AddFlag("quiet", "no progress on stderr");
  if (std::optional<int> rc = p.ParseOrExit(args)) return *rc;
  absl::StatusOr<Machine> machine = LoadMachine(p.Get("machine"));
  if (!machine.ok()) return Fail(machine.status(), kExitFailed, kCommand);
  absl::StatusOr<std::vector<CorunScenario>> scenarios = BundledCorunScenarios(*machine);
  if (!scenarios.ok()) return Fail(scenarios.status(), kExitFailed, kCommand);
  if (scenarios->empty()) {
    return Fail(absl::InvalidArgumentError(StrCat("machine ", machine->name,
                                                  " has no bundled co-run scenarios (knl and "
                                                  "disagg have)")),
                kExitUsage, kCommand);
  }
  if (p.Flag("list")) {
    for (const CorunScenario& s : *scenarios) {
      std::cout << s.name << ":";
      for (const CorunTenant& t : s.tenants) {
        std::cout << "  " << t.name << " (" << Describe(t.placement) << ", " << t.read_pct
                  << " % reads, from " << FixedDecimal(static_cast<double>(t.start_ns) / 1e9, 0)
                  << " s)";
      }
      std::cout << "\n";
    }
    return kExitOk;
  }
  if (absl::Status s = p.Require("out"); !s.ok()) return Fail(s, kExitUsage, kCommand);
  absl::StatusOr<uint64_t> seed = p.GetUint64("seed");
  if (!seed.ok()) return Fail(seed.status(), kExitUsage, kCommand);
  absl::StatusOr<uint64_t> chunks = p.GetUint64("chunks");
  if (!chunks.ok() || *chunks < 1 || *chunks > 100000) {
    return Fail(absl::InvalidArgumentError("--chunks must be an integer in [1, 100000]"),
                kExitUsage, kCommand);
  }
  std::set<std::string> wanted;
  for (const std::string& name : p.GetAll("scenario")) {
    bool known = false;
    for (const CorunScenario& s : *scenarios) known |= s.name == name;
    if (!known) {
      std::string names;
      for (const CorunScenario& s : *scenarios)
        StrAppend(&names, names.empty() ? "" : ", ", s.name);
      return Fail(absl::InvalidArgumentError(StrCat("--scenario: no bundled scenario \"", name,
                                                    "\" on ", machine->name, " (", names, ")")),
                  kExitUsage, kCommand);
    }
    wanted.insert(name);
  }
  CorunOptions options;
  options.seed = *seed;
  options.chunks_per_phase = static_cast<int>(*chunks);
  const std::filesystem::path out = p.Get("out");
  std::vector<CorunRun> rows;
  std::string bandwidth = "scenario,tenant,from_ns,to_ns,tier,gbps\n";
  for (const CorunScenario& scenario : *scenarios) {
    if (!wanted.empty() && !wanted.contains(scenario.name)) continue;
    const auto t0 = std::chrono::steady_clock::now();
    absl::StatusOr<CorunResult> result = SimulateCorun(*machine, scenario, options);
    if (!result.ok()) return Fail(result.status(), kExitFailed, kCommand);
    if (!p.Flag("quiet")) {
      std::cerr << "corun: " << scenario.name << ": " << scenario.tenants.size() << " tenants, "
                << result->events << " events, "
                << FixedDecimal(
                       std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
                       1)
                << " s\n";
    }
    std::error_code ec;
    std::filesystem::create_directories(out / "placements" / scenario.name, ec);
    if (ec)
      return Fail(ErrnoStatus(ec.value(), StrCat("creating ", out.string())), kExitFailed,
                  kCommand);
    for (size_t i = 0; i < scenario.tenants.size(); ++i) {
      const CorunTenant& t = scenario.tenants[i];
      const CorunTenantResult& r = result->tenants[i];
      const std::string placement =
          (out / "placements" / scenario.name / (t.name + ".json")).string();
      if (absl::Status s = WritePlacement(t.placement, placement); !s.ok()) {
        return Fail(s, kExitFailed, kCommand);
      }
      rows.push_back({scenario.name, machine->name, t.name, t.app.name, placement, t.start_ns,
                      t.read_pct, r.runtime_ns, r.solo_runtime_ns, 0});
      for (const BandwidthSpan& span : r.bandwidth) {
        for (size_t k = 0; k < machine->tiers.size(); ++k) {
          StrAppend(&bandwidth, scenario.name, ",", t.name, ",", span.from_ns, ",", span.to_ns, ",",
                    machine->tiers[k].name, ",", FixedDecimal(span.gbps[k], 3), "\n");
        }
      }
      std::cout << scenario.name << " " << t.name << ": "
                << FixedDecimal(static_cast<double>(r.runtime_ns) / 1e9, 3) << " s sharing, "
                << FixedDecimal(static_cast<double>(r.solo_runtime_ns) / 1e9, 3) << " s alone (x"
                << FixedDecimal(
                       static_cast<double>(r.runtime_ns) / static_cast<double>(r.solo_runtime_ns),
                       3)
                << ")\n";
    }
  }
  if (absl::Status s = WriteCorunRuns(rows, (out / "coruns.csv").string()); !s.ok()) {
    return Fail(s, kExitFailed, kCommand);
  }
  if (absl::Status s = WriteFileAtomically((out / "bandwidth.csv").string(), bandwidth); !s.ok()) {
    return Fail(s, kExitFailed, kCommand);
  }
  std::cout << "wrote " << (out / "coruns.csv").string() << " (" << rows.size() << " tenants)\n";
  return kExitOk;
}

}  // namespace tiergym::synth

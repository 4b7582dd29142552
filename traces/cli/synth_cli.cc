#include "traces/cli/synth_cli.h"

#include <iostream>
#include <optional>

#include "absl/strings/str_join.h"
#include "traces/base/args.h"
#include "traces/base/exit_status.h"
#include "traces/base/strings.h"
#include "traces/machine.h"
#include "traces/synth/app_model.h"
#include "traces/synth/generator.h"

namespace tiergym::synth {
namespace {

constexpr std::string_view kCommand = "tiergym trace synth";

constexpr char kEpilog[] =
    "Writes OUT/<app>/profile/<tier>.csv (or .tgt with --format bin), one sampled run per\n"
    "tier of the machine; OUT/<app>/runs/runs.csv and runs/placements/*.json, measured\n"
    "runs under mixed placements whose runtimes come from the model (not the estimator);\n"
    "and OUT/<app>/model.json with the models, seed and address layout. The same seed\n"
    "gives byte-identical files. By default the PEBS reset value is chosen so that the\n"
    "run on the default tier holds about 200000 samples; --samples N or --pebs-reset R\n"
    "change that (not both).\n"
    "\n"
    "Examples:\n"
    "  tiergym trace synth --list\n"
    "  tiergym trace synth --print-model lulesh > my_app.json\n"
    "  tiergym trace synth --app minife --machine knl --seed 1 --out data/synth\n"
    "  tiergym trace synth --app procedural:42 --format bin --no-runs --out data/procedural\n"
    "  tiergym trace synth --app my_app.json --machine disagg --out data --samples 5000000\n"
    "  tiergym trace synth --app lulesh --machine disagg --truth mixed-a --out data\n"
    "\n"
    "Model formats: traces/SYNTH.md.\n";

}  // namespace

int RunSynthCommand(const std::vector<std::string>& args) {
  ArgParser p("tiergym trace synth",
              "Generate a synthetic profile and measured runs from an application model and "
              "a machine model.");
  p.SetEpilog(kEpilog);
  p.AddOption("app", "NAME|JSON",
              "bundled application model name, procedural:SEED (a procedural model, "
              "traces/SYNTH.md section 11) or model JSON file");
  p.AddOption("machine", "NAME|JSON", "bundled machine name or machine JSON file", "knl");
  p.AddOption("seed", "N", "random seed", "1");
  p.AddOption("out", "DIR", "output directory (OUT/<app>/... is written)");
  p.AddOption("format", "csv|bin", "format of the sampled traces", "csv");
  p.AddOption("pebs-reset", "R", "misses per sample (default: derived from --samples)");
  p.AddOption("samples", "N", "target samples in the run on the default tier", "200000");
  p.AddOption("chunks", "K", "chunks per phase instance of the time model", "200");
  p.AddOption("truth", "NAME|JSON",
              "ground-truth model: how the machine combines its tiers, latency and bandwidth "
              "limits and compute (a bundled member, see --list, or a JSON file; "
              "traces/SYNTH.md section 10)",
              "spec");
  p.AddOption("print-truth", "NAME", "print a bundled ground-truth model's JSON and exit");
  p.AddFlag("no-runs", "do not compute or write the measured runs");
  p.AddFlag("list", "list the bundled application and machine models and exit");
  p.AddOption("print-model", "NAME", "print a bundled (or procedural:SEED) model's JSON and exit");
  p.AddFlag("quiet", "no progress on stderr");

  if (std::optional<int> rc = p.ParseOrExit(args)) return *rc;

  if (p.Flag("list")) {
    std::cout << "applications:";
    for (const std::string& n : BundledAppNames()) std::cout << " " << n;
    std::cout << "\nmachines:";
    for (const std::string& n : BundledMachineNames()) std::cout << " " << n;
    std::cout << "\nground truths:";
    for (const std::string& n : BundledTruthNames()) std::cout << " " << n;
    std::cout << "\n";
    return 0;
  }
  if (p.Given("print-truth")) {
    for (const TruthModel& t : BundledTruths()) {
      if (t.name == p.Get("print-truth")) {
        std::cout << TruthModelToJson(t);
        return 0;
      }
    }
    return Fail(
        absl::NotFoundError(StrCat("no bundled ground-truth model named \"", p.Get("print-truth"),
                                   "\" (bundled: ", absl::StrJoin(BundledTruthNames(), ", "), ")")),
        kExitUsage, kCommand);
  }
  if (p.Given("print-model")) {
    absl::StatusOr<std::string> text = BundledModelText(p.Get("print-model"));
    if (!text.ok()) return Fail(text.status(), kExitUsage, kCommand);
    std::cout << *text;
    if (!text->empty() && text->back() != '\n') std::cout << "\n";
    return 0;
  }

  if (!p.Given("app"))
    return Fail(absl::InvalidArgumentError("--app is required (see --help)"), kExitUsage, kCommand);
  if (!p.Given("out"))
    return Fail(absl::InvalidArgumentError("--out is required (see --help)"), kExitUsage, kCommand);
  if (p.Given("pebs-reset") && p.Given("samples")) {
    return Fail(absl::InvalidArgumentError("give --pebs-reset or --samples, not both"), kExitUsage,
                kCommand);
  }
  TraceFormat format;
  if (p.Get("format") == "csv") {
    format = TraceFormat::kCsv;
  } else if (p.Get("format") == "bin") {
    format = TraceFormat::kBinary;
  } else {
    return Fail(absl::InvalidArgumentError(
                    StrCat("--format: expected csv or bin, got \"", p.Get("format"), "\"")),
                2);
  }
  SynthOptions options;
  absl::StatusOr<uint64_t> seed = p.GetUint64("seed");
  if (!seed.ok()) return Fail(seed.status(), kExitUsage, kCommand);
  options.seed = *seed;
  absl::StatusOr<uint64_t> samples = p.GetUint64("samples");
  if (!samples.ok()) return Fail(samples.status(), kExitUsage, kCommand);
  if (*samples == 0)
    return Fail(absl::InvalidArgumentError("--samples must be >= 1"), kExitUsage, kCommand);
  options.target_samples = *samples;
  if (p.Given("pebs-reset")) {
    absl::StatusOr<uint64_t> reset = p.GetUint64("pebs-reset");
    if (!reset.ok()) return Fail(reset.status(), kExitUsage, kCommand);
    if (*reset == 0)
      return Fail(absl::InvalidArgumentError("--pebs-reset must be >= 1"), kExitUsage, kCommand);
    options.pebs_reset = *reset;
  }
  absl::StatusOr<uint64_t> chunks = p.GetUint64("chunks");
  if (!chunks.ok()) return Fail(chunks.status(), kExitUsage, kCommand);
  if (*chunks < 1 || *chunks > 100000) {
    return Fail(absl::InvalidArgumentError("--chunks must be in [1, 100000]"), kExitUsage,
                kCommand);
  }
  options.chunks_per_phase = static_cast<int>(*chunks);
  options.measured_runs = !p.Flag("no-runs");
  if (!p.Flag("quiet")) {
    options.progress = [](const std::string& line) { std::cerr << "synth: " << line << "\n"; };
  }

  absl::StatusOr<AppModel> app = LoadAppModel(p.Get("app"));
  if (!app.ok()) return Fail(app.status(), kExitFailed, kCommand);
  absl::StatusOr<Machine> machine = LoadMachine(p.Get("machine"));
  if (!machine.ok()) return Fail(machine.status(), kExitFailed, kCommand);
  absl::StatusOr<TruthModel> truth = LoadTruthModel(p.Get("truth"));
  if (!truth.ok()) return Fail(truth.status(), kExitFailed, kCommand);
  options.truth = *std::move(truth);

  absl::StatusOr<SynthProfile> profile = GenerateProfile(*app, *machine, options);
  if (!profile.ok()) return Fail(profile.status(), kExitFailed, kCommand);
  absl::Status written = WriteSynthProfile(*profile, p.Get("out"), format);
  if (!written.ok()) return Fail(written, kExitFailed, kCommand);

  std::cout << app->name << " on " << machine->name
            << (options.truth.name == "spec" ? "" : StrCat(" (truth ", options.truth.name, ")"))
            << " (seed " << options.seed << ", pebs_reset " << profile->pebs_reset
            << "): " << p.Get("out") << "/" << app->name << "\n";
  for (const Trace& t : profile->traces) {
    std::cout << "  " << t.metadata().device << ": " << FixedDecimal(t.runtime_ns() / 1e9, 3)
              << " s, " << t.num_phases() << " phases, " << t.num_samples() << " samples\n";
  }
  if (!profile->runs.empty()) {
    std::cout << "  " << profile->runs.size() << " measured runs in runs/runs.csv\n";
  }
  return 0;
}

}  // namespace tiergym::synth

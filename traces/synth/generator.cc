#include "traces/synth/generator.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>
#include <system_error>

#include "traces/base/file.h"
#include "traces/base/json.h"
#include "traces/base/status_macros.h"
#include "traces/base/strings.h"
#include "traces/synth/rng.h"

namespace tiergym::synth {
namespace {

uint64_t PageCount(uint64_t bytes) { return (bytes + kSynthPageBytes - 1) / kSynthPageBytes; }

double ExpectedMisses(const AppModel& app) {
  double total = 0;
  for (int p : app.schedule) {
    total += static_cast<double>(app.phases[p].instructions) * app.phases[p].mpki / 1000.0;
  }
  return total;
}

// Draws the sampled data address and tid of a miss at local phase progress x in [0, 1).
class AddressSampler {
 public:
  AddressSampler(const AppModel& app, const PhaseSpec& phase) : app_(app), phase_(phase) {
    double total = 0;
    for (const ArrayAccess& a : phase.accesses) total += a.weight;
    double c = 0;
    for (const ArrayAccess& a : phase.accesses) {
      c += a.weight / total;
      cumulative_.push_back(c);
    }
    cumulative_.back() = 1.0;
  }

  // Returns the address; sets *tid.
  uint64_t Draw(double x, std::mt19937_64& g, uint32_t* tid) const {
    size_t j = 0;
    double local = x;
    if (phase_.serial) {
      while (j + 1 < cumulative_.size() && x >= cumulative_[j]) ++j;
      const double c0 = j == 0 ? 0.0 : cumulative_[j - 1];
      local = std::clamp((x - c0) / (cumulative_[j] - c0), 0.0, 1.0);
    } else if (cumulative_.size() > 1) {
      const double u = UniformDouble(g);
      while (j + 1 < cumulative_.size() && u >= cumulative_[j]) ++j;
    }
    const ArrayAccess& a = phase_.accesses[j];
    const ArraySpec& array = app_.arrays[a.array];
    const double size = static_cast<double>(array.size_bytes);
    const int threads = app_.threads;
    const bool sliced = !phase_.serial && threads > 1;
    // Serial phases are run by the first thread; otherwise any thread may miss.
    uint32_t t = phase_.serial ? 0 : static_cast<uint32_t>(UniformIndex(g, threads));
    double position = 0;  // fraction of the array
    switch (a.pattern) {
      case AccessPattern::kSequential: {
        double sweep = local * a.passes;
        sweep -= std::floor(sweep);
        position = sliced ? (t + sweep) / threads : sweep;
        break;
      }
      case AccessPattern::kUniform:
        position = UniformDouble(g);
        break;
      case AccessPattern::kSkewed: {
        const double u = UniformDouble(g);
        const double v = UniformDouble(g);
        if (u < a.hot_share || a.hot_fraction >= 1.0) {
          position = a.hot_offset + v * a.hot_fraction;
        } else {
          const double z = v * (1.0 - a.hot_fraction);
          position = z < a.hot_offset ? z : z + a.hot_fraction;
        }
        break;
      }
    }
    uint64_t offset = static_cast<uint64_t>(position * size);
    offset = (offset & ~uint64_t{63}) + 8 * UniformIndex(g, 8);
    if (offset >= array.size_bytes) offset = (array.size_bytes - 1) & ~uint64_t{7};
    *tid = t;
    return array.start_address + offset;
  }

 private:
  const AppModel& app_;
  const PhaseSpec& phase_;
  std::vector<double> cumulative_;
};

uint64_t ToNs(double t) { return t <= 0 ? 0 : static_cast<uint64_t>(std::floor(t)); }

std::string RunsCsvLine(const SynthRun& r) {
  return StrCat(r.name, ",placements/", r.name, ".json,", r.runtime_ns, "\n");
}

Placement Ranges(const Machine& m, std::vector<PlacementRange> ranges) {
  Placement p;
  p.default_tier = m.tiers[0].name;
  std::sort(ranges.begin(), ranges.end(),
            [](const PlacementRange& a, const PlacementRange& b) { return a.start < b.start; });
  p.ranges = std::move(ranges);
  return p;
}

PlacementRange ArrayPart(const ArraySpec& a, double lo, double hi, std::string tier) {
  const uint64_t pages = PageCount(a.size_bytes);
  const uint64_t p0 = static_cast<uint64_t>(std::floor(lo * pages));
  uint64_t p1 = static_cast<uint64_t>(std::ceil(hi * pages));
  p1 = std::clamp<uint64_t>(p1, p0 + 1, pages);
  return {a.start_address + p0 * kSynthPageBytes, a.start_address + p1 * kSynthPageBytes,
          std::move(tier)};
}

}  // namespace

uint64_t DerivePebsReset(const AppModel& app, uint64_t target_samples) {
  const double misses = ExpectedMisses(app);
  const double r = misses / static_cast<double>(std::max<uint64_t>(1, target_samples));
  return std::max<uint64_t>(1, static_cast<uint64_t>(std::llround(r)));
}

absl::StatusOr<Trace> GenerateTierTrace(const AppModel& app, const Machine& machine, int tier,
                                        uint64_t seed, uint64_t pebs_reset, int chunks_per_phase,
                                        const TruthModel& truth) {
  if (tier < 0 || tier >= static_cast<int>(machine.tiers.size())) {
    return absl::InvalidArgumentError(StrCat("tier index ", tier, " out of range"));
  }
  if (pebs_reset == 0) return absl::InvalidArgumentError("pebs_reset must be >= 1");
  const std::string& device = machine.tiers[tier].name;
  const TimeModel model(app, machine, truth, chunks_per_phase);
  std::vector<double> on_tier(machine.tiers.size(), 0.0);
  on_tier[tier] = 1;
  const int chunks = model.chunks_per_phase();
  const TierMap map = WholeTier(tier);
  std::vector<std::vector<double>> chunk_ns(app.phases.size());
  for (size_t p = 0; p < app.phases.size(); ++p) chunk_ns[p] = model.ChunkTimesNs(p, map);
  std::vector<AddressSampler> samplers;
  for (const PhaseSpec& ph : app.phases) samplers.emplace_back(app, ph);

  const std::string run = StrCat("profile/", device);
  const RunRealisation real = MakeRealisation(app, seed, run);
  std::mt19937_64 g(StreamSeed(seed, app.name, StrCat("samples/", run)));

  TraceBuilder builder(StrCat(app.name, "/profile/", device),
                       TraceMetadata::Make(app.name, device, machine.pebs_event, pebs_reset,
                                           static_cast<uint32_t>(kSynthPageBytes)));
  const double reset = static_cast<double>(pebs_reset);
  builder.Reserve(static_cast<size_t>(ExpectedMisses(app) / reset * 1.02) + 16);

  double next = UniformDouble(g) * reset;  // misses until the next sample
  double t = 0;
  uint64_t last_instructions = 0;
  for (size_t i = 0; i < app.schedule.size(); ++i) {
    const int p = app.schedule[i];
    const PhaseSpec& ph = app.phases[p];
    const uint32_t phase_index = static_cast<uint32_t>(i);
    builder.AddMark({ToNs(t), 0, phase_index, last_instructions});
    const double instructions = static_cast<double>(ph.instructions) * real.instruction_factor[i];
    const double time_scale = real.instruction_factor[i] * real.time_factor[i];
    const double chunk_instructions = instructions / chunks;
    // The truth's drift on this tier: more instructions retire over the same misses.
    const double retired =
        instructions * TimeModel::RetiredPerInstruction(ph, machine, truth, on_tier);
    const double chunk_misses = ph.accesses.empty() ? 0 : chunk_instructions * ph.mpki / 1000.0;
    double busy = 0;
    for (int k = 0; k < chunks; ++k) {
      const double duration = chunk_ns[p][k] * time_scale;
      const double t0 = t + busy;
      while (next < chunk_misses) {
        const double u = next / chunk_misses;
        const double x = (k + u) / chunks;
        uint32_t tid = 0;
        const uint64_t address = samplers[p].Draw(x, g, &tid);
        builder.AddSample(ToNs(t0 + u * duration), tid, phase_index,
                          static_cast<uint64_t>(retired * x), address);
        next += reset;
      }
      next -= chunk_misses;
      busy += duration;
    }
    // Barrier wait at the end of the phase: no misses, no samples; spinning threads
    // retire instructions in proportion to the wait.
    t += busy * (1.0 + ph.imbalance);
    const double spin = busy * ph.imbalance * app.barrier_spin_gips;
    last_instructions = static_cast<uint64_t>(std::llround(retired + spin));
  }
  builder.SetEnd({ToNs(t), 0, static_cast<uint32_t>(app.schedule.size() - 1), last_instructions});
  return builder.Finish();
}

absl::StatusOr<uint64_t> GroundTruthRuntimeNs(const AppModel& app, const Machine& machine,
                                              const Placement& placement, uint64_t seed,
                                              std::string_view run_name, int chunks_per_phase,
                                              const TruthModel& truth) {
  TG_ASSIGN_OR_RETURN(TierMap map, ResolvePlacement(app, machine, placement));
  const TimeModel model(app, machine, truth, chunks_per_phase);
  std::vector<double> phase_ns(app.phases.size());
  for (size_t p = 0; p < app.phases.size(); ++p) phase_ns[p] = model.PhaseTimeNs(p, map);
  const RunRealisation real = MakeRealisation(app, seed, StrCat("run/", run_name));
  double t = 0;
  for (size_t i = 0; i < app.schedule.size(); ++i) {
    t += phase_ns[app.schedule[i]] * real.instruction_factor[i] * real.time_factor[i];
  }
  return ToNs(t);
}

std::vector<std::pair<std::string, Placement>> StandardRuns(const AppModel& app,
                                                            const Machine& machine) {
  std::vector<std::pair<std::string, Placement>> candidates;
  if (machine.tiers.size() < 2) return {};
  const std::string& slow = machine.tiers[0].name;
  const std::string& fast = machine.tiers[1].name;

  // 1. Fractions of the footprint on the fast tier, first touch first.
  for (int pct = 10; pct <= 90; pct += 10) {
    Placement p;
    p.default_tier = slow;
    p.fractions.emplace_back(fast, pct / 100.0);
    candidates.emplace_back(StrCat(fast, pct), std::move(p));
  }

  // Misses per array over the whole run, to find the hot arrays.
  std::vector<double> misses(app.arrays.size(), 0.0);
  for (int p : app.schedule) {
    const PhaseSpec& ph = app.phases[p];
    double w = 0;
    for (const ArrayAccess& a : ph.accesses) w += a.weight;
    for (const ArrayAccess& a : ph.accesses) {
      misses[a.array] += static_cast<double>(ph.instructions) * ph.mpki / 1000.0 * a.weight / w;
    }
  }
  std::vector<int> by_misses(app.arrays.size());
  for (size_t i = 0; i < by_misses.size(); ++i) by_misses[i] = static_cast<int>(i);
  std::stable_sort(by_misses.begin(), by_misses.end(),
                   [&](int a, int b) { return misses[a] > misses[b]; });
  std::vector<int> hot;
  for (int a : by_misses) {
    if (misses[a] > 0) hot.push_back(a);
  }

  // 2. Address ranges: hot arrays, parts of arrays, hot regions of skewed accesses.
  for (size_t i = 0; i < hot.size() && i < 3; ++i) {
    const ArraySpec& a = app.arrays[hot[i]];
    candidates.emplace_back(StrCat("range-", a.name), Ranges(machine, {ArrayPart(a, 0, 1, fast)}));
  }
  if (hot.size() >= 2) {
    const ArraySpec& a = app.arrays[hot[0]];
    const ArraySpec& b = app.arrays[hot[1]];
    candidates.emplace_back(StrCat("range-", a.name, "+", b.name),
                            Ranges(machine, {ArrayPart(a, 0, 1, fast), ArrayPart(b, 0, 1, fast)}));
  }
  if (!hot.empty()) {
    const ArraySpec& a = app.arrays[hot[0]];
    candidates.emplace_back(StrCat("range-", a.name, "-first-half"),
                            Ranges(machine, {ArrayPart(a, 0, 0.5, fast)}));
    candidates.emplace_back(StrCat("range-", a.name, "-last-third"),
                            Ranges(machine, {ArrayPart(a, 2.0 / 3.0, 1, fast)}));
  }
  std::set<int> skewed_done;
  for (const PhaseSpec& ph : app.phases) {
    for (const ArrayAccess& acc : ph.accesses) {
      if (acc.pattern != AccessPattern::kSkewed || !skewed_done.insert(acc.array).second) {
        continue;
      }
      const ArraySpec& a = app.arrays[acc.array];
      candidates.emplace_back(
          StrCat("range-", a.name, "-hot"),
          Ranges(machine, {ArrayPart(a, acc.hot_offset, acc.hot_offset + acc.hot_fraction, fast)}));
    }
  }
  {
    // Arrays with more misses per byte than the app's average.
    double total_misses = 0;
    for (double m : misses) total_misses += m;
    const double density =
        total_misses / static_cast<double>(std::max<uint64_t>(1, app.FootprintBytes()));
    std::vector<PlacementRange> dense;
    for (size_t i = 0; i < app.arrays.size(); ++i) {
      if (misses[i] > density * static_cast<double>(app.arrays[i].size_bytes)) {
        dense.push_back(ArrayPart(app.arrays[i], 0, 1, fast));
      }
    }
    if (!dense.empty() && dense.size() < app.arrays.size()) {
      candidates.emplace_back("range-dense", Ranges(machine, std::move(dense)));
    }
    std::vector<PlacementRange> quarters;
    for (const ArraySpec& a : app.arrays) quarters.push_back(ArrayPart(a, 0, 0.25, fast));
    candidates.emplace_back("range-quarters", Ranges(machine, std::move(quarters)));
  }

  // 3. Three-tier mixes.
  if (machine.tiers.size() >= 3) {
    const std::string& far = machine.tiers[2].name;
    const std::pair<int, int> mixes[] = {{30, 20}, {20, 50}, {50, 30}, {10, 80}};
    for (const auto& [f, r] : mixes) {
      Placement p;
      p.default_tier = slow;
      p.fractions.emplace_back(fast, f / 100.0);
      p.fractions.emplace_back(far, r / 100.0);
      candidates.emplace_back(StrCat("mix-", fast, f, "-", far, r), std::move(p));
    }
    if (!hot.empty()) {
      // Hottest array on the fast tier, the coldest (per byte) array on the far tier.
      int coldest = -1;
      double coldest_density = 0;
      for (size_t i = 0; i < app.arrays.size(); ++i) {
        if (static_cast<int>(i) == hot[0]) continue;
        const double d = misses[i] / static_cast<double>(app.arrays[i].size_bytes);
        if (coldest < 0 || d < coldest_density) {
          coldest = static_cast<int>(i);
          coldest_density = d;
        }
      }
      std::vector<PlacementRange> r = {ArrayPart(app.arrays[hot[0]], 0, 1, fast)};
      if (coldest >= 0) r.push_back(ArrayPart(app.arrays[coldest], 0, 1, far));
      candidates.emplace_back("mix-ranges-hot-cold", Ranges(machine, std::move(r)));
    }
    std::vector<PlacementRange> split;
    for (const ArraySpec& a : app.arrays) {
      split.push_back(ArrayPart(a, 0, 0.25, fast));
      if (PageCount(a.size_bytes) >= 4) split.push_back(ArrayPart(a, 0.75, 1, far));
    }
    candidates.emplace_back("mix-ranges-quarters", Ranges(machine, std::move(split)));
  }

  // Keep the placements that fit, once each, under file-safe names.
  std::vector<std::pair<std::string, Placement>> runs;
  std::set<std::string> seen_json, seen_names;
  for (auto& [name, p] : candidates) {
    if (!ResolvePlacement(app, machine, p).ok()) continue;
    if (!seen_json.insert(FormatPlacementJson(p)).second) continue;
    std::string safe;
    for (char c : name) {
      safe.push_back(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' ||
                             c == '+' || c == '.'
                         ? c
                         : '_');
    }
    if (!seen_names.insert(safe).second) continue;
    runs.emplace_back(std::move(safe), std::move(p));
  }
  return runs;
}

absl::StatusOr<SynthProfile> GenerateProfile(const AppModel& app, const Machine& machine,
                                             const SynthOptions& options) {
  if (options.chunks_per_phase < 1 || options.chunks_per_phase > 100000) {
    return absl::InvalidArgumentError("chunks_per_phase must be in [1, 100000]");
  }
  if (options.pebs_reset == 0 && options.target_samples == 0) {
    return absl::InvalidArgumentError("target_samples must be >= 1");
  }
  SynthProfile out;
  out.app = app;
  out.machine = machine;
  out.options = options;
  out.pebs_reset =
      options.pebs_reset != 0 ? options.pebs_reset : DerivePebsReset(app, options.target_samples);
  auto progress = [&](const std::string& line) {
    if (options.progress) options.progress(line);
  };
  for (size_t t = 0; t < machine.tiers.size(); ++t) {
    progress(StrCat(app.name, ": sampling the run on ", machine.tiers[t].name, " (", t + 1, "/",
                    machine.tiers.size(), ")"));
    TG_ASSIGN_OR_RETURN(Trace trace,
                        GenerateTierTrace(out.app, out.machine, static_cast<int>(t), options.seed,
                                          out.pebs_reset, options.chunks_per_phase, options.truth));
    progress(StrCat(app.name, ": ", machine.tiers[t].name, ": ", trace.num_samples(),
                    " samples, runtime ", FixedDecimal(trace.runtime_ns() / 1e9, 3), " s"));
    out.traces.push_back(std::move(trace));
  }
  if (options.measured_runs) {
    auto runs = StandardRuns(out.app, out.machine);
    progress(StrCat(app.name, ": computing ", runs.size(), " measured runs"));
    for (auto& [name, placement] : runs) {
      TG_ASSIGN_OR_RETURN(uint64_t ns,
                          GroundTruthRuntimeNs(out.app, out.machine, placement, options.seed, name,
                                               options.chunks_per_phase, options.truth));
      out.runs.push_back({name, std::move(placement), ns});
    }
  }
  return out;
}

std::string FormatRunsCsv(const std::vector<SynthRun>& runs) {
  std::string out = "name,placement,runtime_ns\n";
  for (const SynthRun& r : runs) out += RunsCsvLine(r);
  return out;
}

absl::Status WriteSynthProfile(const SynthProfile& profile, const std::string& out_dir,
                               TraceFormat format) {
  namespace fs = std::filesystem;
  const fs::path root = fs::path(out_dir) / profile.app.name;
  std::error_code ec;
  fs::create_directories(root / "profile", ec);
  if (!ec && !profile.runs.empty()) fs::create_directories(root / "runs" / "placements", ec);
  if (ec) {
    return absl::InternalError(
        StrCat("cannot create directories under ", root.string(), ": ", ec.message()));
  }
  const char* ext = format == TraceFormat::kBinary ? ".tgt" : ".csv";
  const char* other = format == TraceFormat::kBinary ? ".csv" : ".tgt";
  for (const Trace& trace : profile.traces) {
    const std::string device = trace.metadata().device;
    // A profile directory must not hold the same device twice in two formats.
    fs::remove(root / "profile" / (device + other), ec);
    const std::string path = (root / "profile" / (device + ext)).string();
    if (profile.options.progress) profile.options.progress(StrCat("writing ", path));
    TG_RETURN_IF_ERROR(SaveTrace(trace, path, format));
  }
  if (!profile.runs.empty()) {
    for (const SynthRun& r : profile.runs) {
      TG_RETURN_IF_ERROR(
          WriteFileAtomically((root / "runs" / "placements" / (r.name + ".json")).string(),
                              FormatPlacementJson(r.placement)));
    }
    TG_RETURN_IF_ERROR(
        WriteFileAtomically((root / "runs" / "runs.csv").string(), FormatRunsCsv(profile.runs)));
  }

  // model.json: everything needed to regenerate the profile, plus the layout.
  json::Writer w(2);
  w.BeginObject();
  w.Key("format");
  w.String("tiergym-synth-model");
  w.Key("version");
  w.Int(1);
  w.Key("seed");
  w.Uint(profile.options.seed);
  w.Key("pebs_reset");
  w.Uint(profile.pebs_reset);
  w.Key("chunks_per_phase");
  w.Int(profile.options.chunks_per_phase);
  w.Key("app");
  WriteJsonValue(profile.app.json, w);
  w.Key("machine");
  {
    absl::StatusOr<json::Value> machine_json =
        json::Parse(MachineToJson(profile.machine), "machine");
    if (!machine_json.ok()) return machine_json.status();
    WriteJsonValue(*machine_json, w);
  }
  w.Key("truth");
  {
    absl::StatusOr<json::Value> truth_json =
        json::Parse(TruthModelToJson(profile.options.truth), "truth");
    if (!truth_json.ok()) return truth_json.status();
    WriteJsonValue(*truth_json, w);
  }
  w.Key("layout");
  w.BeginArray();
  for (size_t i = 0; i < profile.app.arrays.size(); ++i) {
    const ArraySpec& a = profile.app.arrays[i];
    w.BeginObject();
    w.Key("array");
    w.String(a.name);
    w.Key("first_touch");
    w.Uint(i);
    w.Key("start");
    w.String(Hex(a.start_address));
    w.Key("end");
    w.String(Hex(a.end_address()));
    w.Key("size_bytes");
    w.Uint(a.size_bytes);
    w.Key("region");
    w.String(a.heap ? "heap" : "mmap");
    w.EndObject();
  }
  w.EndArray();
  w.Key("profile_runtime_ns");
  w.BeginObject();
  for (const Trace& trace : profile.traces) {
    w.Key(trace.metadata().device);
    w.Uint(trace.runtime_ns());
  }
  w.EndObject();
  w.EndObject();
  std::string text = w.Take();
  text.push_back('\n');
  return WriteFileAtomically((root / "model.json").string(), text);
}

}  // namespace tiergym::synth

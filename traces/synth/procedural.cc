#include "traces/synth/procedural.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <random>
#include <utility>
#include <vector>

#include "traces/base/json.h"
#include "traces/base/strings.h"
#include "traces/synth/rng.h"

namespace tiergym::synth {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;
constexpr uint64_t kGiB = uint64_t{1} << 30;

// Draws of the distribution (SYNTH.md section 11), all from one std::mt19937_64.
class Draw {
 public:
  explicit Draw(uint64_t seed)
      : g_(StreamSeed(seed, StrCat("procedural-v", kProceduralVersion), "model")) {}
  double Uniform(double lo, double hi) { return lo + (hi - lo) * UniformDouble(g_); }
  double LogUniform(double lo, double hi) { return std::exp(Uniform(std::log(lo), std::log(hi))); }
  // An integer in [lo, hi].
  int Int(int lo, int hi) {
    const auto count = static_cast<uint64_t>(static_cast<int64_t>(hi) - lo + 1);
    return lo + static_cast<int>(UniformIndex(g_, count));
  }
  bool Chance(double p) { return UniformDouble(g_) < p; }
  // An index drawn with the given weights.
  size_t Pick(const std::vector<double>& weights) {
    double total = 0;
    for (double w : weights) total += w;
    double u = UniformDouble(g_) * total;
    for (size_t i = 0; i < weights.size(); ++i) {
      if (u < weights[i]) return i;
      u -= weights[i];
    }
    return weights.size() - 1;
  }
  // `m` distinct elements of `pool`, in a random order.
  std::vector<int> Choose(std::vector<int> pool, size_t m) {
    for (size_t i = 0; i < pool.size(); ++i) {
      std::swap(pool[i], pool[i + UniformIndex(g_, pool.size() - i)]);
    }
    pool.resize(std::min(m, pool.size()));
    return pool;
  }

 private:
  std::mt19937_64 g_;
};

// Four significant digits: the model file stays readable; the value is what it says.
double Round4(double x) {
  if (x == 0 || !std::isfinite(x)) return x;
  const double scale = std::pow(10.0, 3 - static_cast<int>(std::floor(std::log10(std::fabs(x)))));
  return std::round(x * scale) / scale;
}

enum class Kernel { kStream, kGather, kCompute, kMixed };
constexpr const char* kKernelNames[] = {"stream", "gather", "compute", "mixed"};

struct Access {
  int array = 0;
  std::string pattern;
  double weight = 1, passes = 1, hot_fraction = 0, hot_share = 0, hot_offset = 0;
};

struct Phase {
  std::string name, description;
  uint64_t instructions = 0;
  double mpki = 0, compute_gips = 0, mlp = 1, overlap = 0.5, imbalance = 0, read_pct = 100;
  bool serial = false;
  std::vector<Access> accesses;
};

struct Array {
  std::string name;
  uint64_t size_bytes = 0;
  bool heap = false;
};

// A kernel of a stage: its phase variants (more than one when its hot set drifts: the
// stage's iterations take them in turn).
struct StageKernel {
  std::vector<int> variants;  // phase indices
};

struct Stage {
  std::vector<StageKernel> kernels;
  int periodic = -1;  // a kernel index run once every `period` iterations, or -1
  int period = 1;
  int iterations = 1;  // of the kernels that are not periodic
};

Phase DrawKernel(Draw& d, Kernel kind, const std::vector<Array>& arrays,
                 const std::vector<int>& pool, const std::string& name) {
  Phase p;
  p.name = name;
  p.description = StrCat(kKernelNames[static_cast<int>(kind)], " kernel");
  switch (kind) {
    case Kernel::kStream:  // bandwidth-bound sweeps
      p.mpki = d.LogUniform(40, 150);
      p.mlp = d.Uniform(8, 16);
      p.overlap = d.Uniform(0.6, 0.9);
      p.compute_gips = d.Uniform(50, 90);
      break;
    case Kernel::kGather:  // latency-bound indirect accesses
      p.mpki = d.LogUniform(10, 60);
      p.mlp = d.Uniform(1, 4);
      p.overlap = d.Uniform(0.2, 0.5);
      p.compute_gips = d.Uniform(30, 70);
      break;
    case Kernel::kCompute:  // few misses
      p.mpki = d.LogUniform(0.5, 10);
      p.mlp = d.Uniform(2, 8);
      p.overlap = d.Uniform(0.3, 0.8);
      p.compute_gips = d.Uniform(60, 100);
      break;
    case Kernel::kMixed:
      p.mpki = d.LogUniform(20, 80);
      p.mlp = d.Uniform(4, 10);
      p.overlap = d.Uniform(0.4, 0.8);
      p.compute_gips = d.Uniform(40, 90);
      break;
  }
  p.imbalance = d.Uniform(0, 0.2);
  p.read_pct = d.Uniform(55, 100);
  p.instructions = static_cast<uint64_t>(d.LogUniform(0.5e9, 30e9));
  // Pattern weights (sequential, uniform, skewed) by kind.
  const std::vector<double> patterns = kind == Kernel::kStream   ? std::vector{0.7, 0.15, 0.15}
                                       : kind == Kernel::kGather ? std::vector{0.0, 0.4, 0.6}
                                                                 : std::vector{1.0, 1.0, 1.0};
  const int m = d.Int(1, std::min<int>(4, static_cast<int>(pool.size())));
  for (int array : d.Choose(pool, static_cast<size_t>(m))) {
    Access a;
    a.array = array;
    const double mib = static_cast<double>(arrays[array].size_bytes) / kMiB;
    switch (d.Pick(patterns)) {
      case 0:
        a.pattern = "sequential";
        a.passes = d.LogUniform(1, 20);
        // A sweep's misses grow with the bytes it passes over.
        a.weight = mib * a.passes * d.LogUniform(0.5, 2);
        break;
      case 1:
        a.pattern = "uniform";
        a.weight = std::pow(mib, d.Uniform(0, 1)) * d.LogUniform(0.2, 5);
        break;
      default:
        a.pattern = "skewed";
        a.hot_fraction = d.LogUniform(0.02, 0.5);
        a.hot_share = d.Uniform(0.5, 0.95);
        a.hot_offset = d.Uniform(0, 1 - a.hot_fraction);
        a.weight = std::pow(mib, d.Uniform(0, 1)) * d.LogUniform(0.2, 5);
        break;
    }
    p.accesses.push_back(a);
  }
  return p;
}

void WritePhase(const Phase& p, const std::vector<Array>& arrays, json::Writer& w) {
  w.BeginObject();
  w.Key("name");
  w.String(p.name);
  w.Key("description");
  w.String(p.description);
  w.Key("instructions");
  w.Uint(p.instructions);
  const std::pair<const char*, double> numbers[] = {
      {"mpki", p.mpki},       {"compute_gips", p.compute_gips}, {"mlp", p.mlp},
      {"overlap", p.overlap}, {"imbalance", p.imbalance},       {"read_pct", p.read_pct}};
  for (const auto& [key, value] : numbers) {
    w.Key(key);
    w.Double(Round4(value));
  }
  if (p.serial) {
    w.Key("serial");
    w.Bool(true);
  }
  w.Key("accesses");
  w.BeginArray();
  for (const Access& a : p.accesses) {
    w.BeginObject();
    w.Key("array");
    w.String(arrays[a.array].name);
    w.Key("pattern");
    w.String(a.pattern);
    w.Key("weight");
    w.Double(Round4(a.weight));
    if (a.pattern == "sequential") {
      w.Key("passes");
      w.Double(Round4(a.passes));
    } else if (a.pattern == "skewed") {
      // Rounded so that offset + fraction stays within the array.
      const double fraction = Round4(a.hot_fraction);
      w.Key("hot_fraction");
      w.Double(fraction);
      w.Key("hot_share");
      w.Double(Round4(a.hot_share));
      w.Key("hot_offset");
      w.Double(std::min(std::floor(a.hot_offset * 1e4) / 1e4, 1 - fraction));
    }
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
}

}  // namespace

std::string ProceduralAppName(uint64_t seed) {
  return StrCat("procedural-v", kProceduralVersion, "-", seed);
}

std::string ProceduralAppJson(uint64_t seed) {
  Draw d(seed);
  // Arrays: 3-9 of log-uniform relative sizes (the largest up to 64 times the smallest)
  // sharing a footprint of 0.75-6 GiB; half the applications also have a small heap array.
  std::vector<Array> arrays;
  if (d.Chance(0.5)) {
    arrays.push_back(Array{"meta", static_cast<uint64_t>(d.LogUniform(1, 32) * kMiB), true});
  }
  const int n = d.Int(3, 9);
  const double footprint = d.LogUniform(0.75, 6) * static_cast<double>(kGiB);
  std::vector<double> raw(static_cast<size_t>(n));
  double raw_sum = 0;
  for (double& r : raw) raw_sum += (r = d.LogUniform(1, 64));
  for (int i = 0; i < n; ++i) {
    const double bytes = std::max<double>(kMiB, footprint * raw[i] / raw_sum);
    arrays.push_back(Array{StrCat("a", i), static_cast<uint64_t>(bytes) / 4096 * 4096, false});
  }
  std::vector<int> all(arrays.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int>(i);

  std::vector<Phase> phases;
  // The first-touch phase: serial, one sweep over every array in declared order.
  Phase init;
  init.name = "init";
  init.description = "first touch: one sweep over every array in declared order";
  init.serial = true;
  init.instructions = static_cast<uint64_t>(d.LogUniform(20e9, 150e9));
  init.mpki = d.LogUniform(0.2, 1);
  init.compute_gips = d.Uniform(40, 55);
  init.mlp = 6;
  init.imbalance = 0.02;
  for (size_t i = 0; i < arrays.size(); ++i) {
    const uint64_t whole_mib = arrays[i].size_bytes / kMiB;  // whole MiB, as drawn
    init.accesses.push_back(Access{.array = static_cast<int>(i),
                                   .pattern = "sequential",
                                   .weight = std::max(1.0, static_cast<double>(whole_mib))});
  }
  phases.push_back(init);

  // Stages: one, or two whose kernels work on different arrays (the hot set switches).
  const int stages = d.Chance(0.35) ? 2 : 1;
  std::vector<Stage> plan(static_cast<size_t>(stages));
  const std::vector<double> kinds = {0.4, 0.25, 0.1, 0.25};
  int total_instances = 1;
  for (int s = 0; s < stages; ++s) {
    Stage& stage = plan[static_cast<size_t>(s)];
    // The second stage's kernels use a random half of the arrays (at least two).
    const std::vector<int> pool =
        s == 0 ? all : d.Choose(all, std::max<size_t>(2, (all.size() + 1) / 2));
    const int kernels = d.Int(1, 4);
    for (int k = 0; k < kernels; ++k) {
      const auto kind = static_cast<Kernel>(d.Pick(kinds));
      const std::string name = StrCat("s", s, "k", k, "_", kKernelNames[static_cast<int>(kind)]);
      Phase base = DrawKernel(d, kind, arrays, pool, name);
      StageKernel sk;
      // A drifting hot set: 2-4 variants whose skewed accesses' hot regions move by a
      // fixed step (wrapping around), taken in turn by the stage's iterations.
      const bool skewed = std::any_of(base.accesses.begin(), base.accesses.end(),
                                      [](const Access& a) { return a.pattern == "skewed"; });
      const int variants = skewed && d.Chance(0.35) ? d.Int(2, 4) : 1;
      const double step = d.Uniform(0.1, 0.5);
      for (int v = 0; v < variants; ++v) {
        Phase p = base;
        if (variants > 1) {
          p.name = StrCat(name, "_d", v);
          p.description = StrCat(base.description, ", hot set drifting (position ", v, ")");
          for (Access& a : p.accesses) {
            if (a.pattern != "skewed") continue;
            const double span = 1 - a.hot_fraction;
            a.hot_offset = span > 0 ? std::fmod(a.hot_offset + v * step * span, span) : 0;
          }
        }
        sk.variants.push_back(static_cast<int>(phases.size()));
        phases.push_back(std::move(p));
      }
      stage.kernels.push_back(std::move(sk));
    }
    if (kernels >= 2 && d.Chance(0.4)) {  // like a neighbour-list rebuild
      stage.periodic = 0;
      stage.period = d.Int(3, 10);
    }
    stage.iterations = d.Int(10, 60);
    total_instances += stage.iterations * kernels;
  }
  // At most about 600 phase instances (the generator's cost grows with them).
  const double scale = std::min(1.0, 600.0 / total_instances);

  json::Writer w(2);
  w.BeginObject();
  w.Key("name");
  w.String(ProceduralAppName(seed));
  w.Key("description");
  w.String(StrCat("procedural application (distribution v", kProceduralVersion, ", seed ", seed,
                  "; traces/SYNTH.md section 11): ", arrays.size(), " arrays, ", stages,
                  stages == 1 ? " stage" : " stages (the hot set switches)"));
  w.Key("threads");
  w.Int(64);
  w.Key("arrays");
  w.BeginArray();
  for (const Array& a : arrays) {
    w.BeginObject();
    w.Key("name");
    w.String(a.name);
    w.Key("size_bytes");
    w.Uint(a.size_bytes);
    if (a.heap) {
      w.Key("region");
      w.String("heap");
    }
    w.EndObject();
  }
  w.EndArray();
  w.Key("phases");
  w.BeginArray();
  for (const Phase& p : phases) WritePhase(p, arrays, w);
  w.EndArray();
  w.Key("schedule");
  w.BeginArray();
  w.String("init");
  for (const Stage& stage : plan) {
    // One iteration runs every kernel but the periodic one; iterations take the drifting
    // kernels' variants in turn, so the body holds as many iterations as the most variants.
    size_t unroll = 1;
    for (const StageKernel& k : stage.kernels) unroll = std::max(unroll, k.variants.size());
    const int iterations = std::max(1, static_cast<int>(std::lround(stage.iterations * scale)));
    const auto write_iteration = [&](size_t j) {
      for (size_t k = 0; k < stage.kernels.size(); ++k) {
        if (static_cast<int>(k) == stage.periodic) continue;
        const std::vector<int>& v = stage.kernels[k].variants;
        w.String(phases[static_cast<size_t>(v[j % v.size()])].name);
      }
    };
    // "repeat": count / unroll (at least once), "phases": the unrolled iterations.
    const auto write_body = [&](int64_t count) {
      w.Int(std::max<int64_t>(1, count / static_cast<int64_t>(unroll)));
      w.Key("phases");
      w.BeginArray();
      for (size_t j = 0; j < unroll; ++j) write_iteration(j);
      w.EndArray();
    };
    w.BeginObject();
    w.Key("repeat");
    if (stage.periodic >= 0) {
      // [periodic, {repeat: period, [iteration...]}] repeated.
      const int outer = std::max(1, iterations / stage.period);
      w.Int(outer);
      w.Key("phases");
      w.BeginArray();
      const std::vector<int>& pv = stage.kernels[static_cast<size_t>(stage.periodic)].variants;
      w.String(phases[static_cast<size_t>(pv[0])].name);
      w.BeginObject();
      w.Key("repeat");
      write_body(stage.period);
      w.EndObject();
      w.EndArray();
    } else {
      write_body(iterations);
    }
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  return w.Take();
}

absl::StatusOr<AppModel> ProceduralAppModel(uint64_t seed) {
  const std::string text = ProceduralAppJson(seed);
  absl::StatusOr<AppModel> model = ParseAppModel(text, StrCat(kProceduralPrefix, seed));
  if (!model.ok()) {
    return absl::InternalError(
        StrCat("the procedural generator made an invalid model: ", model.status().message()));
  }
  return model;
}

absl::StatusOr<std::optional<uint64_t>> ParseProceduralName(std::string_view name) {
  if (!name.starts_with(kProceduralPrefix)) return std::nullopt;
  const std::string_view digits = name.substr(kProceduralPrefix.size());
  uint64_t seed = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), seed);
  if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size()) {
    return absl::InvalidArgumentError(
        StrCat("application model \"", name,
               "\": expected procedural:SEED with SEED a decimal integer below 2^64"));
  }
  return seed;
}

}  // namespace tiergym::synth

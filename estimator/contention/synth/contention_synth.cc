#include "estimator/contention/synth/contention_synth.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "traces/base/status_macros.h"
#include "traces/base/strings.h"
#include "traces/machine.h"
#include "traces/synth/app_model.h"
#include "traces/synth/corun_synth.h"
#include "traces/synth/rng.h"
#include "traces/synth/time_model.h"

namespace tiergym::contention {
namespace {

using synth::AppModel;
using synth::TimeModel;

// A target: an application whose data is on the contended tier.
struct Target {
  AppModel model;
  double solo_ns = 0;  // noise-free solo runtime on the tier
};

// An interferer: an application run from the other socket with `threads` threads, its
// data on the contended tier. Per phase of its model: the share of its solo run's time
// and the bandwidth it puts on the tier during that phase (GB/s).
struct Interferer {
  std::string name;
  double read_pct = 100;
  std::vector<double> phase_time_share;
  std::vector<double> phase_gbps;
  double mean_gbps = 0;  // whole-run average (what its CAS counters report)
};

class Physics {
 public:
  Physics(const ContentionSynthOptions& o, Machine machine, int tier)
      : o_(o), machine_(std::move(machine)), tier_(tier) {}

  [[nodiscard]] const Machine& machine() const { return machine_; }
  [[nodiscard]] int tier() const { return tier_; }

  // Most a remote stream with `read_pct` % reads reaches (the link, not the memory).
  [[nodiscard]] double LinkGbps(double read_pct) const {
    const double r = read_pct / 100.0;
    return o_.link_read_gbps * (o_.link_write_factor + (1 - o_.link_write_factor) * r);
  }

  // The machine as the target sees it while an interferer streams `gbps` with
  // `read_pct` % reads into the contended tier.
  // The law is the co-runs' (traces/synth/corun_synth.h, TierLoadFor): one definition.
  [[nodiscard]] Machine Loaded(double gbps, double read_pct) const {
    const TierSpec& t = machine_.tiers[tier_];
    const synth::SharedTierLaw law{o_.write_weight, o_.queueing, o_.max_utilization};
    Machine m = machine_;
    m.tiers[tier_] = synth::LoadedTier(
        t, synth::TierLoadFor(t.bandwidth_gbps, gbps, read_pct, o_.fair_share, law));
    return m;
  }

  // The machine an application sees when its data is on the contended tier but it runs
  // on the other socket (how it interferes).
  [[nodiscard]] Machine Remote(double read_pct) const {
    Machine m = machine_;
    TierSpec& t = m.tiers[tier_];
    t.bandwidth_gbps = std::min(t.bandwidth_gbps, LinkGbps(read_pct));
    t.latency_ns += o_.remote_latency_ns;
    return m;
  }

  // Noise-free normalized performance of `app` under a steady interferer.
  [[nodiscard]] double TruePerf(const Target& app, double gbps, double read_pct) const {
    const Machine loaded = Loaded(gbps, read_pct);
    return app.solo_ns / TimeModel(app.model, loaded).RuntimeNs(synth::WholeTier(tier_));
  }

 private:
  const ContentionSynthOptions& o_;
  Machine machine_;
  int tier_;
};

absl::Status CheckOptions(const ContentionSynthOptions& o) {
  const auto bad = [](std::string_view why) {
    return absl::InvalidArgumentError(StrCat("contention synth: ", why));
  };
  if (o.apps.empty()) return bad("no applications");
  for (const SynthApp& a : o.apps) {
    if (!(a.read_pct >= 0 && a.read_pct <= 100)) {
      return bad(StrCat("read share ", a.read_pct, " of ", a.model, " is outside [0, 100]"));
    }
  }
  if (o.read_pcts.empty()) return bad("no read shares to measure curves at");
  for (double r : o.read_pcts) {
    if (!(r >= 0 && r <= 100)) return bad(StrCat("curve read share ", r, " is outside [0, 100]"));
  }
  if (o.level_fractions.empty()) return bad("no interference levels");
  for (double f : o.level_fractions) {
    if (!(f > 0 && f <= 1)) return bad(StrCat("level fraction ", f, " is outside (0, 1]"));
  }
  if (o.repeats < 1) return bad("repeats must be >= 1");
  if (o.interferer_scales.empty()) return bad("no interferer scales");
  for (double f : o.interferer_scales) {
    if (!(f > 0 && f <= 1)) return bad(StrCat("interferer scale ", f, " is outside (0, 1]"));
  }
  for (double v : {o.level_noise, o.curve_noise, o.solo_noise, o.pair_noise}) {
    if (!(v >= 0 && v <= 0.2)) return bad(StrCat("noise ", v, " is outside [0, 0.2]"));
  }
  if (!(o.outlier_probability >= 0 && o.outlier_probability <= 1)) {
    return bad("outlier_probability is outside [0, 1]");
  }
  if (!(o.outlier_min_drop >= 0 && o.outlier_min_drop <= o.outlier_max_drop &&
        o.outlier_max_drop < 1)) {
    return bad("outlier drops need 0 <= min <= max < 1");
  }
  if (!(o.write_weight >= 1 && o.link_read_gbps > 0 && o.link_write_factor > 0 &&
        o.link_write_factor <= 1 && o.remote_latency_ns >= 0 && o.queueing >= 0 &&
        o.fair_share > 0 && o.fair_share <= 1 && o.max_utilization > 0 && o.max_utilization < 1)) {
    return bad("a memory or link constant is out of range (see CONTENTION.md, section 2)");
  }
  return absl::OkStatus();
}

// `model` run from the other socket with `scale` of its threads (at least one): each
// thread computes as fast as before, so a phase's compute rate scales with the threads;
// the outstanding misses scale through the thread count (traces/SYNTH.md, time model).
Interferer MakeInterferer(const AppModel& model, double read_pct, double scale,
                          const Physics& physics) {
  AppModel scaled = model;
  scaled.threads = std::max(1, static_cast<int>(std::lround(model.threads * scale)));
  const double compute_factor = static_cast<double>(scaled.threads) / model.threads;
  for (synth::PhaseSpec& ph : scaled.phases) ph.compute_gips *= compute_factor;
  Interferer out;
  out.name =
      scaled.threads == model.threads ? model.name : StrCat(model.name, "-", scaled.threads, "t");
  out.read_pct = read_pct;
  const Machine remote = physics.Remote(read_pct);
  const TimeModel remote_model(scaled, remote);
  const synth::TierMap on_tier = synth::WholeTier(physics.tier());
  std::vector<double> instances(scaled.phases.size(), 0);
  for (int p : scaled.schedule) instances[p] += 1;
  double total_ns = 0, total_bytes = 0;
  for (size_t p = 0; p < scaled.phases.size(); ++p) {
    const synth::PhaseSpec& ph = scaled.phases[p];
    const double ns = remote_model.PhaseTimeNs(static_cast<int>(p), on_tier);
    const double bytes =
        static_cast<double>(ph.instructions) * ph.mpki / 1000.0 * remote.cache_line_bytes;
    out.phase_time_share.push_back(instances[p] * ns);
    out.phase_gbps.push_back(bytes / ns);
    total_ns += instances[p] * ns;
    total_bytes += instances[p] * bytes;
  }
  for (double& share : out.phase_time_share) share /= total_ns;
  out.mean_gbps = total_bytes / total_ns;
  return out;
}

// 1 + sd * (approximately standard normal), at least 0.5.
double Noisy(std::mt19937_64& g, double sd) {
  return std::max(0.5, 1.0 + sd * synth::StandardNoise(g));
}

}  // namespace

std::vector<SynthApp> ContentionSynthOptions::DefaultSynthApps() {
  return {{"minife", 85}, {"lulesh", 65}, {"nekbone", 72}, {"lammps", 80}, {"hotset", 95}};
}

absl::StatusOr<ContentionData> SynthesizeContentionData(const ContentionSynthOptions& o) {
  TG_RETURN_IF_ERROR(CheckOptions(o));
  TG_ASSIGN_OR_RETURN(Machine machine, LoadMachine(o.machine));
  int tier = 0;
  if (!o.tier.empty()) {
    tier = machine.IndexOf(o.tier);
    if (tier < 0) {
      return absl::NotFoundError(
          StrCat("contention synth: machine ", machine.name, " has no tier \"", o.tier, "\""));
    }
  }
  const Physics physics(o, std::move(machine), tier);
  const synth::TierMap on_tier = synth::WholeTier(tier);

  std::vector<Target> targets;
  std::vector<Interferer> interferers;
  for (const SynthApp& spec : o.apps) {
    Target target;
    TG_ASSIGN_OR_RETURN(target.model, synth::LoadAppModel(spec.model));
    target.solo_ns = TimeModel(target.model, physics.machine()).RuntimeNs(on_tier);
    for (double scale : o.interferer_scales) {
      interferers.push_back(MakeInterferer(target.model, spec.read_pct, scale, physics));
    }
    targets.push_back(std::move(target));
  }

  ContentionData data;
  std::vector<double> read_pcts = o.read_pcts;
  std::sort(read_pcts.begin(), read_pcts.end());
  read_pcts.erase(std::unique(read_pcts.begin(), read_pcts.end()), read_pcts.end());
  for (const Target& target : targets) {
    SensitivityFamily family;
    family.app = target.model.name;
    for (double read_pct : read_pcts) {
      std::mt19937_64 g(
          synth::StreamSeed(o.seed, target.model.name, StrCat("contention/curve/", read_pct)));
      SensitivityCurve curve;
      curve.read_pct = read_pct;
      const double link = physics.LinkGbps(read_pct);
      for (double fraction : o.level_fractions) {
        const double gbps = fraction * link * Noisy(g, o.level_noise);
        const double truth = physics.TruePerf(target, gbps, read_pct);
        for (int k = 0; k < o.repeats; ++k) {
          double perf = truth * Noisy(g, o.curve_noise);
          // The outlier decision and its size are drawn for every measurement, so that
          // the other measurements do not depend on the outlier probability.
          const double u = synth::UniformDouble(g);
          const double drop = o.outlier_min_drop +
                              (o.outlier_max_drop - o.outlier_min_drop) * synth::UniformDouble(g);
          if (u < o.outlier_probability) perf *= 1 - drop;
          curve.points.push_back(CurvePoint{gbps, std::min(perf, 2.0)});
        }
      }
      std::stable_sort(curve.points.begin(), curve.points.end(),
                       [](const CurvePoint& a, const CurvePoint& b) {
                         return a.interference_gbps < b.interference_gbps;
                       });
      family.curves.push_back(std::move(curve));
    }
    data.families.push_back(std::move(family));
  }

  for (const Interferer& interferer : interferers) {
    std::mt19937_64 g(synth::StreamSeed(o.seed, interferer.name, "contention/solo"));
    AppBandwidth solo;
    solo.app = interferer.name;
    solo.read_gbps = interferer.mean_gbps * interferer.read_pct / 100.0 * Noisy(g, o.solo_noise);
    solo.write_gbps =
        interferer.mean_gbps * (1 - interferer.read_pct / 100.0) * Noisy(g, o.solo_noise);
    data.apps.push_back(std::move(solo));
  }

  // A pair: the interferer restarts whenever it ends, so the target spends the share of
  // time of each of the interferer's phases under that phase's bandwidth; its progress
  // rate is the time-weighted mean of the steady-state normalized performances.
  for (const Target& target : targets) {
    for (const Interferer& interferer : interferers) {
      double truth = 0;
      for (size_t p = 0; p < interferer.phase_gbps.size(); ++p) {
        truth += interferer.phase_time_share[p] *
                 physics.TruePerf(target, interferer.phase_gbps[p], interferer.read_pct);
      }
      std::mt19937_64 g(synth::StreamSeed(o.seed, target.model.name,
                                          StrCat("contention/pair/", interferer.name)));
      data.pairs.push_back(MeasuredPair{target.model.name, interferer.name,
                                        std::min(truth * Noisy(g, o.pair_noise), 2.0)});
    }
  }
  return data;
}

}  // namespace tiergym::contention

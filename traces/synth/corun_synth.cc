#include "traces/synth/corun_synth.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <set>

#include "traces/base/status_macros.h"
#include "traces/base/strings.h"
#include "traces/synth/generator.h"

namespace tiergym::synth {
namespace {

uint64_t ToNs(double t) { return t <= 0 ? 0 : static_cast<uint64_t>(std::floor(t)); }

// Fixed point of the tenants' chunk times: stop when no time moves by more than this
// (relative), or after kMaxIterations damped steps.
constexpr double kTolerance = 1e-9;
constexpr int kMaxIterations = 200;

// One tenant during the simulation.
struct Sim {
  enum class State { kPending, kChunk, kWait, kDone };
  const CorunTenant* spec = nullptr;
  TierMap map;
  RunRealisation real;
  std::vector<std::vector<double>> shares;   // [phase][chunk * tiers + tier]
  std::vector<std::vector<double>> solo_ns;  // [phase][chunk]: unloaded, noise-free

  State state = State::kPending;
  size_t instance = 0;
  int chunk = 0;
  double remaining = 1;  // fraction of the current chunk's work left
  double wait_ns = 0;    // barrier wait left
  double busy_ns = 0;    // chunk time spent in the current phase instance
  double duration = 0;   // the current chunk's time at the current loads (noise included)
  std::vector<double> chunk_bytes;  // per tier, the current chunk's (noise included)
  double span_from = 0;
  std::vector<double> span_bytes;  // per tier, this phase instance so far
  double end = 0;
  CorunTenantResult result;
};

std::string SafeName(std::string_view name) {
  if (name.empty()) return "";
  for (char c : name) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.' ||
          c == '+')) {
      return "";
    }
  }
  return std::string(name);
}

}  // namespace

TierLoad TierLoadFor(double peak_gbps, double others_gbps, double others_read_pct,
                     double fair_share, const SharedTierLaw& law) {
  if (!(others_gbps > 0) || !(peak_gbps > 0)) return {};
  const double r = others_read_pct / 100.0;
  const double load = others_gbps * (r + law.write_weight * (1 - r));
  const double u = std::min(load / peak_gbps, law.max_utilization);
  return {std::max(1 - u, fair_share), 1 + law.queueing * u * u / (1 - u)};
}

TierSpec LoadedTier(const TierSpec& tier, const TierLoad& load) {
  TierSpec t = tier;
  t.bandwidth_gbps = tier.bandwidth_gbps * load.bandwidth_factor;
  t.latency_ns = tier.latency_ns * load.latency_factor;
  for (BandwidthLatencyCurve& c : t.curves) {
    for (auto& [gbps, ns] : c.points) {
      gbps *= load.bandwidth_factor;
      ns *= load.latency_factor;
    }
  }
  return t;
}

absl::StatusOr<CorunResult> SimulateCorun(const Machine& machine, const CorunScenario& scenario,
                                          const CorunOptions& options) {
  const auto bad = [&](std::string_view why) {
    return absl::InvalidArgumentError(StrCat("co-run ", scenario.name, ": ", why));
  };
  if (scenario.tenants.empty()) return bad("no tenants");
  if (options.chunks_per_phase < 1 || options.chunks_per_phase > 100000) {
    return bad("chunks_per_phase must be in [1, 100000]");
  }
  const SharedTierLaw& law = options.law;
  if (!(law.write_weight >= 1 && law.queueing >= 0 && law.max_utilization > 0 &&
        law.max_utilization < 1)) {
    return bad(
        "shared-tier law out of range (write_weight >= 1, queueing >= 0, "
        "max_utilization in (0, 1))");
  }
  const size_t tiers = machine.tiers.size();
  const int chunks = options.chunks_per_phase;
  std::vector<Sim> sims(scenario.tenants.size());
  std::vector<uint64_t> used(tiers, 0);
  std::set<std::string> names;
  for (size_t i = 0; i < sims.size(); ++i) {
    const CorunTenant& t = scenario.tenants[i];
    Sim& s = sims[i];
    s.spec = &t;
    if (SafeName(t.name).empty()) {
      return bad(StrCat("tenants[", i, "]: name \"", t.name,
                        "\" must be non-empty letters, digits, '-', '_', '.', '+'"));
    }
    if (!names.insert(t.name).second) return bad(StrCat("tenant \"", t.name, "\" appears twice"));
    if (!(t.read_pct >= 0 && t.read_pct <= 100)) {
      return bad(StrCat("tenant ", t.name, ": read_pct must be in [0, 100]"));
    }
    if (t.app.schedule.empty()) return bad(StrCat("tenant ", t.name, ": empty schedule"));
    absl::StatusOr<TierMap> map = ResolvePlacement(t.app, machine, t.placement);
    if (!map.ok()) {
      return absl::Status(map.status().code(), StrCat("co-run ", scenario.name, ": tenant ", t.name,
                                                      ": ", map.status().message()));
    }
    s.map = *std::move(map);
    const std::vector<uint64_t> bytes = TierBytes(t.app, machine, s.map);
    for (size_t k = 0; k < tiers; ++k) used[k] += bytes[k];
    const std::string run = t.run.empty() ? StrCat("corun/", scenario.name, "/", t.name) : t.run;
    s.real = MakeRealisation(t.app, options.seed, StrCat("run/", run));
    TG_ASSIGN_OR_RETURN(s.result.solo_runtime_ns, GroundTruthRuntimeNs(t.app, machine, t.placement,
                                                                       options.seed, run, chunks));
    const TimeModel model(t.app, machine, chunks);
    s.shares.resize(t.app.phases.size());
    s.solo_ns.resize(t.app.phases.size());
    for (size_t p = 0; p < t.app.phases.size(); ++p) {
      for (int k = 0; k < chunks; ++k) {
        const std::vector<double> f = model.ChunkTierShares(static_cast<int>(p), k, s.map);
        s.shares[p].insert(s.shares[p].end(), f.begin(), f.end());
      }
      s.solo_ns[p] = model.ChunkTimesNs(static_cast<int>(p), s.map);
    }
    s.result.name = t.name;
    s.result.start_ns = t.start_ns;
    s.chunk_bytes.assign(tiers, 0.0);
    s.span_bytes.assign(tiers, 0.0);
  }
  for (size_t k = 0; k < tiers; ++k) {
    if (used[k] > machine.tiers[k].capacity_bytes) {
      return absl::ResourceExhaustedError(StrCat(
          "co-run ", scenario.name, ": the tenants put ", used[k], " bytes on tier ",
          machine.tiers[k].name, " whose capacity is ", machine.tiers[k].capacity_bytes, " bytes"));
    }
  }

  // The current chunk of a tenant: its bytes per tier and its unloaded time.
  const auto enter_chunk = [&](Sim& s) {
    const AppModel& app = s.spec->app;
    const int p = app.schedule[s.instance];
    const PhaseSpec& ph = app.phases[p];
    const double a = s.real.instruction_factor[s.instance];
    const double scale = a * s.real.time_factor[s.instance];
    const double misses =
        ph.accesses.empty() ? 0.0
                            : static_cast<double>(ph.instructions) / chunks * a * ph.mpki / 1000.0;
    for (size_t k = 0; k < tiers; ++k) {
      s.chunk_bytes[k] = misses * machine.cache_line_bytes * s.shares[p][s.chunk * tiers + k];
    }
    s.duration = s.solo_ns[p][s.chunk] * scale;
    s.remaining = 1;
    s.state = Sim::State::kChunk;
  };
  const auto start_instance = [&](Sim& s, double now) {
    s.busy_ns = 0;
    s.chunk = 0;
    s.span_from = now;
    std::fill(s.span_bytes.begin(), s.span_bytes.end(), 0.0);
    enter_chunk(s);
  };
  const auto finish_instance = [&](Sim& s, double now) {
    BandwidthSpan span{ToNs(s.span_from), ToNs(now), std::vector<double>(tiers, 0.0)};
    const double length = now - s.span_from;
    for (size_t k = 0; k < tiers; ++k) span.gbps[k] = length > 0 ? s.span_bytes[k] / length : 0;
    s.result.bandwidth.push_back(std::move(span));
    if (++s.instance == s.spec->app.schedule.size()) {
      s.state = Sim::State::kDone;
      s.end = now;
      return;
    }
    start_instance(s, now);
  };
  const auto finish_chunk = [&](Sim& s, double now) {
    if (++s.chunk < chunks) {
      enter_chunk(s);
      return;
    }
    const PhaseSpec& ph = s.spec->app.phases[s.spec->app.schedule[s.instance]];
    s.wait_ns = s.busy_ns * ph.imbalance;
    if (s.wait_ns > 0) {
      s.state = Sim::State::kWait;
    } else {
      finish_instance(s, now);
    }
  };

  // The loaded chunk times of the tenants in a chunk, solved together.
  std::vector<size_t> running;
  std::vector<double> next, gbps, read;
  std::vector<int> movers(tiers);
  std::vector<TierLoad> loads(tiers);
  const auto solve = [&]() {
    if (running.size() < 2) {
      // Alone (the others wait, have not started or have left): the unloaded time.
      for (size_t i : running) {
        Sim& s = sims[i];
        const int p = s.spec->app.schedule[s.instance];
        s.duration = s.solo_ns[p][s.chunk] * s.real.instruction_factor[s.instance] *
                     s.real.time_factor[s.instance];
      }
      return;
    }
    std::fill(movers.begin(), movers.end(), 0);
    for (size_t i : running) {
      for (size_t k = 0; k < tiers; ++k) movers[k] += sims[i].chunk_bytes[k] > 0;
    }
    next.resize(running.size());
    for (int iteration = 0; iteration < kMaxIterations; ++iteration) {
      double change = 0;
      for (size_t a = 0; a < running.size(); ++a) {
        Sim& s = sims[running[a]];
        for (size_t k = 0; k < tiers; ++k) {
          double others = 0, reads = 0;
          for (size_t b = 0; b < running.size(); ++b) {
            if (b == a) continue;
            const Sim& o = sims[running[b]];
            const double g = o.chunk_bytes[k] / o.duration;
            others += g;
            reads += g * o.spec->read_pct;
          }
          loads[k] =
              TierLoadFor(machine.tiers[k].bandwidth_gbps, others,
                          others > 0 ? reads / others : 100.0, 1.0 / std::max(1, movers[k]), law);
        }
        const AppModel& app = s.spec->app;
        const int p = app.schedule[s.instance];
        const double scale = s.real.instruction_factor[s.instance] * s.real.time_factor[s.instance];
        next[a] = TimeModel::ChunkTimeNs(
                      app.phases[p], machine, app.threads,
                      static_cast<double>(app.phases[p].instructions) / chunks,
                      std::span<const double>(&s.shares[p][s.chunk * tiers], tiers), loads) *
                  scale;
        change = std::max(change, std::fabs(next[a] - s.duration) / s.duration);
      }
      // Damped: the map is antitone (a slower co-runner loads the others less), which an
      // undamped iteration can turn into an oscillation.
      for (size_t a = 0; a < running.size(); ++a) {
        Sim& s = sims[running[a]];
        s.duration = iteration == 0 ? next[a] : 0.5 * (s.duration + next[a]);
      }
      if (change < kTolerance) break;
    }
  };

  CorunResult out;
  double now = 0;
  const double inf = std::numeric_limits<double>::infinity();
  while (true) {
    for (Sim& s : sims) {
      if (s.state == Sim::State::kPending && static_cast<double>(s.spec->start_ns) <= now) {
        start_instance(s, now);
      }
    }
    running.clear();
    bool all_done = true;
    for (size_t i = 0; i < sims.size(); ++i) {
      all_done &= sims[i].state == Sim::State::kDone;
      if (sims[i].state == Sim::State::kChunk) running.push_back(i);
    }
    if (all_done) break;
    solve();
    double step = inf;
    for (const Sim& s : sims) {
      switch (s.state) {
        case Sim::State::kPending:
          step = std::min(step, static_cast<double>(s.spec->start_ns) - now);
          break;
        case Sim::State::kChunk:
          step = std::min(step, s.remaining * s.duration);
          break;
        case Sim::State::kWait:
          step = std::min(step, s.wait_ns);
          break;
        case Sim::State::kDone:
          break;
      }
    }
    ++out.events;
    const double end = now + step;
    for (Sim& s : sims) {
      if (s.state == Sim::State::kChunk) {
        const double left = s.remaining * s.duration;
        if (left <= step * (1 + 1e-12)) {
          for (size_t k = 0; k < tiers; ++k) s.span_bytes[k] += s.remaining * s.chunk_bytes[k];
          s.busy_ns += left;
          finish_chunk(s, end);
        } else {
          const double f = step / s.duration;
          for (size_t k = 0; k < tiers; ++k) s.span_bytes[k] += f * s.chunk_bytes[k];
          s.busy_ns += step;
          s.remaining -= f;
        }
      } else if (s.state == Sim::State::kWait) {
        if (s.wait_ns <= step * (1 + 1e-12)) {
          finish_instance(s, end);
        } else {
          s.wait_ns -= step;
        }
      }
    }
    now = end;
  }
  for (Sim& s : sims) {
    s.result.runtime_ns = ToNs(s.end - static_cast<double>(s.spec->start_ns));
    out.tenants.push_back(std::move(s.result));
  }
  return out;
}

absl::StatusOr<std::vector<CorunScenario>> BundledCorunScenarios(const Machine& machine) {
  struct Spec {
    const char* app;
    double read_pct;
    std::vector<std::pair<const char*, double>> fractions;  // tier, fraction
    uint64_t start_s;
  };
  struct Named {
    const char* name;
    std::vector<Spec> tenants;
  };
  // Read shares of CONTENTION.md, section 6.
  const double minife = 85, lulesh = 65, nekbone = 72, lammps = 80;
  std::vector<Named> specs;
  if (machine.name == "knl") {
    specs = {
        {"knl-2-ddr", {{"minife", minife, {}, 0}, {"lulesh", lulesh, {}, 0}}},
        {"knl-2-hbm",
         {{"minife", minife, {{"hbm", 1.0}}, 0}, {"lulesh", lulesh, {{"hbm", 1.0}}, 0}}},
        {"knl-2-split",
         {{"minife", minife, {{"hbm", 0.5}}, 0}, {"lulesh", lulesh, {{"hbm", 0.5}}, 5}}},
        {"knl-4-ddr",
         {{"minife", minife, {}, 0},
          {"lulesh", lulesh, {}, 0},
          {"nekbone", nekbone, {}, 0},
          {"lammps", lammps, {}, 0}}},
        {"knl-4-mixed",
         {{"minife", minife, {{"hbm", 1.0}}, 0},
          {"lulesh", lulesh, {{"hbm", 0.5}}, 0},
          {"nekbone", nekbone, {}, 3},
          {"lammps", lammps, {{"hbm", 0.3}}, 6}}},
    };
  } else if (machine.name == "disagg") {
    specs = {
        {"disagg-2-remote",
         {{"minife", minife, {{"remote", 0.8}}, 0}, {"lulesh", lulesh, {{"remote", 0.8}}, 0}}},
        {"disagg-2-mix",
         {{"minife", minife, {{"hbm", 0.3}, {"remote", 0.5}}, 0},
          {"lulesh", lulesh, {{"hbm", 0.2}, {"remote", 0.6}}, 5}}},
        {"disagg-4-remote",
         {{"minife", minife, {{"remote", 0.7}}, 0},
          {"lulesh", lulesh, {{"remote", 0.7}}, 0},
          {"nekbone", nekbone, {{"remote", 0.7}}, 0},
          {"lammps", lammps, {{"remote", 0.7}}, 0}}},
        {"disagg-4-mix",
         {{"minife", minife, {{"hbm", 0.5}, {"remote", 0.3}}, 0},
          {"lulesh", lulesh, {{"remote", 0.6}}, 0},
          {"nekbone", nekbone, {{"hbm", 0.3}, {"remote", 0.4}}, 4},
          {"lammps", lammps, {{"remote", 0.5}}, 8}}},
    };
  }
  std::vector<CorunScenario> out;
  for (const Named& n : specs) {
    CorunScenario scenario;
    scenario.name = n.name;
    for (const Spec& t : n.tenants) {
      CorunTenant tenant;
      tenant.name = t.app;
      TG_ASSIGN_OR_RETURN(tenant.app, LoadAppModel(t.app));
      tenant.placement.default_tier = machine.tiers[0].name;
      for (const auto& [tier, f] : t.fractions) tenant.placement.fractions.emplace_back(tier, f);
      tenant.start_ns = t.start_s * 1'000'000'000ull;
      tenant.read_pct = t.read_pct;
      scenario.tenants.push_back(std::move(tenant));
    }
    out.push_back(std::move(scenario));
  }
  return out;
}

}  // namespace tiergym::synth

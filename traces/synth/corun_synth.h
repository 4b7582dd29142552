// Synthetic co-runs: several applications sharing the synthetic machine at once, with
// ground truth from the machine's own time model (time_model.h), not from any estimator.
//
// Each tenant runs its application model under its own placement from its own start time.
// Tenants share the memory tiers, not the cores (each keeps its model's threads and
// compute rate: tenants on other cores or sockets of the node, as in the contention
// paper). While tenants run, the time model's chunk equation (traces/SYNTH.md, section 4)
// is evaluated for every tenant on tiers loaded by the others' traffic at that moment: on
// tier t, the others put G GB/s with read share R, whose channel load is
// G (R + w (1 - R)); with u = min(load / B_t, u_max) the tenant sees the peak bandwidth
// B_t · max(1 - u, 1 / n_t) (n_t: tenants moving data on t, so a saturated tier is shared
// fairly) and the idle latency λ_t (1 + κ u² / (1 - u)) (TierLoadFor; the law, w, κ and
// u_max are those of the synthetic contention model of estimator/contention/CONTENTION.md,
// section 6, which uses this function too). Tiers with measured curves scale their curve
// alike and load it further with the tenant's own traffic. The others' traffic depends on
// their own chunk times, so at every moment the tenants' chunk times are solved together
// (a damped fixed point). A tenant that finishes leaves the node.
//
// The simulation is event driven: between two events (a tenant starts, finishes a chunk,
// a barrier wait ends) every tenant's rate is constant. Noise: each tenant's phase
// instances carry the factors of MakeRealisation(seed, "run/<run>") as a measured run
// does, so one tenant alone reproduces GroundTruthRuntimeNs(..., run, ...) exactly (to the
// rounding of the sums). Deterministic: the same arguments give the same result.
//
// Thread-safe: pure functions.
#ifndef TIERGYM_TRACES_SYNTH_CORUN_SYNTH_H_
#define TIERGYM_TRACES_SYNTH_CORUN_SYNTH_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "traces/machine.h"
#include "traces/placement.h"
#include "traces/synth/app_model.h"
#include "traces/synth/time_model.h"

namespace tiergym::synth {

// How co-runners' traffic loads a tier (CONTENTION.md, section 6).
struct SharedTierLaw {
  double write_weight = 1.6;      // channel time of a written byte / of a read byte, >= 1
  double queueing = 0.8;          // kappa in latency x (1 + kappa u^2 / (1 - u)), >= 0
  double max_utilization = 0.95;  // cap of u, in (0, 1)
};

// What a tier of peak `peak_gbps` looks like to one application while others put
// `others_gbps` (>= 0) with `others_read_pct` % reads on it; it keeps at least
// `fair_share` (in (0, 1]) of the bandwidth. No load: factors 1 exactly.
TierLoad TierLoadFor(double peak_gbps, double others_gbps, double others_read_pct,
                     double fair_share, const SharedTierLaw& law);

// `tier` with its bandwidth, latency and curve points scaled by `load`.
TierSpec LoadedTier(const TierSpec& tier, const TierLoad& load);

struct CorunTenant {
  std::string name;  // unique in the scenario; letters, digits, '-', '_', '.', '+'
  AppModel app;
  Placement placement;
  uint64_t start_ns = 0;  // when it starts, from the scenario's start
  double read_pct = 100;  // share of reads in its traffic: how it loads the tiers
  std::string run;        // noise stream "time/run/<run>"; "" = "corun/<scenario>/<name>"
};

struct CorunScenario {
  std::string name;
  std::vector<CorunTenant> tenants;
};

struct CorunOptions {
  uint64_t seed = 1;
  int chunks_per_phase = TimeModel::kDefaultChunksPerPhase;  // >= 1
  SharedTierLaw law;
};

// A tenant's traffic during one of its phase instances: mean GB/s per machine tier.
struct BandwidthSpan {
  uint64_t from_ns = 0, to_ns = 0;  // scenario time
  std::vector<double> gbps;         // per machine tier
};

struct CorunTenantResult {
  std::string name;
  uint64_t start_ns = 0;
  uint64_t runtime_ns = 0;       // from its start to its end, sharing the node
  uint64_t solo_runtime_ns = 0;  // alone on the node, same placement and noise
  std::vector<BandwidthSpan> bandwidth;
};

struct CorunResult {
  std::vector<CorunTenantResult> tenants;  // in scenario order
  uint64_t events = 0;                     // simulation steps
};

// Simulates the scenario on `machine`. InvalidArgument for no tenants, duplicate or
// invalid names, a placement that does not resolve (ResolvePlacement), a read share
// outside [0, 100] or bad options; ResourceExhausted when the tenants' pages together
// exceed a tier's capacity (named with the bytes).
absl::StatusOr<CorunResult> SimulateCorun(const Machine& machine, const CorunScenario& scenario,
                                          const CorunOptions& options);

// The bundled co-run scenarios of a machine: two and four tenants of the bundled
// applications (minife, lulesh, nekbone, lammps) on `knl` and on `disagg`, with the read
// shares of CONTENTION.md (traces/SYNTH.md, "Co-runs", lists them). Empty for another
// machine. NotFound if a bundled model fails to load (it cannot).
absl::StatusOr<std::vector<CorunScenario>> BundledCorunScenarios(const Machine& machine);

}  // namespace tiergym::synth

#endif  // TIERGYM_TRACES_SYNTH_CORUN_SYNTH_H_

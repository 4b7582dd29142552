// Co-scheduled applications: K tenants, each an application profile, run at once on one
// node (a machine description) and share its fast tier's capacity, the bandwidth of every
// tier and the migration bandwidth. Contention comes from the tenants themselves: what one
// tenant places on a tier slows the others there.
//
// Built on the single-application environment's parts (env/environment.h): the tenants'
// profiles are one EnvAssets (regions, decision intervals, default runs, interval pricers),
// each tenant's episode moves its regions and prices its intervals with its profile's
// IntervalPricer, and the contention estimator (estimator/contention, the contention paper
// of Zacarias et al.) turns the co-runners' bandwidth on a tier into a slowdown factor that
// scales the time the estimate attributes to that tier (IntervalPricer::Episode::
// IntervalNs with tier factors, as an interference schedule's factors do).
//
// Time. A node step is one decision interval of every tenant on the node (lockstep): each
// running tenant executes its next interval (1/steps of its run, or its next phase); the
// intervals start together and the step ends with the longest (a barrier: a tenant whose
// interval ends first waits, idle, for the others). Per step, for every running tenant i:
//   1. its action moves its regions (capacity of the node enforced: the used bytes of a
//      tier are all tenants'; a move that does not fit is refused, as in Environment;
//      tenants take turns starting from tenant (step mod K), then the refused moves are
//      retried once);
//   2. its migration time is its own bytes over the destination tier's migration bandwidth
//      (as in Environment), plus, for the bandwidth it shares with the tenants migrating
//      to the same tier in the same step, sum over j != i of min(B_j, B_i) / bandwidth
//      (processor sharing: tenant i's transfer ends once every smaller one has had its
//      share);
//   3. its solo interval time S_i is the interval's estimate under its placement with no
//      co-runner; its bytes on tier t are its sampled misses there (regions on t, PEBS
//      reset applied: ProfileAssets::misses_per_access) x 64 B;
//   4. its slowdown on tier t is its sensitivity curves' Slowdown (ContentionModel) with
//      the other running tenants as co-runners on t: each one's mean bandwidth there over
//      i's interval (its bytes over the longer of the two intervals: a co-runner whose
//      interval is shorter loads the tier only for that part of i's) at its read share
//      (tenant_read_pct); its interval time is
//      the estimate with those factors. The co-runners' interval times are themselves
//      slowed, so the intervals are iterated to a fixed point from the solo ones
//      (estimator/contention/fixed_point.h, the iteration of the composed estimate of
//      co-runs, estimator/corun.h), then priced once more at the settled intervals: the
//      step reports each tenant's interval under the slowdowns it reports, which are the
//      curves' answer to the bandwidths its co-runners report (contention_max_passes = 1:
//      one pass at the co-runners' solo bandwidth, as the contention paper reads them);
//   5. its reward is Environment's: (default interval - interval - migration) / default
//      total, the default being its own run all on the default tier, alone.
// The node's clock advances by the longest charged time of the step; a tenant's own
// elapsed time (its speedup) counts its intervals and migrations, not its waits at the
// barrier. With one tenant every step is exactly
// Environment's (same moves, times, rewards and observations;
// tests/env/cosched/cosched_env_test.cc), but for the fill and action mask after the last step: the
// tenant has left the node.
//
// Arrivals and departures. Tenant i joins the node at node step start_step[i] (plus a
// jitter drawn from the seed when start_jitter_steps > 0), its footprint on the default
// tier; before that it waits (its actions are checked, then ignored; its reward 0). A tenant whose
// last interval is charged is terminated and leaves the node: its bytes and bandwidth are freed.
// The episode ends when every tenant has left. Same seed and same actions give bit-identical
// observations and rewards.
//
// Observations (per tenant): Environment's layout (its regions, then the node's fill of
// each tier, its progress, its last interval's ratio to the default) followed by the
// interference it measured on each tier in its last interval: the co-runners' bandwidth
// there over the tier's bandwidth, at most 1.
#ifndef TIERGYM_ENV_COSCHED_COSCHED_ENV_H_
#define TIERGYM_ENV_COSCHED_COSCHED_ENV_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "env/environment.h"
#include "env/spec/config_value.h"
#include "env/spec/env_spec.h"

namespace tiergym::env {

struct CoschedConfig {
  // Everything Environment's configuration has (machine, num_regions, steps, action_mode,
  // observation, model, history_decay, migration_gbps, window_instructions,
  // tier_capacity_mib, calibration). Its `profiles` are the distinct tenant profiles (set
  // by ParseCoschedConfig); `interference` must stay empty: the tenants are the contention.
  EnvConfig env;
  // One profile directory per tenant; a profile may run as several tenants. Required.
  std::vector<std::string> tenants;
  // The node step each tenant joins at; empty: all at 0. Else one per tenant.
  std::vector<int> start_steps;
  // Each tenant's start is delayed by a uniform draw in [0, start_jitter_steps] from the
  // episode's seed. Default 0.
  int start_jitter_steps = 0;
  // Each tenant's share of reads in its memory traffic (%, in [0, 100]), the same on every
  // tier (PEBS samples loads only: the traces do not tell); empty: 100 for every tenant.
  // Picks, with the other co-runners', which of a tenant's sensitivity curves answer.
  std::vector<double> read_pct;
  // Passes of each step's fixed point of the slowdowns (contention/fixed_point.h); 1: one
  // pass at the co-runners' solo bandwidth (the contention paper's rule). Default 50.
  int contention_max_passes = 50;
  // Sensitivity curves (curves.csv, estimator/contention/SENSITIVITY_CSV.md) holding a
  // family for every tenant's application. Required.
  std::string sensitivity;
  // How the curves answer (contention::ParseMethod). Default linear/all/right.
  std::string sensitivity_method = "linear/all/right";
};

// Keys: tenants (list, required), tenant_start_steps (list of integers),
// start_jitter_steps, tenant_read_pct (list of numbers), contention_max_passes, sensitivity
// (required), sensitivity_method, and the keys of ParseEnvConfig except profiles and interference.
// InvalidArgument names the key (as its field) and the rule.
absl::StatusOr<CoschedConfig> ParseCoschedConfig(const ConfigMap& keys);
// The keys ParseCoschedConfig accepts, with their defaults and one line of help each.
const std::vector<ConfigKey>& CoschedConfigKeys();

// The tenants' profiles (one EnvAssets), their contention models and the tenant spec:
// loaded once, shared read-only by any number of CoschedEnvs. Thread-safe.
class CoschedAssets {
 public:
  // Checks the configuration, loads the profiles and the sensitivity curves. InvalidArgument
  // / NotFound name the key at fault (tenants, sensitivity, sensitivity_method,
  // tier_capacity_mib when the tenants' footprints together exceed the default tier).
  static absl::StatusOr<std::shared_ptr<const CoschedAssets>> Load(const CoschedConfig& config,
                                                                   ProfileCache* cache = nullptr);
  const CoschedConfig& config() const;
  // A tenant's spaces (all tenants have the same): Environment's, the observation longer by
  // one interference level per tier. `profiles` lists the tenants' applications.
  const EnvSpec& tenant_spec() const;
  size_t num_tenants() const;
  // The tenants' application names ("minife", "lulesh"; a repeated one gets "#2", "#3").
  const std::vector<std::string>& tenant_names() const;
  const EnvAssets& env_assets() const;
  // Tenant i's profile (env/profile_assets.h). REQUIRES: i < num_tenants().
  const ProfileAssets& tenant_profile(size_t i) const;

  struct Impl;
  const Impl& impl() const { return *impl_; }
  ~CoschedAssets();

 private:
  CoschedAssets() = default;
  std::unique_ptr<Impl> impl_;
};

// One tenant's part of a node step.
struct TenantStep {
  std::vector<float> observation;
  double reward = 0;
  bool active = false;      // on the node and charged an interval in this step
  bool waiting = false;     // not yet on the node
  bool terminated = false;  // has left the node (its last interval charged)
  // As Environment's (interval_ns under contention; tier_used_bytes: the node's).
  StepInfo info;
  double solo_interval_ns = 0;   // the same interval without co-runners
  std::vector<double> slowdown;  // per tier, the factor applied
  // Per tier, its own bandwidth at the step's fixed point: its bytes there over the
  // interval time its co-runners saw (its solo bandwidth with one pass).
  std::vector<double> bandwidth_gbps;
  std::vector<double> interference_gbps;  // per tier, the co-runners' bandwidth, alike
};

struct NodeStep {
  std::vector<TenantStep> tenants;
  uint64_t step = 0;      // node steps done
  double step_ns = 0;     // the longest charged time of this step
  double elapsed_ns = 0;  // node time so far
  std::vector<uint64_t> tier_used_bytes;
  std::vector<double> tier_bandwidth_gbps;  // the running tenants' together (fixed point)
  // Passes of this step's slowdowns (the fixed point's and the pricing pass), and whether
  // the fixed point settled within its tolerance (false with contention_max_passes = 1:
  // nothing was iterated; true when at most one tenant ran: nothing to iterate). C++ only;
  // not sent over the protocol.
  int contention_passes = 0;
  bool contention_converged = false;
  bool done = false;  // every tenant has left
};

class CoschedEnv {
 public:
  static absl::StatusOr<std::unique_ptr<CoschedEnv>> Create(
      std::shared_ptr<const CoschedAssets> assets);
  const CoschedAssets& assets() const { return *assets_; }

  // Starts an episode: the seed (when given) reseeds the generator of the start jitter.
  absl::StatusOr<NodeStep> Reset(std::optional<uint64_t> seed);
  // One node step. actions[i] is tenant i's action (tenant_spec's action space); an empty
  // action keeps its placement; the actions of tenants not on the node (waiting, or
  // departed) are checked like the others, then ignored.
  // InvalidArgument (field "actions[i]") for a wrong count or a bad action of any tenant;
  // FailedPrecondition before Reset or after the episode ended.
  absl::StatusOr<NodeStep> Step(const std::vector<Action>& actions);

  ~CoschedEnv();

 private:
  struct State;
  class StepRun;  // one Step's phases (cosched_env.cc)
  explicit CoschedEnv(std::shared_ptr<const CoschedAssets> assets);
  NodeStep Observe() const;
  std::shared_ptr<const CoschedAssets> assets_;
  std::unique_ptr<State> state_;
};

}  // namespace tiergym::env

#endif  // TIERGYM_ENV_COSCHED_COSCHED_ENV_H_

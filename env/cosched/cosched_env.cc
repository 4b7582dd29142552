#include "env/cosched/cosched_env.h"

#include <algorithm>
#include <random>
#include <utility>

#include "absl/strings/str_join.h"
#include "env/config_reader.h"
#include "env/profile_assets.h"
#include "env/spec/action_check.h"
#include "estimator/contention/contention_model.h"
#include "estimator/contention/fixed_point.h"
#include "estimator/contention/sensitivity_csv.h"
#include "traces/base/field_status.h"
#include "traces/base/status_macros.h"
#include "traces/base/strings.h"

namespace tiergym::env {
namespace {

constexpr double kCacheLineBytes = 64;

constexpr int kMaxStartStep = 1'000'000;
constexpr int kMaxContentionPasses = 1000;
// The relative change of every running tenant's interval between two (half) passes at which
// a step's slowdowns count as settled: the intervals are then within about twice that of
// the fixed point.
constexpr double kContentionTolerance = 1e-4;

}  // namespace

const std::vector<ConfigKey>& CoschedConfigKeys() {
  static const auto* keys = [] {
    auto* k = new std::vector<ConfigKey>{
        {"tenants", "", "comma-separated profile directories, one per tenant (may repeat)"},
        {"tenant_start_steps", "", "node step each tenant joins at, one per tenant; default 0"},
        {"start_jitter_steps", "0", "each start delayed by a draw in [0, N] from the seed"},
        {"tenant_read_pct", "",
         "share of reads in each tenant's traffic (%), one per tenant; default 100"},
        {"contention_max_passes", "50",
         "passes of the slowdowns' fixed point per step; 1: co-runners at solo bandwidth"},
        {"sensitivity", "", "sensitivity curves (curves.csv) with every tenant's application"},
        {"sensitivity_method", "linear/all/right",
         "how the curves answer (SMOOTHING/POINTS/CURVE)"},
    };
    for (const ConfigKey& key : EnvConfigKeys()) {
      if (key.name != "profiles" && key.name != "interference") k->push_back(key);
    }
    return k;
  }();
  return *keys;
}

absl::StatusOr<CoschedConfig> ParseCoschedConfig(const ConfigMap& keys) {
  CoschedConfig c;
  ConfigMap env_keys;
  for (const auto& [key, value] : keys) {
    if (key == "tenants") {
      TG_ASSIGN_OR_RETURN(c.tenants, ConfigList(key, value));
    } else if (key == "tenant_start_steps") {
      TG_ASSIGN_OR_RETURN(std::vector<std::string> items, ConfigList(key, value));
      c.start_steps.clear();
      for (const std::string& item : items) {
        TG_ASSIGN_OR_RETURN(int64_t v, ConfigIntText(key, item, 0, kMaxStartStep));
        c.start_steps.push_back(static_cast<int>(v));
      }
    } else if (key == "tenant_read_pct") {
      TG_ASSIGN_OR_RETURN(std::vector<std::string> items, ConfigList(key, value));
      c.read_pct.clear();
      for (const std::string& item : items) {
        TG_ASSIGN_OR_RETURN(double v, ConfigReal(key, ConfigValue(item), 0, 100));
        c.read_pct.push_back(v);
      }
    } else if (key == "contention_max_passes") {
      TG_ASSIGN_OR_RETURN(int64_t v, ConfigInt(key, value, 1, kMaxContentionPasses));
      c.contention_max_passes = static_cast<int>(v);
    } else if (key == "start_jitter_steps") {
      TG_ASSIGN_OR_RETURN(int64_t v, ConfigInt(key, value, 0, kMaxStartStep));
      c.start_jitter_steps = static_cast<int>(v);
    } else if (key == "sensitivity") {
      TG_ASSIGN_OR_RETURN(c.sensitivity, ConfigString(key, value));
    } else if (key == "sensitivity_method") {
      TG_ASSIGN_OR_RETURN(c.sensitivity_method, ConfigString(key, value));
      absl::StatusOr<contention::Method> method = contention::ParseMethod(c.sensitivity_method);
      if (!method.ok()) return ConfigKeyError(key, StrCat(method.status().message()));
    } else if (key == "profiles") {
      return ConfigKeyError(key, "a co-scheduled node takes its profiles from 'tenants'");
    } else if (key == "interference") {
      return ConfigKeyError(
          key, "a co-scheduled node has no interference schedule: the tenants contend");
    } else {
      env_keys[key] = value;
    }
  }
  if (c.tenants.empty()) return ConfigKeyError("tenants", "at least one tenant is required");
  if (!c.start_steps.empty() && c.start_steps.size() != c.tenants.size()) {
    return ConfigKeyError("tenant_start_steps",
                          StrCat(c.start_steps.size(), " start steps for ", c.tenants.size(),
                                 " tenants; give one each"));
  }
  if (!c.read_pct.empty() && c.read_pct.size() != c.tenants.size()) {
    return ConfigKeyError("tenant_read_pct", StrCat(c.read_pct.size(), " read shares for ",
                                                    c.tenants.size(), " tenants; give one each"));
  }
  if (c.sensitivity.empty()) {
    return ConfigKeyError("sensitivity",
                          "the tenants' sensitivity curves (curves.csv) are required");
  }
  // The distinct profiles, in the order the tenants first name them.
  std::vector<std::string> profiles;
  for (const std::string& t : c.tenants) {
    if (std::find(profiles.begin(), profiles.end(), t) == profiles.end()) profiles.push_back(t);
  }
  env_keys["profiles"] = ConfigValue(ConfigValue::List(profiles));
  absl::StatusOr<EnvConfig> env = ParseEnvConfig(env_keys);
  if (!env.ok()) return env.status();
  c.env = *std::move(env);
  return c;
}

// --- Assets ------------------------------------------------------------------------------

struct CoschedAssets::Impl {
  CoschedConfig config;
  std::shared_ptr<const EnvAssets> env;
  EnvSpec tenant_spec;
  std::vector<std::string> tenant_names;
  std::vector<size_t> profile_of_tenant;                // index into env->profiles()
  std::vector<contention::ContentionModel> contention;  // per tenant
  std::vector<double> read_pct;                         // per tenant
};

CoschedAssets::~CoschedAssets() = default;
const CoschedConfig& CoschedAssets::config() const { return impl_->config; }
const EnvSpec& CoschedAssets::tenant_spec() const { return impl_->tenant_spec; }
size_t CoschedAssets::num_tenants() const { return impl_->tenant_names.size(); }
const std::vector<std::string>& CoschedAssets::tenant_names() const { return impl_->tenant_names; }
const EnvAssets& CoschedAssets::env_assets() const { return *impl_->env; }
const ProfileAssets& CoschedAssets::tenant_profile(size_t i) const {
  return impl_->env->profiles()[impl_->profile_of_tenant[i]];
}

namespace {

// The checks of a configuration made without ParseCoschedConfig (its keys' rules again).
absl::Status CheckCoschedConfig(const CoschedConfig& config) {
  if (config.tenants.empty()) return ConfigKeyError("tenants", "at least one tenant is required");
  if (!config.env.interference.empty()) {
    return ConfigKeyError("interference",
                          "a co-scheduled node has no interference schedule: the tenants contend");
  }
  if (!config.start_steps.empty() && config.start_steps.size() != config.tenants.size()) {
    return ConfigKeyError(
        "tenant_start_steps",
        StrCat(config.start_steps.size(), " start steps for ", config.tenants.size(), " tenants"));
  }
  if (!config.read_pct.empty() && config.read_pct.size() != config.tenants.size()) {
    return ConfigKeyError("tenant_read_pct", StrCat(config.read_pct.size(), " read shares for ",
                                                    config.tenants.size(), " tenants"));
  }
  for (double r : config.read_pct) {
    if (!(r >= 0 && r <= 100)) {
      return ConfigKeyError("tenant_read_pct", StrCat(r, " is outside [0, 100]"));
    }
  }
  if (config.contention_max_passes < 1 || config.contention_max_passes > kMaxContentionPasses) {
    return ConfigKeyError(
        "contention_max_passes",
        StrCat(config.contention_max_passes, " is not in [1, ", kMaxContentionPasses, "]"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::shared_ptr<const CoschedAssets>> CoschedAssets::Load(
    const CoschedConfig& config, ProfileCache* cache) {
  TG_RETURN_IF_ERROR(CheckCoschedConfig(config));
  absl::StatusOr<contention::Method> method = contention::ParseMethod(config.sensitivity_method);
  if (!method.ok()) return ConfigKeyError("sensitivity_method", StrCat(method.status().message()));
  absl::StatusOr<std::vector<contention::SensitivityFamily>> families =
      contention::ReadCurvesCsv(config.sensitivity);
  if (!families.ok()) {
    return WithField(absl::Status(families.status().code(), StrCat("config key 'sensitivity': ",
                                                                   families.status().message())),
                     "sensitivity");
  }
  auto impl = std::make_unique<Impl>();
  impl->config = config;
  impl->read_pct = config.read_pct;
  if (impl->read_pct.empty()) impl->read_pct.assign(config.tenants.size(), 100.0);
  TG_ASSIGN_OR_RETURN(impl->env, EnvAssets::Load(config.env, cache));
  const EnvAssets& env = *impl->env;
  const std::vector<ProfileAssets>& profiles = env.profiles();
  const Machine& machine = env.machine();
  uint64_t footprint = 0;
  for (size_t i = 0; i < config.tenants.size(); ++i) {
    const auto it =
        std::find(config.env.profiles.begin(), config.env.profiles.end(), config.tenants[i]);
    if (it == config.env.profiles.end()) {
      return ConfigKeyError("tenants", StrCat("tenant ", i, " (", config.tenants[i],
                                              ") is not among the configuration's profiles"));
    }
    const auto p = static_cast<size_t>(it - config.env.profiles.begin());
    impl->profile_of_tenant.push_back(p);
    const ProfileAssets& pa = profiles[p];
    for (uint64_t b : pa.region_bytes) footprint += b;
    const std::string& app =
        pa.estimator->profile().app().empty() ? pa.name : pa.estimator->profile().app();
    const contention::SensitivityFamily* family = contention::FindFamily(*families, app);
    if (family == nullptr) {
      return ConfigKeyError("sensitivity", StrCat(config.sensitivity, " has no curves for '", app,
                                                  "' (tenant ", i, ", ", config.tenants[i], ")"));
    }
    absl::StatusOr<contention::ContentionModel> model =
        contention::ContentionModel::Create(*family, *method);
    if (!model.ok()) return ConfigKeyError("sensitivity", StrCat(model.status().message()));
    impl->contention.push_back(*std::move(model));
    const auto repeats = static_cast<size_t>(
        std::count(impl->profile_of_tenant.begin(), impl->profile_of_tenant.end(), p));
    impl->tenant_names.push_back(repeats > 1 ? StrCat(pa.name, "#", repeats) : pa.name);
  }
  // Every tenant starts on the default tier: together they must fit it.
  if (footprint > machine.tiers[0].capacity_bytes) {
    return ConfigKeyError(
        "tier_capacity_mib",
        StrCat("the tenants' footprints (", footprint >> 20,
               " MiB together) do not fit the default tier '", machine.tiers[0].name, "' (",
               machine.tiers[0].capacity_bytes >> 20,
               " MiB), where each starts; raise its capacity"));
  }
  impl->tenant_spec = env.spec();
  impl->tenant_spec.profiles = impl->tenant_names;
  impl->tenant_spec.observation.shape[0] += static_cast<int64_t>(machine.tiers.size());
  auto assets = std::shared_ptr<CoschedAssets>(new CoschedAssets());
  assets->impl_ = std::move(impl);
  return std::shared_ptr<const CoschedAssets>(std::move(assets));
}

// --- Episodes ----------------------------------------------------------------------------

struct CoschedEnv::State {
  struct Tenant {
    const ProfileAssets* profile = nullptr;
    std::unique_ptr<IntervalPricer::Episode> pricing;
    std::vector<int> region_tier;
    std::vector<int> moved;
    std::vector<float> history;
    int start_step = 0;
    bool joined = false;
    bool finished = false;
    size_t step = 0;  // its decision intervals done
    double elapsed_ns = 0, default_elapsed_ns = 0, last_ratio = 1;
    std::vector<float> interference_level;  // per tier, measured in its last interval
    TenantStep last;                        // its part of the last node step (info)
  };
  std::mt19937_64 rng{0};
  bool started = false;
  bool done = false;
  uint64_t node_step = 0;
  double elapsed_ns = 0, step_ns = 0;
  int step_passes = 0;
  bool step_converged = true;
  std::vector<uint64_t> used_bytes;
  std::vector<double> tier_bandwidth_gbps;
  std::vector<Tenant> tenants;
};

CoschedEnv::CoschedEnv(std::shared_ptr<const CoschedAssets> assets)
    : assets_(std::move(assets)), state_(std::make_unique<State>()) {}
CoschedEnv::~CoschedEnv() = default;

absl::StatusOr<std::unique_ptr<CoschedEnv>> CoschedEnv::Create(
    std::shared_ptr<const CoschedAssets> assets) {
  if (assets == nullptr) return absl::InvalidArgumentError("no assets");
  return std::unique_ptr<CoschedEnv>(new CoschedEnv(std::move(assets)));
}

namespace {

// Puts a joining tenant's footprint on the default tier.
void Join(std::vector<uint64_t>& used, const ProfileAssets& p) {
  for (uint64_t b : p.region_bytes) used[0] += b;
}

}  // namespace

absl::StatusOr<NodeStep> CoschedEnv::Reset(std::optional<uint64_t> seed) {
  const CoschedAssets::Impl& a = assets_->impl();
  const Machine& machine = a.env->machine();
  const size_t tiers = machine.tiers.size();
  State& s = *state_;
  if (seed) s.rng.seed(*seed);
  s.node_step = 0;
  s.elapsed_ns = s.step_ns = 0;
  s.step_passes = 0;
  s.step_converged = true;
  s.used_bytes.assign(tiers, 0);
  s.tier_bandwidth_gbps.assign(tiers, 0.0);
  s.tenants.clear();
  s.tenants.resize(a.tenant_names.size());
  for (size_t i = 0; i < s.tenants.size(); ++i) {
    State::Tenant& t = s.tenants[i];
    t.profile = &a.env->profiles()[a.profile_of_tenant[i]];
    TG_ASSIGN_OR_RETURN(t.pricing, t.profile->pricer->NewEpisode());
    const size_t k = t.profile->regions.size();
    t.region_tier.assign(k, 0);
    t.history.assign(k, 0.0f);
    t.interference_level.assign(tiers, 0.0f);
    t.start_step = a.config.start_steps.empty() ? 0 : a.config.start_steps[i];
    if (a.config.start_jitter_steps > 0) {
      t.start_step +=
          static_cast<int>(s.rng() % (static_cast<uint64_t>(a.config.start_jitter_steps) + 1));
    }
    if (t.start_step == 0) {
      Join(s.used_bytes, *t.profile);
      t.joined = true;
    }
  }
  s.started = true;
  s.done = false;
  return Observe();
}

// One node step's phases, in the order Step runs them, with what one phase hands the next.
class CoschedEnv::StepRun {
 public:
  StepRun(const CoschedAssets::Impl& a, State& s)
      : a_(a),
        s_(s),
        machine_(a.env->machine()),
        n_(s.tenants.size()),
        tiers_(machine_.tiers.size()),
        migration_bytes_per_ns_(a.env->migration_bytes_per_ns()) {}

  // 1. Desired tiers. Every action is checked before anything moves, a waiting or departed
  // tenant's too (it is then ignored): a bad action is refused whatever the tenant's state.
  absl::Status Desire(const std::vector<Action>& actions);
  // 2. Moves, tenants taking turns from tenant (step mod n); a second pass retries the
  // refused moves once the first pass's departures have freed space.
  void Move();
  // 3. Solo intervals and the bytes each running tenant moves on each tier in its interval.
  absl::Status PriceSolo();
  // 4. Slowdowns: the fixed point of the running tenants' intervals.
  void Contend();
  // 5. Migrations, contended intervals, rewards; then the tenants whose start has come join.
  void Advance();

 private:
  static bool Running(const State::Tenant& t) { return t.joined && !t.finished; }
  // One pass of the fixed point: every running tenant's interval under the slowdowns its
  // co-runners cause at the intervals `current`.
  void PricePass(const std::vector<std::vector<double>>& current,
                 std::vector<std::vector<double>>& next);
  // Its migration time: its own transfer, then the shares of the tenants moving to the
  // same tiers.
  [[nodiscard]] double MigrationNs(size_t i) const;
  void AdvanceTenant(size_t i);

  const CoschedAssets::Impl& a_;
  State& s_;
  const Machine& machine_;
  const size_t n_, tiers_;
  const std::vector<double>& migration_bytes_per_ns_;
  // From Desire: the tiers each running tenant asks for (empty: keep).
  std::vector<std::vector<int>> want_;
  // From Move: the regions still refused, own migration time, bytes moved (per tier).
  std::vector<std::vector<int>> pending_;
  std::vector<double> own_migration_ns_;
  std::vector<uint64_t> migrated_;
  std::vector<std::vector<uint64_t>> bytes_in_;
  // From PriceSolo.
  std::vector<double> solo_ns_;
  std::vector<std::vector<double>> bytes_;
  // From Contend: the running tenants (group g is tenant tenant_of_[g]), their settled
  // intervals, the priced pass at them, and per tenant and tier the slowdowns,
  // the co-runners' bandwidth and its own bandwidth.
  std::vector<bool> ran_;
  std::vector<size_t> group_of_, tenant_of_;
  std::vector<std::vector<double>> times_, priced_;
  std::vector<std::vector<double>> slowdown_, interference_, bw_;
};

absl::Status CoschedEnv::StepRun::Desire(const std::vector<Action>& actions) {
  want_.assign(n_, {});
  for (size_t i = 0; i < n_; ++i) {
    if (actions[i].values.empty()) continue;
    TG_RETURN_IF_ERROR(CheckAction(a_.tenant_spec, actions[i], StrCat("actions[", i, "]")));
  }
  for (size_t i = 0; i < n_; ++i) {
    const State::Tenant& t = s_.tenants[i];
    if (!Running(t) || actions[i].values.empty()) continue;
    want_[i] = DesiredTiers(a_.config.env.action_mode, actions[i], t.region_tier, tiers_);
  }
  return absl::OkStatus();
}

void CoschedEnv::StepRun::Move() {
  pending_.assign(n_, {});
  own_migration_ns_.assign(n_, 0.0);
  migrated_.assign(n_, 0);
  bytes_in_.assign(n_, std::vector<uint64_t>(tiers_, 0));
  for (size_t i = 0; i < n_; ++i) {
    State::Tenant& t = s_.tenants[i];
    t.moved.clear();
    if (want_[i].empty()) continue;
    for (size_t r = 0; r < t.region_tier.size(); ++r) {
      if (want_[i][r] != t.region_tier[r]) pending_[i].push_back(static_cast<int>(r));
    }
  }
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t j = 0; j < n_; ++j) {
      const size_t i = (s_.node_step + j) % n_;
      State::Tenant& t = s_.tenants[i];
      std::vector<int> refused;
      for (int r : pending_[i]) {
        const int to = want_[i][r];
        const uint64_t bytes = t.profile->region_bytes[r];
        if (s_.used_bytes[to] + bytes > machine_.tiers[to].capacity_bytes) {
          refused.push_back(r);
          continue;
        }
        t.moved.push_back(r);
        s_.used_bytes[t.region_tier[r]] -= bytes;
        s_.used_bytes[to] += bytes;
        t.region_tier[r] = to;
        own_migration_ns_[i] += static_cast<double>(bytes) / migration_bytes_per_ns_[to];
        migrated_[i] += bytes;
        bytes_in_[i][static_cast<size_t>(to)] += bytes;
      }
      pending_[i] = std::move(refused);
    }
  }
}

absl::Status CoschedEnv::StepRun::PriceSolo() {
  solo_ns_.assign(n_, 0.0);
  bytes_.assign(n_, std::vector<double>(tiers_, 0.0));
  for (size_t i = 0; i < n_; ++i) {
    State::Tenant& t = s_.tenants[i];
    if (!Running(t)) continue;
    if (!t.moved.empty()) TG_RETURN_IF_ERROR(t.pricing->Move(t.moved, t.region_tier));
    const ProfileAssets& p = *t.profile;
    const size_t k = p.regions.size();
    solo_ns_[i] = t.pricing->IntervalNs(t.step, t.region_tier);
    if (solo_ns_[i] <= 0) continue;
    for (size_t r = 0; r < k; ++r) {
      bytes_[i][static_cast<size_t>(t.region_tier[r])] +=
          p.region_accesses[t.step * k + r] * p.misses_per_access * kCacheLineBytes;
    }
  }
  return absl::OkStatus();
}

void CoschedEnv::StepRun::PricePass(const std::vector<std::vector<double>>& current,
                                    std::vector<std::vector<double>>& next) {
  for (size_t g = 0; g < tenant_of_.size(); ++g) {
    const size_t i = tenant_of_[g];
    for (size_t d = 0; d < tiers_; ++d) {
      slowdown_[i][d] = 1.0;
      interference_[i][d] = 0.0;
      contention::Interference in;
      for (size_t h = 0; h < tenant_of_.size(); ++h) {
        const size_t j = tenant_of_[h];
        if (j == i || bytes_[j][d] <= 0 || !(current[h][0] > 0)) continue;
        // Its bytes over the part of tenant i's interval it overlaps: a co-runner whose
        // interval ends first waits at the step's barrier for the rest of i's.
        const double gbps = bytes_[j][d] / std::max(current[h][0], current[g][0]);
        in.co_runners.push_back({gbps, a_.read_pct[j]});
        interference_[i][d] += gbps;
      }
      if (!in.co_runners.empty()) slowdown_[i][d] = a_.contention[i].Slowdown(in);
    }
    next[g][0] = s_.tenants[i].pricing->IntervalNs(s_.tenants[i].step, s_.tenants[i].region_tier,
                                                   slowdown_[i]);
  }
}

// contention/fixed_point.h. A pass prices every tenant's interval under the slowdowns its
// co-runners cause at their mean bandwidth over its interval under the previous pass's
// intervals (their bytes over the longer of the two intervals); the first pass starts from
// the solo intervals. The co-runners are the tenants that run in this step (a tenant
// leaving after it still ran in it).
void CoschedEnv::StepRun::Contend() {
  ran_.assign(n_, false);
  group_of_.assign(n_, n_);
  for (size_t i = 0; i < n_; ++i) {
    ran_[i] = Running(s_.tenants[i]);
    if (!ran_[i]) continue;
    group_of_[i] = tenant_of_.size();
    tenant_of_.push_back(i);
    times_.push_back({solo_ns_[i]});
  }
  slowdown_.assign(n_, std::vector<double>(tiers_, 1.0));
  interference_.assign(n_, std::vector<double>(tiers_, 0.0));
  const auto pass = [this](const std::vector<std::vector<double>>& current,
                           std::vector<std::vector<double>>& next) { PricePass(current, next); };
  // With contention_max_passes = P, P - 1 passes of the fixed point, then the pricing
  // pass: P = 1 prices at the co-runners' solo bandwidth. A tenant alone has nothing to
  // iterate: its pricing pass is its solo interval.
  contention::FixedPointResult settled{.iterations = 0, .converged = tenant_of_.size() < 2};
  if (a_.config.contention_max_passes > 1 && tenant_of_.size() > 1) {
    settled =
        contention::IterateDampedFixedPoint(times_, pass,
                                            {.max_iterations = a_.config.contention_max_passes - 1,
                                             .tolerance = kContentionTolerance,
                                             .damping = contention::Damping::kHalf});
  }
  // The reported step is one more pass at the settled intervals, so that every tenant's
  // interval is the estimate under the slowdowns it reports, and those slowdowns are the
  // curves' answer to the bandwidths its co-runners report.
  priced_.assign(times_.size(), std::vector<double>(1, 0.0));
  PricePass(times_, priced_);
  s_.step_passes = settled.iterations + 1;
  s_.step_converged = settled.converged;
  s_.tier_bandwidth_gbps.assign(tiers_, 0.0);
  bw_.assign(n_, std::vector<double>(tiers_, 0.0));
  for (size_t i = 0; i < n_; ++i) {
    if (!ran_[i] || !(times_[group_of_[i]][0] > 0)) continue;
    for (size_t d = 0; d < tiers_; ++d) {
      bw_[i][d] = bytes_[i][d] / times_[group_of_[i]][0];
      s_.tier_bandwidth_gbps[d] += bw_[i][d];
    }
  }
}

double CoschedEnv::StepRun::MigrationNs(size_t i) const {
  double migration_ns = own_migration_ns_[i];
  for (size_t d = 0; d < tiers_; ++d) {
    if (bytes_in_[i][d] == 0) continue;
    uint64_t shared = 0;
    for (size_t j = 0; j < n_; ++j) {
      if (j != i) shared += std::min(bytes_in_[j][d], bytes_in_[i][d]);
    }
    if (shared > 0) migration_ns += static_cast<double>(shared) / migration_bytes_per_ns_[d];
  }
  return migration_ns;
}

void CoschedEnv::StepRun::AdvanceTenant(size_t i) {
  State::Tenant& t = s_.tenants[i];
  TenantStep& out = t.last;
  out = TenantStep{};
  out.slowdown = slowdown_[i];
  out.bandwidth_gbps = bw_[i];
  out.interference_gbps = interference_[i];
  if (!Running(t)) return;
  const ProfileAssets& p = *t.profile;
  const size_t k = p.regions.size();
  for (size_t d = 0; d < tiers_; ++d) {
    t.interference_level[d] = static_cast<float>(
        std::min(1.0, out.interference_gbps[d] / machine_.tiers[d].bandwidth_gbps));
  }
  const double migration_ns = MigrationNs(i);
  const double interval = priced_[group_of_[i]][0];
  const double base = p.default_interval_ns[t.step];
  t.elapsed_ns += interval + migration_ns;
  t.default_elapsed_ns += base;
  t.last_ratio = base > 0 ? interval / base : 1.0;
  out.reward = p.default_total_ns > 0 ? (base - interval - migration_ns) / p.default_total_ns : 0;
  out.solo_interval_ns = solo_ns_[i];
  const auto decay = static_cast<float>(a_.config.env.history_decay);
  for (size_t r = 0; r < k; ++r) {
    t.history[r] = decay * t.history[r] + (1 - decay) * p.region_share[t.step * k + r];
  }
  StepInfo& info = out.info;
  info.interval_ns = interval;
  info.default_interval_ns = base;
  info.migration_ns = migration_ns;
  info.migrated_bytes = migrated_[i];
  info.refused_regions = pending_[i];
  out.active = true;
  s_.step_ns = std::max(s_.step_ns, interval + migration_ns);
  ++t.step;
  if (t.step + 1 >= p.bounds.size()) {  // its last interval: it leaves the node
    t.finished = true;
    for (size_t r = 0; r < k; ++r) {
      s_.used_bytes[static_cast<size_t>(t.region_tier[r])] -= p.region_bytes[r];
    }
  }
}

void CoschedEnv::StepRun::Advance() {
  s_.step_ns = 0;
  for (size_t i = 0; i < n_; ++i) AdvanceTenant(i);
  s_.elapsed_ns += s_.step_ns;
  ++s_.node_step;
  bool all_done = true;
  for (State::Tenant& t : s_.tenants) {
    if (!t.joined && static_cast<uint64_t>(t.start_step) <= s_.node_step) {
      Join(s_.used_bytes, *t.profile);
      t.joined = true;
    }
    all_done = all_done && t.finished;
  }
  s_.done = all_done;
}

absl::StatusOr<NodeStep> CoschedEnv::Step(const std::vector<Action>& actions) {
  State& s = *state_;
  if (!s.started) return absl::FailedPreconditionError("step before reset");
  if (s.done) return absl::FailedPreconditionError("step after the episode ended; call reset");
  const size_t n = s.tenants.size();
  if (actions.size() != n) {
    return InvalidFieldError(
        "actions", StrCat("expected ", n, " actions (one per tenant), got ", actions.size()));
  }
  StepRun run(assets_->impl(), s);
  TG_RETURN_IF_ERROR(run.Desire(actions));
  run.Move();
  TG_RETURN_IF_ERROR(run.PriceSolo());
  run.Contend();
  run.Advance();
  return Observe();
}

NodeStep CoschedEnv::Observe() const {
  const CoschedAssets::Impl& a = assets_->impl();
  const State& s = *state_;
  const EnvAssets& env = *a.env;
  const Machine& machine = env.machine();
  const size_t tiers = machine.tiers.size();
  NodeStep node;
  node.step = s.node_step;
  node.step_ns = s.step_ns;
  node.elapsed_ns = s.elapsed_ns;
  node.tier_used_bytes = s.used_bytes;
  node.tier_bandwidth_gbps = s.tier_bandwidth_gbps;
  node.contention_passes = s.step_passes;
  node.contention_converged = s.step_converged;
  node.done = s.done;
  for (size_t i = 0; i < s.tenants.size(); ++i) {
    const State::Tenant& t = s.tenants[i];
    const ProfileAssets& p = *t.profile;
    TenantStep out = t.last;
    if (out.slowdown.empty()) {
      out.slowdown.assign(tiers, 1.0);
      out.bandwidth_gbps.assign(tiers, 0.0);
      out.interference_gbps.assign(tiers, 0.0);
    }
    out.waiting = !t.joined;
    out.terminated = t.finished;
    const size_t step = std::min(t.step, p.bounds.size() - 1);
    EpisodeView view{.region_tier = &t.region_tier,
                     .history = &t.history,
                     .used_bytes = &s.used_bytes,
                     .step = step,
                     .last_ratio = t.last_ratio,
                     .interference_level = t.interference_level.data()};
    ObserveEpisode(a.tenant_spec, a.config.env.observation, machine, p, view, out.observation);
    StepInfo& info = out.info;
    info.profile = a.tenant_names[i];
    info.step = t.step;
    info.elapsed_ns = t.elapsed_ns;
    info.default_elapsed_ns = t.default_elapsed_ns;
    info.default_total_ns = p.default_total_ns;
    info.tier_used_bytes = s.used_bytes;
    info.action_mask = EpisodeActionMask(a.config.env.action_mode, machine, p.region_bytes,
                                         t.region_tier, s.used_bytes);
    info.action_mask_columns = ActionMaskColumns(a.config.env.action_mode, tiers);
    node.tenants.push_back(std::move(out));
  }
  return node;
}

}  // namespace tiergym::env

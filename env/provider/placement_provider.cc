#include "env/provider/placement_provider.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <new>
#include <utility>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_format.h"
#include "env/interval_pricer.h"
#include "env/profile_assets.h"
#include "estimator/page_placement.h"
#include "traces/base/field_status.h"
#include "traces/base/status_macros.h"
#include "traces/base/strings.h"
#include "traces/machine.h"
#include "traces/profile.h"

namespace tiergym::env {
namespace {

std::string MiB(uint64_t bytes) {
  return absl::StrFormat("%.1f MiB", static_cast<double>(bytes) / (1 << 20));
}

// The bytes assumed for an index of `estimator`'s profile not built yet (its size is known
// only once it is built): kTraceBytesFactor times the profile's trace files, as EstimateCost
// prices a profile not loaded yet (measured on the bundled profiles: 48.9 MiB for indexes
// of 33.5 to 36.1 MiB); trace files that cannot be sized any more, the indexes of the
// profile held (the same samples, cut into windows by another run).
uint64_t NewIndexBytes(const Estimator& estimator) {
  const uint64_t assumed = PlacementProvider::AssumedIndexBytes(estimator.profile().name());
  return assumed > 0 ? assumed : estimator.IndexBytes();
}

// An Environment as a SessionEnv; keeps its assets alive.
class EnvironmentSession : public SessionEnv {
 public:
  EnvironmentSession(std::unique_ptr<Environment> env, std::shared_ptr<const EnvAssets> assets,
                     std::shared_ptr<std::atomic<uint64_t>> charged_to, uint64_t bytes)
      : env_(std::move(env)),
        assets_(std::move(assets)),
        charged_to_(std::move(charged_to)),
        bytes_(bytes) {}
  ~EnvironmentSession() override { charged_to_->fetch_sub(bytes_); }
  [[nodiscard]] const EnvSpec& spec() const override { return env_->spec(); }
  absl::StatusOr<StepResult> Reset(std::optional<uint64_t> seed,
                                   const ResetOptions& options) override {
    return env_->Reset(seed, options);
  }
  absl::StatusOr<StepResult> Step(const Action& action) override { return env_->Step(action); }
  absl::StatusOr<StepResult> StepPrechecked(const Action& action) override {
    return env_->StepPrechecked(action);
  }
  // A placement whose default tier is not the configuration's needs an index of its own,
  // which the profile's estimator builds and then holds as long as it lives (shared through
  // the ProfileCache, so with the server's default configuration possibly for good), and
  // which the budget counts from then on (ProfileCache::MemoryBytes). Its size is not known
  // until it is built, so, as a configuration's load is, it is charged at an estimate
  // (NewIndexBytes) while it is built: refused before anything is built when that does not
  // fit, the charge given back once the index is built and counted at its real size.
  absl::StatusOr<double> EstimatePlacementNs(const std::string& profile, const Placement& placement,
                                             EnvProvider* maker) const override {
    uint64_t charged = 0;
    for (const ProfileAssets& p : assets_->profiles()) {
      if (maker == nullptr || p.name != profile) continue;
      Estimator& estimator = *p.estimator;
      // A placement the estimator refuses is refused for what is wrong with it, below.
      if (estimator.HasIndex(placement.default_tier) ||
          !CheckPlacementTiers(estimator.profile(), placement).ok()) {
        break;
      }
      charged = NewIndexBytes(estimator);
      if (absl::Status s = maker->Charge(charged); !s.ok()) {
        return absl::ResourceExhaustedError(
            StrCat("a placement defaulting to '", placement.default_tier, "' needs an index of ",
                   "profile '", profile, "' of its own, held with the profile from then on ",
                   "and estimated before it is built: ", s.message()));
      }
      break;
    }
    // Given back however the build ends (an exception included).
    absl::Cleanup uncharge = [&] {
      if (charged > 0) maker->Uncharge(charged);
    };
    return env_->EstimatePlacementNs(profile, placement);
  }
  // Charged as its Make charged this session (PlacementProvider::Charge adds to the same
  // count the fork's destructor takes from).
  absl::StatusOr<std::unique_ptr<SessionEnv>> Fork(EnvProvider* maker) const override {
    if (maker != nullptr) {
      if (absl::Status charged = maker->Charge(bytes_); !charged.ok()) {
        return absl::ResourceExhaustedError(
            StrCat("a fork is charged as a session: ", charged.message()));
      }
    } else {
      charged_to_->fetch_add(bytes_);
    }
    return std::unique_ptr<SessionEnv>(
        new EnvironmentSession(env_->Fork(), assets_, charged_to_, bytes_));
  }

 private:
  std::unique_ptr<Environment> env_;
  std::shared_ptr<const EnvAssets> assets_;  // env_'s
  std::shared_ptr<std::atomic<uint64_t>> charged_to_;
  uint64_t bytes_;
};

bool Ready(const std::shared_future<absl::StatusOr<std::shared_ptr<const EnvAssets>>>& f) {
  return f.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
}

}  // namespace

PlacementProvider::PlacementProvider(PlacementProviderOptions options)
    : options_(std::move(options)),
      keys_(WithServerDefaults(EnvConfigKeys(), options_.default_config)),
      roots_(DataRoots::Create(
          ServerDataRoots(options_.data_dirs, options_.named_profiles, options_.default_config))) {}
PlacementProvider::~PlacementProvider() = default;

std::string PlacementProvider::Description() const {
  return "Place an application's memory regions on the tiers of a heterogeneous-memory node. "
         "Reward: the interval time saved against the all-on-the-default-tier run, minus "
         "migration time, over the default run's total, so that an episode's return is its "
         "fractional speedup.";
}

const std::vector<ConfigKey>& PlacementProvider::ConfigKeys() const { return keys_; }

absl::StatusOr<ConfigMap> PlacementProvider::Resolve(const ConfigMap& config) const {
  if (!roots_.ok()) return roots_.status();
  ConfigMap out = config;
  // The client's names, resolved to the operator's files (or refused); a value of the
  // wrong type is left to ParseEnvConfig, which says what it expects.
  TG_RETURN_IF_ERROR(roots_->ResolveFileKey(out, "machine", &DataRoots::Machine, true));
  TG_RETURN_IF_ERROR(roots_->ResolveFileKey(out, "interference", &DataRoots::Schedule));
  TG_RETURN_IF_ERROR(roots_->ResolveFileKey(out, "calibration", &DataRoots::Calibration));
  // The server's defaults: the operator's word, taken as they are.
  for (const auto& [key, value] : options_.default_config) out.emplace(key, value);
  ConfigValue::List dirs;
  if (auto it = out.find("profiles"); it != out.end()) {
    TG_ASSIGN_OR_RETURN(std::optional<ConfigValue::List> named,
                        roots_->ResolveProfileNames(it->second, "profiles"));
    if (!named) return out;  // ParseEnvConfig refuses it
    dirs = *std::move(named);
  }
  out["profiles"] = dirs.empty() ? ConfigValue(options_.default_profiles) : ConfigValue(dirs);
  return out;
}

PlacementProvider::Cost PlacementProvider::EstimateCost(const EnvConfig& c) const {
  absl::StatusOr<Machine> machine = LoadMachine(c.machine);
  const uint64_t tiers = machine.ok() ? machine->tiers.size() : 8;
  const uint64_t k = static_cast<uint64_t>(std::max(1, c.num_regions));
  // Decision intervals: as asked, or one per phase (then a generous guess).
  auto steps = static_cast<uint64_t>(c.steps);
  Cost cost;
  std::lock_guard<std::mutex> lock(mu_);
  for (const std::string& dir : c.profiles) {
    uint64_t index_bytes = 0;
    bool held = false;
    for (const auto& [key, f] : cache_) {
      if (!Ready(f) || !f.get().ok()) continue;
      const EnvAssets& a = **f.get();
      const auto& ps = a.config().profiles;
      if (a.config().window_instructions == c.window_instructions &&
          std::find(ps.begin(), ps.end(), dir) != ps.end()) {
        held = true;  // its index is shared, already counted
      }
    }
    if (!held) index_bytes = AssumedIndexBytes(dir);
    const uint64_t n = steps > 0 ? steps : 10000;
    const bool linear = PricesByLinearCosts(c.model, n, k, tiers);
    // Per interval and region: the access share (float), with observation=relative-load
    // the loads so far (double) and, on the linear path, a cost per tier (double); per
    // interval: bounds, default time, constant, interference levels; per region: the
    // region, its bytes, size share, bounds.
    const uint64_t load = c.observation == ObservationMode::kRelativeLoad ? 8 : 0;
    cost.asset_bytes += index_bytes + n * k * (4 + load + (linear ? tiers * 8 : 0)) +
                        n * (32 + tiers * 4) + k * (64 + 16);
  }
  // A session: per region its tier, history, observation features and mask row.
  cost.session_bytes = 4096 + k * (4 + 4 + 16 + tiers + 8);
  return cost;
}

std::string PlacementProvider::CacheKey(const ConfigMap& resolved) {
  // Every key with its value in force, so that spelling a default out loads nothing new;
  // list items length-prefixed, so that no two lists share a key.
  std::string key;
  for (const ConfigKey& k : EnvConfigKeys()) {
    auto it = resolved.find(k.name);
    StrAppend(&key, k.name, "=");
    if (it == resolved.end()) {
      StrAppend(&key, k.default_value);
    } else if (const ConfigValue::List* list = it->second.list()) {
      for (const std::string& item : *list) StrAppend(&key, "[", item.size(), "]", item);
    } else {
      StrAppend(&key, ConfigValueText(it->second));
    }
    StrAppend(&key, "\n");
  }
  return key;
}

void PlacementProvider::Trim() {
  absl::StatusOr<ConfigMap> defaults = Resolve({});
  const std::string pinned = defaults.ok() ? CacheKey(*defaults) : "";
  const auto now = std::chrono::steady_clock::now();
  std::vector<std::shared_future<AssetsOr>> doomed;  // freed outside the lock
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = unused_since_.begin(); it != unused_since_.end();) {
    it = cache_.count(it->first) ? std::next(it) : unused_since_.erase(it);
  }
  for (auto it = cache_.begin(); it != cache_.end();) {
    const bool unused =
        Ready(it->second) && (!it->second.get().ok() || it->second.get()->use_count() == 1);
    if (!unused || it->first == pinned) {
      unused_since_.erase(it->first);
      ++it;
      continue;
    }
    auto [since, fresh] = unused_since_.emplace(it->first, now);
    if (std::chrono::duration<double>(now - since->second).count() >=
        options_.unused_asset_timeout_s) {
      unused_since_.erase(since);
      doomed.push_back(std::move(it->second));
      it = cache_.erase(it);
    } else {
      ++it;
    }
  }
}

uint64_t PlacementProvider::HeldBytesLocked() const {
  uint64_t held = 0;
  for (const auto& [key, f] : cache_) {
    if (!Ready(f) || !f.get().ok()) continue;
    held += (*f.get())->MemoryBytes() - (*f.get())->IndexBytes();
  }
  return held + profiles_.MemoryBytes() + loading_bytes_ + session_bytes_->load();
}

absl::StatusOr<std::shared_ptr<const EnvAssets>> PlacementProvider::Assets(const std::string& key,
                                                                           const EnvConfig& config,
                                                                           const Cost& cost) {
  std::promise<AssetsOr> promise;
  std::shared_future<AssetsOr> future;
  bool load = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = cache_.find(key);
    if (it != cache_.end()) {
      future = it->second;  // loaded, or being loaded by another request
    } else {
      if (!EvictUnusedLocked(cost.asset_bytes + cost.session_bytes)) {
        const uint64_t held = HeldBytesLocked();
        return absl::ResourceExhaustedError(StrCat(
            "this configuration needs about ", MiB(cost.asset_bytes), " of assets (and ",
            MiB(cost.session_bytes), " per session) before it is built; ", "with ", MiB(held),
            " held by configurations and sessions in use, that is over the server's memory "
            "budget of ",
            MiB(options_.max_asset_bytes),
            " (--max-asset-mib); use fewer regions or decision intervals, or close sessions"));
      }
      future = promise.get_future().share();
      cache_.emplace(key, future);
      loading_bytes_ += cost.asset_bytes;
      load = true;
      EvictUnusedLocked();
    }
  }
  if (load) {
    AssetsOr result = [&]() -> AssetsOr {
      try {
        return EnvAssets::Load(config, &profiles_);
      } catch (const std::bad_alloc&) {
        return absl::ResourceExhaustedError(
            "the server ran out of memory loading this configuration");
      } catch (const std::exception& e) {
        return absl::InternalError(StrCat("loading this configuration: ", e.what()));
      }
    }();
    {
      std::lock_guard<std::mutex> lock(mu_);
      loading_bytes_ -= cost.asset_bytes;
      if (!result.ok()) cache_.erase(key);  // not cached: the next request tries again
    }
    // Always set: a waiting request never sees a broken promise.
    promise.set_value(std::move(result));
  }
  return future.get();
}

bool PlacementProvider::EvictUnusedLocked(uint64_t need) {
  auto over = [&] {
    return cache_.size() > options_.max_asset_sets ||
           (need > 0 && options_.max_asset_bytes > 0 &&
            HeldBytesLocked() + need > options_.max_asset_bytes);
  };
  for (auto it = cache_.begin(); it != cache_.end() && over();) {
    if (Ready(it->second) && (!it->second.get().ok() || it->second.get()->use_count() == 1)) {
      it = cache_.erase(it);
    } else {
      ++it;
    }
  }
  return need == 0 || options_.max_asset_bytes == 0 ||
         HeldBytesLocked() + need <= options_.max_asset_bytes;
}

absl::StatusOr<std::unique_ptr<SessionEnv>> PlacementProvider::Make(const ConfigMap& config) {
  absl::StatusOr<ConfigMap> resolved = Resolve(config);
  if (!resolved.ok()) return resolved.status();
  absl::StatusOr<EnvConfig> parsed = ParseEnvConfig(*resolved);
  if (!parsed.ok()) return parsed.status();
  // Files by the names clients know them by, not by their server paths; the field kept.
  auto redact = [&](const absl::Status& status) {
    absl::Status redacted(status.code(), roots_->Redact(std::string(status.message())));
    const std::optional<std::string> field = ErrorField(status);
    return field ? WithField(std::move(redacted), *field) : redacted;
  };
  // What the configuration alone decides (machine, overrides, spaces) is checked before
  // its cost is weighed or anything is loaded.
  if (absl::StatusOr<EnvSpec> spec = MakeEnvSpec(*parsed); !spec.ok()) {
    return redact(spec.status());
  }
  const Cost cost = EstimateCost(*parsed);
  absl::StatusOr<std::shared_ptr<const EnvAssets>> assets =
      Assets(CacheKey(*resolved), *parsed, cost);
  if (!assets.ok()) return redact(assets.status());
  // A session's episode state, now that the profiles are known: the pricer's view of the
  // placement (the index walk's PlacementState) of the largest profile, on top of the
  // per-region state estimated.
  uint64_t session_bytes = cost.session_bytes;
  uint64_t episode_bytes = 0;
  for (const ProfileAssets& p : (*assets)->profiles()) {
    episode_bytes = std::max<uint64_t>(episode_bytes, p.pricer->EpisodeBytes());
  }
  session_bytes += episode_bytes;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (options_.max_asset_bytes > 0 &&
        HeldBytesLocked() + session_bytes > options_.max_asset_bytes) {
      return absl::ResourceExhaustedError(
          StrCat("a session of this configuration needs about ", MiB(session_bytes), "; with ",
                 MiB(HeldBytesLocked()),
                 " held by configurations and sessions in use, that is over the server's "
                 "memory budget of ",
                 MiB(options_.max_asset_bytes), " (--max-asset-mib); close sessions"));
    }
    session_bytes_->fetch_add(session_bytes);
  }
  absl::StatusOr<std::unique_ptr<Environment>> env = Environment::Create(*assets);
  if (!env.ok()) {
    session_bytes_->fetch_sub(session_bytes);
    return env.status();
  }
  return std::unique_ptr<SessionEnv>(
      new EnvironmentSession(*std::move(env), *std::move(assets), session_bytes_, session_bytes));
}

uint64_t PlacementProvider::AssumedIndexBytes(const std::string& path) {
  uint64_t bytes = 0;
  if (absl::StatusOr<std::vector<std::string>> files = ListTraceFiles(path); files.ok()) {
    for (const std::string& f : *files) {
      std::error_code ec;
      const uint64_t size = std::filesystem::file_size(f, ec);
      if (!ec) bytes += size * kTraceBytesFactor;
    }
  }
  return bytes;
}

absl::Status PlacementProvider::Charge(uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!EvictUnusedLocked(bytes)) {
    return absl::ResourceExhaustedError(
        StrCat(MiB(bytes), " more; with ", MiB(HeldBytesLocked()),
               " held by configurations, sessions and shared memory in use, that is over the "
               "server's memory budget of ",
               MiB(options_.max_asset_bytes), " (--max-asset-mib); close sessions"));
  }
  session_bytes_->fetch_add(bytes);
  return absl::OkStatus();
}

void PlacementProvider::Uncharge(uint64_t bytes) { session_bytes_->fetch_sub(bytes); }

EnvProvider::Stats PlacementProvider::GetStats() const {
  Stats s;
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [key, f] : cache_) {
    if (!Ready(f) || !f.get().ok()) continue;
    ++s.asset_sets;
    s.asset_bytes += (*f.get())->MemoryBytes() - (*f.get())->IndexBytes();
  }
  s.asset_bytes += profiles_.MemoryBytes();  // indexes, counted once however shared
  return s;
}

}  // namespace tiergym::env

#include "env/server/environment_provider.h"

#include <chrono>
#include <utility>

#include "traces/util/status_macros.h"
#include "traces/util/strings.h"

namespace tiergym::env {
namespace {

// An Environment as a SessionEnv; keeps its assets alive.
class EnvironmentSession : public SessionEnv {
 public:
  explicit EnvironmentSession(std::unique_ptr<Environment> env) : env_(std::move(env)) {}
  const EnvSpec& spec() const override { return env_->spec(); }
  absl::StatusOr<StepResult> Reset(std::optional<uint64_t> seed,
                                   const ResetOptions& options) override {
    return env_->Reset(seed, options);
  }
  absl::StatusOr<StepResult> Step(const Action& action) override { return env_->Step(action); }
  absl::StatusOr<double> EstimatePlacementNs(const std::string& profile,
                                             const Placement& placement) const override {
    return env_->EstimatePlacementNs(profile, placement);
  }

 private:
  std::unique_ptr<Environment> env_;
};

bool Ready(const std::shared_future<absl::StatusOr<std::shared_ptr<const EnvAssets>>>& f) {
  return f.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
}

}  // namespace

EnvironmentProvider::EnvironmentProvider(EnvironmentProviderOptions options)
    : options_(std::move(options)),
      keys_(EnvConfigKeys()),
      roots_(DataRoots::Create(
          DataRootsOptions{options_.data_dirs, options_.named_profiles,
                           options_.default_config.count("machine")
                               ? std::vector<std::string>{options_.default_config.at("machine")}
                               : std::vector<std::string>{}})) {
  for (ConfigKey& k : keys_) {
    auto it = options_.default_config.find(k.name);
    if (it != options_.default_config.end()) k.default_value = it->second;
  }
}
EnvironmentProvider::~EnvironmentProvider() = default;

std::string EnvironmentProvider::Description() const {
  return "Place an application's memory regions on the tiers of a heterogeneous-memory node. "
         "Reward: the interval time saved against the all-on-the-default-tier run, minus "
         "migration time, over the default run's total, so that an episode's return is its "
         "fractional speedup.";
}

const std::vector<ConfigKey>& EnvironmentProvider::ConfigKeys() const { return keys_; }

absl::StatusOr<std::map<std::string, std::string>> EnvironmentProvider::Resolve(
    const std::map<std::string, std::string>& config) const {
  if (!roots_.ok()) return roots_.status();
  std::map<std::string, std::string> out = config;
  // The client's names, resolved to the operator's files (or refused).
  if (auto it = out.find("machine"); it != out.end()) {
    TG_ASSIGN_OR_RETURN(it->second, roots_->Machine(it->second, "machine"));
  }
  if (auto it = out.find("interference"); it != out.end() && !it->second.empty()) {
    TG_ASSIGN_OR_RETURN(it->second, roots_->Schedule(it->second, "interference"));
  }
  // The server's defaults: the operator's word, taken as they are.
  for (const auto& [key, value] : options_.default_config) out.emplace(key, value);
  auto it = out.find("profiles");
  if (it == out.end() || it->second.empty()) {
    std::string dirs;
    for (const std::string& d : options_.default_profiles)
      StrAppend(&dirs, dirs.empty() ? "" : ",", d);
    out["profiles"] = dirs;
    return out;
  }
  std::string dirs;
  size_t start = 0;
  const std::string& value = it->second;
  while (start <= value.size()) {
    size_t comma = value.find(',', start);
    if (comma == std::string::npos) comma = value.size();
    const std::string item = value.substr(start, comma - start);
    if (!item.empty()) {
      TG_ASSIGN_OR_RETURN(std::string dir, roots_->ProfileDir(item, "profiles"));
      StrAppend(&dirs, dirs.empty() ? "" : ",", dir);
    }
    start = comma + 1;
  }
  it->second = dirs;
  return out;
}

absl::StatusOr<std::shared_ptr<const EnvAssets>> EnvironmentProvider::Assets(
    const std::map<std::string, std::string>& config) {
  // Every key with its value in force, so that spelling a default out loads nothing new.
  std::string key;
  for (const ConfigKey& k : EnvConfigKeys()) {
    auto it = config.find(k.name);
    StrAppend(&key, k.name, "=", it == config.end() ? k.default_value : it->second, "\n");
  }
  std::promise<AssetsOr> promise;
  std::shared_future<AssetsOr> future;
  bool load = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = cache_.find(key);
    if (it != cache_.end()) {
      future = it->second;  // loaded, or being loaded by another request
    } else {
      future = promise.get_future().share();
      cache_.emplace(key, future);
      load = true;
      EvictUnusedLocked();
    }
  }
  if (load) {
    AssetsOr result = [&]() -> AssetsOr {
      absl::StatusOr<EnvConfig> parsed = ParseEnvConfig(config);
      if (!parsed.ok()) return parsed.status();
      return EnvAssets::Load(*parsed, &profiles_);
    }();
    if (!result.ok()) {  // not cached: the next request tries again
      std::lock_guard<std::mutex> lock(mu_);
      cache_.erase(key);
    }
    promise.set_value(std::move(result));
  }
  return future.get();
}

void EnvironmentProvider::EvictUnusedLocked() {
  if (cache_.size() <= options_.max_asset_sets) return;
  for (auto it = cache_.begin(); it != cache_.end() && cache_.size() > options_.max_asset_sets;) {
    if (Ready(it->second) && (!it->second.get().ok() || it->second.get()->use_count() == 1)) {
      it = cache_.erase(it);
    } else {
      ++it;
    }
  }
}

absl::StatusOr<std::unique_ptr<SessionEnv>> EnvironmentProvider::Make(
    const std::map<std::string, std::string>& config) {
  absl::StatusOr<std::map<std::string, std::string>> resolved = Resolve(config);
  if (!resolved.ok()) return resolved.status();
  absl::StatusOr<std::shared_ptr<const EnvAssets>> assets = Assets(*resolved);
  if (!assets.ok()) {
    // Files by the names clients know them by, not by their server paths.
    return absl::Status(assets.status().code(),
                        roots_->Redact(std::string(assets.status().message())));
  }
  absl::StatusOr<std::unique_ptr<Environment>> env = Environment::Create(*std::move(assets));
  if (!env.ok()) return env.status();
  return std::unique_ptr<SessionEnv>(new EnvironmentSession(*std::move(env)));
}

EnvProvider::Stats EnvironmentProvider::GetStats() const {
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

// The EnvProvider of `tiergym serve`: environments of env/environment.h, with their
// assets (profiles, estimator indexes, regions) loaded once per distinct configuration and
// shared read-only by every session made from it.
//
// Configurations without `profiles` use the served profiles. What a client's configuration
// names is checked against the operator's word (data_roots.h): a `profiles` entry is a
// served profile's name ("minife") or a directory in a data directory, `machine` a preset,
// the operator's machine or a file in a data directory, `interference` a file in a data
// directory; anything else fails with NotFound before any file is opened, and error
// messages name files as clients name them, never by their server path. Two requests for
// the same new configuration load it once (the second waits for the first).
//
// Memory is budgeted (`max_asset_bytes`): before a configuration is loaded its cost is
// estimated from the configuration alone (profiles already held at their real size, others
// at kTraceBytesFactor times their trace files; per profile the tables of decision
// intervals x regions x tiers) and each session is charged for its per-region state. When
// the assets held, the loads under way, the sessions and the new cost would pass the
// budget, asset sets no session uses are evicted; if that is not enough, Make fails with
// ResourceExhausted naming the estimate and the budget, having allocated nothing. A load
// that fails (bad input, or memory after all) leaves nothing behind: the same request may
// be retried. An estimate of a placement with another default tier than the
// configuration's builds another index of its profile, which the profile keeps: it is
// charged alike before it is built (kTraceBytesFactor times the profile's trace files;
// EstimatePlacementNs refuses it with ResourceExhausted when that does not fit), and every
// index held counts at its real size.
//
// Thread-safe.
#ifndef TIERGYM_ENV_PROVIDER_PLACEMENT_PROVIDER_H_
#define TIERGYM_ENV_PROVIDER_PLACEMENT_PROVIDER_H_

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "env/environment.h"
#include "env/provider/data_roots.h"
#include "env/provider/env_provider.h"

namespace tiergym::env {

struct PlacementProviderOptions {
  // Profile directories used when a configuration names none. Default none (then
  // configurations must name profiles).
  std::vector<std::string> default_profiles;
  // Served profiles by name ("minife" -> its directory). Default none.
  std::map<std::string, std::string> named_profiles;
  // Distinct configurations held at once (unused ones are evicted). Default 16.
  size_t max_asset_sets = 16;
  // The server's own defaults for configuration keys a session does not give (e.g.
  // {"machine": "disagg"} for profiles recorded on that machine); they are also the
  // defaults `list` reports. Default none: EnvConfigKeys()'s.
  ConfigMap default_config;
  // Directories whose files and profile directories clients may name (--data-dir).
  // Default none.
  std::vector<std::string> data_dirs;
  // Memory for assets and sessions (bytes); 0: no budget. Default 2 GiB.
  uint64_t max_asset_bytes = uint64_t{2} << 30;
  // Asset sets no session has used for this long are freed by Trim() (the server's
  // default configuration excepted). Default 30 s.
  double unused_asset_timeout_s = 30;
};

class PlacementProvider : public EnvProvider {
 public:
  explicit PlacementProvider(PlacementProviderOptions options);
  ~PlacementProvider() override;

  std::string Description() const override;
  const std::vector<ConfigKey>& ConfigKeys() const override;
  absl::StatusOr<std::unique_ptr<SessionEnv>> Make(const ConfigMap& config) override;
  Stats GetStats() const override;
  void Trim() override;
  absl::Status Charge(uint64_t bytes) override;
  void Uncharge(uint64_t bytes) override;

  // Bytes a profile not yet loaded is assumed to take per byte of its trace files.
  static constexpr uint64_t kTraceBytesFactor = 4;
  // The bytes an index of the profile at `path` (a directory or trace file) is assumed to
  // take before it is built: kTraceBytesFactor times its trace files (0 when none can be
  // listed or sized).
  static uint64_t AssumedIndexBytes(const std::string& path);

  // The estimated bytes of the assets of a configuration (resolved) and of one of its
  // sessions, before anything is loaded.
  struct Cost {
    uint64_t asset_bytes = 0;
    uint64_t session_bytes = 0;
  };
  Cost EstimateCost(const EnvConfig& config) const;

  // The configuration as ParseEnvConfig will see it: the client's names resolved to the
  // operator's files (NotFound for anything else, on the key's field), the server's
  // defaults and default profiles filled in, `profiles` as a list. Exposed for tests.
  absl::StatusOr<ConfigMap> Resolve(const ConfigMap& config) const;

 private:
  using AssetsOr = absl::StatusOr<std::shared_ptr<const EnvAssets>>;
  absl::StatusOr<std::shared_ptr<const EnvAssets>> Assets(const std::string& key,
                                                          const EnvConfig& config,
                                                          const Cost& cost);
  // Evicts unused asset sets while more than max_asset_sets are held or, with `need`,
  // until `need` more bytes fit the budget; returns whether they fit.
  bool EvictUnusedLocked(uint64_t need = 0);
  uint64_t HeldBytesLocked() const;
  // The cache key of a resolved configuration: every key with its value in force.
  static std::string CacheKey(const ConfigMap& resolved);

  PlacementProviderOptions options_;
  std::vector<ConfigKey> keys_;  // EnvConfigKeys() with options_.default_config applied
  absl::StatusOr<DataRoots> roots_;
  mutable std::mutex mu_;
  // Canonical configuration -> its assets (or their loading, in progress).
  std::map<std::string, std::shared_future<AssetsOr>> cache_;
  uint64_t loading_bytes_ = 0;  // estimates of the loads under way (guarded by mu_)
  // Since when each unused asset set has been seen unused by Trim (guarded by mu_).
  std::map<std::string, std::chrono::steady_clock::time_point> unused_since_;
  // Bytes charged by the sessions alive (shared with them: they may outlive the provider)
  // and by Charge().
  std::shared_ptr<std::atomic<uint64_t>> session_bytes_ =
      std::make_shared<std::atomic<uint64_t>>(0);
  // Profiles and indexes, shared across configurations (EnvAssets::Load).
  ProfileCache profiles_;
};

}  // namespace tiergym::env

#endif  // TIERGYM_ENV_PROVIDER_PLACEMENT_PROVIDER_H_

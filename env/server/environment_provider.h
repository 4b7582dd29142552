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
// the same new
// configuration load it once (the second waits for the first). Asset sets no session uses
// are evicted when more than `max_asset_sets` are held.
//
// Thread-safe.
#ifndef TIERGYM_ENV_SERVER_ENVIRONMENT_PROVIDER_H_
#define TIERGYM_ENV_SERVER_ENVIRONMENT_PROVIDER_H_

#include <cstddef>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "env/environment.h"
#include "env/server/data_roots.h"
#include "env/server/env_provider.h"

namespace tiergym::env {

struct EnvironmentProviderOptions {
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
  std::map<std::string, std::string> default_config;
  // Directories whose files and profile directories clients may name (--data-dir).
  // Default none.
  std::vector<std::string> data_dirs;
};

class EnvironmentProvider : public EnvProvider {
 public:
  explicit EnvironmentProvider(EnvironmentProviderOptions options);
  ~EnvironmentProvider() override;

  std::string Description() const override;
  const std::vector<ConfigKey>& ConfigKeys() const override;
  absl::StatusOr<std::unique_ptr<SessionEnv>> Make(
      const std::map<std::string, std::string>& config) override;
  Stats GetStats() const override;

  // The configuration as ParseEnvConfig will see it: the client's names resolved to the
  // operator's files (NotFound for anything else), the server's defaults and default
  // profiles filled in. Exposed for tests.
  absl::StatusOr<std::map<std::string, std::string>> Resolve(
      const std::map<std::string, std::string>& config) const;

 private:
  using AssetsOr = absl::StatusOr<std::shared_ptr<const EnvAssets>>;
  absl::StatusOr<std::shared_ptr<const EnvAssets>> Assets(
      const std::map<std::string, std::string>& config);
  void EvictUnusedLocked();

  EnvironmentProviderOptions options_;
  std::vector<ConfigKey> keys_;  // EnvConfigKeys() with options_.default_config applied
  absl::StatusOr<DataRoots> roots_;
  mutable std::mutex mu_;
  // Canonical configuration -> its assets (or their loading, in progress).
  std::map<std::string, std::shared_future<AssetsOr>> cache_;
  // Profiles and indexes, shared across configurations (EnvAssets::Load).
  ProfileCache profiles_;
};

}  // namespace tiergym::env

#endif  // TIERGYM_ENV_SERVER_ENVIRONMENT_PROVIDER_H_

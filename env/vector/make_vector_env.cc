#include "env/vector/make_vector_env.h"

#include <algorithm>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "env/provider/bundled_profiles.h"
#include "env/provider/placement_provider.h"
#include "traces/base/field_status.h"
#include "traces/base/strings.h"

namespace tiergym::env {

absl::StatusOr<MadeVectorEnv> MakeVectorEnv(const std::vector<ConfigMap>& configs,
                                            VectorEnvOptions options) {
  if (configs.empty()) return absl::InvalidArgumentError("num_envs: at least 1, got 0");
  const bool all_equal =
      std::all_of(configs.begin(), configs.end(), [&](const auto& c) { return c == configs[0]; });
  // `s` with "configs[i]: " before its message when the entries differ; code and field kept.
  auto in_entry = [&](size_t i, const absl::Status& s) {
    if (all_equal) return s;
    absl::Status out(s.code(), StrCat("configs[", i, "]: ", s.message()));
    const std::optional<std::string> field = ErrorField(s);
    return field ? WithField(std::move(out), *field) : out;
  };
  for (size_t i = 0; i < configs.size(); ++i) {
    if (absl::Status s = CheckKnownConfigKeys(configs[i], EnvConfigKeys()); !s.ok()) {
      return in_entry(i, s);
    }
  }
  absl::StatusOr<std::string> cache = DefaultCacheDir();
  if (!cache.ok()) return cache.status();
  // The bundled profiles (what `profiles` may name) recorded on the configurations' machine
  // when they all name the same preset, as a private server started for it serves them;
  // else on knl.
  std::set<std::string> machines;
  for (const ConfigMap& c : configs) {
    const auto m = c.find("machine");
    machines.insert(m != c.end() && m->second.string() != nullptr ? *m->second.string() : "knl");
  }
  std::string machine = "knl";
  if (machines.size() == 1 && machines.begin()->find_first_of("/.") == std::string::npos) {
    machine = *machines.begin();
  }
  absl::StatusOr<std::vector<ServedProfile>> profiles =
      EnsureBundledProfiles(*cache, /*progress=*/{}, machine);
  if (!profiles.ok()) return profiles.status();
  PlacementProviderOptions po;
  for (const ServedProfile& sp : *profiles) {
    po.default_profiles.push_back(sp.dir);
    po.named_profiles[sp.name] = sp.dir;
  }
  // The process's owner reads what it likes, as the Python client's private server
  // (--data-dir /); its memory is its own (no asset budget), and every environment's
  // assets stay held (one asset set per distinct configuration).
  po.data_dirs = {"/"};
  po.max_asset_bytes = 0;
  po.max_asset_sets = configs.size();
  PlacementProvider provider(po);
  std::vector<std::unique_ptr<SessionEnv>> envs;
  envs.reserve(configs.size());
  MadeVectorEnv made;
  for (size_t i = 0; i < configs.size(); ++i) {
    absl::StatusOr<std::unique_ptr<SessionEnv>> env = provider.Make(configs[i]);
    if (!env.ok()) {
      // On its field (env_provider.h), which also leads the message: a Python ValueError
      // carries no field of its own.
      const absl::Status s = ConfigFieldError(env.status());
      const std::string field = ErrorField(s).value_or("config");
      return in_entry(i,
                      WithField(absl::Status(s.code(), StrCat(field, ": ", s.message())), field));
    }
    made.configs.push_back(ConfigInForce(provider.ConfigKeys(), configs[i], (*env)->spec()));
    envs.push_back(*std::move(env));
  }
  absl::StatusOr<std::unique_ptr<VectorEnv>> env = VectorEnv::Create(std::move(envs), options);
  if (!env.ok()) {
    const absl::Status& s = env.status();
    return absl::Status(s.code(), StrCat(all_equal ? "" : "configs: ", s.message()));
  }
  made.env = *std::move(env);
  return made;
}

}  // namespace tiergym::env

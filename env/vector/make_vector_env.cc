#include "env/vector/make_vector_env.h"

#include <algorithm>
#include <cctype>
#include <utility>
#include <vector>

#include "env/server/bundled_profiles.h"
#include "env/server/environment_provider.h"
#include "traces/base/strings.h"

namespace tiergym::env {

absl::StatusOr<MadeVectorEnv> MakeVectorEnv(const std::map<std::string, std::string>& config,
                                            int num_envs, VectorEnvOptions options) {
  if (num_envs < 1) {
    return absl::InvalidArgumentError(StrCat("num_envs: at least 1, got ", num_envs));
  }
  const std::vector<ConfigKey>& keys = EnvConfigKeys();
  for (const auto& [key, value] : config) {
    if (std::none_of(keys.begin(), keys.end(), [&](const ConfigKey& k) { return k.name == key; })) {
      std::string known;
      for (const ConfigKey& k : keys) StrAppend(&known, known.empty() ? "" : ", ", k.name);
      return absl::InvalidArgumentError(
          StrCat("config.", key, ": unknown configuration key (known: ", known, ")"));
    }
  }
  absl::StatusOr<std::string> cache = DefaultCacheDir();
  if (!cache.ok()) return cache.status();
  absl::StatusOr<std::vector<ServedProfile>> profiles =
      EnsureBundledProfiles(*cache, /*progress=*/{});
  if (!profiles.ok()) return profiles.status();
  EnvironmentProviderOptions po;
  for (const ServedProfile& sp : *profiles) {
    po.default_profiles.push_back(sp.dir);
    po.named_profiles[sp.name] = sp.dir;
  }
  EnvironmentProvider provider(po);
  std::vector<std::unique_ptr<SessionEnv>> envs;
  envs.reserve(static_cast<size_t>(num_envs));
  for (int i = 0; i < num_envs; ++i) {
    absl::StatusOr<std::unique_ptr<SessionEnv>> env = provider.Make(config);
    if (!env.ok()) {
      const absl::Status& s = env.status();
      // Name the key the message is about, as the server does ("config.num_regions: ..."):
      // the earliest key named in it as a whole word.
      const std::string message(s.message());
      std::string field = "config";
      size_t best = std::string::npos;
      auto word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
      for (const ConfigKey& k : keys) {
        for (size_t pos = message.find(k.name); pos != std::string::npos && pos < best;
             pos = message.find(k.name, pos + 1)) {
          const size_t end = pos + k.name.size();
          if ((pos == 0 || !word(message[pos - 1])) &&
              (end == message.size() || !word(message[end]))) {
            best = pos;
            field = StrCat("config.", k.name);
            break;
          }
        }
      }
      if (field == "config" && s.code() == absl::StatusCode::kNotFound) field = "config.profiles";
      return absl::Status(s.code(), StrCat(field, ": ", message));
    }
    envs.push_back(*std::move(env));
  }
  MadeVectorEnv made;
  for (const ConfigKey& k : keys) made.config[k.name] = k.default_value;
  for (const auto& [k, v] : config) made.config[k] = v;
  if (config.count("profiles") == 0) {
    std::string names;
    for (const std::string& p : envs[0]->spec().profiles) {
      StrAppend(&names, names.empty() ? "" : ",", p);
    }
    made.config["profiles"] = names;
  }
  absl::StatusOr<std::unique_ptr<VectorEnv>> env = VectorEnv::Create(std::move(envs), options);
  if (!env.ok()) return env.status();
  made.env = *std::move(env);
  return made;
}

}  // namespace tiergym::env

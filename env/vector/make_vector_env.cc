#include "env/vector/make_vector_env.h"

#include <algorithm>
#include <cctype>
#include <utility>
#include <vector>

#include "env/server/bundled_profiles.h"
#include "env/server/environment_provider.h"
#include "traces/base/strings.h"

namespace tiergym::env {

namespace {

// The key a provider's message is about, as the server names it ("config.num_regions"):
// the earliest key named in it as a whole word.
std::string FieldOf(const absl::Status& s, const std::vector<ConfigKey>& keys) {
  const std::string message(s.message());
  std::string field = "config";
  size_t best = std::string::npos;
  auto word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  for (const ConfigKey& k : keys) {
    for (size_t pos = message.find(k.name); pos != std::string::npos && pos < best;
         pos = message.find(k.name, pos + 1)) {
      const size_t end = pos + k.name.size();
      if ((pos == 0 || !word(message[pos - 1])) && (end == message.size() || !word(message[end]))) {
        best = pos;
        field = StrCat("config.", k.name);
        break;
      }
    }
  }
  if (field == "config" && s.code() == absl::StatusCode::kNotFound) field = "config.profiles";
  return field;
}

}  // namespace

absl::StatusOr<MadeVectorEnv> MakeVectorEnv(
    const std::vector<std::map<std::string, std::string>>& configs, VectorEnvOptions options) {
  if (configs.empty()) return absl::InvalidArgumentError("num_envs: at least 1, got 0");
  const bool all_equal =
      std::all_of(configs.begin(), configs.end(), [&](const auto& c) { return c == configs[0]; });
  // "configs[i]: " before a message about entry i, when the entries differ.
  auto where = [&](size_t i) { return all_equal ? std::string() : StrCat("configs[", i, "]: "); };
  const std::vector<ConfigKey>& keys = EnvConfigKeys();
  for (size_t i = 0; i < configs.size(); ++i) {
    for (const auto& entry : configs[i]) {
      const std::string& key = entry.first;  // (a lambda may not capture a structured binding
                                             // in clang 14)
      if (std::none_of(keys.begin(), keys.end(),
                       [&](const ConfigKey& k) { return k.name == key; })) {
        std::string known;
        for (const ConfigKey& k : keys) StrAppend(&known, known.empty() ? "" : ", ", k.name);
        return absl::InvalidArgumentError(
            StrCat(where(i), "config.", key, ": unknown configuration key (known: ", known, ")"));
      }
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
  // The process's owner reads what it likes, as the Python client's private server
  // (--data-dir /); its memory is its own (no asset budget), and every environment's
  // assets stay held (one asset set per distinct configuration).
  po.data_dirs = {"/"};
  po.max_asset_bytes = 0;
  po.max_asset_sets = configs.size();
  EnvironmentProvider provider(po);
  std::vector<std::unique_ptr<SessionEnv>> envs;
  envs.reserve(configs.size());
  for (size_t i = 0; i < configs.size(); ++i) {
    // The text form of every value (as a command line gives them; ParseEnvConfig reads
    // numbers and lists from text too).
    const ConfigMap typed(configs[i].begin(), configs[i].end());
    absl::StatusOr<std::unique_ptr<SessionEnv>> env = provider.Make(typed);
    if (!env.ok()) {
      const absl::Status& s = env.status();
      return absl::Status(s.code(), StrCat(where(i), FieldOf(s, keys), ": ", s.message()));
    }
    envs.push_back(*std::move(env));
  }
  MadeVectorEnv made;
  for (size_t i = 0; i < configs.size(); ++i) {
    std::map<std::string, std::string> c;
    for (const ConfigKey& k : keys) c[k.name] = k.default_value;
    for (const auto& [k, v] : configs[i]) c[k] = v;
    if (configs[i].count("profiles") == 0) {
      std::string names;
      for (const std::string& p : envs[i]->spec().profiles) {
        StrAppend(&names, names.empty() ? "" : ",", p);
      }
      c["profiles"] = names;
    }
    made.configs.push_back(std::move(c));
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

// The co-scheduling nodes of `tiergym serve` (the cosched_* ops, env/PROTOCOL.md
// "Co-scheduling"): env/cosched's CoschedEnv made from a client's configuration.
//
// What a configuration names is checked against the operator's word (data_roots.h), as
// for `make`: each of `tenants` is a served profile's name or a profile directory in a
// data directory, `machine` a preset, the operator's machine or a file in a data
// directory, `calibration` and `sensitivity` files in a data directory; `sensitivity`
// defaults to the operator's curves (`--sensitivity`), without which it is required.
// Anything else fails with NotFound before a file is opened, and messages name files as
// clients name them.
//
// Memory: before a node is loaded its cost is estimated from its configuration (the
// tenants' trace files at EnvironmentProvider::kTraceBytesFactor times their size, plus
// their tables of decision intervals x regions x tiers) and charged to the budget of
// `budget` (EnvProvider::Charge, the server's --max-asset-mib shared with `make`); a node
// that does not fit fails with ResourceExhausted having loaded nothing. The charge is
// given back when the node is destroyed. Profiles' indexes are shared between nodes
// (ProfileCache).
//
// Thread-safe.
#ifndef TIERGYM_ENV_SERVER_COSCHED_PROVIDER_H_
#define TIERGYM_ENV_SERVER_COSCHED_PROVIDER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "env/cosched/cosched_env.h"
#include "env/server/data_roots.h"
#include "env/server/env_provider.h"

namespace tiergym::env {

struct CoschedProviderOptions {
  // As EnvironmentProviderOptions: data directories, served profiles by name, the
  // operator's defaults for keys a configuration does not give (machine...).
  std::vector<std::string> data_dirs;
  std::map<std::string, std::string> named_profiles;
  ConfigMap default_config;
  // The sensitivity curves used when a configuration names none (the operator's path,
  // taken as it is); empty: configurations must name theirs. Default empty.
  std::string default_sensitivity;
};

// A node and what it is charged; gives the charge back when destroyed.
class CoschedNode {
 public:
  CoschedNode(std::unique_ptr<CoschedEnv> env, EnvProvider* budget, uint64_t bytes)
      : env_(std::move(env)), budget_(budget), bytes_(bytes) {}
  ~CoschedNode() {
    env_.reset();
    if (budget_ != nullptr) budget_->Uncharge(bytes_);
  }
  CoschedNode(const CoschedNode&) = delete;
  CoschedNode& operator=(const CoschedNode&) = delete;
  CoschedEnv& env() { return *env_; }
  const CoschedAssets& assets() const { return env_->assets(); }

 private:
  std::unique_ptr<CoschedEnv> env_;
  EnvProvider* budget_;
  uint64_t bytes_;
};

class CoschedProvider {
 public:
  // `budget` (may be null: no budget) must outlive the provider and its nodes.
  CoschedProvider(CoschedProviderOptions options, EnvProvider* budget);

  // The keys Make accepts (CoschedConfigKeys with the operator's defaults).
  const std::vector<ConfigKey>& ConfigKeys() const { return keys_; }
  // A new node. `config` holds only keys of ConfigKeys() (the caller checks). Errors
  // about one key carry it as their field ("tenants", "sensitivity").
  absl::StatusOr<std::unique_ptr<CoschedNode>> Make(const ConfigMap& config);

  // The configuration as ParseCoschedConfig sees it: names resolved to the operator's
  // files (NotFound on the key's field otherwise), defaults filled in. Exposed for tests.
  absl::StatusOr<ConfigMap> Resolve(const ConfigMap& config) const;
  // The estimated bytes of a node of `config` (parsed) before anything is loaded.
  static uint64_t EstimateBytes(const CoschedConfig& config);

 private:
  CoschedProviderOptions options_;
  EnvProvider* budget_;
  std::vector<ConfigKey> keys_;
  absl::StatusOr<DataRoots> roots_;
  ProfileCache profiles_;
};

}  // namespace tiergym::env

#endif  // TIERGYM_ENV_SERVER_COSCHED_PROVIDER_H_

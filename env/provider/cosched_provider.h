// The co-scheduling nodes of `tiergym serve` (env/PROTOCOL.md "Co-scheduling": make with
// the node's environment id, then reset and step with one action per tenant): env/cosched's
// CoschedEnv made from a client's configuration, a kind of environment behind the
// EnvProvider interface (env_provider.h) whose sessions are nodes (SessionEnv::tenants()).
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
// tenants' trace files at PlacementProvider::kTraceBytesFactor times their size, plus
// their tables of decision intervals x regions x tiers) and charged to the budget of
// `budget` (EnvProvider::Charge, the server's --max-asset-mib shared with `make`); a node
// that does not fit fails with ResourceExhausted having loaded nothing. Profiles' indexes
// are shared between nodes (ProfileCache), and so is their charge: a profile's part (its
// trace files' estimate) is charged by the first node that uses it and given back when the
// last one goes; a node's own tables are charged to it and given back when it is
// destroyed.
//
// Thread-safe.
#ifndef TIERGYM_ENV_PROVIDER_COSCHED_PROVIDER_H_
#define TIERGYM_ENV_PROVIDER_COSCHED_PROVIDER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "env/cosched/cosched_env.h"
#include "env/provider/data_roots.h"
#include "env/provider/env_provider.h"

namespace tiergym::env {

struct CoschedProviderOptions {
  // As PlacementProviderOptions: data directories, served profiles by name, the
  // operator's defaults for keys a configuration does not give (machine...).
  std::vector<std::string> data_dirs;
  std::map<std::string, std::string> named_profiles;
  ConfigMap default_config;
  // The sensitivity curves used when a configuration names none (the operator's path,
  // taken as it is); empty: configurations must name theirs. Default empty.
  std::string default_sensitivity;
};

// The nodes' charges to the budget: each node's own bytes, and each profile's once while
// any node uses it. Thread-safe.
class CoschedCharges {
 public:
  explicit CoschedCharges(EnvProvider* budget) : budget_(budget) {}
  // Charges `node_bytes` and the bytes of every profile key no node holds yet (the sum is
  // returned in *charged either way), then holds the keys. On an error nothing is held or
  // charged.
  absl::Status Acquire(uint64_t node_bytes,
                       const std::vector<std::pair<std::string, uint64_t>>& profiles,
                       uint64_t* charged);
  // Gives back `node_bytes` and the bytes of the keys no other node holds.
  void Release(uint64_t node_bytes, const std::vector<std::string>& keys);
  // Bytes charged for profiles now (for tests).
  uint64_t ProfileBytes() const;

 private:
  struct Held {
    uint64_t bytes = 0;
    int users = 0;
  };
  EnvProvider* budget_;
  mutable std::mutex mu_;
  std::map<std::string, Held> held_;  // guarded by mu_
};

// A node's session: the node and what it is charged; gives the charge back when destroyed.
// Its spec is one tenant's spaces (every tenant has the same), with each distinct
// application's profile name and region bounds once.
class CoschedNode : public SessionEnv {
 public:
  CoschedNode(std::unique_ptr<CoschedEnv> env, std::shared_ptr<CoschedCharges> charges,
              uint64_t node_bytes, std::vector<std::string> profile_keys);
  ~CoschedNode() override;
  CoschedNode(const CoschedNode&) = delete;
  CoschedNode& operator=(const CoschedNode&) = delete;
  CoschedEnv& env() { return *env_; }
  const CoschedAssets& assets() const { return env_->assets(); }

  const EnvSpec& spec() const override { return spec_; }
  const std::vector<std::string>& tenants() const override { return env_->assets().tenant_names(); }
  absl::StatusOr<NodeStep> ResetNode(std::optional<uint64_t> seed) override {
    return env_->Reset(seed);
  }
  absl::StatusOr<NodeStep> StepNode(const std::vector<Action>& actions) override {
    return env_->Step(actions);
  }
  // A single environment's functions: refused (a node's episodes are node steps).
  absl::StatusOr<StepResult> Reset(std::optional<uint64_t> seed,
                                   const ResetOptions& options) override;
  absl::StatusOr<StepResult> Step(const Action& action) override;
  absl::StatusOr<double> EstimatePlacementNs(const std::string& profile, const Placement& placement,
                                             EnvProvider* maker) const override;

 private:
  std::unique_ptr<CoschedEnv> env_;
  EnvSpec spec_;
  std::shared_ptr<CoschedCharges> charges_;
  uint64_t node_bytes_;
  std::vector<std::string> profile_keys_;
};

class CoschedProvider : public EnvProvider {
 public:
  // `budget` (may be null: no budget) must outlive the provider and its nodes.
  CoschedProvider(CoschedProviderOptions options, EnvProvider* budget);

  std::string Description() const override;
  // The keys Make accepts (CoschedConfigKeys with the operator's defaults).
  const std::vector<ConfigKey>& ConfigKeys() const override { return keys_; }
  // A new node (a CoschedNode). `config` holds only keys of ConfigKeys() (the caller
  // checks). Errors about one key carry it as their field ("tenants", "sensitivity").
  absl::StatusOr<std::unique_ptr<SessionEnv>> Make(const ConfigMap& config) override;
  // Nodes hold no asset sets of their own: their profiles are charged to `budget`.
  Stats GetStats() const override { return {}; }

  // The configuration as ParseCoschedConfig sees it: names resolved to the operator's
  // files (NotFound on the key's field otherwise), defaults filled in. Exposed for tests.
  absl::StatusOr<ConfigMap> Resolve(const ConfigMap& config) const;
  // The estimated bytes of a node of `config` (parsed) before anything is loaded: its own
  // tables, and per distinct profile (keyed as ProfileCache shares them: directory,
  // machine, window, calibration) its index.
  static uint64_t EstimateNodeBytes(const CoschedConfig& config);
  static std::vector<std::pair<std::string, uint64_t>> EstimateProfileBytes(
      const CoschedConfig& config);
  // Bytes charged for profiles now.
  uint64_t ChargedProfileBytes() const { return charges_->ProfileBytes(); }

 private:
  CoschedProviderOptions options_;
  std::shared_ptr<CoschedCharges> charges_;
  std::vector<ConfigKey> keys_;
  absl::StatusOr<DataRoots> roots_;
  ProfileCache profiles_;
};

}  // namespace tiergym::env

#endif  // TIERGYM_ENV_PROVIDER_COSCHED_PROVIDER_H_

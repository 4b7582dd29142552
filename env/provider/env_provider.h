// What the server and the in-process vector environment drive: environments made from a
// configuration map.
//
// The session manager (env/server/service.h) and the vector environment (env/vector/)
// talk to environments through these two small interfaces, so that the protocol can be
// tested with a fake environment and served with the real one (placement_provider.h, which
// wraps env/environment.h; cosched_provider.h, whose sessions are co-scheduling nodes). This
// layer (env/provider/) knows no protocol and no transport.
// Contract:
//   - EnvProvider::Make is thread-safe; what it loads (profiles, indexes) it may share
//     between the environments it makes, read-only.
//   - A SessionEnv is used by one thread at a time (the service locks its session).
//   - Errors are absl statuses: InvalidArgument for a bad configuration or action (the
//     key or index at fault carried as the status's field, traces/base/field_status.h),
//     NotFound for a missing profile, FailedPrecondition for a step outside an episode.
#ifndef TIERGYM_ENV_PROVIDER_ENV_PROVIDER_H_
#define TIERGYM_ENV_PROVIDER_ENV_PROVIDER_H_

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_join.h"
#include "env/cosched/cosched_env.h"
#include "env/environment.h"
#include "env/spec/field_path.h"
#include "traces/base/field_status.h"
#include "traces/base/strings.h"
#include "traces/placement.h"

namespace tiergym::env {

class EnvProvider;

// One session's environment. Two kinds: a single environment (an agent's placement
// episode: Reset, Step) and a co-scheduling node (cosched_provider.h: K tenants, each with
// its own action and reward; its episodes are node steps, ResetNode and StepNode, and its
// spec is one tenant's). tenants() tells which: empty for a single environment, the
// tenants' names for a node. Each kind refuses the other's functions (FailedPrecondition).
class SessionEnv {
 public:
  virtual ~SessionEnv() = default;
  virtual const EnvSpec& spec() const = 0;
  virtual absl::StatusOr<StepResult> Reset(std::optional<uint64_t> seed,
                                           const ResetOptions& options) = 0;
  virtual absl::StatusOr<StepResult> Step(const Action& action) = 0;
  // Step for a caller that checked `action` with CheckAction(spec(), ...) (the service's
  // batches, before anything moves): the environment need not check it again. Default: Step.
  virtual absl::StatusOr<StepResult> StepPrechecked(const Action& action) { return Step(action); }
  // The estimated runtime of `placement` of `profile` (NotFound for a profile not in the
  // environment). An estimate that builds something the environment then holds (the
  // estimator index of a default tier other than the configuration's) charges it to the
  // memory budget of `maker` first, as a load: ResourceExhausted, naming the charge and the
  // budget, when it does not fit, nothing built. REQUIRES: `maker` made this environment,
  // or is null (no budget).
  virtual absl::StatusOr<double> EstimatePlacementNs(const std::string& profile,
                                                     const Placement& placement,
                                                     EnvProvider* maker) const = 0;
  // An independent environment at this one's state (Environment::Fork: the same actions
  // give both bit-identical results from here), charged to the memory budget of `maker`
  // like a session its Make made (ResourceExhausted when it does not fit), the charge
  // given back when the fork is destroyed. REQUIRES: `maker` made this environment, or is
  // null (no budget: the in-process vector environment). Default: Unimplemented.
  virtual absl::StatusOr<std::unique_ptr<SessionEnv>> Fork(EnvProvider* /*maker*/) const {
    return absl::UnimplementedError("this environment cannot be forked");
  }

  // A node's tenants, in tenant order (empty: a single environment).
  virtual const std::vector<std::string>& tenants() const {
    static const std::vector<std::string> kNone;
    return kNone;
  }
  // A node's episode: the seed (when given) reseeds its start jitter's generator.
  virtual absl::StatusOr<NodeStep> ResetNode(std::optional<uint64_t> /*seed*/) {
    return absl::FailedPreconditionError("not a co-scheduling node");
  }
  // One node step: actions[i] is tenant i's action (an empty one keeps its placement).
  // InvalidArgument on "actions[i]" for a bad one; nothing moves then.
  virtual absl::StatusOr<NodeStep> StepNode(const std::vector<Action>& /*actions*/) {
    return absl::FailedPreconditionError("not a co-scheduling node");
  }
};

class EnvProvider {
 public:
  virtual ~EnvProvider() = default;

  // One line about the environment, for `list`.
  virtual std::string Description() const = 0;
  // The configuration keys Make accepts, with defaults and help.
  virtual const std::vector<ConfigKey>& ConfigKeys() const = 0;
  // A new environment. `config` holds only keys of ConfigKeys() (the service checks), with
  // their values as the client typed them. Errors about one key carry it as their field
  // (traces/base/field_status.h: "steps", not "config.steps").
  virtual absl::StatusOr<std::unique_ptr<SessionEnv>> Make(const ConfigMap& config) = 0;

  struct Stats {
    uint64_t asset_sets = 0;   // distinct configurations loaded and held
    uint64_t asset_bytes = 0;  // memory they hold
  };
  virtual Stats GetStats() const = 0;

  // Frees what no environment uses any more (called periodically). Default: nothing.
  virtual void Trim() {}

  // Charges `bytes` the server holds for clients besides their environments (shared-memory
  // segments of batch results) to the memory budget: ResourceExhausted, saying so, when
  // they do not fit (after unused assets are evicted). Uncharge gives them back. Default:
  // no budget.
  virtual absl::Status Charge(uint64_t /*bytes*/) { return absl::OkStatus(); }
  virtual void Uncharge(uint64_t /*bytes*/) {}
};

// What every maker of environments from a client's configuration (the server's `make`,
// env/vector/make_vector_env.h) does around EnvProvider::Make, in one place.

// OK when every key of `config` is one of `keys`; else InvalidArgument on "config.KEY"
// (MemberPath, env/spec/field_path.h) for the first unknown key, naming the known ones.
inline absl::Status CheckKnownConfigKeys(const ConfigMap& config,
                                         const std::vector<ConfigKey>& keys) {
  for (const auto& entry : config) {
    const std::string& key = entry.first;
    if (std::none_of(keys.begin(), keys.end(), [&](const ConfigKey& k) { return k.name == key; })) {
      return InvalidFieldError(
          MemberPath("config", key),  // quoted when the key is not plain
          StrCat("unknown configuration key (known: ",
                 absl::StrJoin(keys, ", ",
                               [](std::string* out, const ConfigKey& k) { out->append(k.name); }),
                 ")"));
    }
  }
  return absl::OkStatus();
}

// An error of EnvProvider::Make placed on the configuration: on "config.KEY" when it
// carries its key, on "config.profiles" for a profile not found, else on "config". The
// message is unchanged.
inline absl::Status ConfigFieldError(absl::Status status) {
  if (!ErrorField(status) && status.code() == absl::StatusCode::kNotFound) {
    status = WithField(std::move(status), "profiles");
  }
  return NestField(std::move(status), "config");
}

// Every key of `keys` with its value in force, as text (ConfigValueText): the one in
// `config`, else the key's default; `profiles`, when defaulted, names the profiles of the
// environment made (`spec`).
inline std::map<std::string, std::string> ConfigInForce(const std::vector<ConfigKey>& keys,
                                                        const ConfigMap& config,
                                                        const EnvSpec& spec) {
  std::map<std::string, std::string> in_force;
  for (const ConfigKey& k : keys) in_force[k.name] = k.default_value;
  for (const auto& [k, v] : config) in_force[k] = ConfigValueText(v);
  if (config.count("profiles") == 0 && in_force.count("profiles") != 0) {
    in_force["profiles"] = absl::StrJoin(spec.profiles, ",");
  }
  return in_force;
}

}  // namespace tiergym::env

#endif  // TIERGYM_ENV_PROVIDER_ENV_PROVIDER_H_

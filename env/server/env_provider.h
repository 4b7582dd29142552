// What the server drives: environments made from a configuration map.
//
// The session manager (service.h) talks to environments through these two small
// interfaces so that the protocol can be tested with a fake environment and served with
// the real one (environment_provider.h, which wraps env/environment.h). Contract:
//   - EnvProvider::Make is thread-safe; what it loads (profiles, indexes) it may share
//     between the environments it makes, read-only.
//   - A SessionEnv is used by one thread at a time (the service locks its session).
//   - Errors are absl statuses: InvalidArgument for a bad configuration or action (the
//     key or index at fault carried as the status's field, traces/base/field_status.h),
//     NotFound for a missing profile, FailedPrecondition for a step outside an episode.
#ifndef TIERGYM_ENV_SERVER_ENV_PROVIDER_H_
#define TIERGYM_ENV_SERVER_ENV_PROVIDER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "env/environment.h"
#include "traces/placement.h"

namespace tiergym::env {

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
  virtual absl::StatusOr<double> EstimatePlacementNs(const std::string& profile,
                                                     const Placement& placement) const = 0;
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

}  // namespace tiergym::env

#endif  // TIERGYM_ENV_SERVER_ENV_PROVIDER_H_

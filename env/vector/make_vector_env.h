// A VectorEnv from configuration keys, as `tiergym serve` would make its sessions: the same
// served profiles (the bundled ones, by name or as the default), the same configuration
// keys and defaults, the assets loaded once and shared by the N environments.
#ifndef TIERGYM_ENV_VECTOR_MAKE_VECTOR_ENV_H_
#define TIERGYM_ENV_VECTOR_MAKE_VECTOR_ENV_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "env/spec/config_value.h"
#include "env/vector/vector_env.h"

namespace tiergym::env {

struct MadeVectorEnv {
  std::unique_ptr<VectorEnv> env;
  // Each environment's configuration keys with their values in force (profiles by name
  // when defaulted), as the server's `make` replies have them.
  std::vector<std::map<std::string, std::string>> configs;
};

// One environment per entry of `configs`, each holding configuration keys
// (env/environment.h EnvConfigKeys) with typed values, as a `make` message carries them
// (env/spec/config_value.h: lists stay lists, numbers numbers); unknown keys and bad values
// are InvalidArgument, with the message and the status's field (traces/base/field_status.h)
// naming "config.KEY" (the message prefixed by "configs[i]: " when the entries differ).
// Environments of equal configurations share their assets. Without `profiles` the bundled
// profiles are served (generated into DefaultCacheDir() on first use, as `tiergym serve`
// does); `profiles` may name them ("minife,lulesh") or give directories or files anywhere
// (the process's owner is trusted, as a private server trusts its owner).
absl::StatusOr<MadeVectorEnv> MakeVectorEnv(const std::vector<ConfigMap>& configs,
                                            VectorEnvOptions options);

}  // namespace tiergym::env

#endif  // TIERGYM_ENV_VECTOR_MAKE_VECTOR_ENV_H_

// A VectorEnv from configuration keys, as `tiergym serve` would make its sessions: the same
// served profiles (the bundled ones, by name or as the default), the same configuration
// keys and defaults, the assets loaded once and shared by the N environments.
#ifndef TIERGYM_ENV_VECTOR_MAKE_VECTOR_ENV_H_
#define TIERGYM_ENV_VECTOR_MAKE_VECTOR_ENV_H_

#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "env/vector/vector_env.h"

namespace tiergym::env {

struct MadeVectorEnv {
  std::unique_ptr<VectorEnv> env;
  // Every configuration key with its value in force (profiles by name when defaulted), as
  // the server's `make` reply has it.
  std::map<std::string, std::string> config;
};

// `config` holds configuration keys (env/environment.h EnvConfigKeys) as strings; unknown
// keys and bad values are InvalidArgument naming "config.KEY". Without `profiles` the
// bundled profiles are served (generated into DefaultCacheDir() on first use, as
// `tiergym serve` does); `profiles` may name them ("minife,lulesh") or give directories.
absl::StatusOr<MadeVectorEnv> MakeVectorEnv(const std::map<std::string, std::string>& config,
                                            int num_envs, VectorEnvOptions options);

}  // namespace tiergym::env

#endif  // TIERGYM_ENV_VECTOR_MAKE_VECTOR_ENV_H_

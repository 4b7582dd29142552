// The environment's declarative side, apart from its dynamics (env/environment.h): the
// spaces and layout an environment declares (EnvSpec), what an action and a step's result
// hold (StepInfo is generated from the protocol's declaration: env/spec/step_info.h), and
// the description of a configuration key. Plain values with no dependency beyond
// the standard library, so that the wire protocol (env/protocol) and its clients can carry
// them without linking the environment.
#ifndef TIERGYM_ENV_SPEC_ENV_SPEC_H_
#define TIERGYM_ENV_SPEC_ENV_SPEC_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "env/spec/step_info.h"  // generated from env/protocol/schema.json

namespace tiergym::env {

// A configuration key (env/environment.h EnvConfigKeys), with its default and one line of
// help.
struct ConfigKey {
  std::string name, default_value, help;
};

// A space, in Gymnasium terms.
struct Space {
  enum Kind { kBox, kDiscrete, kMultiDiscrete } kind = kBox;
  std::vector<int64_t> shape;  // kBox: the shape; kMultiDiscrete: {n}
  float low = 0, high = 1;     // kBox bounds (every element)
  int64_t n = 0;               // kDiscrete: number of actions; kMultiDiscrete: values per element
};

struct EnvSpec {
  Space observation;                  // Box float32
  Space action;                       // MultiDiscrete (placement) or Discrete (move)
  std::vector<std::string> tiers;     // machine tier names, index = tier id
  std::vector<std::string> profiles;  // profile names (app names)
  int num_regions = 0;
  // Observation layout: offsets of each block in the flat float32 vector.
  int obs_region_features = 4;  // tier / (tiers - 1), last share, history, size share
  int obs_global_offset = 0;    // num_regions * obs_region_features
  // Per tier (tier 0 is the default tier): capacity, and the page-migration throughput
  // into it that moves are charged at (the migration_gbps override applied).
  std::vector<uint64_t> tier_capacity_bytes;
  std::vector<double> tier_migration_gbps;
  // Per tier: its peak bandwidth (GB/s), from the machine description; policies rank
  // tiers by it (the fast tier is not always the last).
  std::vector<double> tier_bandwidth_gbps;
  // The regions' address ranges, per profile: [(profile * num_regions + r) * 2 + 0] is
  // region r's first byte, [... + 1] one past its last (empty regions: start == end).
  std::vector<uint64_t> region_bounds;
};

struct ResetOptions {
  std::optional<std::string> profile;  // by app name or index ("0", "1", ...)
};

// An action: in placement mode one tier per region; in move mode a single integer.
struct Action {
  std::vector<int64_t> values;
};

struct StepResult {
  std::vector<float> observation;
  double reward = 0;
  bool terminated = false;
  bool truncated = false;
  StepInfo info;
};

}  // namespace tiergym::env

#endif  // TIERGYM_ENV_SPEC_ENV_SPEC_H_

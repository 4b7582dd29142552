// One loaded profile of an EnvAssets, as its episodes read it: regions, decision intervals,
// the default run, the pricer. Built by EnvAssets::Load, immutable afterwards and shared
// read-only by every episode (Environment, and the tenants of env/cosched's node).
#ifndef TIERGYM_ENV_PROFILE_ASSETS_H_
#define TIERGYM_ENV_PROFILE_ASSETS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "env/interval_pricer.h"
#include "env/regions.h"
#include "estimator/estimator.h"
#include "estimator/estimator_index.h"
#include "estimator/interference.h"

namespace tiergym::env {

struct ProfileAssets {
  std::string name;
  std::shared_ptr<Estimator> estimator;         // shared through a ProfileCache
  std::shared_ptr<const EstimatorIndex> index;  // base: the machine's default tier
  std::vector<int> device_of_tier;              // machine tier -> profile device
  std::vector<Region> regions;                  // exactly num_regions (empty ones at the end)
  std::vector<uint64_t> region_bytes;
  std::vector<float> region_size_share;     // region bytes / all regions' bytes
  std::vector<uint32_t> region_of_page;     // per index page id
  std::vector<uint64_t> bounds;             // interval boundaries: steps + 1
  std::vector<double> default_interval_ns;  // per step, all on the default tier
  double default_total_ns = 0;
  std::vector<float> region_share;  // [step * K + r]: share of the step's accesses
  // [step * K + r]: the region's weighted sampled accesses in the step (all runs,
  // EstimatorIndex::AccessesPerGroup); times misses_per_access, the memory accesses (LLC
  // misses) one run makes there.
  std::vector<double> region_accesses;
  // [step * K + r]: region_accesses summed over the steps before `step` (steps + 1 rows),
  // for the relative observation's density since the start of the run.
  std::vector<double> region_accesses_before;
  // [step * K + r]: as region_accesses_before, each access weighted by its load
  // (EstimatorIndex::LoadWeightedAccessesPerGroup), for observation=relative-load (empty
  // in the other modes).
  std::vector<double> region_load_before;
  // Misses of one run per weighted sample of all runs: the PEBS reset a weight unit stands
  // for (the runs' resets' greatest common divisor, or their mean when the index counts
  // samples unweighted), divided by the number of runs. 1 / runs without resets.
  double misses_per_access = 1;
  // The contention scenario, if any (shared with the pricer).
  std::shared_ptr<const InterferenceComposer> interference;
  std::vector<float> interference_level;  // [step * tiers + t], at the step's start
  // How a step is priced (env/interval_pricer.h), chosen from the configuration.
  std::unique_ptr<const IntervalPricer> pricer;
};

}  // namespace tiergym::env

#endif  // TIERGYM_ENV_PROFILE_ASSETS_H_

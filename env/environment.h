// Placement episodes: the environment's dynamics, in C++, with no I/O and no ZeroMQ.
//
// An episode is one run of an application profile. Reset picks the profile (by the seed,
// or by ResetOptions::profile), places everything on the default tier and returns the
// first observation. Time advances by decision intervals (the run cut into `steps` equal
// spans of base-run instructions, or one step per phase). Each step first applies the
// action (moving regions between tiers, capacity enforced, migration charged), then
// charges the interval's estimated time under the placement in force; the reward is the
// interval's time saved against the all-on-default-tier run, minus the migration time,
// divided by the default run's total time, so that an episode's return is its fractional
// speedup.
//
// Regions: the footprint is partitioned into `num_regions` page-aligned address ranges,
// deterministically, never spanning a gap between mapped areas (see regions.h).
//
// Observations contain only what a deployed agent could observe (the past of the run,
// never its future): per region its tier, its share of the last interval's sampled
// accesses, a decayed history of those shares and its size; globally the fill of each
// tier, the progress through the run, and the last interval's speed against the default.
// Layout and bounds: EnvSpec. Same seed and same actions give bit-identical observations
// and rewards.
//
// Cost: how an interval is priced is chosen per profile when the assets load
// (env/interval_pricer.h): under Model::kPaper each decision interval is tabulated per
// region and tier (GroupCostModel), so a step is O(regions * tiers), about a microsecond;
// Model::kConcurrent and kRoofline move pages in a PlacementState and walk the interval's
// windows.
//
// The spec (spaces, tiers, observation layout) follows from the configuration and the
// machine alone (MakeEnvSpec), before any profile is loaded. EnvAssets (profiles, their
// estimators, regions and pricers) are loaded once and shared read-only by any number of
// Environments; an Environment is not thread-safe (one per session).
#ifndef TIERGYM_ENV_ENVIRONMENT_H_
#define TIERGYM_ENV_ENVIRONMENT_H_

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "env/spec/config_value.h"
#include "env/spec/env_spec.h"
#include "estimator/estimator.h"
#include "estimator/estimator_index.h"
#include "traces/machine.h"

namespace tiergym::env {

enum class ActionMode {
  kPlacement,  // MultiDiscrete: a tier per region (default)
  kMove,       // Discrete: region * tiers + tier moves one region, num_regions * tiers = no-op
  kKeep,       // MultiDiscrete: per region 0 = keep it where it is, 1 + t = move it to tier t
};

// What a region's observation holds (EnvSpec::obs_region_features per region).
enum class ObservationMode {
  kRaw,           // tier / (tiers - 1), last share, decayed share, size share (default)
  kNormalized,    // those four, then x / (1 + x) of the last and decayed access densities
                  // (share / size share: 1 = the average byte) and of the size against the
                  // average region's (0.5 = average)
  kRelative,      // the seven of kNormalized, then features relative to the application and
                  // to the tiers, which carry from one program and machine to another
                  // (env/README.md, "Observations that transfer")
  kRelativeLoad,  // kRelative's, then the region's load (the application's memory traffic
                  // while the region is accessed, against its mean)
};

// The layout of ObservationMode::kRelative on a machine of `tiers` tiers: per region
// kRelativeCommonFeatures, then kRelativePerTierFeatures blocks of one value per tier;
// globally, after the fill of each tier, the progress and the last ratio,
// kRelativeGlobalPerTier blocks of one value per tier (then the interference levels of a
// contention scenario, as in every mode).
inline constexpr int kRelativeCommonFeatures = 10;
inline constexpr int kRelativePerTierFeatures = 5;
inline constexpr int kRelativeGlobalPerTier = 4;
// ObservationMode::kRelativeLoad: kRelative's per-region features, then this many more.
inline constexpr int kRelativeLoadFeatures = 1;
// Per-region features of a mode on a machine of `tiers` tiers (EnvSpec::obs_region_features).
int RegionFeatures(ObservationMode mode, size_t tiers);
// Global features a mode adds after the fill, the progress and the last ratio.
int ExtraGlobalFeatures(ObservationMode mode, size_t tiers);

struct EnvConfig {
  // Profile directories; `tiergym serve` defaults to the bundled synthetic ones. Required.
  std::vector<std::string> profiles;
  // Machine description: preset name (knl, disagg) or JSON file. Default "knl".
  std::string machine = "knl";
  // Number of regions the footprint is cut into. Default 64.
  int num_regions = 64;
  // Decision intervals per episode. Default 100; 0 means one step per phase.
  int steps = 100;
  ActionMode action_mode = ActionMode::kPlacement;
  // Per-region observation features. Default raw.
  ObservationMode observation = ObservationMode::kRaw;
  // Estimator model for the interval times. Default paper.
  Model model = Model::kPaper;
  // Decay of the per-region access history: h = decay * h + (1 - decay) * share. Default 0.5.
  double history_decay = 0.5;
  // Overrides the machine's migration bandwidth of every tier (GB/s); 0 keeps them.
  double migration_gbps = 0;
  // Estimator window (base-run instructions). Default 1,000,000.
  uint64_t window_instructions = 1'000'000;
  // Contention scenario: an interference schedule file (estimator/interference.h) whose
  // co-runners slow the tiers they share; its sensitivity family is looked up by each
  // profile's app. Default "": none. When set, observations end with the interference
  // level of each tier (co-runner bandwidth / tier bandwidth, at most 1).
  std::string interference;
  // Capacity overrides (tier name, MiB) applied to the machine. Default none.
  std::vector<std::pair<std::string, uint64_t>> tier_capacity_mib;
  // A calibration file from `tiergym calibrate` (estimator/calibration.h): its compute
  // overlap replaces the roofline model's prior. It must have been fitted for `model`.
  // Default "": none.
  std::string calibration;
};

// Reads configuration keys as a client typed them (env/spec/config_value.h): integers and
// numbers as such or as their text (command lines), lists (profiles, tier_capacity_mib) as
// lists of strings or comma-separated text. InvalidArgument names the key and the rule, and
// carries the key as its field (traces/base/field_status.h). Keys: profiles, machine,
// num_regions, steps, action_mode (placement|move|keep), observation (raw|normalized),
// model (paper|concurrent|roofline), history_decay, migration_gbps, window_instructions,
// interference, tier_capacity_mib, calibration.
absl::StatusOr<EnvConfig> ParseEnvConfig(const ConfigMap& keys);
// The keys ParseEnvConfig accepts, with their defaults and one line of help each.
const std::vector<ConfigKey>& EnvConfigKeys();

// The machine of a configuration: `machine` loaded, tier_capacity_mib applied.
// InvalidArgument / NotFound carry the key (machine, tier_capacity_mib) as their field.
absl::StatusOr<Machine> ConfiguredMachine(const EnvConfig& config);

// The spec of a configuration on `machine` (ConfiguredMachine), known before any profile
// is loaded: spaces, tiers, capacities, migration and tier bandwidths, observation layout.
// `profiles` and `region_bounds` come from the profiles and stay empty here (EnvAssets::
// spec() has them). InvalidArgument (with the key) for a configuration no profile could
// satisfy. Cheap: no file is read.
absl::StatusOr<EnvSpec> MakeEnvSpec(const EnvConfig& config, const Machine& machine);
// The same, loading the machine description (and nothing else).
absl::StatusOr<EnvSpec> MakeEnvSpec(const EnvConfig& config);

struct ProfileAssets;  // env/profile_assets.h

// Loaded profiles with their estimators and indexes, shared by the asset sets of every
// configuration naming the same profile directory, machine, estimator window and
// calibrated terms (a calibration's compute and tier overlaps, queue strength and recorded
// options): a server's configurations that differ only in regions, steps, action mode,
// model, decay, migration bandwidth or contention scenario load and index each profile
// once. Held weakly: a profile no asset set uses any more is loaded again when next asked
// for.
// Thread-safe.
class ProfileCache {
 public:
  // The estimator of the profile in `path` (its index for `machine`'s default tier
  // built), loaded now or shared. Of `calibrated`, only the terms a calibration sets
  // (ApplyCalibration: compute_overlap, tier_overlap, fit_span_samples, queue_like,
  // queue_strength, queue_from_profile and the RecordedOptions but the window, which
  // `window_instructions` gives) are read.
  // Fails like LoadProfile and Estimator::Create.
  absl::StatusOr<std::shared_ptr<Estimator>> Get(const std::string& path, const Machine& machine,
                                                 uint64_t window_instructions,
                                                 const EstimatorOptions& calibrated = {});
  // Bytes of the indexes of the profiles in use: every index their estimators hold
  // (Estimator::IndexBytes), those built after Get for other default tiers included.
  size_t MemoryBytes() const;

 private:
  struct Entry {
    std::weak_ptr<Estimator> estimator;
  };
  mutable std::mutex mu_;
  std::map<std::string, Entry> loaded_;  // guarded by mu_
};

// Profiles, their estimator indexes, regions and interval pricers, the machine: loaded
// once per configuration and shared read-only by every Environment made from it.
// Thread-safe.
class EnvAssets {
 public:
  // Checks the configuration (machine, spec, calibration, contention scenario) first, then
  // loads every profile of config.profiles, builds the indexes, the regions and each
  // profile's pricer, and completes the spec with the profiles' names and region bounds.
  // InvalidArgument / NotFound name the key or file at fault. With a cache, the profiles
  // and their indexes come from (and go to) it.
  static absl::StatusOr<std::shared_ptr<const EnvAssets>> Load(const EnvConfig& config,
                                                               ProfileCache* cache = nullptr);

  const EnvConfig& config() const;
  const EnvSpec& spec() const;
  // The configured machine (ConfiguredMachine), the profiles in config.profiles' order
  // (env/profile_assets.h) and the migration bandwidth of each machine tier (bytes / ns).
  const Machine& machine() const;
  const std::vector<ProfileAssets>& profiles() const;
  const std::vector<double>& migration_bytes_per_ns() const;
  // Bytes held (traces excluded: they are mapped or shared), the estimator indexes
  // included; IndexBytes() of them are the indexes, which a ProfileCache may share with
  // other asset sets.
  size_t MemoryBytes() const;
  size_t IndexBytes() const;

  struct Impl;
  const Impl& impl() const { return *impl_; }
  ~EnvAssets();

 private:
  EnvAssets() = default;
  std::unique_ptr<Impl> impl_;
};

// --- Parts of an episode, shared with the environments that run several profiles'
// episodes on one node (env/cosched) --------------------------------------------------------

// The action mask of an episode of a profile whose regions (of region_bytes) are on
// region_tier, with used[t] bytes of machine tier t taken (StepInfo::action_mask).
std::vector<uint8_t> EpisodeActionMask(ActionMode mode, const Machine& machine,
                                       const std::vector<uint64_t>& region_bytes,
                                       const std::vector<int>& region_tier,
                                       const std::vector<uint64_t>& used);
// StepInfo::action_mask_columns of an action mode.
size_t ActionMaskColumns(ActionMode mode, size_t tiers);
// The machine tier each region is asked to be on by `action` (checked against the action
// space: CheckAction), the regions now on region_tier.
std::vector<int> DesiredTiers(ActionMode mode, const Action& action,
                              const std::vector<int>& region_tier, size_t tiers);

// The state of an episode an observation is made from.
struct EpisodeView {
  const std::vector<int>* region_tier = nullptr;      // per region
  const std::vector<float>* history = nullptr;        // decayed access shares, per region
  const std::vector<uint64_t>* used_bytes = nullptr;  // per machine tier (fill)
  size_t step = 0;                                    // decision intervals done
  double last_ratio = 1;                              // last interval's time / default
  const float* interference_level = nullptr;          // per tier, or null (zeros)
  // ObservationMode::kRelative(Load) only: the last interval's time as charged (migration
  // excluded), 0 before the first step (the features that need it are then 0).
  double last_interval_ns = 0;
};
// The observation (spec's layout, EnvSpec): per region its features, then the fill of each
// tier, the progress, the last ratio, the relative mode's global features and, when the
// layout has room, the interference level of each tier. Every value clamped to [0, 1].
void ObserveEpisode(const EnvSpec& spec, ObservationMode mode, const Machine& machine,
                    const ProfileAssets& p, const EpisodeView& view, std::vector<float>& obs);

class Environment {
 public:
  // InvalidArgument for a bad configuration (names the key); NotFound for a missing
  // profile; the profiles must be loadable and their devices must be machine tiers.
  static absl::StatusOr<std::unique_ptr<Environment>> Create(
      std::shared_ptr<const EnvAssets> assets);

  const EnvSpec& spec() const;

  // Starts an episode. The seed (when given) reseeds the episode's generator; the profile
  // is options.profile or, without it, drawn from the generator.
  absl::StatusOr<StepResult> Reset(std::optional<uint64_t> seed, const ResetOptions& options);

  // FailedPrecondition before Reset or after the episode ended; InvalidArgument for an
  // action of the wrong shape or with out-of-range values (names the index and value).
  absl::StatusOr<StepResult> Step(const Action& action);
  // Step for a caller that has checked `action` against spec() with CheckAction
  // (env/spec/action_check.h), as the server's batches do before anything moves: the same
  // without checking it again. REQUIRES: CheckAction(spec(), action, ...) is OK.
  absl::StatusOr<StepResult> StepPrechecked(const Action& action);

  // Estimated runtime of a placement of one profile, without an episode.
  absl::StatusOr<double> EstimatePlacementNs(const std::string& profile,
                                             const Placement& placement) const;

  // An independent environment at this one's state (for search: lookahead, MCTS): the
  // same assets (shared), a copy of the episode (generator, profile, placement, history,
  // time, the pricer's view), so that the same actions from here give both bit-identical
  // observations and rewards, and what one does never reaches the other. In any state:
  // before the first Reset, mid-episode, after the end.
  std::unique_ptr<Environment> Fork() const;

  ~Environment();

 private:
  struct State;
  explicit Environment(std::shared_ptr<const EnvAssets> assets);
  // The observation of the current state (after Reset: nothing observed yet).
  std::vector<float> Observe() const;
  std::shared_ptr<const EnvAssets> assets_;
  std::unique_ptr<State> state_;
};

}  // namespace tiergym::env

#endif  // TIERGYM_ENV_ENVIRONMENT_H_

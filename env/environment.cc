#include "env/environment.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <random>

#include "absl/strings/str_join.h"
#include "env/config_reader.h"
#include "env/interval_pricer.h"
#include "env/profile_assets.h"
#include "env/regions.h"
#include "env/spec/action_check.h"
#include "estimator/calibration.h"
#include "estimator/estimator.h"
#include "estimator/interference.h"
#include "estimator/page_placement.h"
#include "traces/base/field_status.h"
#include "traces/base/status_macros.h"
#include "traces/base/strings.h"

namespace tiergym::env {
namespace {

constexpr int kRegionFeatures = 4;  // tier, last share, history, size share
// ObservationMode::kNormalized: also last share, history and size share against the average
// region (times the number of regions), each x / (1 + x).
constexpr int kNormalizedRegionFeatures = 7;

bool IsRelative(ObservationMode mode) {
  return mode == ObservationMode::kRelative || mode == ObservationMode::kRelativeLoad;
}

absl::StatusOr<ObservationMode> ParseObservationMode(const std::string& key,
                                                     const std::string& mode) {
  static const auto* modes =
      new std::map<std::string, ObservationMode>{{"raw", ObservationMode::kRaw},
                                                 {"normalized", ObservationMode::kNormalized},
                                                 {"relative", ObservationMode::kRelative},
                                                 {"relative-load", ObservationMode::kRelativeLoad}};
  const auto it = modes->find(mode);
  if (it == modes->end()) {
    return ConfigKeyError(key,
                          StrCat("'", mode, "' is not raw, normalized, relative or relative-load"));
  }
  return it->second;
}

}  // namespace

int RegionFeatures(ObservationMode mode, size_t tiers) {
  switch (mode) {
    case ObservationMode::kRaw:
      return kRegionFeatures;
    case ObservationMode::kNormalized:
      return kNormalizedRegionFeatures;
    case ObservationMode::kRelative:
      return kRelativeCommonFeatures + kRelativePerTierFeatures * static_cast<int>(tiers);
    case ObservationMode::kRelativeLoad:
      return RegionFeatures(ObservationMode::kRelative, tiers) + kRelativeLoadFeatures;
  }
  return kRegionFeatures;
}

int ExtraGlobalFeatures(ObservationMode mode, size_t tiers) {
  return IsRelative(mode) ? kRelativeGlobalPerTier * static_cast<int>(tiers) : 0;
}

const std::vector<ConfigKey>& EnvConfigKeys() {
  static const auto* keys = new std::vector<ConfigKey>{
      {"profiles", "", "comma-separated profile directories (one trace per tier each)"},
      {"machine", "knl", "machine description: knl, disagg or a JSON file"},
      {"num_regions", "64", "regions the footprint is cut into (1..65536)"},
      {"steps", "100", "decision intervals per episode; 0 = one step per phase"},
      {"action_mode", "placement",
       "placement (a tier per region), keep (per region: keep, or a tier) or move (one region)"},
      {"observation", "raw",
       "raw (per region: tier, last and decayed access shares, size share), normalized "
       "(also those shares against the average region, squashed into [0, 1)) or relative "
       "(also features relative to the application and the tiers: trend, rank against each "
       "tier's capacity, room, traffic, migration cost; env/README.md) or relative-load "
       "(relative's, then each region's load: the application's memory traffic while it is "
       "accessed)"},
      {"model", "paper", "estimator model: paper or concurrent"},
      {"history_decay", "0.5", "decay of the per-region access history, in [0, 1)"},
      {"migration_gbps", "0", "migration bandwidth of every tier in GB/s; 0 keeps the machine's"},
      {"window_instructions", "1000000", "estimator window in base-run instructions"},
      {"interference", "", "contention scenario: interference schedule JSON (co-runners per tier)"},
      {"tier_capacity_mib", "", "capacity overrides, e.g. hbm:512 or hbm:1024,remote:8192 (MiB)"},
      {"calibration", "", "calibration file from `tiergym calibrate`, fitted for the model"},
  };
  return *keys;
}

absl::StatusOr<EnvConfig> ParseEnvConfig(const ConfigMap& keys) {
  EnvConfig c;
  for (const auto& [key, value] : keys) {
    if (key == "profiles") {
      TG_ASSIGN_OR_RETURN(c.profiles, ConfigList(key, value));
    } else if (key == "machine") {
      TG_ASSIGN_OR_RETURN(c.machine, ConfigString(key, value));
    } else if (key == "num_regions") {
      TG_ASSIGN_OR_RETURN(int64_t v, ConfigInt(key, value, 1, 65536));
      c.num_regions = static_cast<int>(v);
    } else if (key == "steps") {
      TG_ASSIGN_OR_RETURN(int64_t v, ConfigInt(key, value, 0, 1'000'000));
      c.steps = static_cast<int>(v);
    } else if (key == "action_mode") {
      TG_ASSIGN_OR_RETURN(std::string mode, ConfigString(key, value));
      if (mode == "placement") {
        c.action_mode = ActionMode::kPlacement;
      } else if (mode == "move") {
        c.action_mode = ActionMode::kMove;
      } else if (mode == "keep") {
        c.action_mode = ActionMode::kKeep;
      } else {
        return ConfigKeyError(key, StrCat("'", mode, "' is not placement, keep or move"));
      }
    } else if (key == "observation") {
      TG_ASSIGN_OR_RETURN(std::string mode, ConfigString(key, value));
      TG_ASSIGN_OR_RETURN(c.observation, ParseObservationMode(key, mode));
    } else if (key == "model") {
      TG_ASSIGN_OR_RETURN(std::string name, ConfigString(key, value));
      auto m = ParseModel(name);
      if (!m.ok()) return ConfigKeyError(key, StrCat(m.status().message()));
      c.model = *m;
    } else if (key == "history_decay") {
      TG_ASSIGN_OR_RETURN(c.history_decay, ConfigReal(key, value, 0, 0.999999));
    } else if (key == "migration_gbps") {
      TG_ASSIGN_OR_RETURN(c.migration_gbps, ConfigReal(key, value, 0, 1e6));
    } else if (key == "interference") {
      TG_ASSIGN_OR_RETURN(c.interference, ConfigString(key, value));
    } else if (key == "tier_capacity_mib") {
      // TIER:MIB items, as a list or comma-separated text.
      TG_ASSIGN_OR_RETURN(std::vector<std::string> items, ConfigList(key, value));
      c.tier_capacity_mib.clear();
      for (const std::string& item : items) {
        const size_t colon = item.find(':');
        if (colon == std::string::npos || colon == 0) {
          return ConfigKeyError(key, StrCat("'", item, "' is not TIER:MIB"));
        }
        const std::string tier = item.substr(0, colon);
        TG_ASSIGN_OR_RETURN(int64_t mib,
                            ConfigIntText(key, item.substr(colon + 1), 1, int64_t{1} << 40));
        for (const auto& [other, unused] : c.tier_capacity_mib) {
          if (other == tier) return ConfigKeyError(key, StrCat("tier '", tier, "' given twice"));
        }
        c.tier_capacity_mib.emplace_back(tier, static_cast<uint64_t>(mib));
      }
    } else if (key == "calibration") {
      TG_ASSIGN_OR_RETURN(c.calibration, ConfigString(key, value));
    } else if (key == "window_instructions") {
      TG_ASSIGN_OR_RETURN(int64_t v, ConfigInt(key, value, 1, int64_t{1} << 40));
      c.window_instructions = static_cast<uint64_t>(v);
    } else {
      const std::string known = absl::StrJoin(
          EnvConfigKeys(), ", ", [](std::string* out, const ConfigKey& k) { out->append(k.name); });
      return WithField(
          absl::InvalidArgumentError(StrCat("unknown config key '", key, "' (known: ", known, ")")),
          key);
    }
  }
  if (c.profiles.empty()) return ConfigKeyError("profiles", "at least one profile is required");
  return c;
}

// --- Assets ------------------------------------------------------------------------------

struct EnvAssets::Impl {
  EnvConfig config;
  Machine machine;
  EnvSpec spec;
  std::vector<ProfileAssets> profiles;
  std::vector<double> migration_bytes_per_ns;  // per machine tier
};

EnvAssets::~EnvAssets() = default;
const EnvConfig& EnvAssets::config() const { return impl_->config; }
const EnvSpec& EnvAssets::spec() const { return impl_->spec; }
const Machine& EnvAssets::machine() const { return impl_->machine; }
const std::vector<ProfileAssets>& EnvAssets::profiles() const { return impl_->profiles; }
const std::vector<double>& EnvAssets::migration_bytes_per_ns() const {
  return impl_->migration_bytes_per_ns;
}

absl::StatusOr<std::shared_ptr<Estimator>> ProfileCache::Get(const std::string& path,
                                                             const Machine& machine,
                                                             uint64_t window_instructions,
                                                             const EstimatorOptions& calibrated) {
  EstimatorOptions eo = calibrated;
  eo.window_instructions = window_instructions;
  eo.machine = machine;
  // Capacities do not enter the estimator: machines that differ only in them share.
  Machine estimated = machine;
  for (TierSpec& t : estimated.tiers) t.capacity_bytes = 1;
  // The queue strength: read from the profile (the default), or a calibration's.
  std::string queue = eo.queue_from_profile ? "read" : "none";
  if (eo.queue_like) {
    Machine shape;
    shape.tiers = {*eo.queue_like};
    queue = StrCat(eo.queue_from_profile ? "read" : StrCat(eo.queue_strength), " x ",
                   MachineToJson(shape));
  }
  std::string key = StrCat(path, "\n", eo.compute_overlap, "\n", eo.tier_overlap, "\n",
                           eo.fit_span_samples, "\n", queue, "\n", MachineToJson(estimated));
  for (const auto& [name, value] : RecordedOptions(eo)) StrAppend(&key, "\n", name, "=", value);
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = loaded_.find(key);
    if (it != loaded_.end()) {
      if (std::shared_ptr<Estimator> e = it->second.estimator.lock()) return e;
    }
  }
  // Loaded outside the lock: other profiles are served meanwhile. Two first requests for
  // the same profile may both load it; the first to finish is kept.
  TG_ASSIGN_OR_RETURN(Profile profile, LoadProfile(path));
  TG_ASSIGN_OR_RETURN(std::unique_ptr<Estimator> made, Estimator::Create(std::move(profile), eo));
  std::shared_ptr<Estimator> estimator = std::move(made);
  const std::vector<std::string> devices = estimator->profile().devices();
  const std::string& base = machine.tiers[0].name;
  // Built here, outside any asset set's lock; a profile without the default tier's run
  // is refused by EnvAssets::Load with its own message.
  const bool indexed = std::find(devices.begin(), devices.end(), base) != devices.end();
  if (indexed) TG_RETURN_IF_ERROR(estimator->IndexFor(base).status());
  std::lock_guard<std::mutex> lock(mu_);
  Entry& slot = loaded_[key];
  if (std::shared_ptr<Estimator> other = slot.estimator.lock()) return other;
  slot = Entry{estimator};
  for (auto it = loaded_.begin(); it != loaded_.end();) {  // forget the unused ones
    it = it->second.estimator.expired() ? loaded_.erase(it) : std::next(it);
  }
  return estimator;
}

size_t ProfileCache::MemoryBytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t bytes = 0;
  for (const auto& [key, entry] : loaded_) {
    // Every index the estimator holds: the one Get built and those an estimate of a
    // placement with another default tier built since (Estimator::IndexFor), which live as
    // long as the estimator.
    if (std::shared_ptr<Estimator> e = entry.estimator.lock()) bytes += e->IndexBytes();
  }
  return bytes;
}

size_t EnvAssets::IndexBytes() const {
  size_t bytes = 0;
  for (const ProfileAssets& p : impl_->profiles) bytes += p.index->MemoryBytes();
  return bytes;
}

size_t EnvAssets::MemoryBytes() const {
  size_t bytes = sizeof(Impl);
  for (const ProfileAssets& p : impl_->profiles) {
    bytes += p.index->MemoryBytes() + p.regions.size() * sizeof(Region) +
             p.region_of_page.size() * 4 + p.bounds.size() * 8 + p.default_interval_ns.size() * 8 +
             p.region_share.size() * 4 + p.region_accesses.size() * 8 +
             p.region_accesses_before.size() * 8 + p.region_load_before.size() * 8 +
             p.pricer->MemoryBytes();
  }
  return bytes;
}

absl::StatusOr<Machine> ConfiguredMachine(const EnvConfig& config) {
  absl::StatusOr<Machine> machine = LoadMachine(config.machine);
  if (!machine.ok()) return WithField(machine.status(), "machine");
  for (const auto& capacity : config.tier_capacity_mib) {
    const std::string& tier_name = capacity.first;
    auto it = std::find_if(machine->tiers.begin(), machine->tiers.end(),
                           [&](const TierSpec& t) { return t.name == tier_name; });
    if (it == machine->tiers.end()) {
      return ConfigKeyError(
          "tier_capacity_mib",
          StrCat("machine ", machine->name, " has no tier '", tier_name, "' (tiers: ",
                 absl::StrJoin(machine->tiers, ", ",
                               [](std::string* out, const TierSpec& t) { out->append(t.name); }),
                 R"(); name one of them, e.g. ")", machine->tiers.back().name,
                 R"(:512", or give "" for the machine's own capacities)"));
    }
    it->capacity_bytes = capacity.second << 20;
  }
  return machine;
}

absl::StatusOr<EnvSpec> MakeEnvSpec(const EnvConfig& config, const Machine& machine) {
  if (config.num_regions < 1) return ConfigKeyError("num_regions", "must be at least 1");
  EnvSpec spec;
  const size_t tiers = machine.tiers.size();
  spec.num_regions = config.num_regions;
  for (const TierSpec& t : machine.tiers) {
    spec.tiers.push_back(t.name);
    spec.tier_capacity_bytes.push_back(t.capacity_bytes);
    spec.tier_migration_gbps.push_back(config.migration_gbps > 0 ? config.migration_gbps
                                                                 : t.migration_gbps);
    spec.tier_bandwidth_gbps.push_back(t.bandwidth_gbps);
  }
  const int features = RegionFeatures(config.observation, tiers);
  spec.obs_region_features = features;
  spec.obs_global_offset = config.num_regions * features;
  spec.observation.kind = Space::kBox;
  // Global: fill per tier, progress, last interval's time against the default (halved),
  // the relative mode's per-tier features. With a contention scenario: the interference
  // level of each tier.
  const size_t interference_features = config.interference.empty() ? 0 : tiers;
  spec.observation.shape = {static_cast<int64_t>(
      spec.obs_global_offset + tiers + 2 +
      static_cast<size_t>(ExtraGlobalFeatures(config.observation, tiers)) + interference_features)};
  spec.observation.low = 0;
  spec.observation.high = 1;
  if (config.action_mode == ActionMode::kPlacement) {
    spec.action.kind = Space::kMultiDiscrete;
    spec.action.shape = {config.num_regions};
    spec.action.n = static_cast<int64_t>(tiers);
  } else if (config.action_mode == ActionMode::kKeep) {
    spec.action.kind = Space::kMultiDiscrete;
    spec.action.shape = {config.num_regions};
    spec.action.n = static_cast<int64_t>(tiers) + 1;
  } else {
    spec.action.kind = Space::kDiscrete;
    spec.action.n = static_cast<int64_t>(config.num_regions) * static_cast<int64_t>(tiers) + 1;
  }
  return spec;
}

absl::StatusOr<EnvSpec> MakeEnvSpec(const EnvConfig& config) {
  TG_ASSIGN_OR_RETURN(Machine machine, ConfiguredMachine(config));
  return MakeEnvSpec(config, machine);
}

namespace {

// The estimator options config.calibration sets (ApplyCalibration), or the defaults without
// one. The calibration must have been fitted for config.model, on `machine` when it names
// one, with config.window_instructions when it records its window.
absl::StatusOr<EstimatorOptions> CalibratedOptions(const EnvConfig& config,
                                                   const Machine& machine) {
  EstimatorOptions calibrated;
  if (config.calibration.empty()) return calibrated;
  auto calibration = ReadCalibration(config.calibration);
  if (!calibration.ok()) {
    return WithField(
        absl::Status(calibration.status().code(),
                     StrCat("config key 'calibration': ", calibration.status().message())),
        "calibration");
  }
  if (calibration->model != config.model) {
    return WithField(absl::InvalidArgumentError(StrCat(
                         "config key 'calibration': fitted for the ", ModelName(calibration->model),
                         " model, but config key 'model' is ", ModelName(config.model))),
                     "calibration");
  }
  if (absl::Status s = CheckCalibrationMachine(*calibration, machine); !s.ok()) {
    return WithField(
        absl::InvalidArgumentError(StrCat("config key 'calibration': ", config.calibration, ": ",
                                          s.message(), " (config key 'machine')")),
        "calibration");
  }
  calibrated.window_instructions = config.window_instructions;
  ApplyCalibration(*calibration, &calibrated);
  // Its other recorded options it sets (version 7); the window the configuration sets too.
  if (calibrated.window_instructions != config.window_instructions) {
    return WithField(absl::InvalidArgumentError(
                         StrCat("config key 'calibration': ", config.calibration,
                                " was fitted with a window of ", calibrated.window_instructions,
                                " instructions, but config key "
                                "'window_instructions' is ",
                                config.window_instructions,
                                "; set it to the calibration's, or calibrate with this window")),
                     "window_instructions");
  }
  return calibrated;
}

// The contention scenario's schedule (config.interference), if any.
absl::StatusOr<std::optional<InterferenceSchedule>> ContentionSchedule(const EnvConfig& config) {
  if (config.interference.empty()) return std::nullopt;
  absl::StatusOr<InterferenceSchedule> schedule = ReadInterferenceSchedule(config.interference);
  if (!schedule.ok()) return WithField(schedule.status(), "interference");
  return *std::move(schedule);
}

// The profile's device for every machine tier; the profile must have a run for each tier
// and no other.
absl::Status MatchTiers(const std::string& path, const Machine& m, ProfileAssets& pa) {
  const std::vector<std::string>& devices = pa.estimator->profile().devices();
  for (const TierSpec& t : m.tiers) {
    const auto it = std::find(devices.begin(), devices.end(), t.name);
    if (it == devices.end()) {
      return absl::InvalidArgumentError(
          StrCat("profile ", path, " has no run for tier '", t.name, "' of machine ", m.name));
    }
    pa.device_of_tier.push_back(static_cast<int>(it - devices.begin()));
  }
  if (devices.size() != m.tiers.size()) {
    return absl::InvalidArgumentError(StrCat("profile ", path, " has runs for ", devices.size(),
                                             " devices but machine ", m.name, " has ",
                                             m.tiers.size(), " tiers; they must match"));
  }
  return absl::OkStatus();
}

// The footprint cut into exactly num_regions regions, with their pages, sizes and size
// shares; the footprint must fit the default tier, where every episode starts.
absl::Status CutRegions(const std::string& path, const Machine& m, int num_regions,
                        ProfileAssets& pa) {
  const EstimatorIndex& x = *pa.index;
  pa.regions = MakeRegions(x.pages(), num_regions);
  const uint64_t page_bytes = uint64_t{1} << x.page_shift();
  pa.region_of_page.assign(x.pages().size(), 0);
  for (size_t r = 0; r < pa.regions.size(); ++r) {
    const auto [begin, end] = x.IdsOfPages(pa.regions[r].start_page, pa.regions[r].end_page);
    for (uint32_t id = begin; id < end; ++id) pa.region_of_page[id] = static_cast<uint32_t>(r);
  }
  // Profiles with fewer pages than regions: empty regions at the end.
  pa.regions.resize(static_cast<size_t>(num_regions));
  uint64_t all_bytes = 0;
  for (const Region& r : pa.regions) {
    pa.region_bytes.push_back((r.end_page - r.start_page) * page_bytes);
    all_bytes += pa.region_bytes.back();
  }
  if (all_bytes > m.tiers[0].capacity_bytes) {
    return WithField(absl::InvalidArgumentError(
                         StrCat("profile ", path, ": its footprint (", all_bytes >> 20,
                                " MiB) does not fit the default tier '", m.tiers[0].name, "' (",
                                m.tiers[0].capacity_bytes >> 20,
                                " MiB), where every episode starts; raise its capacity (config "
                                "key tier_capacity_mib)")),
                     "tier_capacity_mib");
  }
  for (uint64_t b : pa.region_bytes) {
    pa.region_size_share.push_back(
        all_bytes ? static_cast<float>(static_cast<double>(b) / static_cast<double>(all_bytes))
                  : 0.0f);
  }
  return absl::OkStatus();
}

// The decision intervals' boundaries in base-run instructions: `steps` equal spans, or
// (steps == 0) one per phase, phases without instructions joining the step that holds
// them.
std::vector<uint64_t> DecisionBounds(const EstimatorIndex& x, int steps) {
  const uint64_t total = x.total_instructions();
  std::vector<uint64_t> bounds;
  if (steps == 0) {
    for (size_t seg = 0; seg <= x.num_segments(); ++seg) {
      if (bounds.empty() || x.segment_begin(seg) > bounds.back()) {
        bounds.push_back(x.segment_begin(seg));
      }
    }
    if (bounds.size() < 2) bounds = {0, total};
  } else {
    for (int i = 0; i <= steps; ++i) {
      bounds.push_back(static_cast<uint64_t>(static_cast<unsigned __int128>(total) *
                                             static_cast<unsigned>(i) / steps));
    }
  }
  return bounds;
}

// The contention scenario composed for the profile's devices and app.
absl::Status ComposeContention(const EnvConfig& config, const InterferenceSchedule& schedule,
                               ProfileAssets& pa) {
  auto composer = InterferenceComposer::Create(schedule, pa.estimator->profile().devices(),
                                               pa.estimator->profile().app());
  if (!composer.ok()) {
    return WithField(absl::Status(composer.status().code(),
                                  StrCat("config key 'interference' (", config.interference,
                                         "): ", composer.status().message())),
                     "interference");
  }
  pa.interference = std::make_shared<const InterferenceComposer>(*std::move(composer));
  return absl::OkStatus();
}

// What every episode sees the same way, per step: the time of the run all on the
// default tier, the interference levels and the regions' shares of the accesses (and,
// with_load, their loads: observation=relative-load).
absl::Status ObserveDefaultRun(const Machine& m, bool with_load, ProfileAssets& pa) {
  const EstimatorIndex& x = *pa.index;
  const size_t steps = pa.bounds.size() - 1, k = pa.regions.size(), tiers = m.tiers.size();
  const uint64_t total = x.total_instructions();
  TG_ASSIGN_OR_RETURN(std::unique_ptr<IntervalPricer::Episode> all_default,
                      pa.pricer->NewEpisode());
  const std::vector<int> all_default_tiers(k, 0);
  pa.region_share.assign(steps * k, 0.0f);
  for (size_t i = 0; i < steps; ++i) {
    pa.default_interval_ns.push_back(all_default->IntervalNs(i, all_default_tiers));
    if (pa.interference) {
      const std::vector<double> bw = pa.interference->BandwidthAt(
          static_cast<double>(pa.bounds[i]) / static_cast<double>(std::max<uint64_t>(1, total)));
      for (size_t t = 0; t < tiers; ++t) {
        pa.interference_level.push_back(static_cast<float>(
            std::min(1.0, bw[pa.device_of_tier[t]] / m.tiers[t].bandwidth_gbps)));
      }
    }
    pa.default_total_ns += pa.default_interval_ns.back();
    const std::vector<double> counts =
        x.AccessesPerGroup(pa.bounds[i], pa.bounds[i + 1], pa.region_of_page, k);
    double sum = 0;
    for (double c : counts) sum += c;
    pa.region_accesses.insert(pa.region_accesses.end(), counts.begin(), counts.end());
    for (size_t r = 0; r < k; ++r) {
      pa.region_share[i * k + r] = sum > 0 ? static_cast<float>(counts[r] / sum) : 0.0f;
    }
  }
  pa.region_accesses_before.assign((steps + 1) * k, 0.0);
  for (size_t i = 0; i < steps; ++i) {
    for (size_t r = 0; r < k; ++r) {
      pa.region_accesses_before[(i + 1) * k + r] =
          pa.region_accesses_before[i * k + r] + pa.region_accesses[i * k + r];
    }
  }
  if (!with_load) return absl::OkStatus();
  pa.region_load_before.assign((steps + 1) * k, 0.0);  // observation=relative-load only
  for (size_t i = 0; i < steps; ++i) {
    const std::vector<double> load =
        x.LoadWeightedAccessesPerGroup(pa.bounds[i], pa.bounds[i + 1], pa.region_of_page, k);
    for (size_t r = 0; r < k; ++r) {
      pa.region_load_before[(i + 1) * k + r] = pa.region_load_before[i * k + r] + load[r];
    }
  }
  return absl::OkStatus();
}

// ProfileAssets::misses_per_access: the index weighs a run's samples by its PEBS reset over
// the resets' greatest common divisor (one weight unit = gcd misses), or counts them as
// they are when a run has no reset or the ratio is implausible (over 4096: a sample then
// stands for the runs' mean reset); every run samples the whole run, so one run's misses
// are the weighted count over the number of runs.
double MissesPerAccess(const Profile& profile) {
  const std::vector<Trace>& runs = profile.runs();
  if (runs.empty()) return 1;
  uint64_t g = 0, max_reset = 0;
  double mean_reset = 0;
  bool all_reset = true;
  for (const Trace& t : runs) {
    const std::optional<uint64_t> reset = t.metadata().pebs_reset;
    if (!reset || *reset == 0) {
      all_reset = false;
      break;
    }
    g = std::gcd(g, *reset);
    max_reset = std::max(max_reset, *reset);
    mean_reset += static_cast<double>(*reset) / static_cast<double>(runs.size());
  }
  const auto n = static_cast<double>(runs.size());
  if (!all_reset) return 1 / n;
  if (max_reset / g > 4096) return mean_reset / n;
  return static_cast<double>(g) / n;
}

// One profile's assets: its estimator and index (from the cache), regions, decision
// intervals, contention scenario, pricer and default run.
absl::StatusOr<ProfileAssets> LoadProfileAssets(const std::string& path, const EnvConfig& config,
                                                const Machine& m,
                                                const EstimatorOptions& calibrated,
                                                const std::optional<InterferenceSchedule>& schedule,
                                                ProfileCache& cache) {
  ProfileAssets pa;
  absl::StatusOr<std::shared_ptr<Estimator>> estimator =
      cache.Get(path, m, config.window_instructions, calibrated);
  if (!estimator.ok()) return WithField(estimator.status(), "profiles");
  pa.estimator = *std::move(estimator);
  const Profile& profile = pa.estimator->profile();
  pa.name = profile.app().empty() ? path : profile.app();
  TG_RETURN_IF_ERROR(MatchTiers(path, m, pa));
  TG_ASSIGN_OR_RETURN(pa.index, pa.estimator->IndexFor(m.tiers[0].name));
  TG_RETURN_IF_ERROR(CutRegions(path, m, config.num_regions, pa));
  pa.bounds = DecisionBounds(*pa.index, config.steps);
  if (schedule) TG_RETURN_IF_ERROR(ComposeContention(config, *schedule, pa));
  pa.pricer = MakeIntervalPricer({.index = pa.index,
                                  .model = config.model,
                                  .device_of_tier = pa.device_of_tier,
                                  .regions = pa.regions,
                                  .region_of_page = pa.region_of_page,
                                  .bounds = pa.bounds,
                                  .contention = pa.interference});
  TG_RETURN_IF_ERROR(
      ObserveDefaultRun(m, config.observation == ObservationMode::kRelativeLoad, pa));
  pa.misses_per_access = MissesPerAccess(profile);
  return pa;
}

// The profile's name and region bounds in the spec.
void AddToSpec(const ProfileAssets& p, EnvSpec& spec) {
  spec.profiles.push_back(p.name);
  const uint64_t page_bytes = uint64_t{1} << p.index->page_shift();
  for (const Region& r : p.regions) {
    spec.region_bounds.push_back(r.start_page * page_bytes);
    spec.region_bounds.push_back(r.end_page * page_bytes);
  }
}

}  // namespace

absl::StatusOr<std::shared_ptr<const EnvAssets>> EnvAssets::Load(const EnvConfig& config,
                                                                 ProfileCache* cache) {
  if (config.profiles.empty())
    return ConfigKeyError("profiles", "at least one profile is required");
  ProfileCache own;  // without a shared cache: one for this load (the assets keep theirs)
  if (cache == nullptr) cache = &own;
  auto impl = std::make_unique<Impl>();
  impl->config = config;
  // Everything the configuration alone decides, checked before any profile is loaded.
  TG_ASSIGN_OR_RETURN(impl->machine, ConfiguredMachine(config));
  TG_ASSIGN_OR_RETURN(impl->spec, MakeEnvSpec(config, impl->machine));
  impl->migration_bytes_per_ns = impl->spec.tier_migration_gbps;
  TG_ASSIGN_OR_RETURN(const EstimatorOptions calibrated, CalibratedOptions(config, impl->machine));
  TG_ASSIGN_OR_RETURN(const std::optional<InterferenceSchedule> schedule,
                      ContentionSchedule(config));
  for (const std::string& path : config.profiles) {
    TG_ASSIGN_OR_RETURN(ProfileAssets pa, LoadProfileAssets(path, config, impl->machine, calibrated,
                                                            schedule, *cache));
    AddToSpec(pa, impl->spec);
    impl->profiles.push_back(std::move(pa));
  }
  auto assets = std::shared_ptr<EnvAssets>(new EnvAssets());
  assets->impl_ = std::move(impl);
  return std::shared_ptr<const EnvAssets>(std::move(assets));
}

// --- Episodes ------------------------------------------------------------------------------

namespace {

// An episode's state but the pricer's view: values only, so that Fork copies them all
// (a field added here is forked with the rest).
struct EpisodeValues {
  std::mt19937_64 rng{0};
  bool started = false;
  bool done = false;
  const ProfileAssets* profile = nullptr;  // in the shared assets
  std::vector<int> region_tier;            // machine tier per region
  std::vector<int> moved;                  // regions moved by this step
  std::vector<float> history;              // per region
  std::vector<uint64_t> used_bytes;        // per machine tier
  size_t step = 0;
  double elapsed_ns = 0;
  double default_elapsed_ns = 0;
  double last_ratio = 1;        // last interval's time / default
  double last_interval_ns = 0;  // last interval's time as charged (migration excluded)
};

}  // namespace

struct Environment::State : EpisodeValues {
  std::unique_ptr<IntervalPricer::Episode> pricing;  // the profile's pricer's view
};

Environment::Environment(std::shared_ptr<const EnvAssets> assets)
    : assets_(std::move(assets)), state_(std::make_unique<State>()) {}
Environment::~Environment() = default;

absl::StatusOr<std::unique_ptr<Environment>> Environment::Create(
    std::shared_ptr<const EnvAssets> assets) {
  if (assets == nullptr) return absl::InvalidArgumentError("no assets");
  return std::unique_ptr<Environment>(new Environment(std::move(assets)));
}

const EnvSpec& Environment::spec() const { return assets_->spec(); }

std::unique_ptr<Environment> Environment::Fork() const {
  std::unique_ptr<Environment> fork(new Environment(assets_));
  static_cast<EpisodeValues&>(*fork->state_) = *state_;
  fork->state_->pricing = state_->pricing != nullptr ? state_->pricing->Clone() : nullptr;
  return fork;
}

namespace {

std::vector<uint8_t> ActionMask(const EnvAssets::Impl& a, const ProfileAssets& p,
                                const std::vector<int>& region_tier,
                                const std::vector<uint64_t>& used) {
  return EpisodeActionMask(a.config.action_mode, a.machine, p.region_bytes, region_tier, used);
}

size_t MaskColumns(const EnvAssets::Impl& a) {
  return ActionMaskColumns(a.config.action_mode, a.machine.tiers.size());
}

// What a step's moves did: the regions still refused, the migration time and bytes.
struct Moves {
  std::vector<int> refused;
  double migration_ns = 0;
  uint64_t migrated_bytes = 0;
};

// Moves the regions of `p` toward the tiers `want` in region order; a second pass retries the
// refused ones, space freed by the first pass's departures. What still does not fit stays
// where it is. `region_tier`, `used_bytes` and `moved` (the regions moved) are updated.
Moves MoveRegions(const EnvAssets::Impl& a, const ProfileAssets& p, const std::vector<int>& want,
                  std::vector<int>& region_tier, std::vector<uint64_t>& used_bytes,
                  std::vector<int>& moved) {
  Moves m;
  std::vector<int> pending;
  for (size_t r = 0; r < region_tier.size(); ++r) {
    if (want[r] != region_tier[r]) pending.push_back(static_cast<int>(r));
  }
  moved.clear();
  for (int pass = 0; pass < 2 && !pending.empty(); ++pass) {
    std::vector<int> refused;
    for (int r : pending) {
      const int to = want[r];
      const uint64_t bytes = p.region_bytes[r];
      if (used_bytes[to] + bytes > a.machine.tiers[to].capacity_bytes) {
        refused.push_back(r);
        continue;
      }
      moved.push_back(r);
      used_bytes[region_tier[r]] -= bytes;
      used_bytes[to] += bytes;
      region_tier[r] = to;
      m.migration_ns += static_cast<double>(bytes) / a.migration_bytes_per_ns[to];
      m.migrated_bytes += bytes;
    }
    pending = std::move(refused);
  }
  m.refused = std::move(pending);
  return m;
}

}  // namespace

std::vector<uint8_t> EpisodeActionMask(ActionMode mode, const Machine& machine,
                                       const std::vector<uint64_t>& region_bytes,
                                       const std::vector<int>& region_tier,
                                       const std::vector<uint64_t>& used) {
  const size_t k = region_tier.size(), tiers = machine.tiers.size();
  const bool move_mode = mode == ActionMode::kMove;
  std::vector<uint8_t> mask(k * tiers + (move_mode ? 1 : 0), 1);  // move mode: the no-op last
  for (size_t t = 0; t < tiers; ++t) {
    uint64_t free_bytes =
        machine.tiers[t].capacity_bytes - std::min(used[t], machine.tiers[t].capacity_bytes);
    for (size_t r = 0; r < k; ++r) {
      if (static_cast<size_t>(region_tier[r]) == t) continue;  // staying is always allowed
      if (region_bytes[r] > free_bytes) {
        mask[r * tiers + t] = 0;
      } else if (!move_mode) {
        // Placement and keep modes: the mask is joint. Regions are granted a tier's free
        // space in region order, so that every combination of allowed moves fits at once
        // (one action moves many regions); move mode moves one region, so each fits alone.
        free_bytes -= region_bytes[r];
      }
    }
  }
  if (mode == ActionMode::kKeep) {  // [k, 1 + tiers]: keep, then the tiers
    std::vector<uint8_t> keep(k * (tiers + 1), 1);
    for (size_t r = 0; r < k; ++r) {
      for (size_t t = 0; t < tiers; ++t) keep[r * (tiers + 1) + 1 + t] = mask[r * tiers + t];
    }
    return keep;
  }
  return mask;
}

size_t ActionMaskColumns(ActionMode mode, size_t tiers) {
  switch (mode) {
    case ActionMode::kPlacement:
      return tiers;
    case ActionMode::kKeep:
      return tiers + 1;
    case ActionMode::kMove:
      return 0;
  }
  return 0;
}

std::vector<int> DesiredTiers(ActionMode mode, const Action& action,
                              const std::vector<int>& region_tier, size_t tiers) {
  const size_t k = region_tier.size();
  std::vector<int> want = region_tier;
  if (mode == ActionMode::kPlacement) {
    for (size_t r = 0; r < k; ++r) want[r] = static_cast<int>(action.values[r]);
  } else if (mode == ActionMode::kKeep) {
    // 0 keeps the region where it is, 1 + t moves it to tier t.
    for (size_t r = 0; r < k; ++r) {
      const int64_t v = action.values[r];
      if (v > 0) want[r] = static_cast<int>(v - 1);
    }
  } else {
    const int64_t v = action.values[0];
    const auto n = static_cast<int64_t>(k * tiers);  // n: the no-op
    if (v < n) want[static_cast<size_t>(v) / tiers] = static_cast<int>(v % tiers);
  }
  return want;
}

namespace {

// x / (1 + x): a ratio in [0, inf) squashed into [0, 1).
float Squash(double x) { return static_cast<float>(x / (1.0 + x)); }

// The bytes of the regions ahead of each region, its own included, with the regions
// ordered by decayed density (`decayed`), or by density since the start (`mean`), densest
// first, ties by region index.
struct BytesAhead {
  std::vector<double> decayed, mean;
};

BytesAhead RankRegions(const ProfileAssets& p, const std::vector<float>& history,
                       const double* before, double before_sum) {
  const size_t k = p.regions.size();
  BytesAhead ahead{std::vector<double>(k, 0.0), std::vector<double>(k, 0.0)};
  std::vector<double> decayed(k, 0.0), mean(k, 0.0);
  for (size_t r = 0; r < k; ++r) {
    const double size = p.region_size_share[r];
    if (size <= 0) continue;
    decayed[r] = history[r] / size;
    mean[r] = before_sum > 0 ? before[r] / before_sum / size : 0.0;
  }
  std::vector<size_t> order(k);
  const auto bytes_ahead = [&](const std::vector<double>& density, std::vector<double>& out) {
    std::iota(order.begin(), order.end(), size_t{0});
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return density[a] > density[b]; });
    double bytes = 0;
    for (size_t r : order) {
      bytes += static_cast<double>(p.region_bytes[r]);
      out[r] = bytes;
    }
  };
  bytes_ahead(decayed, ahead.decayed);
  bytes_ahead(mean, ahead.mean);
  return ahead;
}

// ObservationMode::kRelative's global features at `globals`: per tier its capacity against
// the footprint, its bandwidth and latency against the fastest's, the last interval's
// traffic against its bandwidth.
void ObserveRelativeGlobals(const Machine& machine, uint64_t footprint, double traffic_sum,
                            std::vector<float>& obs, size_t globals) {
  const size_t tiers = machine.tiers.size();
  double max_bandwidth = 0, max_latency = 0;
  for (const TierSpec& t : machine.tiers) {
    max_bandwidth = std::max(max_bandwidth, t.bandwidth_gbps);
    max_latency = std::max(max_latency, t.latency_ns);
  }
  for (size_t t = 0; t < tiers; ++t) {
    const TierSpec& tier = machine.tiers[t];
    obs[globals + t] =
        footprint > 0 ? static_cast<float>(std::min(1.0, static_cast<double>(tier.capacity_bytes) /
                                                             static_cast<double>(footprint)))
                      : 1.0f;
    obs[globals + tiers + t] =
        max_bandwidth > 0 ? static_cast<float>(tier.bandwidth_gbps / max_bandwidth) : 0.0f;
    obs[globals + 2 * tiers + t] =
        max_latency > 0 ? static_cast<float>(tier.latency_ns / max_latency) : 0.0f;
    obs[globals + 3 * tiers + t] = Squash(traffic_sum / tier.bandwidth_gbps);
  }
}

// ObservationMode::kRelative's per-region features from index kNormalizedRegionFeatures on,
// and its global features at `globals` (env/README.md, "Observations that transfer"). The
// first seven per-region features (kNormalized's) are in place already.
void ObserveRelative(const EnvSpec& spec, const Machine& machine, const ProfileAssets& p,
                     const EpisodeView& view, std::vector<float>& obs, size_t globals) {
  const size_t k = p.regions.size(), tiers = machine.tiers.size();
  const auto features = static_cast<size_t>(spec.obs_region_features);
  const size_t step = view.step;
  const std::vector<int>& tier_of = *view.region_tier;
  // Accesses since the start of the run, per region (the index's weighted samples).
  const double* before = &p.region_accesses_before[std::min(step, p.bounds.size() - 1) * k];
  double before_sum = 0;
  for (size_t r = 0; r < k; ++r) before_sum += before[r];
  // The last interval's memory traffic (bytes per ns) per region: its misses, as one run
  // makes them, times the line, over the interval's time as charged.
  std::vector<double> traffic(k, 0.0);
  double traffic_sum = 0;
  if (step > 0 && view.last_interval_ns > 0) {
    const double per_access =
        p.misses_per_access * machine.cache_line_bytes / view.last_interval_ns;
    for (size_t r = 0; r < k; ++r) {
      traffic[r] = p.region_accesses[(step - 1) * k + r] * per_access;
      traffic_sum += traffic[r];
    }
  }
  // The bytes ahead of each region by the two densities, its own included.
  const BytesAhead ahead = RankRegions(p, *view.history, before, before_sum);
  const std::vector<double>& ahead_decayed = ahead.decayed;
  const std::vector<double>& ahead_mean = ahead.mean;
  uint64_t footprint = 0;
  for (uint64_t b : p.region_bytes) footprint += b;
  for (size_t r = 0; r < k; ++r) {
    float* f = &obs[r * features];
    const double size = p.region_size_share[r];
    const auto bytes = static_cast<double>(p.region_bytes[r]);
    // 7: accesses per byte since the start of the run against the average byte.
    f[7] = size > 0 && before_sum > 0 ? Squash(before[r] / before_sum / size) : 0.0f;
    // 8: trend, the last interval's share against the decayed one (0.5 steady, 1 new).
    const double last = f[1], decayed = f[2];
    f[8] = last + decayed > 0 ? static_cast<float>(last / (last + decayed)) : 0.5f;
    // 9: the region's traffic against the default tier's bandwidth.
    f[9] = Squash(traffic[r] / machine.tiers[0].bandwidth_gbps);
    float* on = f + kRelativeCommonFeatures;
    float* rank_decayed = on + tiers;
    float* rank_mean = on + 2 * tiers;
    float* room = on + 3 * tiers;
    float* migration = on + 4 * tiers;
    for (size_t t = 0; t < tiers; ++t) {
      const auto capacity = static_cast<double>(machine.tiers[t].capacity_bytes);
      on[t] = static_cast<size_t>(tier_of[r]) == t ? 1.0f : 0.0f;
      // The bytes ahead of the region, its own included, against the tier's capacity:
      // at most 0.5 when filling the tier densest first would take it.
      rank_decayed[t] = Squash(ahead_decayed[r] / capacity);
      rank_mean[t] = Squash(ahead_mean[r] / capacity);
      // Its size against the room the tier has for it (its own bytes when it is there).
      const auto used = static_cast<double>((*view.used_bytes)[t]);
      const double free_bytes =
          std::max(0.0, capacity - used) + (static_cast<size_t>(tier_of[r]) == t ? bytes : 0.0);
      room[t] = free_bytes > 0 ? Squash(bytes / free_bytes) : 1.0f;
      // Moving it there, in last intervals (0 where it is, and before the first interval).
      const double gbps = spec.tier_migration_gbps[t];
      migration[t] = static_cast<size_t>(tier_of[r]) != t && view.last_interval_ns > 0 && gbps > 0
                         ? Squash(bytes / gbps / view.last_interval_ns)
                         : 0.0f;
    }
  }
  ObserveRelativeGlobals(machine, footprint, traffic_sum, obs, globals);
}

// ObservationMode::kRelativeLoad's last per-region feature: the region's load since the
// start of the run (the application's sampled accesses per ns while it is accessed, its
// accesses' mean) against the application's (all accesses' mean): sq of it, 0.5 for a
// region accessed at the application's mean load, 0 for one never sampled.
void ObserveLoad(const EnvSpec& spec, const ProfileAssets& p, size_t step,
                 std::vector<float>& obs) {
  const size_t k = p.regions.size(), features = static_cast<size_t>(spec.obs_region_features);
  const size_t row = std::min(step, p.bounds.size() - 1) * k;
  const double* accesses = &p.region_accesses_before[row];
  const double* load = &p.region_load_before[row];
  double accesses_sum = 0, load_sum = 0;
  for (size_t r = 0; r < k; ++r) {
    accesses_sum += accesses[r];
    load_sum += load[r];
  }
  for (size_t r = 0; r < k; ++r) {
    obs[r * features + features - kRelativeLoadFeatures] =
        accesses[r] > 0 && load_sum > 0 ? Squash(load[r] / accesses[r] / (load_sum / accesses_sum))
                                        : 0.0f;
  }
}

}  // namespace

void ObserveEpisode(const EnvSpec& spec, ObservationMode mode, const Machine& machine,
                    const ProfileAssets& p, const EpisodeView& view, std::vector<float>& obs) {
  const size_t k = p.regions.size(), tiers = machine.tiers.size();
  obs.assign(static_cast<size_t>(spec.observation.shape[0]), 0.0f);
  const auto features = static_cast<size_t>(spec.obs_region_features);
  // Normalized features: x / (1 + x) of an access density (the region's share of the
  // accesses over its share of the footprint: 1 = the average byte) and of the region's size
  // against the average region's.
  const auto squash = [](float x) { return x / (1.0f + x); };
  const size_t step = view.step;
  for (size_t r = 0; r < k; ++r) {
    float* f = &obs[r * features];
    f[0] = tiers > 1 ? static_cast<float>((*view.region_tier)[r]) / static_cast<float>(tiers - 1)
                     : 0.0f;
    f[1] = step > 0 ? p.region_share[(step - 1) * k + r] : 0.0f;  // the last interval
    f[2] = (*view.history)[r];
    f[3] = p.region_size_share[r];
    if (mode != ObservationMode::kRaw) {
      f[4] = f[3] > 0 ? squash(f[1] / f[3]) : 0.0f;
      f[5] = f[3] > 0 ? squash(f[2] / f[3]) : 0.0f;
      f[6] = squash(f[3] * static_cast<float>(k));
    }
  }
  const auto g = static_cast<size_t>(spec.obs_global_offset);
  for (size_t t = 0; t < tiers; ++t) {
    obs[g + t] =
        static_cast<float>(std::min(1.0, static_cast<double>((*view.used_bytes)[t]) /
                                             static_cast<double>(machine.tiers[t].capacity_bytes)));
  }
  obs[g + tiers] =
      static_cast<float>(static_cast<double>(step) / static_cast<double>(p.bounds.size() - 1));
  obs[g + tiers + 1] = static_cast<float>(std::clamp(view.last_ratio / 2, 0.0, 1.0));
  const auto extra = static_cast<size_t>(ExtraGlobalFeatures(mode, tiers));
  if (IsRelative(mode)) ObserveRelative(spec, machine, p, view, obs, g + tiers + 2);
  if (mode == ObservationMode::kRelativeLoad) ObserveLoad(spec, p, view.step, obs);
  if (view.interference_level != nullptr) {
    const size_t at = g + tiers + 2 + extra;
    for (size_t t = 0; t < tiers && at + t < obs.size(); ++t) {
      obs[at + t] = view.interference_level[t];
    }
  }
  for (float& v : obs) v = std::clamp(v, 0.0f, 1.0f);
}

absl::StatusOr<StepResult> Environment::Reset(std::optional<uint64_t> seed,
                                              const ResetOptions& options) {
  const EnvAssets::Impl& a = assets_->impl();
  State& s = *state_;
  if (seed) s.rng.seed(*seed);
  size_t chosen = 0;
  if (options.profile) {
    bool found = false;
    for (size_t i = 0; i < a.profiles.size() && !found; ++i) {
      if (a.profiles[i].name == *options.profile || std::to_string(i) == *options.profile) {
        chosen = i;
        found = true;
      }
    }
    if (!found) {
      return absl::InvalidArgumentError(StrCat(
          "options.profile: unknown profile '", *options.profile, "' (known: ",
          absl::StrJoin(a.profiles, ", ",
                        [](std::string* out, const ProfileAssets& p) { out->append(p.name); }),
          ")"));
    }
  } else {
    chosen = static_cast<size_t>(s.rng() % a.profiles.size());
  }
  s.profile = &a.profiles[chosen];
  const ProfileAssets& p = *s.profile;
  const size_t k = p.regions.size(), tiers = a.machine.tiers.size();
  s.pricing.reset();
  TG_ASSIGN_OR_RETURN(s.pricing, p.pricer->NewEpisode());
  s.region_tier.assign(k, 0);
  s.history.assign(k, 0.0f);
  s.used_bytes.assign(tiers, 0);
  for (uint64_t b : p.region_bytes) s.used_bytes[0] += b;
  s.step = 0;
  s.elapsed_ns = s.default_elapsed_ns = 0;
  s.last_ratio = 1;
  s.last_interval_ns = 0;
  s.started = true;
  s.done = false;

  StepResult out;
  out.info.profile = p.name;
  out.info.default_total_ns = p.default_total_ns;
  out.info.tier_used_bytes = s.used_bytes;
  out.info.action_mask = ActionMask(a, p, s.region_tier, s.used_bytes);
  out.info.action_mask_columns = MaskColumns(a);
  out.observation = Observe();
  return out;
}

absl::StatusOr<StepResult> Environment::Step(const Action& action) {
  // The action checked against the action space first (the one check the server's batches
  // use too, before they step with StepPrechecked).
  TG_RETURN_IF_ERROR(CheckAction(assets_->impl().spec, action, "action"));
  return StepPrechecked(action);
}

absl::StatusOr<StepResult> Environment::StepPrechecked(const Action& action) {
  const EnvAssets::Impl& a = assets_->impl();
  State& s = *state_;
  if (!s.started) return absl::FailedPreconditionError("step before reset");
  if (s.done) return absl::FailedPreconditionError("step after the episode ended; call reset");
  const ProfileAssets& p = *s.profile;
  const size_t k = p.regions.size(), tiers = a.machine.tiers.size();

  // Desired tier per region (the action fits the action space: Step checked it).
  const std::vector<int> want = DesiredTiers(a.config.action_mode, action, s.region_tier, tiers);

  // The moves (region order, refused ones retried once; what does not fit stays).
  StepResult out;
  Moves moves = MoveRegions(a, p, want, s.region_tier, s.used_bytes, s.moved);
  const double migration_ns = moves.migration_ns;
  out.info.refused_regions = std::move(moves.refused);
  if (!s.moved.empty()) TG_RETURN_IF_ERROR(s.pricing->Move(s.moved, s.region_tier));

  // Charge the interval.
  const double interval = s.pricing->IntervalNs(s.step, s.region_tier);
  const double base = p.default_interval_ns[s.step];
  s.elapsed_ns += interval + migration_ns;
  s.default_elapsed_ns += base;
  s.last_ratio = base > 0 ? interval / base : 1.0;
  s.last_interval_ns = interval;
  out.reward = p.default_total_ns > 0 ? (base - interval - migration_ns) / p.default_total_ns : 0;
  const auto decay = static_cast<float>(a.config.history_decay);
  for (size_t r = 0; r < k; ++r) {
    s.history[r] = decay * s.history[r] + (1 - decay) * p.region_share[s.step * k + r];
  }

  StepInfo& info = out.info;
  info.profile = p.name;
  info.interval_ns = interval;
  info.default_interval_ns = base;
  info.migration_ns = migration_ns;
  info.migrated_bytes = moves.migrated_bytes;
  info.elapsed_ns = s.elapsed_ns;
  info.default_elapsed_ns = s.default_elapsed_ns;
  info.default_total_ns = p.default_total_ns;
  info.tier_used_bytes = s.used_bytes;
  info.action_mask = ActionMask(a, p, s.region_tier, s.used_bytes);
  info.action_mask_columns = MaskColumns(a);

  ++s.step;            // the interval just charged is now in the past
  info.step = s.step;  // decision intervals done so far (PROTOCOL.md "Step info")
  out.terminated = s.step + 1 >= p.bounds.size();
  s.done = out.terminated;
  out.observation = Observe();
  return out;
}

std::vector<float> Environment::Observe() const {
  const EnvAssets::Impl& a = assets_->impl();
  const State& s = *state_;
  const ProfileAssets& p = *s.profile;
  const size_t tiers = a.machine.tiers.size();
  EpisodeView view{.region_tier = &s.region_tier,
                   .history = &s.history,
                   .used_bytes = &s.used_bytes,
                   .step = s.step,
                   .last_ratio = s.last_ratio,
                   .last_interval_ns = s.last_interval_ns};
  // The interference level now in force (known to a deployed agent).
  if (p.interference && !s.done) view.interference_level = &p.interference_level[s.step * tiers];
  std::vector<float> obs;
  ObserveEpisode(spec(), a.config.observation, a.machine, p, view, obs);
  return obs;
}

absl::StatusOr<double> Environment::EstimatePlacementNs(const std::string& profile,
                                                        const Placement& placement) const {
  const EnvAssets::Impl& a = assets_->impl();
  for (const ProfileAssets& p : a.profiles) {
    if (p.name == profile) {
      TG_ASSIGN_OR_RETURN(Estimate e, p.estimator->EstimatePlacement(placement, a.config.model));
      return e.runtime_ns;
    }
  }
  return absl::NotFoundError(StrCat("no profile '", profile, "' in this environment"));
}

}  // namespace tiergym::env

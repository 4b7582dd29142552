// A small deterministic environment behind the EnvProvider interface, for the protocol,
// service and socket tests: they check what the server does with requests, not the
// placement dynamics (tests/env/environment_test.cc does those).
//
// Configuration keys: num_regions (default 4), tiers (2), steps (3), action_mode
// (placement|move), profiles (comma-separated names, default "alpha,beta"), fail
// ("load": Make fails with NotFound naming profiles; "step": Step fails with Internal),
// load_ms (Make sleeps that long: a slow load).
// Observation: per region its tier / (tiers - 1), then step / steps and a value drawn
// from the seeded generator at reset. Reward: the number of regions on tier 1 divided by
// num_regions * steps. The episode terminates after `steps` steps.
#ifndef TIERGYM_TESTS_ENV_FAKE_ENV_H_
#define TIERGYM_TESTS_ENV_FAKE_ENV_H_

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "env/provider/env_provider.h"
#include "env/spec/action_check.h"
#include "traces/base/field_status.h"
#include "traces/base/strings.h"

namespace tiergym::env::testing {

class FakeEnv : public SessionEnv {
 public:
  FakeEnv(EnvSpec spec, int steps, bool fail_step)
      : spec_(std::move(spec)),
        steps_(steps),
        fail_step_(fail_step),
        tiers_(spec_.num_regions, 0) {}

  const EnvSpec& spec() const override { return spec_; }

  absl::StatusOr<StepResult> Reset(std::optional<uint64_t> seed,
                                   const ResetOptions& options) override {
    if (seed) rng_.seed(*seed);
    size_t profile = rng_() % spec_.profiles.size();
    if (options.profile) {
      profile = spec_.profiles.size();
      for (size_t i = 0; i < spec_.profiles.size(); ++i) {
        if (spec_.profiles[i] == *options.profile || std::to_string(i) == *options.profile)
          profile = i;
      }
      if (profile == spec_.profiles.size()) {
        return absl::NotFoundError(StrCat("no profile \"", *options.profile, "\""));
      }
    }
    profile_ = spec_.profiles[profile];
    noise_ = static_cast<float>(rng_() % 1000) / 1000.0f;
    step_ = 0;
    std::fill(tiers_.begin(), tiers_.end(), 0);
    return Result(0);
  }

  absl::StatusOr<StepResult> Step(const Action& action) override {
    if (fail_step_) return absl::InternalError("the fake was told to fail");
    if (absl::Status s = CheckAction(spec_, action, "action"); !s.ok()) return s;
    if (spec_.action.kind == Space::kMultiDiscrete) {
      for (size_t i = 0; i < tiers_.size(); ++i) tiers_[i] = static_cast<int>(action.values[i]);
    } else if (action.values[0] < spec_.num_regions * static_cast<int64_t>(spec_.tiers.size())) {
      tiers_[action.values[0] / spec_.tiers.size()] =
          static_cast<int>(action.values[0] % spec_.tiers.size());
    }
    ++step_;
    double on_fast = 0;
    for (int t : tiers_) on_fast += t == 1;
    return Result(on_fast / (spec_.num_regions * steps_));
  }

  absl::StatusOr<double> EstimatePlacementNs(const std::string& profile, const Placement& placement,
                                             EnvProvider* /*maker*/) const override {
    bool known = false;
    for (const std::string& p : spec_.profiles) known = known || p == profile;
    if (!known) return absl::NotFoundError(StrCat("no profile \"", profile, "\""));
    return placement.default_tier == spec_.tiers[0] ? 1000.0 : 500.0;
  }

 private:
  StepResult Result(double reward) const {
    StepResult r;
    const int tiers = static_cast<int>(spec_.tiers.size());
    for (int t : tiers_) r.observation.push_back(static_cast<float>(t) / (tiers - 1));
    r.observation.push_back(static_cast<float>(step_) / steps_);
    r.observation.push_back(noise_);
    r.reward = reward;
    r.terminated = step_ >= steps_;
    r.info.profile = profile_;
    r.info.step = step_;
    r.info.interval_ns = 100.0 * step_;
    r.info.default_total_ns = 1e6;
    r.info.tier_used_bytes.assign(tiers, 0);
    for (int t : tiers_) r.info.tier_used_bytes[t] += 4096;
    if (spec_.action.kind == Space::kMultiDiscrete) {
      r.info.action_mask.assign(spec_.num_regions * tiers, 1);
    } else {
      r.info.action_mask.assign(spec_.action.n, 1);
    }
    return r;
  }

  EnvSpec spec_;
  int steps_;
  bool fail_step_;
  std::vector<int> tiers_;
  std::mt19937_64 rng_{0};
  std::string profile_;
  float noise_ = 0;
  int step_ = 0;
};

class FakeProvider : public EnvProvider {
 public:
  std::string Description() const override { return "a fake environment for tests"; }
  const std::vector<ConfigKey>& ConfigKeys() const override {
    static const std::vector<ConfigKey> kKeys = {
        {"num_regions", "4", "regions"},
        {"tiers", "2", "tiers"},
        {"steps", "3", "steps per episode"},
        {"action_mode", "placement", "placement|move"},
        {"profiles", "alpha,beta", "profiles"},
        {"fail", "", "load|step"},
        {"load_ms", "0", "how long Make takes (a slow load), at most 10 s"},
    };
    return kKeys;
  }
  absl::StatusOr<std::unique_ptr<SessionEnv>> Make(const ConfigMap& config) override {
    auto get = [&](const std::string& k) {
      auto it = config.find(k);
      if (it != config.end()) return ConfigValueText(it->second);
      for (const ConfigKey& key : ConfigKeys()) {
        if (key.name == k) return key.default_value;
      }
      return std::string();
    };
    if (get("fail") == "load") return absl::NotFoundError("profiles: no such directory /nowhere");
    if (const std::string ms = get("load_ms"); ms != "0" && !ms.empty() && ms.size() < 6) {
      std::this_thread::sleep_for(std::chrono::milliseconds(std::min(10000, std::stoi(ms))));
    }
    int regions = 0;
    try {
      regions = std::stoi(get("num_regions"));
    } catch (...) {
      regions = 0;
    }
    if (regions < 1 || regions > 4096) {
      return InvalidFieldError("num_regions",
                               StrCat("must be in [1, 4096], got \"", get("num_regions"), "\""));
    }
    EnvSpec spec;
    const int tiers = std::stoi(get("tiers"));
    for (int t = 0; t < tiers; ++t) spec.tiers.push_back(t == 0 ? "ddr" : StrCat("fast", t));
    std::string profiles = get("profiles");
    for (size_t start = 0; start <= profiles.size();) {
      size_t comma = profiles.find(',', start);
      if (comma == std::string::npos) comma = profiles.size();
      spec.profiles.push_back(profiles.substr(start, comma - start));
      start = comma + 1;
    }
    spec.num_regions = regions;
    for (int t = 0; t < tiers; ++t) {
      spec.tier_capacity_bytes.push_back(uint64_t{1} << (30 + t));
      spec.tier_migration_gbps.push_back(2.0 + t);
      spec.tier_bandwidth_gbps.push_back(90.0 * (t + 1));
    }
    for (size_t p = 0; p < spec.profiles.size(); ++p) {
      for (int r = 0; r < regions; ++r) {  // 1 MiB regions, each profile at its own base
        spec.region_bounds.push_back(((p + 1) << 40) + (static_cast<uint64_t>(r) << 20));
        spec.region_bounds.push_back(((p + 1) << 40) + (static_cast<uint64_t>(r + 1) << 20));
      }
    }
    spec.obs_region_features = 1;
    spec.obs_global_offset = regions;
    spec.observation = Space{Space::kBox, {regions + 2}, 0, 1, 0};
    if (get("action_mode") == "move") {
      spec.action = Space{Space::kDiscrete, {}, 0, 1, int64_t{regions} * tiers + 1};
    } else {
      spec.action = Space{Space::kMultiDiscrete, {regions}, 0, 1, tiers};
    }
    made_.fetch_add(1);
    return std::make_unique<FakeEnv>(spec, std::stoi(get("steps")), get("fail") == "step");
  }
  Stats GetStats() const override { return Stats{made_.load() > 0 ? 1u : 0u, 1234}; }

 private:
  std::atomic<uint64_t> made_{0};
};

}  // namespace tiergym::env::testing

#endif  // TIERGYM_TESTS_ENV_FAKE_ENV_H_

#include "env/provider/cosched_provider.h"

#include <algorithm>
#include <new>
#include <utility>

#include "env/provider/placement_provider.h"
#include "traces/base/field_status.h"
#include "traces/base/status_macros.h"
#include "traces/base/strings.h"
#include "traces/machine.h"

namespace tiergym::env {
namespace {

std::string MiB(uint64_t bytes) { return StrCat(bytes >> 20, " MiB"); }

}  // namespace

absl::Status CoschedCharges::Acquire(uint64_t node_bytes,
                                     const std::vector<std::pair<std::string, uint64_t>>& profiles,
                                     uint64_t* charged) {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t bytes = node_bytes;
  for (const auto& [key, b] : profiles) {
    auto it = held_.find(key);
    if (it == held_.end() || it->second.users == 0) bytes += b;
  }
  *charged = bytes;
  if (budget_ != nullptr) TG_RETURN_IF_ERROR(budget_->Charge(bytes));
  for (const auto& [key, b] : profiles) {
    Held& h = held_[key];
    if (h.users++ == 0) h.bytes = b;
  }
  return absl::OkStatus();
}

void CoschedCharges::Release(uint64_t node_bytes, const std::vector<std::string>& keys) {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t bytes = node_bytes;
  for (const std::string& key : keys) {
    auto it = held_.find(key);
    if (it == held_.end()) continue;
    if (--it->second.users == 0) {
      bytes += it->second.bytes;
      held_.erase(it);
    }
  }
  if (budget_ != nullptr) budget_->Uncharge(bytes);
}

uint64_t CoschedCharges::ProfileBytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t bytes = 0;
  for (const auto& [key, h] : held_) bytes += h.bytes;
  return bytes;
}

CoschedNode::CoschedNode(std::unique_ptr<CoschedEnv> env, std::shared_ptr<CoschedCharges> charges,
                         uint64_t node_bytes, std::vector<std::string> profile_keys)
    : env_(std::move(env)),
      spec_(env_->assets().tenant_spec()),
      charges_(std::move(charges)),
      node_bytes_(node_bytes),
      profile_keys_(std::move(profile_keys)) {
  // The distinct profiles with their region bounds (a profile may run as several tenants).
  spec_.profiles = env_->assets().env_assets().spec().profiles;
  spec_.region_bounds = env_->assets().env_assets().spec().region_bounds;
}

CoschedNode::~CoschedNode() {
  env_.reset();
  charges_->Release(node_bytes_, profile_keys_);
}

namespace {
absl::Status NodeRefuses() {
  return absl::FailedPreconditionError(
      "a co-scheduling node's session: its episodes are node steps, reset and step with one "
      "action per tenant (actions)");
}
}  // namespace

absl::StatusOr<StepResult> CoschedNode::Reset(std::optional<uint64_t>, const ResetOptions&) {
  return NodeRefuses();
}
absl::StatusOr<StepResult> CoschedNode::Step(const Action&) { return NodeRefuses(); }
absl::StatusOr<double> CoschedNode::EstimatePlacementNs(const std::string&, const Placement&,
                                                        EnvProvider*) const {
  return NodeRefuses();
}

std::string CoschedProvider::Description() const {
  return "co-scheduling nodes: K tenants sharing one node's tiers (make with this id, then "
         "reset and step with one action per tenant, actions)";
}

CoschedProvider::CoschedProvider(CoschedProviderOptions options, EnvProvider* budget)
    : options_(std::move(options)),
      charges_(std::make_shared<CoschedCharges>(budget)),
      keys_(WithServerDefaults(CoschedConfigKeys(), options_.default_config)),
      roots_(DataRoots::Create(
          ServerDataRoots(options_.data_dirs, options_.named_profiles, options_.default_config))) {
  for (ConfigKey& k : keys_) {
    if (k.name == "sensitivity" && !options_.default_sensitivity.empty()) {
      k.default_value = "(the server's curves)";
    }
  }
}

absl::StatusOr<ConfigMap> CoschedProvider::Resolve(const ConfigMap& config) const {
  if (!roots_.ok()) return roots_.status();
  ConfigMap out = config;
  // A value of the wrong type is left to ParseCoschedConfig, which says what it expects.
  TG_RETURN_IF_ERROR(roots_->ResolveFileKey(out, "machine", &DataRoots::Machine, true));
  TG_RETURN_IF_ERROR(roots_->ResolveFileKey(out, "calibration", &DataRoots::Calibration));
  TG_RETURN_IF_ERROR(roots_->ResolveFileKey(out, "sensitivity", &DataRoots::Sensitivity));
  if (!out.contains("sensitivity") && !options_.default_sensitivity.empty()) {
    out["sensitivity"] = options_.default_sensitivity;  // the operator's word
  }
  if (auto it = out.find("tenants"); it != out.end()) {
    TG_ASSIGN_OR_RETURN(std::optional<ConfigValue::List> dirs,
                        roots_->ResolveProfileNames(it->second, "tenants"));
    if (!dirs) return out;  // ParseCoschedConfig refuses it
    it->second = ConfigValue(*std::move(dirs));
  }
  // The server's defaults: the operator's word, taken as they are.
  for (const auto& [key, value] : options_.default_config) out.emplace(key, value);
  return out;
}

uint64_t CoschedProvider::EstimateNodeBytes(const CoschedConfig& c) {
  absl::StatusOr<Machine> machine = LoadMachine(c.env.machine);
  const uint64_t tiers = machine.ok() ? machine->tiers.size() : 8;
  const uint64_t k = static_cast<uint64_t>(std::max(1, c.env.num_regions));
  const uint64_t n = c.env.steps > 0 ? static_cast<uint64_t>(c.env.steps) : 10000;
  // Per tenant: its state and tables.
  return c.tenants.size() *
         (4096 + n * k * (4 + tiers * 8) + n * (32 + tiers * 4) + k * (64 + 16 + 32 + tiers));
}

std::vector<std::pair<std::string, uint64_t>> CoschedProvider::EstimateProfileBytes(
    const CoschedConfig& c) {
  std::vector<std::pair<std::string, uint64_t>> out;
  for (const std::string& dir : c.tenants) {
    // The profile's index, shared by the nodes that would share it in ProfileCache (whose
    // key also holds the machine, the window and the calibration's overlap).
    std::string key =
        StrCat(dir, "\n", c.env.machine, "\n", c.env.window_instructions, "\n", c.env.calibration);
    if (std::any_of(out.begin(), out.end(), [&](const auto& p) { return p.first == key; })) {
      continue;
    }
    out.emplace_back(std::move(key), PlacementProvider::AssumedIndexBytes(dir));
  }
  return out;
}

absl::StatusOr<std::unique_ptr<SessionEnv>> CoschedProvider::Make(const ConfigMap& config) {
  absl::StatusOr<ConfigMap> resolved = Resolve(config);
  if (!resolved.ok()) return resolved.status();
  if (resolved->count("sensitivity") == 0) {
    return InvalidFieldError("sensitivity",
                             "required: name sensitivity curves (curves.csv) in a data directory "
                             "(this server has no default: tiergym serve --sensitivity)");
  }
  absl::StatusOr<CoschedConfig> parsed = ParseCoschedConfig(*resolved);
  if (!parsed.ok()) return parsed.status();
  // Files by the names clients know them by, not by their server paths; the field kept.
  auto redact = [&](const absl::Status& status) {
    absl::Status redacted(status.code(), roots_->Redact(std::string(status.message())));
    const std::optional<std::string> field = ErrorField(status);
    return field ? WithField(std::move(redacted), *field) : redacted;
  };
  if (absl::StatusOr<EnvSpec> spec = MakeEnvSpec(parsed->env); !spec.ok()) {
    return redact(spec.status());
  }
  const uint64_t node_bytes = EstimateNodeBytes(*parsed);
  const std::vector<std::pair<std::string, uint64_t>> profiles = EstimateProfileBytes(*parsed);
  std::vector<std::string> keys;
  keys.reserve(profiles.size());
  for (const auto& [key, b] : profiles) keys.push_back(key);
  uint64_t bytes = 0;
  if (absl::Status s = charges_->Acquire(node_bytes, profiles, &bytes); !s.ok()) {
    return absl::Status(s.code(), StrCat("a co-scheduling node of this configuration needs "
                                         "about ",
                                         MiB(bytes), " before it is built: ", s.message()));
  }
  auto give_back = [&] { charges_->Release(node_bytes, keys); };
  absl::StatusOr<std::shared_ptr<const CoschedAssets>> assets = [&] {
    try {
      return CoschedAssets::Load(*parsed, &profiles_);
    } catch (const std::bad_alloc&) {
      return absl::StatusOr<std::shared_ptr<const CoschedAssets>>(
          absl::ResourceExhaustedError("the server ran out of memory loading this node"));
    }
  }();
  if (!assets.ok()) {
    give_back();
    return redact(assets.status());
  }
  absl::StatusOr<std::unique_ptr<CoschedEnv>> env = CoschedEnv::Create(*std::move(assets));
  if (!env.ok()) {
    give_back();
    return redact(env.status());
  }
  return std::make_unique<CoschedNode>(*std::move(env), charges_, node_bytes, std::move(keys));
}

}  // namespace tiergym::env

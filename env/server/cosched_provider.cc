#include "env/server/cosched_provider.h"

#include <algorithm>
#include <filesystem>
#include <new>
#include <utility>

#include "env/server/environment_provider.h"
#include "traces/base/field_status.h"
#include "traces/base/status_macros.h"
#include "traces/base/strings.h"
#include "traces/machine.h"
#include "traces/profile.h"

namespace tiergym::env {
namespace {

std::string MiB(uint64_t bytes) { return StrCat(bytes >> 20, " MiB"); }

}  // namespace

CoschedProvider::CoschedProvider(CoschedProviderOptions options, EnvProvider* budget)
    : options_(std::move(options)),
      budget_(budget),
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

uint64_t CoschedProvider::EstimateBytes(const CoschedConfig& c) {
  absl::StatusOr<Machine> machine = LoadMachine(c.env.machine);
  const uint64_t tiers = machine.ok() ? machine->tiers.size() : 8;
  const uint64_t k = static_cast<uint64_t>(std::max(1, c.env.num_regions));
  const uint64_t n = c.env.steps > 0 ? static_cast<uint64_t>(c.env.steps) : 10000;
  uint64_t bytes = 4096 * c.tenants.size();
  std::vector<std::string> seen;
  for (const std::string& dir : c.tenants) {
    // Per tenant: its state and tables; per distinct profile: its index.
    bytes += n * k * (4 + tiers * 8) + n * (32 + tiers * 4) + k * (64 + 16 + 32 + tiers);
    if (std::find(seen.begin(), seen.end(), dir) != seen.end()) continue;
    seen.push_back(dir);
    absl::StatusOr<std::vector<std::string>> files = ListTraceFiles(dir);
    if (!files.ok()) continue;
    for (const std::string& f : *files) {
      std::error_code ec;
      const uint64_t size = std::filesystem::file_size(f, ec);
      if (!ec) bytes += size * EnvironmentProvider::kTraceBytesFactor;
    }
  }
  return bytes;
}

absl::StatusOr<std::unique_ptr<CoschedNode>> CoschedProvider::Make(const ConfigMap& config) {
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
  const uint64_t bytes = EstimateBytes(*parsed);
  if (budget_ != nullptr) {
    if (absl::Status s = budget_->Charge(bytes); !s.ok()) {
      return absl::Status(s.code(), StrCat("a co-scheduling node of this configuration needs "
                                           "about ",
                                           MiB(bytes), " before it is built: ", s.message()));
    }
  }
  auto give_back = [&] {
    if (budget_ != nullptr) budget_->Uncharge(bytes);
  };
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
  return std::make_unique<CoschedNode>(*std::move(env), budget_, bytes);
}

}  // namespace tiergym::env

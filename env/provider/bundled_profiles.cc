#include "env/provider/bundled_profiles.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <random>
#include <set>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "traces/base/status_macros.h"
#include "traces/base/strings.h"
#include "traces/machine.h"
#include "traces/synth/app_model.h"
#include "traces/synth/generator.h"

namespace tiergym::env {
namespace fs = std::filesystem;

namespace {
constexpr uint64_t kSeed = 1;
constexpr uint64_t kSamples = synth::kDefaultTargetSamples;  // 200000
}  // namespace

std::string MachineDigest(const Machine& machine) {
  uint64_t h = 14695981039346656037ULL;  // FNV-1a, 64 bits
  for (const char c : MachineToJson(machine)) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ULL;
  }
  return absl::StrCat(absl::Hex(h >> 16, absl::kZeroPad12));
}

const std::vector<std::string>& BundledProfileApps() {
  static const std::vector<std::string> kApps = {"minife", "lulesh", "nekbone", "lammps"};
  return kApps;
}

absl::StatusOr<std::string> DefaultCacheDir() {
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && xdg[0] == '/') {
    return StrCat(xdg, "/tiergym");
  }
  if (const char* home = std::getenv("HOME"); home != nullptr && home[0] != '\0') {
    return StrCat(home, "/.cache/tiergym");
  }
  return absl::FailedPreconditionError(
      "neither XDG_CACHE_HOME nor HOME is set: give --profiles DIRS");
}

absl::StatusOr<std::vector<ServedProfile>> EnsureBundledProfiles(
    const std::string& cache_dir, const std::function<void(const std::string&)>& progress,
    const std::string& machine_name) {
  if (machine_name.empty() || machine_name.find_first_of("/.") != std::string::npos) {
    return absl::InvalidArgumentError(
        StrCat("bundled profiles: '", machine_name,
               "' is not a machine preset (knl, disagg, xeonmax, ddr5cxl)"));
  }
  TG_ASSIGN_OR_RETURN(const Machine machine, LoadMachine(machine_name));
  const fs::path root =
      fs::path(cache_dir) / "profiles-v1" /
      StrCat(machine_name, "-", MachineDigest(machine), "-seed", kSeed, "-s", kSamples);
  std::error_code ec;
  fs::create_directories(root, ec);
  if (ec) {
    return absl::PermissionDeniedError(
        StrCat(root.string(), ": cannot create the profile cache: ", ec.message()));
  }
  std::vector<ServedProfile> out;
  for (const std::string& app : BundledProfileApps()) {
    const fs::path dir = root / app;
    if (!fs::is_directory(dir / "profile")) {
      if (progress)
        progress(StrCat("generating the bundled profile ", app, " into ", dir.string()));
      TG_ASSIGN_OR_RETURN(synth::AppModel model, synth::LoadAppModel(app));
      synth::SynthOptions options;
      options.seed = kSeed;
      options.target_samples = kSamples;
      TG_ASSIGN_OR_RETURN(synth::SynthProfile profile,
                          synth::GenerateProfile(model, machine, options));
      std::random_device rd;
      const fs::path tmp = root / StrCat(".tmp-", app, "-", getpid(), "-", rd());
      TG_RETURN_IF_ERROR(synth::WriteSynthProfile(profile, tmp.string(), TraceFormat::kBinary));
      fs::rename(tmp / app, dir, ec);  // atomic; fails when another server was first
      fs::remove_all(tmp, ec);
      if (!fs::is_directory(dir / "profile")) {
        return absl::InternalError(StrCat(dir.string(), ": the generated profile is missing"));
      }
    }
    out.push_back(ServedProfile{app, (dir / "profile").string()});
  }
  return out;
}

absl::StatusOr<std::vector<ServedProfile>> ProfilesFromDirs(const std::string& dirs) {
  std::vector<ServedProfile> out;
  std::set<std::string> names;
  size_t start = 0;
  while (start <= dirs.size()) {
    size_t comma = dirs.find(',', start);
    if (comma == std::string::npos) comma = dirs.size();
    std::string dir = dirs.substr(start, comma - start);
    start = comma + 1;
    if (dir.empty()) continue;
    fs::path p = fs::path(dir).lexically_normal();
    if (p.filename().empty()) p = p.parent_path();
    std::string name = p.filename().string();
    if (name == "profile" && p.has_parent_path()) name = p.parent_path().filename().string();
    if (!names.insert(name).second) {
      return absl::InvalidArgumentError(
          StrCat("--profiles: two profiles named \"", name, "\" (", dir, ")"));
    }
    out.push_back(ServedProfile{name, dir});
  }
  if (out.empty()) return absl::InvalidArgumentError("--profiles: no profile directory given");
  return out;
}

}  // namespace tiergym::env

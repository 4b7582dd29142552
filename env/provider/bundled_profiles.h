// The profiles `tiergym serve` serves when it is given none: the synthetic profiles of the
// bundled application models (traces/synth/models/) on the KNL machine, generated on first
// use into a cache directory and reused afterwards.
//
// Each profile is generated like `tiergym trace synth --app APP --machine knl --seed 1
// --samples 200000 --format bin` into CACHE/profiles-v1/knl-DIGEST-seed1-s200000/APP/
// (DIGEST: MachineDigest of the machine, so that profiles generated on an earlier
// description of a machine of the same name are not served for the new one), written to
// a temporary directory first and renamed into place, so a profile directory that exists
// is complete even when several servers start at once. Thread-compatible.
#ifndef TIERGYM_ENV_PROVIDER_BUNDLED_PROFILES_H_
#define TIERGYM_ENV_PROVIDER_BUNDLED_PROFILES_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "traces/machine.h"

namespace tiergym::env {

struct ServedProfile {
  std::string name;  // "minife"
  std::string dir;   // the profile directory (one trace per tier)
};

// 12 hex digits of a hash (FNV-1a) of the machine's JSON description (MachineToJson): the
// same for the same description, different (but for a 2^-48 chance) when any number of it
// changes.
std::string MachineDigest(const Machine& machine);

// The applications served by default.
const std::vector<std::string>& BundledProfileApps();

// $XDG_CACHE_HOME/tiergym, else $HOME/.cache/tiergym. FailedPrecondition when neither
// variable is set.
absl::StatusOr<std::string> DefaultCacheDir();

// The bundled profiles under `cache_dir`, generated when missing. `progress` (may be
// empty) gets one line per profile generated. `machine`: a machine preset (knl, disagg,
// xeonmax, ddr5cxl) the profiles are generated for (one run per tier), into
// CACHE/profiles-v1/MACHINE-DIGEST-...
absl::StatusOr<std::vector<ServedProfile>> EnsureBundledProfiles(
    const std::string& cache_dir, const std::function<void(const std::string&)>& progress,
    const std::string& machine = "knl");

// Profiles given as comma-separated directories; a profile is named after its directory,
// or after the parent of a directory called "profile" (".../minife/profile" -> "minife").
// InvalidArgument for an empty list or two profiles of one name.
absl::StatusOr<std::vector<ServedProfile>> ProfilesFromDirs(const std::string& dirs);

}  // namespace tiergym::env

#endif  // TIERGYM_ENV_PROVIDER_BUNDLED_PROFILES_H_

// What a client may make the server read: only what the operator named when starting it.
//
// `tiergym serve` reads profiles, machine files and interference schedules on behalf of its
// clients. A client names them by name, never by a path of the server's file system:
//   - a profile is a served profile's name (--profiles, or the bundled ones), or a
//     directory in one of the data directories (--data-dir);
//   - a machine is a bundled preset (knl, disagg), the server's own --machine, or a JSON
//     file in a data directory;
//   - an interference schedule is a file in a data directory.
// A name is relative to a data directory, or absolute; either way it is resolved
// (symbolic links included) and must lie inside a data directory. ".." components, names
// over 255 bytes and anything that resolves outside are refused with the same NotFound
// message as a name that does not exist, so that a client learns nothing about the
// server's file system. (A private server trusting its owner may be given "/".)
// Every file handed to a loader was opened with O_NONBLOCK and found by fstat to be a
// regular file of at most the size limit (no FIFOs, devices or /proc entries, which could
// block a worker or stream without end).
//
// The checks happen before the loaders (traces/, estimator/) open the files again; the data
// directories are the operator's, so nothing can swap a file in between unless the
// operator lets clients write there.
//
// Immutable after Create; thread-safe.
#ifndef TIERGYM_ENV_PROVIDER_DATA_ROOTS_H_
#define TIERGYM_ENV_PROVIDER_DATA_ROOTS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "env/spec/config_value.h"
#include "env/spec/env_spec.h"

namespace tiergym::env {

struct DataRootsOptions {
  // Directories clients may name files and profile directories in (--data-dir). Default
  // none: clients may name only served profiles and machine presets.
  std::vector<std::string> data_dirs;
  // Served profiles by name ("minife" -> its directory), named by the operator.
  std::map<std::string, std::string> named_profiles;
  // Machine values the operator gave (--machine FILE), accepted as they are.
  std::vector<std::string> operator_machines;
  // Largest trace file, machine file and interference schedule read. Defaults 4 GiB,
  // 1 MiB, 16 MiB.
  uint64_t max_trace_bytes = uint64_t{4} << 30;
  uint64_t max_machine_bytes = uint64_t{1} << 20;
  uint64_t max_schedule_bytes = uint64_t{16} << 20;
};

// The options of a server's data roots: its data directories and served profiles, and
// the machine of its default configuration (when it names one) as the operator's word.
DataRootsOptions ServerDataRoots(std::vector<std::string> data_dirs,
                                 std::map<std::string, std::string> named_profiles,
                                 const ConfigMap& default_config);

// `keys` with the defaults of a server's default configuration in their help.
std::vector<ConfigKey> WithServerDefaults(std::vector<ConfigKey> keys,
                                          const ConfigMap& default_config);

class DataRoots {
 public:
  // InvalidArgument when a data directory is not a directory (names it: the operator's
  // own option).
  static absl::StatusOr<DataRoots> Create(DataRootsOptions options);
  DataRoots() = default;

  // The directory of the profile `name`. NotFound (message naming `key`) otherwise.
  absl::StatusOr<std::string> ProfileDir(std::string_view name, std::string_view key) const;
  // What LoadMachine is given for `name`: the preset or operator value as is, or the
  // resolved file. NotFound otherwise.
  absl::StatusOr<std::string> Machine(std::string_view name, std::string_view key) const;
  // The resolved interference schedule file. NotFound otherwise.
  absl::StatusOr<std::string> Schedule(std::string_view name, std::string_view key) const;
  // The resolved calibration file (`tiergym calibrate`). NotFound otherwise.
  absl::StatusOr<std::string> Calibration(std::string_view name, std::string_view key) const;
  // The resolved sensitivity curves (curves.csv, for co-scheduling). NotFound otherwise.
  absl::StatusOr<std::string> Sensitivity(std::string_view name, std::string_view key) const;

  // Resolving a client's configuration in place (the providers' Resolve). A key that is
  // absent, or whose value has another type, is left as it is: the configuration's parser
  // says what it expects. Errors carry `key` as their field.
  //
  // The file string key `key` names, looked up with `lookup` (&DataRoots::Machine,
  // Schedule, Calibration, Sensitivity); an empty name is left alone unless
  // `resolve_empty`.
  using Lookup = absl::StatusOr<std::string> (DataRoots::*)(std::string_view,
                                                            std::string_view) const;
  absl::Status ResolveFileKey(ConfigMap& config, const std::string& key, Lookup lookup,
                              bool resolve_empty = false) const;
  // The profile directories of the names list key `key` holds (a list, or comma-separated
  // text; empty names skipped); nullopt when the value is neither.
  absl::StatusOr<std::optional<ConfigValue::List>> ResolveProfileNames(const ConfigValue& value,
                                                                       std::string_view key) const;

  // `message` with every server path this object knows replaced by what clients call it
  // (a data directory by "data-dir:", a served profile by its name).
  std::string Redact(std::string message) const;

  // OK when `path` opens without blocking as a regular file of at most `max_bytes`;
  // otherwise NotFound or ResourceExhausted whose message names only `label`.
  static absl::Status CheckRegularFile(const std::string& path, uint64_t max_bytes,
                                       std::string_view label);
  // `text` fit to quote in a reply: printable ASCII kept, other bytes as \xNN, at most
  // 64 bytes of it (then "...").
  static std::string Printable(std::string_view text);

 private:
  // The real path of `name` under one of the data directories, or "" when it is not one.
  std::string Resolve(std::string_view name) const;
  // The resolved data file `name` (a `what` for the messages), a regular file of at most
  // max_schedule_bytes. NotFound otherwise.
  absl::StatusOr<std::string> DataFile(std::string_view name, std::string_view key,
                                       std::string_view what) const;
  bool Inside(const std::string& real_path) const;

  DataRootsOptions options_;
  std::vector<std::string> real_dirs_;                           // realpath of each data directory
  std::vector<std::pair<std::string, std::string>> redactions_;  // server path -> label
};

}  // namespace tiergym::env

#endif  // TIERGYM_ENV_PROVIDER_DATA_ROOTS_H_

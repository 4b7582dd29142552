#include "env/provider/data_roots.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <utility>

#include "absl/strings/str_join.h"
#include "env/spec/field_path.h"
#include "traces/base/field_status.h"
#include "traces/base/strings.h"
#include "traces/machine.h"
#include "traces/profile.h"

namespace tiergym::env {
namespace {

constexpr size_t kMaxNameBytes = 255;

// realpath(path), or "" when it does not resolve.
std::string RealPath(const std::string& path) {
  char buf[PATH_MAX];
  if (::realpath(path.c_str(), buf) == nullptr) return "";
  return buf;
}

// Whether a client's name may even be looked up: not empty, no "..", no NUL, at most
// kMaxNameBytes.
bool Acceptable(std::string_view name) {
  if (name.empty() || name.size() > kMaxNameBytes) return false;
  if (name.find('\0') != std::string_view::npos) return false;
  size_t start = 0;
  while (start <= name.size()) {
    size_t slash = name.find('/', start);
    if (slash == std::string_view::npos) slash = name.size();
    if (name.substr(start, slash - start) == "..") return false;
    start = slash + 1;
  }
  return true;
}

void ReplaceAll(std::string& s, const std::string& from, const std::string& to) {
  if (from.empty()) return;
  for (size_t pos = s.find(from); pos != std::string::npos; pos = s.find(from, pos + to.size())) {
    s.replace(pos, from.size(), to);
  }
}

// realpath(name) for comparing a client's spelling of an operator's path with it; "" for
// names that cannot be such a path.
std::string SamePath(std::string_view name) {
  if (name.empty() || name.size() > PATH_MAX || name.find('\0') != std::string_view::npos) {
    return "";
  }
  return RealPath(std::string(name));
}

}  // namespace

std::string DataRoots::Printable(std::string_view text) { return ::tiergym::env::Printable(text); }

absl::Status DataRoots::CheckRegularFile(const std::string& path, uint64_t max_bytes,
                                         std::string_view label) {
  // O_NONBLOCK: opening a FIFO without a writer (or a device) must not block a worker.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return absl::NotFoundError(StrCat(label, ": not found or not readable"));
  struct stat st = {};
  struct statfs fs = {};
  const bool stat_ok = ::fstat(fd, &st) == 0 && ::fstatfs(fd, &fs) == 0;
  ::close(fd);
  // /proc and /sys files claim to be regular (of size 0) but are not data.
  const bool pseudo =
      fs.f_type == PROC_SUPER_MAGIC || fs.f_type == SYSFS_MAGIC || fs.f_type == DEBUGFS_MAGIC;
  if (!stat_ok || !S_ISREG(st.st_mode) || pseudo) {
    return absl::NotFoundError(StrCat(label, ": not a regular file"));
  }
  if (static_cast<uint64_t>(st.st_size) > max_bytes) {
    return absl::ResourceExhaustedError(
        StrCat(label, ": ", st.st_size, " bytes, over the server's limit of ", max_bytes));
  }
  return absl::OkStatus();
}

DataRootsOptions ServerDataRoots(std::vector<std::string> data_dirs,
                                 std::map<std::string, std::string> named_profiles,
                                 const ConfigMap& default_config) {
  DataRootsOptions o;
  o.data_dirs = std::move(data_dirs);
  o.named_profiles = std::move(named_profiles);
  if (auto it = default_config.find("machine"); it != default_config.end()) {
    o.operator_machines.push_back(ConfigValueText(it->second));
  }
  return o;
}

std::vector<ConfigKey> WithServerDefaults(std::vector<ConfigKey> keys,
                                          const ConfigMap& default_config) {
  for (ConfigKey& k : keys) {
    auto it = default_config.find(k.name);
    if (it != default_config.end()) k.default_value = ConfigValueText(it->second);
  }
  return keys;
}

absl::StatusOr<DataRoots> DataRoots::Create(DataRootsOptions options) {
  DataRoots roots;
  for (const std::string& dir : options.data_dirs) {
    const std::string real = RealPath(dir);
    struct stat st = {};
    if (real.empty() || ::stat(real.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      return absl::InvalidArgumentError(StrCat("--data-dir ", dir, ": not a directory"));
    }
    roots.real_dirs_.push_back(real == "/" ? "" : real);
    if (real != "/") {  // "/" as a root: paths are the client's own, nothing to hide
      roots.redactions_.emplace_back(real, "data-dir:");
      if (dir != real) roots.redactions_.emplace_back(dir, "data-dir:");
    }
  }
  for (const auto& [name, dir] : options.named_profiles) {
    roots.redactions_.emplace_back(dir, StrCat("profile:", name));
    if (const std::string real = RealPath(dir); !real.empty() && real != dir) {
      roots.redactions_.emplace_back(real, StrCat("profile:", name));
    }
  }
  // Longest first, so that a path inside another is replaced whole.
  std::sort(roots.redactions_.begin(), roots.redactions_.end(),
            [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
  roots.options_ = std::move(options);
  return roots;
}

bool DataRoots::Inside(const std::string& real_path) const {
  for (const std::string& root : real_dirs_) {
    if (real_path.size() > root.size() + 1 && real_path.compare(0, root.size(), root) == 0 &&
        real_path[root.size()] == '/') {
      return true;
    }
  }
  return false;
}

std::string DataRoots::Resolve(std::string_view name) const {
  if (!Acceptable(name)) return "";
  if (name[0] == '/') {  // an absolute name: fine when it resolves inside a root
    const std::string real = RealPath(std::string(name));
    return !real.empty() && Inside(real) ? real : "";
  }
  for (const std::string& root : real_dirs_) {
    std::string real = RealPath(StrCat(root, "/", name));
    if (!real.empty() && real.size() > root.size() + 1 && real.compare(0, root.size(), root) == 0 &&
        real[root.size()] == '/') {
      return real;
    }
  }
  return "";
}

absl::StatusOr<std::string> DataRoots::ProfileDir(std::string_view name,
                                                  std::string_view key) const {
  const std::string label = StrCat("config key '", key, "': profile \"", Printable(name), "\"");
  std::string dir;
  bool served = false;
  if (auto it = options_.named_profiles.find(std::string(name));
      it != options_.named_profiles.end()) {
    dir = it->second;
    served = true;
  } else if (const std::string real = SamePath(name); !real.empty()) {
    // The operator's own path for a served profile, spelt out.
    for (const auto& [n, d] : options_.named_profiles) {
      if (RealPath(d) == real) {
        dir = d;
        served = true;
      }
    }
  }
  if (!served) dir = Resolve(name);
  struct stat st = {};
  if (dir.empty() || ::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    const std::string names =
        absl::StrJoin(options_.named_profiles, ", ",
                      [](std::string* out, const auto& named) { out->append(named.first); });
    return absl::NotFoundError(
        StrCat(label, " is neither a served profile (", names.empty() ? "none" : names,
               ") nor a profile directory in the server's data directories (--data-dir)"));
  }
  absl::StatusOr<std::vector<std::string>> files = ListTraceFiles(dir);
  if (!files.ok()) return absl::NotFoundError(StrCat(label, ": no trace files"));
  for (const std::string& file : *files) {
    // A trace of a client-named directory must not lead out of the data directories.
    if (!served && !Inside(RealPath(file))) {
      return absl::NotFoundError(StrCat(label, ": a trace file is outside the data directories"));
    }
    if (absl::Status s = CheckRegularFile(file, options_.max_trace_bytes,
                                          StrCat(label, ": trace file ", Printable(Redact(file))));
        !s.ok()) {
      return s;
    }
  }
  return dir;
}

absl::StatusOr<std::string> DataRoots::Machine(std::string_view name, std::string_view key) const {
  for (const std::string& preset : BundledMachineNames()) {
    if (name == preset || name == StrCat("machine_", preset)) return std::string(name);
  }
  for (const std::string& given : options_.operator_machines) {
    if (name == given) return std::string(name);
    if (const std::string real = SamePath(name); !real.empty() && real == RealPath(given)) {
      return given;
    }
  }
  const std::string label = StrCat("config key '", key, "': machine \"", Printable(name), "\"");
  const std::string file = Resolve(name);
  if (file.empty()) {
    const std::string presets = absl::StrJoin(BundledMachineNames(), ", ");
    return absl::NotFoundError(
        StrCat(label, " is neither a machine preset (", presets,
               ") nor a file in the server's data directories (--data-dir)"));
  }
  if (absl::Status s = CheckRegularFile(file, options_.max_machine_bytes, label); !s.ok()) return s;
  return file;
}

absl::StatusOr<std::string> DataRoots::Schedule(std::string_view name, std::string_view key) const {
  return DataFile(name, key, "interference schedule");
}

absl::StatusOr<std::string> DataRoots::Calibration(std::string_view name,
                                                   std::string_view key) const {
  return DataFile(name, key, "calibration file");
}

absl::StatusOr<std::string> DataRoots::Sensitivity(std::string_view name,
                                                   std::string_view key) const {
  return DataFile(name, key, "sensitivity curves file");
}

absl::Status DataRoots::ResolveFileKey(ConfigMap& config, const std::string& key, Lookup lookup,
                                       bool resolve_empty) const {
  auto it = config.find(key);
  if (it == config.end() || it->second.string() == nullptr) return absl::OkStatus();
  if (it->second.string()->empty() && !resolve_empty) return absl::OkStatus();
  absl::StatusOr<std::string> file = (this->*lookup)(*it->second.string(), key);
  if (!file.ok()) return WithField(file.status(), key);
  it->second = *std::move(file);
  return absl::OkStatus();
}

absl::StatusOr<std::optional<ConfigValue::List>> DataRoots::ResolveProfileNames(
    const ConfigValue& value, std::string_view key) const {
  ConfigValue::List names;
  if (const ConfigValue::List* list = value.list()) {
    names = *list;
  } else if (const std::string* text = value.string()) {  // comma-separated text
    for (std::string_view item : SplitFields(*text, ',')) names.emplace_back(item);
  } else {
    return std::nullopt;
  }
  ConfigValue::List dirs;
  for (const std::string& name : names) {
    if (name.empty()) continue;
    absl::StatusOr<std::string> dir = ProfileDir(name, key);
    if (!dir.ok()) return WithField(dir.status(), key);
    dirs.push_back(*std::move(dir));
  }
  return dirs;
}

absl::StatusOr<std::string> DataRoots::DataFile(std::string_view name, std::string_view key,
                                                std::string_view what) const {
  const std::string label = StrCat("config key '", key, "': ", what, " \"", Printable(name), "\"");
  const std::string file = Resolve(name);
  if (file.empty()) {
    return absl::NotFoundError(
        StrCat(label, " is not a file in the server's data directories (--data-dir)"));
  }
  if (absl::Status s = CheckRegularFile(file, options_.max_schedule_bytes, label); !s.ok()) {
    return s;
  }
  return file;
}

std::string DataRoots::Redact(std::string message) const {
  for (const auto& [path, label] : redactions_) ReplaceAll(message, path, label);
  return message;
}

}  // namespace tiergym::env

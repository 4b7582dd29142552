#include "traces/profile.h"

#include <algorithm>
#include <filesystem>

#include "traces/base/status_macros.h"
#include "traces/base/strings.h"
#include "traces/trace_file.h"

namespace tiergym {

std::vector<std::string> Profile::devices() const {
  std::vector<std::string> out;
  for (const Trace& t : runs_) out.push_back(t.metadata().device);
  return out;
}

const Trace* Profile::Find(std::string_view device) const {
  for (const Trace& t : runs_) {
    if (t.metadata().device == device) return &t;
  }
  return nullptr;
}

absl::StatusOr<Profile> Profile::FromRuns(std::string name, std::vector<Trace> runs) {
  if (runs.empty()) return absl::NotFoundError(StrCat(name, ": the profile has no runs"));
  std::sort(runs.begin(), runs.end(), [](const Trace& a, const Trace& b) {
    return a.metadata().device < b.metadata().device;
  });
  Profile p;
  for (size_t i = 0; i < runs.size(); ++i) {
    const Trace& t = runs[i];
    const TraceMetadata& m = t.metadata();
    if (i > 0 && m.device == runs[i - 1].metadata().device) {
      return absl::InvalidArgumentError(StrCat(name, ": two runs for device '", m.device,
                                               "': ", runs[i - 1].source(), " and ", t.source(),
                                               "; a profile holds one run per device"));
    }
    if (!m.app.empty()) {
      if (p.app_.empty()) {
        p.app_ = m.app;
      } else if (m.app != p.app_) {
        return absl::InvalidArgumentError(
            StrCat(name, ": runs of different applications: ", t.source(), " is '", m.app,
                   "', another run is '", p.app_, "'"));
      }
    }
    const Trace& first = runs.front();
    if (m.page_size != first.metadata().page_size) {
      return absl::InvalidArgumentError(
          StrCat(name, ": runs disagree on page_size: ", first.source(), " has ",
                 first.metadata().page_size, ", ", t.source(), " has ", m.page_size));
    }
    if (t.num_phases() != first.num_phases()) {
      return absl::InvalidArgumentError(
          StrCat(name, ": runs disagree on the number of phases: ", first.source(), " has ",
                 first.num_phases(), ", ", t.source(), " has ", t.num_phases(),
                 "; the runs of a profile must be the same program run the same way"));
    }
  }
  const size_t phases = runs.front().num_phases();
  p.spread_.per_phase.resize(phases, 0.0);
  double sum = 0;
  for (size_t ph = 0; ph < phases; ++ph) {
    uint64_t lo = UINT64_MAX, hi = 0;
    for (const Trace& t : runs) {
      lo = std::min(lo, t.PhaseInstructions(ph));
      hi = std::max(hi, t.PhaseInstructions(ph));
    }
    const double spread = hi == 0 ? 0.0 : static_cast<double>(hi - lo) / static_cast<double>(hi);
    p.spread_.per_phase[ph] = spread;
    sum += spread;
    if (spread > p.spread_.max) {
      p.spread_.max = spread;
      p.spread_.max_phase = ph;
    }
  }
  p.spread_.mean = phases > 0 ? sum / static_cast<double>(phases) : 0.0;
  p.name_ = std::move(name);
  p.runs_ = std::move(runs);
  return p;
}

absl::StatusOr<std::vector<std::string>> ListTraceFiles(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (ec || !fs::exists(st)) {
    return absl::NotFoundError(StrCat(path, ": no such file or directory"));
  }
  if (!fs::is_directory(st)) return std::vector<std::string>{path};
  std::vector<std::string> files;
  for (const auto& entry : fs::directory_iterator(path, ec)) {
    const std::string ext = entry.path().extension().string();
    const std::string base = entry.path().filename().string();
    if (base.empty() || base[0] == '.') continue;
    if (entry.is_regular_file() && (ext == ".csv" || ext == ".tgt")) {
      files.push_back(entry.path().string());
    }
  }
  if (ec) return absl::PermissionDeniedError(StrCat(path, ": ", ec.message()));
  if (files.empty()) {
    return absl::NotFoundError(StrCat(path, ": no trace files (*.csv or *.tgt) in this directory"));
  }
  std::sort(files.begin(), files.end());
  return files;
}

absl::StatusOr<Profile> LoadProfile(const std::string& path) {
  TG_ASSIGN_OR_RETURN(std::vector<std::string> files, ListTraceFiles(path));
  std::vector<Trace> runs;
  for (const std::string& f : files) {
    TG_ASSIGN_OR_RETURN(Trace t, LoadTrace(f));
    runs.push_back(std::move(t));
  }
  return Profile::FromRuns(path, std::move(runs));
}

}  // namespace tiergym

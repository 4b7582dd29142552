// A profile: one sampled run of the same application per memory device (tier), all run
// the same way, as the differential-trace estimator needs them.
//
// On disk a profile is a directory of trace files (CSV v1 `*.csv` or binary `*.tgt`); which
// run is which device comes from each trace's `device` header, not the file name. Loading
// checks that the runs agree (one run per device, same app, same page size, same number of
// phases) and measures how far their per-phase instruction counts differ, which the seed
// paper observed to vary slightly with the memory device.
//
// A Profile is immutable and cheap to copy (its traces share their columns); thread-safe.
#ifndef TIERGYM_TRACES_PROFILE_H_
#define TIERGYM_TRACES_PROFILE_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "traces/trace.h"

namespace tiergym {

// How far the runs' instruction counts differ, phase by phase.
struct InstructionSpread {
  // Per phase: (max - min) / max over the runs' instruction counts of that phase.
  std::vector<double> per_phase;
  double max = 0;        // the largest per-phase spread
  double mean = 0;       // the mean per-phase spread
  size_t max_phase = 0;  // the phase with the largest spread
};

class Profile {
 public:
  // Builds a profile from runs already in memory; the same checks as LoadProfile.
  static absl::StatusOr<Profile> FromRuns(std::string name, std::vector<Trace> runs);

  const std::string& name() const { return name_; }  // the directory or file loaded
  const std::string& app() const { return app_; }    // "" when no run names its app
  // Runs ordered by device name.
  const std::vector<Trace>& runs() const { return runs_; }
  std::vector<std::string> devices() const;
  // The run placed on `device`, or nullptr.
  const Trace* Find(std::string_view device) const;
  size_t num_phases() const { return runs_.front().num_phases(); }
  const InstructionSpread& instruction_spread() const { return spread_; }

 private:
  Profile() = default;

  std::string name_;
  std::string app_;
  std::vector<Trace> runs_;
  InstructionSpread spread_;
};

// The trace files `path` names: the file itself, or the *.csv and *.tgt regular files of
// the directory `path` (hidden files skipped), sorted. NotFound for a missing path or a
// directory without trace files.
absl::StatusOr<std::vector<std::string>> ListTraceFiles(const std::string& path);

// Loads every *.csv and *.tgt file of directory `path` (or the single trace file `path`)
// as one profile. Fails with the first trace that does not load (its error names file,
// line and rule), or InvalidArgument naming the files that disagree: two runs for one
// device, different apps, page sizes or numbers of phases. NotFound for a missing path or a
// directory without trace files.
absl::StatusOr<Profile> LoadProfile(const std::string& path);

}  // namespace tiergym

#endif  // TIERGYM_TRACES_PROFILE_H_

// Reader and writer of the measured-runs CSV of traces/TRACE_CSV.md section 3
// (traces/TRACE_CSV.md): real executions of an application under given
// placements, used to check the estimators against measured runtimes.
//
//   name,placement,runtime_ns
//   hbm30,placements/hbm30.json,30412000000
//
// The column line names at least `name`, `placement` and `runtime_ns`, in any order;
// other columns are ignored. Fields are not quoted, so names and paths cannot hold
// commas. `placement` is a path relative to the CSV file's directory (or absolute).
// The reader is strict: a file breaking a rule is refused whole with InvalidArgument
// "FILE:LINE: RULE: detail" (NotFound when the CSV itself cannot be opened). Rules:
//   empty                no column line
//   duplicate-column     a column name appears twice in the column line
//   missing-column       the column line lacks name, placement or runtime_ns
//   field-count          a row has more or fewer fields than the column line
//   empty-name           a row's name is empty
//   duplicate-name       two rows share a name (both lines named)
//   empty-placement      a row's placement is empty
//   non-numeric          runtime_ns is not a decimal integer below 2^64
//   zero-runtime         runtime_ns is 0
//   missing-placement    the placement file (resolved path named) does not exist or is
//                        not a regular file
//   truncated-last-line  the file does not end with a newline (it was cut short)
// Blank lines are ignored; CRLF line ends are accepted. A file with a column line and
// no rows is valid and holds no runs.
//
// Thread-safe: no shared state.
#ifndef TIERGYM_TRACES_MEASURED_RUNS_H_
#define TIERGYM_TRACES_MEASURED_RUNS_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "traces/placement.h"

namespace tiergym {

struct MeasuredRun {
  std::string name;
  // The placement file: as read, the CSV's directory joined with the path written in the
  // file (unchanged when absolute); when writing, any path valid from the working
  // directory.
  std::string placement_path;
  uint64_t runtime_ns = 0;
  // 1-based line of the row in the file it was read from; 0 for runs made in memory.
  int line = 0;
};

// Parses CSV text; `path` is where it came from: it names the file in errors and its
// directory resolves the placement paths, which must exist.
absl::StatusOr<std::vector<MeasuredRun>> ParseMeasuredRuns(std::string_view text,
                                                           const std::string& path);

// Reads and parses the CSV file at `path`.
absl::StatusOr<std::vector<MeasuredRun>> ReadMeasuredRuns(const std::string& path);

// As ReadMeasuredRuns, and reads each run's placement; a placement that fails to load
// fails the whole call with the CSV line prepended to the placement's own error.
absl::StatusOr<std::vector<std::pair<MeasuredRun, Placement>>> ReadMeasuredRunsWithPlacements(
    const std::string& path);

// Writes the runs as `name,placement,runtime_ns` to `path` (atomically: temporary file
// renamed into place), placement paths rewritten relative to the directory of `path`.
// InvalidArgument, writing nothing, for a run that could not be read back: an empty or
// duplicate name, an empty placement path, a comma, quote or line break in a name or
// path, or a zero runtime. The placement files need not exist yet.
absl::Status WriteMeasuredRuns(const std::vector<MeasuredRun>& runs, const std::string& path);

}  // namespace tiergym

#endif  // TIERGYM_TRACES_MEASURED_RUNS_H_

// Reader and writer of the co-runs CSV (traces/CORUN_CSV.md): applications measured
// while sharing one node, one row per tenant of each co-run scenario, used to check the
// composed (contention-aware) runtime estimate against measured runtimes.
//
//   scenario,machine,tenant,app,placement,start_ns,read_pct,runtime_ns,solo_runtime_ns
//   knl-2-ddr,knl,minife,minife,placements/knl-2-ddr/minife.json,0,85,52191820310,40611523640
//
// Columns are found by name, in any order; other columns are ignored. `placement` is a
// path relative to the CSV file's directory (or absolute). The reader is strict: a file
// breaking a rule is refused whole with InvalidArgument "FILE:LINE: RULE: detail" naming
// the field (NotFound when the CSV cannot be opened). Rules:
//   truncated-last-line, empty, duplicate-column, missing-column, field-count
//                        as every CSV table (traces/base/csv_table.h)
//   empty-field          scenario, machine, tenant, app or placement is empty
//   duplicate-tenant     a scenario names a tenant twice (both lines named)
//   machine-mismatch     a scenario's rows name different machines (both lines named)
//   non-numeric          start_ns, runtime_ns or solo_runtime_ns is not a decimal integer
//                        below 2^64, or read_pct is not a finite decimal number
//   read-pct-range       read_pct is outside [0, 100]
//   zero-runtime         runtime_ns or solo_runtime_ns is 0
//   missing-placement    the placement file (resolved path named) does not exist or is
//                        not a regular file
// Blank lines are ignored; CRLF line ends are accepted. A file with a column line and no
// rows is valid and holds no co-runs.
//
// Thread-safe: no shared state.
#ifndef TIERGYM_TRACES_CORUN_RUNS_H_
#define TIERGYM_TRACES_CORUN_RUNS_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tiergym {

struct CorunRun {
  std::string scenario;
  std::string machine;  // a bundled machine name or a machine JSON path
  std::string tenant;   // unique within the scenario
  std::string app;      // the application (its profile is looked up by this name)
  // As read: the CSV's directory joined with the path in the file (unchanged when
  // absolute). When writing: any path valid from the working directory.
  std::string placement_path;
  uint64_t start_ns = 0;         // when the tenant started, from the scenario's start
  double read_pct = 100;         // share of reads in its memory traffic
  uint64_t runtime_ns = 0;       // its runtime from its start, sharing the node
  uint64_t solo_runtime_ns = 0;  // its runtime alone on the node under the same placement
  int line = 0;                  // 1-based line in the file read; 0 for runs made in memory
};

// Parses CSV text; `path` names the file in errors and its directory resolves the
// placement paths, which must exist.
absl::StatusOr<std::vector<CorunRun>> ParseCorunRuns(std::string_view text,
                                                     const std::string& path);

// Reads and parses the CSV file at `path`.
absl::StatusOr<std::vector<CorunRun>> ReadCorunRuns(const std::string& path);

// Writes the rows to `path` atomically, placement paths rewritten relative to the
// directory of `path`. InvalidArgument, writing nothing, for a row the reader would
// refuse (an empty field, a comma or line break in a field, a zero runtime, a read share
// outside [0, 100]); placement files need not exist yet.
absl::Status WriteCorunRuns(const std::vector<CorunRun>& runs, const std::string& path);

}  // namespace tiergym

#endif  // TIERGYM_TRACES_CORUN_RUNS_H_

// `tiergym-prof run-placed`: a real run of a command under a placement, for checking
// estimates (and learned policies) against measured runtimes.
//
// The command starts with its memory policy preferring the default tier's NUMA node;
// a placer thread then moves the pages of the placement's ranges to their tiers' nodes
// with move_pages(2) (first right after exec, then every interval, since pages exist only
// once touched) and moves nothing that is already where it belongs. With a schedule, the
// placement changes at phasemarks: the recorder's uprobe on phasemark() (perf_session.h)
// counts the marks and the placer applies a step's placement as soon as its phase
// begins, moving back pages that the previous placement had put elsewhere. The runtime is
// measured from exec to exit and, on request, appended to a measured-runs CSV
// (traces/measured_runs.h).
//
// This is the Linux stand-in for McKernel's placement API (Denoyelle et al., section 4.2), which
// places memory at first touch: here pages touched between two applications live on the
// default tier until the next one. Fraction placements need that first-touch quota and
// are refused (convert them to ranges).
//
// Schedule JSON (format v1, documented in profiler/README.md):
//   {"steps": [{"from_phase": 3, "placement": "solve.json"}, ...]}
// from_phase strictly increasing; placement paths relative to the schedule file. Before
// the first step the --placement applies.
//
// Not thread-safe: one run at a time per process.
#ifndef TIERGYM_PROFILER_RUN_PLACED_H_
#define TIERGYM_PROFILER_RUN_PLACED_H_

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "traces/placement.h"

namespace tiergym::prof {

struct ScheduleStep {
  uint32_t from_phase = 0;
  std::string placement_path;  // resolved against the schedule file's directory
  Placement placement;
};

// Reads a schedule; every placement it names is read too. InvalidArgument
// "FILE:LINE:COL: PATH: RULE" for: not an object, unknown key, missing or empty `steps`,
// from_phase not an integer or not increasing, a placement that fails to load (its own
// error appended) or uses fractions.
absl::StatusOr<std::vector<ScheduleStep>> ReadSchedule(const std::string& path);

// Counts of one application of a placement to a process's pages.
struct PlacementCounts {
  uint64_t pages = 0;     // pages of the ranges that are mapped
  uint64_t moved = 0;     // moved to their tier's node
  uint64_t in_place = 0;  // already there
  uint64_t absent = 0;    // not yet touched (nothing to move)
  uint64_t failed = 0;    // move_pages refused them (busy, pinned, ...)

  void Add(const PlacementCounts& o);
};

// Moves the pages of process `pid` that lie in the ranges of `placement` (and in
// `previous_ranges`, ranges an earlier placement moved) to the NUMA node of the tier
// TierOf(placement, page) gives. `tier_nodes` maps every tier name to its node.
// InvalidArgument for a tier without a node; other errors are counted, not returned,
// since the process may unmap memory while it is being placed.
absl::StatusOr<PlacementCounts> ApplyPlacement(pid_t pid, const Placement& placement,
                                               const std::vector<PlacementRange>& previous_ranges,
                                               const std::map<std::string, int>& tier_nodes);

struct PlacedRunOptions {
  std::vector<std::string> command;       // required
  std::string placement_path;             // required
  std::string schedule_path;              // optional
  std::map<std::string, int> tier_nodes;  // every tier named must be here
  uint32_t interval_ms = 50;              // periodic re-application; default 50 ms
  std::string runs_csv;                   // append the run here ("" : do not)
  std::string run_name;                   // default: the placement's file stem (+ "+schedule")
  bool keep_aslr = false;                 // default off, as when the profile was recorded
  std::string phasemark_lib;              // for schedules; as RecordOptions::phasemark_lib
};

struct PlacedRunResult {
  std::string run_name;  // as appended (made unique in the CSV)
  uint64_t runtime_ns = 0;
  int wait_status = 0;
  uint64_t applications = 0;  // times the placement was applied
  PlacementCounts counts;     // summed over applications
  uint32_t phases = 0;        // phasemarks seen (schedules only)
  uint32_t steps_applied = 0;
};

absl::StatusOr<PlacedRunResult> RunPlaced(const PlacedRunOptions& options);

}  // namespace tiergym::prof

#endif  // TIERGYM_PROFILER_RUN_PLACED_H_

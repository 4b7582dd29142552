// Interference schedules: what co-runners put on each tier's memory during which part of
// the run, and how that composes with the runtime estimate.
//
// A schedule file (JSON) names the target's sensitivity family and lists entries:
//
//   {"sensitivity": {"curves": "curves.csv", "app": "lulesh", "method": "linear/all/right"},
//    "schedule": [
//      {"tier": "ddr", "from": 0.0, "to": 0.5,
//       "co_runners": [{"bandwidth_gbps": 20, "read_pct": 70}]}]}
//
// `from` and `to` are fractions of the run's progress (base-run instructions), 0 <= from
// < to <= 1; `curves` is relative to the schedule file; `app` defaults to the profile's
// application; `method` to the seed's choice (contention_model.h, ParseMethod).
//
// Composition: the run is cut at every entry boundary; in each piece, tier T's slowdown is
// ContentionModel::Slowdown of all co-runners of the entries on T covering the piece
// (several entries on one tier combine as co-runners do); the time the estimate
// attributes to T there is multiplied by it (PlacementState::IntervalNs with device
// factors; under the concurrent model the bandwidth floors scale alike). Without entries
// the estimate is unchanged; since Slowdown >= 1 and never falls as bandwidth grows,
// more interference never makes the estimate faster.
#ifndef TIERGYM_ESTIMATOR_INTERFERENCE_H_
#define TIERGYM_ESTIMATOR_INTERFERENCE_H_

#include <algorithm>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "estimator/contention/contention_model.h"
#include "estimator/estimator_index.h"
#include "estimator/group_cost_model.h"
#include "estimator/placement_state.h"

namespace tiergym {

struct InterferenceEntry {
  std::string tier;
  double from = 0, to = 1;  // fractions of the run
  contention::Interference interference;
};

struct InterferenceSchedule {
  std::string curves_path;  // resolved against the schedule file's directory
  std::string app;          // "" = the profile's app
  std::string method = "linear/all/right";
  std::vector<InterferenceEntry> entries;
};

// Strict reader: unknown keys, bad ranges, bad co-runners are InvalidArgument naming the
// file, line and member.
absl::StatusOr<InterferenceSchedule> ReadInterferenceSchedule(const std::string& path);
absl::StatusOr<InterferenceSchedule> ParseInterferenceSchedule(std::string_view json_text,
                                                               const std::string& source);

// A schedule bound to a profile's index and the target's contention model: per-device
// slowdown factors for any part of the run.
class InterferenceComposer {
 public:
  // Loads the sensitivity family (app: schedule.app or `default_app`) and checks that
  // every entry names one of `devices`.
  static absl::StatusOr<InterferenceComposer> Create(const InterferenceSchedule& schedule,
                                                     const std::vector<std::string>& devices,
                                                     const std::string& default_app);

  // The estimated time of base-run positions [from, to) of a run of `total` instructions
  // under `state`'s placement, with the schedule's slowdowns.
  double IntervalNs(const PlacementState& state, uint64_t from, uint64_t to) const;
  // The same interval decomposed by groups of pages (GroupCostModel; Model::kPaper): the
  // factors do not depend on the placement, so the estimate stays linear in it.
  GroupCostModel::Costs IntervalCosts(const GroupCostModel& model, uint64_t from,
                                      uint64_t to) const;
  // Per-device slowdown factors at progress fraction x (the piece holding x).
  std::vector<double> FactorsAt(double x) const;
  // Total co-runner bandwidth per device at progress fraction x (GB/s).
  std::vector<double> BandwidthAt(double x) const;

 private:
  InterferenceComposer(contention::ContentionModel model) : model_(std::move(model)) {}
  // Calls visit(lo, hi, p) for every piece p of the schedule that overlaps base positions
  // [from, to) of a run of `total` instructions, with [lo, hi) the overlap.
  template <typename Visit>
  void ForEachPiece(uint64_t total, uint64_t from, uint64_t to, Visit visit) const {
    for (size_t p = 0; p + 1 < cuts_.size(); ++p) {
      const uint64_t lo =
          std::max<uint64_t>(from, static_cast<uint64_t>(cuts_[p] * static_cast<double>(total)));
      const uint64_t hi =
          std::min<uint64_t>(to, static_cast<uint64_t>(cuts_[p + 1] * static_cast<double>(total)));
      if (lo < hi) visit(lo, hi, p);
    }
  }
  contention::ContentionModel model_;
  std::vector<double> cuts_;                  // sorted piece boundaries in [0, 1]
  std::vector<std::vector<double>> factors_;  // per piece, per device
  std::vector<std::vector<double>> bandwidth_;
};

}  // namespace tiergym

#endif  // TIERGYM_ESTIMATOR_INTERFERENCE_H_

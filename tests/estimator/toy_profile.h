// The toy profile of the estimator's tests: one phase of 2,000,000 instructions sampled
// twice, at 0.5 M instructions on page A (window 0) and at 1.5 M on page B (window 1), run
// on ddr, on hbm (twice as fast) and on remote (twice as slow); and placements of pages.
#ifndef TIERGYM_TESTS_ESTIMATOR_TOY_PROFILE_H_
#define TIERGYM_TESTS_ESTIMATOR_TOY_PROFILE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "traces/placement.h"
#include "traces/profile.h"
#include "traces/trace.h"

namespace tiergym::testing {

inline constexpr uint64_t kPageA = 0x1000;    // sampled in window 0
inline constexpr uint64_t kPageB = 0x100000;  // sampled in window 1

// The run on `device`: the ddr run's times multiplied by `slowdown`; with a PEBS reset in
// its metadata when `pebs_reset` is not 0.
inline Trace ToyRun(const std::string& device, double slowdown, uint64_t pebs_reset = 0) {
  TraceBuilder b(
      device, TraceMetadata::Make("toy", device, "",
                                  pebs_reset ? std::optional<uint64_t>(pebs_reset) : std::nullopt));
  b.AddMark({0, 0, 0, 0});
  b.AddSample(static_cast<uint64_t>(50 * slowdown), 0, 0, 500'000, kPageA);
  b.AddSample(static_cast<uint64_t>(150 * slowdown), 0, 0, 1'500'000, kPageB);
  b.SetEnd({static_cast<uint64_t>(200 * slowdown), 0, 0, 2'000'000});
  return *b.Finish();
}

inline Profile Toy() {
  return *Profile::FromRuns("toy", {ToyRun("ddr", 1), ToyRun("hbm", 0.5), ToyRun("remote", 2)});
}

// These ranges on their tiers, the rest on `default_tier`.
inline Placement Ranges(std::vector<PlacementRange> ranges, std::string default_tier = "ddr") {
  Placement p;
  p.default_tier = std::move(default_tier);
  p.ranges = std::move(ranges);
  return p;
}

}  // namespace tiergym::testing

#endif  // TIERGYM_TESTS_ESTIMATOR_TOY_PROFILE_H_

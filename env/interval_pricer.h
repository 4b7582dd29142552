// How an environment prices a decision interval: the estimated time of base-run
// instructions [bounds[i], bounds[i + 1]) of one profile with each region on the tier the
// episode has put it on. One implementation per way of pricing, chosen once per profile
// when the assets load (MakeIntervalPricer):
//
//   linear costs  Model::kPaper: every interval's time is linear in the regions' tiers
//                 (GroupCostModel), so it is tabulated at load, per interval, region and
//                 tier, a contention scenario's slowdowns folded in. A step is a sum over
//                 the regions (O(regions)); a move costs nothing.
//   index walk    Model::kConcurrent and kRoofline (not linear), or a table beyond
//                 kMaxLinearCostEntries: an episode moves the regions' pages in a
//                 PlacementState and walks the interval's windows and blocks.
//   contended     the index walk under a contention scenario: the interval priced piece by
//     index walk  piece of the schedule at its slowdowns (InterferenceComposer).
//
// All give PlacementState::IntervalNs (through the composer when contended) to rounding;
// the linear tables equal it to about 1e-12 (tests/env/interval_pricer_test.cc).
//
// An IntervalPricer is immutable and shared by every Environment of its assets; each
// episode has its own IntervalPricer::Episode. Per step the environment makes one virtual
// call to price the interval and, when regions moved, one to move them.
#ifndef TIERGYM_ENV_INTERVAL_PRICER_H_
#define TIERGYM_ENV_INTERVAL_PRICER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "env/regions.h"
#include "estimator/estimator_index.h"
#include "estimator/interference.h"

namespace tiergym::env {

// Largest linear cost table per profile (doubles: 32 MiB); beyond it (very many regions
// times decision intervals) the environment walks the estimator index instead.
inline constexpr uint64_t kMaxLinearCostEntries = uint64_t{1} << 22;

// Whether a profile cut into `regions` regions and `steps` decision intervals on a machine
// of `tiers` tiers is priced by linear cost tables (else by walking the index).
bool PricesByLinearCosts(Model model, uint64_t steps, uint64_t regions, uint64_t tiers,
                         uint64_t max_entries = kMaxLinearCostEntries);

class IntervalPricer {
 public:
  // One episode's placement as the pricer sees it. Not thread-safe.
  class Episode {
   public:
    virtual ~Episode() = default;
    // The regions `moved` (each at most once, in the order they moved) are now on machine
    // tiers region_tier[r].
    virtual absl::Status Move(std::span<const int> moved, const std::vector<int>& region_tier) = 0;
    // The time of decision interval `step` with region r on machine tier region_tier[r]
    // (as the last Move left them).
    [[nodiscard]] virtual double IntervalNs(size_t step,
                                            const std::vector<int>& region_tier) const = 0;
    // The same with the time the estimate attributes to machine tier t multiplied by
    // tier_factor[t] (>= 1: the slowdown co-runners cause there; one per machine tier),
    // as a contention scenario's factors scale it (env/cosched prices its tenants so). All
    // factors 1 give IntervalNs(step, region_tier) exactly. REQUIRES: the pricer has no
    // contention scenario of its own (its factors are not combined with these).
    [[nodiscard]] virtual double IntervalNs(size_t step, const std::vector<int>& region_tier,
                                            const std::vector<double>& tier_factor) const = 0;
    // An independent copy at this episode's placement (Environment::Fork): the same
    // prices from here on, for the same moves.
    [[nodiscard]] virtual std::unique_ptr<Episode> Clone() const = 0;
  };

  virtual ~IntervalPricer() = default;
  // A new episode with every region on the default tier (machine tier 0).
  [[nodiscard]] virtual absl::StatusOr<std::unique_ptr<Episode>> NewEpisode() const = 0;
  // "linear costs", "index walk" or "contended index walk".
  [[nodiscard]] virtual const char* name() const = 0;
  // Bytes held (the estimator index, which is shared, not counted).
  [[nodiscard]] virtual size_t MemoryBytes() const = 0;
  // Bytes one Episode holds beyond the environment's per-region state (the index walk's
  // PlacementState: a tier per footprint page, hits per block and segment and device),
  // which a server charges to its memory budget per session. Default 0.
  [[nodiscard]] virtual size_t EpisodeBytes() const { return 0; }
};

// What pricing a profile's intervals needs.
struct IntervalPricerInputs {
  std::shared_ptr<const EstimatorIndex> index;  // built for the machine's default tier
  Model model = Model::kPaper;
  std::vector<int> device_of_tier;       // machine tier -> index device
  std::vector<Region> regions;           // the episode's regions (empty ones at the end)
  std::vector<uint32_t> region_of_page;  // per index page id
  std::vector<uint64_t> bounds;          // decision interval boundaries (steps + 1)
  // The contention scenario for this profile, or null.
  std::shared_ptr<const InterferenceComposer> contention;
  // Linear tables larger than this are not built (the index walk instead).
  uint64_t max_linear_entries = kMaxLinearCostEntries;
};

// The pricer the inputs call for: linear costs when PricesByLinearCosts (with
// max_linear_entries), the index walk otherwise, contended with a scenario.
std::unique_ptr<const IntervalPricer> MakeIntervalPricer(const IntervalPricerInputs& inputs);

}  // namespace tiergym::env

#endif  // TIERGYM_ENV_INTERVAL_PRICER_H_

// The performance model behind the synthetic profiles and their ground truth.
//
// Given an application model, a machine and a tier assignment of the address space, the
// TimeModel computes how long every phase takes: each phase instance is cut into chunks;
// a chunk's LLC misses are split over the tiers by intersecting the access mix's page
// distributions with the assignment; compute, per-tier latency-bound and per-tier
// bandwidth-bound times are combined (tiers serve concurrently), then the barrier
// imbalance is applied. The equations are in traces/SYNTH.md ("Time model"); how the
// tiers, the limits and compute combine follows a TruthModel (truth_model.h; SYNTH.md
// section 10), by default the spec model. This is the synthetic "hardware": it is
// deliberately not the estimator's interpolation formula.
//
// ResolvePlacement turns a Placement (traces/placement.h: ranges or first-touch
// fractions) into the TierMap the model evaluates.
//
// A TimeModel holds const references to its AppModel, Machine and TruthModel, which must
// outlive it; its const methods are thread-safe.
#ifndef TIERGYM_TRACES_SYNTH_TIME_MODEL_H_
#define TIERGYM_TRACES_SYNTH_TIME_MODEL_H_

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "traces/machine.h"
#include "traces/placement.h"
#include "traces/synth/app_model.h"
#include "traces/synth/truth_model.h"

namespace tiergym::synth {

// How co-runners' traffic changes a tier for one application (corun_synth.h, TierLoadFor): the
// share of the tier's peak bandwidth left to it and the factor on its idle latency.
struct TierLoad {
  double bandwidth_factor = 1;  // in (0, 1]
  double latency_factor = 1;    // >= 1
};

// Which tier (index into Machine::tiers) backs each byte of the address space.
struct TierRange {
  uint64_t start = 0;  // [start, end)
  uint64_t end = 0;
  int tier = 0;
};
struct TierMap {
  int default_tier = 0;
  std::vector<TierRange> ranges;  // sorted by start, disjoint
};

// Resolves tier names and turns fractions into page ranges by the model's first-touch
// order (arrays in declared order, pages ascending; each tier takes
// round(fraction * footprint pages) pages, tiers filled in listed order). InvalidArgument
// for unknown tiers, overlapping ranges, fractions outside [0, 1] or summing above 1, or
// both ranges and fractions; ResourceExhausted when the model's bytes placed on a tier
// exceed its capacity.
absl::StatusOr<TierMap> ResolvePlacement(const AppModel& app, const Machine& machine,
                                         const Placement& placement);

// Everything on one tier.
TierMap WholeTier(int tier);

// The bytes of `app`'s footprint (page-rounded arrays) that `map` puts on each tier.
std::vector<uint64_t> TierBytes(const AppModel& app, const Machine& machine, const TierMap& map);

class TimeModel {
 public:
  static constexpr int kDefaultChunksPerPhase = 200;

  // REQUIRES: chunks_per_phase >= 1; app, machine and truth outlive the model.
  TimeModel(const AppModel& app, const Machine& machine,
            int chunks_per_phase = kDefaultChunksPerPhase);
  TimeModel(const AppModel& app, const Machine& machine, const TruthModel& truth,
            int chunks_per_phase = kDefaultChunksPerPhase);

  int chunks_per_phase() const { return chunks_; }

  // Time of each chunk of one instance of phase `phase` with its nominal instruction
  // count, noise-free and without imbalance (ns). Chunks have equal instruction counts.
  std::vector<double> ChunkTimesNs(int phase, const TierMap& map) const;

  // Noise-free time of one instance of the phase, imbalance included (ns).
  double PhaseTimeNs(int phase, const TierMap& map) const;

  // Noise-free runtime of the whole schedule (ns).
  double RuntimeNs(const TierMap& map) const;

  // The share of a chunk's misses served by each tier (sums to 1; size = tiers).
  std::vector<double> ChunkTierShares(int phase, int chunk, const TierMap& map) const;

  // The chunk equation: time (ns) of `instructions` instructions of `phase` whose
  // misses are split over the machine's tiers by `tier_shares` (size = tiers).
  static double ChunkTimeNs(const PhaseSpec& phase, const Machine& machine, int threads,
                            double instructions, std::span<const double> tier_shares);
  // The same on tiers that co-runners load (corun_synth.h): tier t's peak bandwidth is
  // multiplied by loads[t].bandwidth_factor and its idle latency by
  // loads[t].latency_factor (size = tiers; empty: unloaded, the equation above exactly).
  static double ChunkTimeNs(const PhaseSpec& phase, const Machine& machine, int threads,
                            double instructions, std::span<const double> tier_shares,
                            std::span<const TierLoad> loads);
  // The same under `truth` (the two above use the spec model, TruthModel{}).
  static double ChunkTimeNs(const PhaseSpec& phase, const Machine& machine, const TruthModel& truth,
                            int threads, double instructions, std::span<const double> tier_shares,
                            std::span<const TierLoad> loads);

  // The instructions a run retires per instruction of the phase when the tier shares of
  // its misses are `tier_shares`: 1 + sum_t share_t * drift_t (TruthModel::instruction_drift);
  // 1 for a phase without misses.
  static double RetiredPerInstruction(const PhaseSpec& phase, const Machine& machine,
                                      const TruthModel& truth, std::span<const double> tier_shares);

 private:
  static const TruthModel& Spec();

  const AppModel& app_;
  const Machine& machine_;
  const TruthModel& truth_;
  int chunks_;
};

// Per-run randomness of the time model: a factor on each phase instance's instruction
// count and on its time. Drawn from stream "time/<run>" (see rng.h): per instance first
// the instruction deviation then the time noise, after one run-wide time noise.
struct RunRealisation {
  std::vector<double> instruction_factor;  // one per schedule entry
  std::vector<double> time_factor;         // one per schedule entry
};
RunRealisation MakeRealisation(const AppModel& app, uint64_t seed, std::string_view run);

}  // namespace tiergym::synth

#endif  // TIERGYM_TRACES_SYNTH_TIME_MODEL_H_

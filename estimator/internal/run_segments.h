// Internal to estimator/: how the differential-trace estimators see one run. Shared by the
// per-sample replay (replay_estimator.cc) and the index (estimator_index.cc) so that both
// cut windows and interpolate time identically.
//
// A run is a sequence of segments: its phases (phasemarks are the anchors) or, without
// phasemarks, the whole run as one segment. Within a segment a sample's position is the
// number of instructions retired since the segment start.
#ifndef TIERGYM_ESTIMATOR_INTERNAL_RUN_SEGMENTS_H_
#define TIERGYM_ESTIMATOR_INTERNAL_RUN_SEGMENTS_H_

#include <cstdint>
#include <vector>

#include "traces/profile.h"
#include "traces/trace.h"

namespace tiergym::internal {

struct Segment {
  uint64_t instructions = 0;       // retired in the segment
  uint64_t start_ns = 0;           // trace time of the segment start
  uint64_t end_ns = 0;             // trace time of the segment end
  size_t begin = 0, end = 0;       // the segment's samples: indices [begin, end) of the run
  std::vector<uint64_t> position;  // per sample: instructions since the segment start
};

std::vector<Segment> Segments(const Trace& run, bool use_phasemarks);

// Time (ns since the segment start) at instruction position x of a segment: piecewise
// linear through the samples' (position, time) points, made monotone, from the segment's
// start. After the last sample the instructions run at the rate of those before it (its
// time over its position), up to the segment's end: what follows the last sample until the
// end is a barrier wait as much as work (no instructions retire while threads wait, no
// sample falls in it), and interpolated from the last sample to the end, the windows after
// it would hold the wait; sparse samples leave several windows there. Positions at or
// beyond the segment's instruction count give the segment's end.
class TimeAt {
 public:
  TimeAt(const Trace& run, const Segment& segment);
  double operator()(double x) const;

 private:
  std::vector<double> x_, y_;  // (0, 0), the samples' points, the segment's end
};

// Window geometry of one segment: `windows` windows of `window_instructions` base-run
// instructions, the last one running to the segment end; run d's boundaries are the base
// run's scaled by scale[d] = (run d's instructions) / (base run's instructions), or, with
// `align_by_samples` and at least kMinAlignSamples samples in both runs, by the ratio of
// the extents of the runs' sampled work, the last sample's position times (n + 1) / n of
// n samples: misses per instruction do not depend on the placement, so the samples spread
// alike over the instructions that do the work, and instructions retired without misses
// (spinning at a barrier) do not stretch the windows. The last position of n samples
// errs by about 1/n of the extent where their mean position errs by 0.58/sqrt(n) (1.7 %
// of ~1,100, a window boundary moved that far), which reached the barrier wait.
struct WindowGrid {
  uint64_t windows = 1;
  std::vector<double> scale;  // per run
  uint64_t window_instructions = 0;

  static constexpr size_t kMinAlignSamples = 16;
  WindowGrid(const std::vector<const Segment*>& segment_of_run, int base,
             uint64_t window_instructions, bool align_by_samples = false);
  // Window of a sample of run d at `position`.
  uint64_t WindowOf(size_t d, uint64_t position) const;
  // Run d's instruction position of the start of window w (w == windows: +infinity).
  double Boundary(size_t d, uint64_t w) const;
};

// What a sample of each run counts for: the run's PEBS reset (misses per sample) divided by
// the greatest common divisor of all runs' resets, so runs recorded with different
// periods weigh their samples by the misses they stand for. 1 for every run when some run
// does not record its reset.
std::vector<uint32_t> SampleWeights(const Profile& profile);

// Fraction of the span [lo, hi) inside [a, b) (how much of a window or block an interval
// of positions covers); a zero-length span counts whole when it lies in [a, b).
inline double FractionInside(double lo, double hi, double a, double b) {
  if (hi <= lo) return (lo >= a && lo < b) ? 1.0 : 0.0;
  const double x = lo > a ? lo : a, y = hi < b ? hi : b;
  return y > x ? (y - x) / (hi - lo) : 0.0;
}

}  // namespace tiergym::internal

#endif  // TIERGYM_ESTIMATOR_INTERNAL_RUN_SEGMENTS_H_

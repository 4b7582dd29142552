#include "estimator/replay_estimator.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "estimator/internal/run_segments.h"
#include "estimator/page_placement.h"
#include "traces/base/status_macros.h"
#include "traces/base/strings.h"

namespace tiergym {

using internal::Segment;
using internal::Segments;
using internal::TimeAt;
using internal::WindowGrid;

absl::StatusOr<Estimate> EstimateByReplay(const Profile& profile, const Placement& placement,
                                          const EstimateOptions& options) {
  if (options.window_instructions == 0) {
    return absl::InvalidArgumentError("window_instructions must be positive");
  }
  TG_ASSIGN_OR_RETURN(PagePlacement pages, PagePlacement::Resolve(profile, placement));
  const std::vector<Trace>& runs = profile.runs();
  const size_t n = runs.size();
  const int base = pages.default_tier();

  std::vector<std::vector<Segment>> segments;
  for (const Trace& t : runs) segments.push_back(Segments(t, options.use_phasemarks));

  Estimate est;
  est.devices = profile.devices();
  for (const Trace& t : runs) est.device_runtime_ns.push_back(t.runtime_ns());
  est.access_share.assign(n, 0.0);
  est.time_share.assign(n, 0.0);
  std::vector<double> total_hits(n, 0.0);

  const std::vector<uint32_t> weight = internal::SampleWeights(profile);
  const size_t num_segments = segments[base].size();
  for (size_t seg = 0; seg < num_segments; ++seg) {
    std::vector<const Segment*> of_run;
    for (size_t d = 0; d < n; ++d) of_run.push_back(&segments[d][seg]);
    const WindowGrid grid(of_run, base, options.window_instructions, options.align_by_samples);
    const size_t windows = grid.windows;
    // hits[w * n + tier] over all runs' samples.
    std::vector<double> hits(windows * n, 0.0);
    std::vector<double> segment_hits(n, 0.0);
    for (size_t d = 0; d < n; ++d) {
      const Segment& s = segments[d][seg];
      for (size_t i = s.begin; i < s.end; ++i) {
        const uint64_t w = grid.WindowOf(d, s.position[i - s.begin]);
        const int tier = pages.TierOfAddress(runs[d].address()[i]);
        hits[w * n + tier] += weight[d];
        segment_hits[tier] += weight[d];
      }
    }
    double segment_total = 0;
    for (size_t d = 0; d < n; ++d) segment_total += segment_hits[d];
    std::vector<TimeAt> time_at;
    for (size_t d = 0; d < n; ++d) time_at.emplace_back(runs[d], segments[d][seg]);

    PhaseEstimate pe;
    pe.phase = static_cast<uint32_t>(seg);
    pe.windows = windows;
    for (size_t d = 0; d < n; ++d) {
      pe.measured_ns.push_back(segments[d][seg].end_ns - segments[d][seg].start_ns);
    }
    for (size_t w = 0; w < windows; ++w) {
      double total = 0;
      for (size_t d = 0; d < n; ++d) total += hits[w * n + d];
      for (size_t d = 0; d < n; ++d) {
        double share;
        if (total > 0) {
          share = hits[w * n + d] / total;
        } else if (segment_total > 0) {
          share = segment_hits[d] / segment_total;
        } else {
          share = static_cast<int>(d) == base ? 1.0 : 0.0;
        }
        if (share == 0) continue;
        const double lo = grid.Boundary(d, w);
        const double hi = grid.Boundary(d, w + 1);  // the last window runs to the end
        const double t = time_at[d](hi) - time_at[d](lo);
        pe.estimated_ns += share * t;
        est.time_share[d] += share * t;
      }
    }
    for (size_t d = 0; d < n; ++d) total_hits[d] += segment_hits[d];
    est.runtime_ns += pe.estimated_ns;
    est.phases.push_back(std::move(pe));
  }
  double all_hits = 0;
  for (double h : total_hits) all_hits += h;
  for (size_t d = 0; d < n; ++d) {
    est.access_share[d] = all_hits > 0 ? total_hits[d] / all_hits : (static_cast<int>(d) == base);
    est.time_share[d] = est.runtime_ns > 0 ? est.time_share[d] / est.runtime_ns : 0.0;
  }
  return est;
}

}  // namespace tiergym

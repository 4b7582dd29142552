#include "estimator/replay_estimator.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "estimator/page_placement.h"
#include "traces/util/status_macros.h"
#include "traces/util/strings.h"

namespace tiergym {
namespace {

// One run seen as a sequence of segments (phases, or the whole run) with, per segment,
// its instruction count, time span and samples' (instruction position, time) points.
struct Segment {
  uint64_t instructions = 0;
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
  size_t begin = 0, end = 0;  // sample index range
  std::vector<uint64_t> position;  // per sample: instructions since segment start
};

std::vector<Segment> Segments(const Trace& t, bool use_phasemarks) {
  std::vector<Segment> out;
  if (use_phasemarks) {
    for (size_t p = 0; p < t.num_phases(); ++p) {
      Segment s{t.PhaseInstructions(p), t.PhaseStartNs(p), t.PhaseEndNs(p), t.PhaseBegin(p),
                t.PhaseBegin(p + 1), {}};
      s.position.assign(t.instructions().begin() + s.begin, t.instructions().begin() + s.end);
      out.push_back(std::move(s));
    }
    return out;
  }
  Segment s{0, 0, t.runtime_ns(), 0, t.num_samples(), {}};
  s.position.resize(t.num_samples());
  for (size_t p = 0; p < t.num_phases(); ++p) {
    for (size_t i = t.PhaseBegin(p); i < t.PhaseBegin(p + 1); ++i) {
      s.position[i] = s.instructions + t.instructions()[i];
    }
    s.instructions += t.PhaseInstructions(p);
  }
  out.push_back(std::move(s));
  return out;
}

// Time (ns since the segment start) at instruction position x of a segment: piecewise
// linear through the samples' points, kept monotone, and the segment's two ends.
class TimeAt {
 public:
  TimeAt(const Trace& t, const Segment& s) {
    x_.push_back(0);
    y_.push_back(0);
    uint64_t max_x = 0;
    for (size_t i = s.begin; i < s.end; ++i) {
      const uint64_t x = s.position[i - s.begin];
      if (x <= max_x || x >= s.instructions) continue;
      max_x = x;
      x_.push_back(static_cast<double>(x));
      y_.push_back(static_cast<double>(t.time_ns()[i] - s.start_ns));
    }
    x_.push_back(static_cast<double>(std::max<uint64_t>(s.instructions, max_x + 1)));
    y_.push_back(static_cast<double>(s.end_ns - s.start_ns));
    for (size_t i = 1; i < y_.size(); ++i) y_[i] = std::max(y_[i], y_[i - 1]);
  }
  double operator()(double x) const {
    if (x <= 0) return 0;
    if (x >= x_.back()) return y_.back();
    size_t k = std::upper_bound(x_.begin(), x_.end(), x) - x_.begin();
    const double f = (x - x_[k - 1]) / (x_[k] - x_[k - 1]);
    return y_[k - 1] + f * (y_[k] - y_[k - 1]);
  }

 private:
  std::vector<double> x_, y_;
};

}  // namespace

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

  const size_t num_segments = segments[base].size();
  for (size_t seg = 0; seg < num_segments; ++seg) {
    const uint64_t base_instr = segments[base][seg].instructions;
    const size_t windows = std::max<uint64_t>(
        1, (base_instr + options.window_instructions - 1) / options.window_instructions);
    // hits[w][tier] over all runs' samples.
    std::vector<std::vector<double>> hits(windows, std::vector<double>(n, 0.0));
    std::vector<double> segment_hits(n, 0.0);
    std::vector<double> scale(n, 1.0);
    for (size_t d = 0; d < n; ++d) {
      const Segment& s = segments[d][seg];
      scale[d] = base_instr == 0 ? 1.0
                                 : static_cast<double>(s.instructions) /
                                       static_cast<double>(base_instr);
      const double window_len = static_cast<double>(options.window_instructions) * scale[d];
      for (size_t i = s.begin; i < s.end; ++i) {
        size_t w = static_cast<size_t>(static_cast<double>(s.position[i - s.begin]) / window_len);
        w = std::min(w, windows - 1);
        const int tier = pages.TierOfAddress(runs[d].address()[i]);
        hits[w][tier] += 1;
        segment_hits[tier] += 1;
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
      for (size_t d = 0; d < n; ++d) total += hits[w][d];
      for (size_t d = 0; d < n; ++d) {
        double share;
        if (total > 0) {
          share = hits[w][d] / total;
        } else if (segment_total > 0) {
          share = segment_hits[d] / segment_total;
        } else {
          share = static_cast<int>(d) == base ? 1.0 : 0.0;
        }
        if (share == 0) continue;
        const double lo = static_cast<double>(w * options.window_instructions) * scale[d];
        // The last window runs to the end of the segment, whatever its instruction count.
        const double hi = w + 1 == windows
                              ? std::numeric_limits<double>::infinity()
                              : static_cast<double>((w + 1) * options.window_instructions) *
                                    scale[d];
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

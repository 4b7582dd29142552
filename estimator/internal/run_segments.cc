#include "estimator/internal/run_segments.h"

#include <algorithm>
#include <limits>
#include <numeric>

namespace tiergym::internal {

std::vector<Segment> Segments(const Trace& t, bool use_phasemarks) {
  std::vector<Segment> out;
  if (use_phasemarks) {
    for (size_t p = 0; p < t.num_phases(); ++p) {
      Segment s{t.PhaseInstructions(p), t.PhaseStartNs(p),   t.PhaseEndNs(p),
                t.PhaseBegin(p),        t.PhaseBegin(p + 1), {}};
      const auto positions = t.instructions().subspan(s.begin, s.end - s.begin);
      s.position.assign(positions.begin(), positions.end());
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

TimeAt::TimeAt(const Trace& t, const Segment& s) {
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
  for (size_t i = 1; i < y_.size(); ++i) y_[i] = std::max(y_[i], y_[i - 1]);
  x_.push_back(static_cast<double>(std::max<uint64_t>(s.instructions, max_x + 1)));
  y_.push_back(std::max(y_.back(), static_cast<double>(s.end_ns - s.start_ns)));
}

double TimeAt::operator()(double x) const {
  if (x <= 0) return 0;
  if (x >= x_.back()) return y_.back();
  // After the last sample (the point before the end): at the rate of the instructions up to it.
  const double last_x = x_[x_.size() - 2], last_y = y_[y_.size() - 2];
  if (x > last_x && last_x > 0) return std::min(y_.back(), last_y + (x - last_x) * last_y / last_x);
  const size_t k = std::upper_bound(x_.begin(), x_.end(), x) - x_.begin();
  const double f = (x - x_[k - 1]) / (x_[k] - x_[k - 1]);
  return y_[k - 1] + f * (y_[k] - y_[k - 1]);
}

WindowGrid::WindowGrid(const std::vector<const Segment*>& segment_of_run, int base,
                       uint64_t window_instructions, bool align_by_samples)
    : window_instructions(window_instructions) {
  const uint64_t base_instr = segment_of_run[base]->instructions;
  windows = std::max<uint64_t>(1, (base_instr + window_instructions - 1) / window_instructions);
  auto work_extent = [](const Segment* s) {
    uint64_t last = 0;
    for (uint64_t p : s->position) last = std::max(last, p);
    const auto n = static_cast<double>(s->position.size());
    return static_cast<double>(last) * (n + 1) / n;
  };
  const Segment* b = segment_of_run[base];
  const bool align = align_by_samples && b->position.size() >= kMinAlignSamples;
  const double base_extent = align ? work_extent(b) : 0.0;
  for (const Segment* s : segment_of_run) {
    if (align && s->position.size() >= kMinAlignSamples && base_extent > 0) {
      scale.push_back(work_extent(s) / base_extent);
      continue;
    }
    scale.push_back(base_instr == 0
                        ? 1.0
                        : static_cast<double>(s->instructions) / static_cast<double>(base_instr));
  }
}

uint64_t WindowGrid::WindowOf(size_t d, uint64_t position) const {
  const double len = static_cast<double>(window_instructions) * scale[d];
  const double w = static_cast<double>(position) / len;
  return w >= static_cast<double>(windows - 1) ? windows - 1 : static_cast<uint64_t>(w);
}

double WindowGrid::Boundary(size_t d, uint64_t w) const {
  if (w >= windows) return std::numeric_limits<double>::infinity();
  return static_cast<double>(w * window_instructions) * scale[d];
}

std::vector<uint32_t> SampleWeights(const Profile& profile) {
  std::vector<uint32_t> weights(profile.runs().size(), 1);
  uint64_t g = 0;
  for (const Trace& t : profile.runs()) {
    if (!t.metadata().pebs_reset || *t.metadata().pebs_reset == 0) return weights;
    g = std::gcd(g, *t.metadata().pebs_reset);
  }
  if (g == 0) return weights;  // no runs
  for (size_t d = 0; d < weights.size(); ++d) {
    const uint64_t w = *profile.runs()[d].metadata().pebs_reset / g;
    // A ratio this large means a mis-recorded reset; counting it would let one run's
    // samples drown the others, so such profiles count samples as they are.
    if (w > 4096) {
      weights.assign(weights.size(), 1);
      return weights;
    }
    weights[d] = static_cast<uint32_t>(w);
  }
  return weights;
}

}  // namespace tiergym::internal

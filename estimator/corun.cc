#include "estimator/corun.h"

#include <algorithm>
#include <map>

#include "estimator/contention/fixed_point.h"
#include "estimator/internal/run_segments.h"
#include "traces/base/strings.h"

namespace tiergym {
namespace {

// One tenant's run cut into pieces, and where its pieces lie in time.
struct Tenant {
  const CorunTenantInput* in = nullptr;
  std::unique_ptr<PlacementState> state;
  std::vector<uint64_t> lo, hi;            // base-run positions of each piece
  std::vector<double> blind;               // plain estimate of each piece
  std::vector<std::vector<double>> bytes;  // [piece][device]
  std::vector<int> tier_of_device;         // global tier of each device
  std::vector<double> duration;            // current estimate of each piece
  std::vector<double> begin;               // piece start times (P + 1), scenario time
  std::vector<std::vector<double>> cum;    // [global tier][P + 1]: bytes moved by begin[q]

  [[nodiscard]] double Runtime() const { return begin.back() - begin.front(); }

  // Bytes moved on global tier g by scenario time t.
  [[nodiscard]] double BytesBy(int g, double t) const {
    const std::vector<double>& c = cum[g];
    if (t <= begin.front()) return 0;
    if (t >= begin.back()) return c.back();
    const size_t q = std::upper_bound(begin.begin(), begin.end(), t) - begin.begin() - 1;
    const double span = begin[q + 1] - begin[q];
    const double f = span > 0 ? (t - begin[q]) / span : 1.0;
    return c[q] + f * (c[q + 1] - c[q]);
  }

  void Lay(size_t tiers) {
    const size_t n = duration.size();
    begin.assign(n + 1, in->start_ns);
    cum.assign(tiers, std::vector<double>(n + 1, 0.0));
    for (size_t q = 0; q < n; ++q) {
      begin[q + 1] = begin[q] + duration[q];
      for (size_t g = 0; g < tiers; ++g) cum[g][q + 1] = cum[g][q];
      for (size_t d = 0; d < bytes[q].size(); ++d) {
        cum[tier_of_device[d]][q + 1] += bytes[q][d];
      }
    }
  }
};

}  // namespace

double CorunMissesPerSample(const Profile& profile) {
  const std::vector<uint32_t> weights = internal::SampleWeights(profile);
  if (profile.runs().empty()) return 1;
  double sum = 0;
  for (size_t d = 0; d < profile.runs().size(); ++d) {
    const auto& reset = profile.runs()[d].metadata().pebs_reset;
    const double r = reset && *reset > 0 ? static_cast<double>(*reset) : 1.0;
    sum += r / weights[d];
  }
  const auto n = static_cast<double>(profile.runs().size());
  return sum / n / n;
}

absl::StatusOr<CorunEstimate> EstimateCorun(const std::vector<CorunTenantInput>& inputs,
                                            const CorunEstimateOptions& options) {
  if (inputs.empty()) return absl::InvalidArgumentError("co-run estimate: no tenants");
  if (options.pieces_per_phase < 1 || options.max_iterations < 1 || !(options.tolerance > 0) ||
      !(options.cache_line_bytes > 0)) {
    return absl::InvalidArgumentError(
        "co-run estimate: pieces_per_phase and max_iterations must be >= 1, tolerance and "
        "cache_line_bytes > 0");
  }
  // Global tiers: every device name of every tenant.
  std::map<std::string, int> tier_index;
  std::vector<Tenant> tenants(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const CorunTenantInput& in = inputs[i];
    if (in.index == nullptr) {
      return absl::InvalidArgumentError(StrCat("co-run estimate: tenant ", in.name, ": no index"));
    }
    const EstimatorIndex& x = *in.index;
    if (in.sensitivity.size() != x.devices().size()) {
      return absl::InvalidArgumentError(StrCat("co-run estimate: tenant ", in.name, ": ",
                                               in.sensitivity.size(), " sensitivities for ",
                                               x.devices().size(), " devices"));
    }
    if (!(in.start_ns >= 0) || !(in.read_pct >= 0 && in.read_pct <= 100) ||
        !(in.misses_per_sample > 0)) {
      return absl::InvalidArgumentError(
          StrCat("co-run estimate: tenant ", in.name,
                 ": start_ns must be >= 0, read_pct in [0, 100], misses_per_sample > 0"));
    }
    Tenant& t = tenants[i];
    t.in = &in;
    t.state = std::make_unique<PlacementState>(in.index, in.placement, options.model);
    for (const std::string& d : x.devices()) {
      const auto [it, added] = tier_index.emplace(d, static_cast<int>(tier_index.size()));
      t.tier_of_device.push_back(it->second);
    }
    for (size_t s = 0; s < x.num_segments(); ++s) {
      const uint64_t a = x.segment_begin(s), b = x.segment_begin(s + 1);
      const uint64_t parts =
          std::max<uint64_t>(1, std::min<uint64_t>(options.pieces_per_phase, b - a));
      for (uint64_t k = 0; k < parts; ++k) {
        const uint64_t lo = a + (b - a) * k / parts, hi = a + (b - a) * (k + 1) / parts;
        t.lo.push_back(lo);
        t.hi.push_back(hi);
        t.blind.push_back(t.state->IntervalNs(lo, hi));
        std::vector<double> bytes = t.state->AccessesPerDevice(lo, hi);
        for (double& v : bytes) v *= in.misses_per_sample * options.cache_line_bytes;
        t.bytes.push_back(std::move(bytes));
      }
    }
    t.duration = t.blind;
  }
  const size_t tiers = tier_index.size();
  for (Tenant& t : tenants) t.Lay(tiers);

  CorunEstimate out;
  // Per tenant, the last pass's time-weighted slowdowns and its (undamped) time.
  std::vector<std::vector<double>> slowdown_time(tenants.size());
  std::vector<double> pass_time(tenants.size(), 0.0);
  std::vector<std::vector<double>> durations(tenants.size());
  for (size_t i = 0; i < tenants.size(); ++i) durations[i] = tenants[i].duration;
  const auto pass = [&](const std::vector<std::vector<double>>& current,
                        std::vector<std::vector<double>>& next_all) {
    for (size_t i = 0; i < tenants.size(); ++i) {
      tenants[i].duration = current[i];
      tenants[i].Lay(tiers);
    }
    for (size_t i = 0; i < tenants.size(); ++i) {
      Tenant& t = tenants[i];
      std::vector<double>& next = next_all[i];
      const size_t devices = t.tier_of_device.size();
      slowdown_time[i].assign(devices, 0.0);
      pass_time[i] = 0;
      std::vector<double> factors(devices, 1.0);
      for (size_t q = 0; q < t.duration.size(); ++q) {
        const double s = t.begin[q], e = t.begin[q + 1];
        bool slowed = false;
        for (size_t d = 0; d < devices; ++d) {
          factors[d] = 1.0;
          if (!t.in->sensitivity[d].has_value() || !(e > s)) continue;
          contention::Interference interference;
          for (size_t j = 0; j < tenants.size(); ++j) {
            if (j == i) continue;
            const int g = t.tier_of_device[d];
            const double gbps = (tenants[j].BytesBy(g, e) - tenants[j].BytesBy(g, s)) / (e - s);
            if (gbps > 0) interference.co_runners.push_back({gbps, tenants[j].in->read_pct});
          }
          if (interference.co_runners.empty()) continue;
          factors[d] = t.in->sensitivity[d]->Slowdown(interference);
          slowed |= factors[d] != 1.0;
        }
        next[q] = slowed ? t.state->IntervalNs(t.lo[q], t.hi[q], factors) : t.blind[q];
        for (size_t d = 0; d < devices; ++d) slowdown_time[i][d] += factors[d] * next[q];
        pass_time[i] += next[q];
      }
    }
  };
  contention::FixedPointOptions fixed_point{
      .max_iterations = options.fixed_point ? options.max_iterations : 1,
      .tolerance = options.tolerance,
      .damping = contention::Damping::kHalfThenHarmonic};
  const contention::FixedPointResult result =
      contention::IterateDampedFixedPoint(durations, pass, fixed_point);
  out.iterations = result.iterations;
  out.converged = !options.fixed_point || result.converged;
  for (size_t i = 0; i < tenants.size(); ++i) {
    tenants[i].duration = std::move(durations[i]);
    tenants[i].Lay(tiers);
  }
  for (size_t i = 0; i < tenants.size(); ++i) {
    const Tenant& t = tenants[i];
    CorunTenantEstimate e;
    e.name = t.in->name;
    for (double v : t.blind) e.blind_ns += v;
    e.composed_ns = t.Runtime();
    for (double v : slowdown_time[i]) {
      e.mean_slowdown.push_back(pass_time[i] > 0 ? v / pass_time[i] : 1.0);
    }
    out.tenants.push_back(std::move(e));
  }
  return out;
}

}  // namespace tiergym

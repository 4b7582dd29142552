#include "estimator/internal/roofline_fit.h"

#include <cmath>
#include <limits>
#include <span>

namespace tiergym::internal {

double DeviceMemoryNs(double latency_time, double band_time, const LoadCurve* curve,
                      const MemoryCombination& how) {
  if ((curve == nullptr || curve->flat()) && how.spec()) return std::max(latency_time, band_time);
  return LoadedMemoryTimeNs(std::span<const double>(&latency_time, 1),
                            std::span<const double>(&band_time, 1),
                            std::span<const LoadCurve* const>(&curve, 1), how);
}

std::pair<double, double> FitRoofline(const std::vector<double>& t, const std::vector<double>& band,
                                      const std::vector<double>& latency, double overlap,
                                      const std::vector<LoadCurve>& curves, double* residual_out,
                                      const MemoryCombination& how, double tolerance) {
  *residual_out = 0;
  const size_t n = t.size();
  double lo = std::numeric_limits<double>::infinity(), hi = 0, t_max = 0;
  for (size_t d = 0; d < n; ++d) {
    lo = std::min(lo, band[d] / latency[d]);
    hi = std::max(hi, band[d] / latency[d]);
    t_max = std::max(t_max, t[d]);
  }
  if (!(hi > 0) || t_max <= 0) return {0.0, t_max};
  // The largest x that could explain the slowest run: latency alone.
  double x_max = 0;
  for (size_t d = 0; d < n; ++d) x_max = std::max(x_max, t[d] / latency[d]);
  lo *= 1e-2;
  x_max = std::max(x_max, lo * 2);
  // For a given x the residual is piecewise quadratic in the compute time c (each
  // RoofTime is linear in c below and above its memory time): minimise it exactly on
  // every piece.
  std::vector<double> memory(n), knots;
  auto best_compute = [&](double x, double* cost) {
    knots.assign(1, 0.0);
    for (size_t d = 0; d < n; ++d) {
      memory[d] =
          DeviceMemoryNs(latency[d] * x, band[d], curves.empty() ? nullptr : &curves[d], how);
      if (memory[d] < t_max) knots.push_back(memory[d]);
    }
    knots.push_back(t_max);
    std::sort(knots.begin(), knots.end());
    auto residual = [&](double c) {
      double r = 0;
      for (size_t d = 0; d < n; ++d) {
        const double e = t[d] - RoofTime(c, memory[d], overlap);
        r += e * e;
      }
      return r;
    };
    double best_c = 0, best_r = residual(0);
    for (size_t j = 0; j + 1 < knots.size(); ++j) {
      const double lo_c = knots[j], hi_c = knots[j + 1];
      if (hi_c <= lo_c) continue;
      const double mid = 0.5 * (lo_c + hi_c);
      // RoofTime(c, m) = slope * c + offset on this piece.
      double saa = 0, sab = 0;
      for (size_t d = 0; d < n; ++d) {
        const bool below = mid < memory[d];
        const double slope = below ? 1.0 - overlap : 1.0;
        const double offset = below ? memory[d] : (1.0 - overlap) * memory[d];
        saa += slope * slope;
        sab += slope * (t[d] - offset);
      }
      const double c = saa > 0 ? std::clamp(sab / saa, lo_c, hi_c) : lo_c;
      const double r = residual(c);
      if (r < best_r) {
        best_r = r;
        best_c = c;
      }
    }
    *cost = best_r;
    return best_c;
  };
  constexpr int kGrid = 48;
  const double ratio = std::log(x_max / lo);
  double best_x = lo, best_c = 0, best = std::numeric_limits<double>::infinity();
  int best_i = 0;
  const double tol = 1e-10 * t_max * t_max;
  for (int i = 0; i <= kGrid; ++i) {
    const double x = lo * std::exp(ratio * i / kGrid);
    double cost;
    const double c = best_compute(x, &cost);
    if (cost < best - tol) {  // ties keep the smallest x
      best = cost;
      best_x = x;
      best_c = c;
      best_i = i;
    }
  }
  // Golden refinement between the grid neighbours of the best point (log x).
  double a = ratio * std::max(0, best_i - 1) / kGrid,
         b = ratio * std::min(kGrid, best_i + 1) / kGrid;
  for (int it = 0; it < 24; ++it) {
    const double u1 = a + (b - a) * 0.381966, u2 = a + (b - a) * 0.618034;
    double c1, c2;
    best_compute(lo * std::exp(u1), &c1);
    best_compute(lo * std::exp(u2), &c2);
    if (c1 <= c2) {
      b = u2;
    } else {
      a = u1;
    }
  }
  double cost;
  double x = lo * std::exp(0.5 * (a + b));
  double c = best_compute(x, &cost);
  if (cost < best - tol) {
    best = cost;
  } else {
    x = best_x;
    c = best_c;
  }
  *residual_out = best;
  if (!(tolerance > 0)) return {x, c};
  // The least x within the tolerance: the first grid point below the best fit's that
  // meets it (or the best fit's x), then bisection (log x) between it and the grid point
  // before, which does not.
  double squares = 0;
  for (size_t d = 0; d < n; ++d) squares += t[d] * t[d];
  const double limit = best + tolerance * tolerance * squares;
  double u_in = std::log(x / lo), u_out = -1;
  for (int i = 0; i <= kGrid; ++i) {
    const double u = ratio * i / kGrid;
    if (u >= u_in) break;
    best_compute(lo * std::exp(u), &cost);
    if (cost <= limit) {
      u_in = u;
      break;
    }
    u_out = u;
  }
  if (u_out >= 0) {
    for (int it = 0; it < 24; ++it) {
      const double u = 0.5 * (u_in + u_out);
      best_compute(lo * std::exp(u), &cost);
      (cost <= limit ? u_in : u_out) = u;
    }
  }
  x = lo * std::exp(u_in);
  c = best_compute(x, &cost);
  return {x, c};
}

}  // namespace tiergym::internal

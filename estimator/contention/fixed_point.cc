#include "estimator/contention/fixed_point.h"

#include <algorithm>
#include <cmath>

namespace tiergym::contention {

FixedPointResult IterateDampedFixedPoint(std::vector<std::vector<double>>& times,
                                         FixedPointPass pass, const FixedPointOptions& options) {
  FixedPointResult out;
  std::vector<std::vector<double>> next(times.size());
  for (int iteration = 1; iteration <= options.max_iterations; ++iteration) {
    out.iterations = iteration;
    for (size_t g = 0; g < times.size(); ++g) next[g].assign(times[g].size(), 0.0);
    pass(times, next);
    double change = 0;
    for (size_t g = 0; g < times.size(); ++g) {
      std::vector<double>& x = times[g];
      std::vector<double>& y = next[g];
      double before = 0, after = 0;
      for (size_t q = 0; q < y.size(); ++q) {
        before += x[q];
        if (iteration > 1) {
          const double step =
              options.damping == Damping::kHalf || iteration <= 5 ? 0.5 : 1.0 / (iteration - 3);
          y[q] = x[q] + step * (y[q] - x[q]);
        }
        after += y[q];
      }
      change = std::max(change, before > 0 ? std::fabs(after - before) / before : 0.0);
    }
    times.swap(next);
    if (change < options.tolerance) {
      out.converged = true;
      break;
    }
  }
  return out;
}

}  // namespace tiergym::contention

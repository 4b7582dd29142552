#include "estimator/models/concurrent_model.h"

#include <algorithm>

namespace tiergym {

double ConcurrentModel::Correction(const BlockTable& blocks, size_t k, const uint64_t* hits,
                                   const double* factor) const {
  const auto total = static_cast<double>(blocks.total[k]);
  if (total == 0) return 0;
  const size_t n = blocks.devices;
  double sum = 0, max = 0;
  for (size_t d = 0; d < n; ++d) {
    const double part = static_cast<double>(hits[d]) / total * blocks.bandwidth_floor[k * n + d] *
                        (factor ? factor[d] : 1.0);
    sum += part;
    max = std::max(max, part);
  }
  return sum - max;
}

}  // namespace tiergym

#include "estimator/prediction_interval.h"

#include <algorithm>
#include <cmath>

namespace tiergym {
namespace {

// The interval of half-width `relative` * estimate_ns either side, with the sampling
// interval's half-widths added in quadrature.
PredictionInterval Around(double estimate_ns, double relative, const SamplingInterval& sampling,
                          double level) {
  const double model = relative * estimate_ns;
  const double below = std::max(0.0, estimate_ns - sampling.lo_ns);
  const double above = std::max(0.0, sampling.hi_ns - estimate_ns);
  const bool has_sampling = sampling.replicates > 0;
  PredictionInterval out;
  out.lo_ns = estimate_ns - std::hypot(has_sampling ? below : 0.0, model);
  out.hi_ns = estimate_ns + std::hypot(has_sampling ? above : 0.0, model);
  out.level = level;
  return out;
}

}  // namespace

double NormalQuantile(double p) {
  // Acklam's rational approximation (relative error below 1.2e-9).
  static const double a[] = {-3.969683028665376e+01, 2.209460984245205e+02,  -2.759285104469687e+02,
                             1.383577518672690e+02,  -3.066479806614716e+01, 2.506628277459239e+00};
  static const double b[] = {-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
                             6.680131188771972e+01, -1.328068155288572e+01};
  static const double c[] = {-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
                             -2.549732539343734e+00, 4.374664141464968e+00,  2.938163982698783e+00};
  static const double d[] = {7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
                             3.754408661907416e+00};
  p = std::clamp(p, 1e-12, 1 - 1e-12);
  if (p < 0.02425) {
    const double q = std::sqrt(-2 * std::log(p));
    return (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
           ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  }
  if (p > 1 - 0.02425) return -NormalQuantile(1 - p);
  const double q = p - 0.5, r = q * q;
  return (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
         (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
}

double Mixing(const std::vector<double>& access_share) {
  if (access_share.empty()) return 0;
  return std::clamp(1 - *std::max_element(access_share.begin(), access_share.end()), 0.0, 1.0);
}

double Serialization(double estimate_ns, double serialized_ns) {
  return std::fabs(serialized_ns - estimate_ns) / estimate_ns;
}

double RelativeSd(const IntervalPrior& prior, double estimate_ns, double paper_ns, double mixing,
                  double serialization) {
  const double delta = std::fabs(estimate_ns - paper_ns) / estimate_ns;
  return std::hypot(std::hypot(prior.noise, prior.model_error * delta, prior.mix_error * mixing),
                    prior.overlap_error * serialization);
}

PredictionInterval PriorInterval(const IntervalPrior& prior, double estimate_ns, double paper_ns,
                                 const SamplingInterval& sampling, double level, double mixing,
                                 double serialization) {
  const double z = NormalQuantile(0.5 + level / 2);
  return Around(estimate_ns, z * RelativeSd(prior, estimate_ns, paper_ns, mixing, serialization),
                sampling, level);
}

PredictionInterval ConformalInterval(const std::vector<double>& scores, const IntervalPrior& prior,
                                     double estimate_ns, double paper_ns,
                                     const SamplingInterval& sampling, double level, double mixing,
                                     double serialization) {
  if (scores.empty()) {
    return PriorInterval(prior, estimate_ns, paper_ns, sampling, level, mixing, serialization);
  }
  std::vector<double> sorted = scores;
  std::sort(sorted.begin(), sorted.end());
  const auto n = static_cast<double>(sorted.size());
  const auto k = static_cast<size_t>(std::ceil((n + 1) * level));
  const double q = sorted[std::min(sorted.size(), std::max<size_t>(k, 1)) - 1];
  return Around(estimate_ns, q * RelativeSd(prior, estimate_ns, paper_ns, mixing, serialization),
                sampling, level);
}

}  // namespace tiergym

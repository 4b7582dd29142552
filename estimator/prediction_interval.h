// The interval in which an application's measured runtime falls, with a given probability,
// around the estimate of its placement (estimator/README.md, "Intervals that hold their
// level").
//
// An estimate misses a measured runtime for three reasons:
//   - sampling: the profile's samples are a draw (SamplingSpread, sampling_spread.h);
//   - run-to-run noise, of the measured run and of the profile's runs;
//   - the model's own error: how the machine combines tiers, latency and bandwidth limits
//     and compute in a mix is not in the profile (the family of ground truths of
//     traces/SYNTH.md section 10). It vanishes when one tier holds everything and grows
//     with how far the runtime model moves the estimate from the paper's linear
//     weighting: the relative correction delta = |estimate - paper estimate| / estimate;
//     and with how far the placement lies from the runs the profile measured (one tier
//     holding everything): its mixing mu = 1 - the largest device's share of the accesses
//     (0 for a single-tier placement, 1/2 for two tiers halved, 2/3 for three in thirds).
//     How much the tiers overlap or queue shows in a mix whether or not the runtime model
//     corrects it; how much the tiers overlap shows by the serialization sigma = |the
//     estimate were the tiers' bandwidth-bound times not to overlap at all (tier overlap 0)
//     - estimate| / estimate: 0 where one tier holds the accesses, large where two tiers'
//     bandwidth-bound times are alike (Serialization()).
// The relative scale of the last two is
//   sd = sqrt(noise^2 + (model_error * delta)^2 + (mix_error * mu)^2
//             + (overlap_error * sigma)^2).
//
// Without measured runs (PriorInterval) the half-width is z(level) * sd * estimate, with a
// prior (noise, model_error) fitted on the family of ground truths and documented in the
// README. With a calibration on measured runs (ConformalInterval) it is split-conformal:
// the runs' cross-validated residuals divided by their own sd are the scores, and the
// half-width is their ceil((n + 1) level)-th smallest times sd * estimate. Either adds the
// sampling interval's half-widths in quadrature. Plain functions of values; thread-safe.
#ifndef TIERGYM_ESTIMATOR_PREDICTION_INTERVAL_H_
#define TIERGYM_ESTIMATOR_PREDICTION_INTERVAL_H_

#include <vector>

#include "estimator/sampling_spread.h"

namespace tiergym {

// The defaults are fitted on the family of ground truths (estimator/README.md, "Intervals
// that hold their level": scripts/estimator_family.py --fit-prior), the runs estimated with
// the default options (the queue strength read from the profile, the tier overlap 1):
// of a grid (noise at least 0.5 %, the family's run-to-run noise), the triple (noise,
// model_error, overlap_error) whose 90 % interval's coverage is nearest 90 % on every
// member (the least largest distance), then the narrowest. Before the serialization term
// the narrowest pair holding 90 % of all runs was noise 0.009, model_error 0.08 (it left
// the members whose tiers overlap partly at 78-80 %).
struct IntervalPrior {
  // Relative error (one standard deviation) of an estimate the runtime model does not move
  // from the paper's: run-to-run noise and what every placement shares.
  double noise = 0.0055;
  // Standard deviation of the model's own relative error per unit of relative correction.
  double model_error = 0.04;
  // Standard deviation of the model's own relative error per unit of mixing (Mixing()).
  double mix_error = 0;
  // Standard deviation of the model's own relative error per unit of serialization
  // (Serialization()): how much the machine's tiers overlap, which the profile does not show.
  double overlap_error = 0.24;
};

// The serialization of a placement's estimate: |serialized_ns - estimate_ns| / estimate_ns,
// serialized_ns its estimate with the tier overlap 0 (the roofline model; 0 for the others).
// REQUIRES: estimate_ns > 0.
double Serialization(double estimate_ns, double serialized_ns);

// The mixing of a placement: 1 - max_d access_share[d] (0 for an empty list).
double Mixing(const std::vector<double>& access_share);

struct PredictionInterval {
  double lo_ns = 0, hi_ns = 0;
  double level = 0;
};

// sd of the estimate (relative): sqrt(noise^2 + (model_error * delta)^2 + (mix_error *
// mixing)^2 + (overlap_error * serialization)^2) with delta = |estimate_ns - paper_ns| /
// estimate_ns. REQUIRES: estimate_ns > 0.
double RelativeSd(const IntervalPrior& prior, double estimate_ns, double paper_ns,
                  double mixing = 0, double serialization = 0);

// The prior interval: z(level) * sd * estimate_ns either side, and the sampling interval's
// half-widths in quadrature. REQUIRES: level in (0, 1), estimate_ns > 0.
PredictionInterval PriorInterval(const IntervalPrior& prior, double estimate_ns, double paper_ns,
                                 const SamplingInterval& sampling, double level, double mixing = 0,
                                 double serialization = 0);

// The conformal interval from calibration scores (|relative residual| / RelativeSd of
// runs scored by a fit on the other folds): the ceil((n + 1) level)-th smallest score, or
// the largest when there are too few, times sd * estimate_ns either side, and the sampling
// interval in quadrature. Falls back to PriorInterval without scores.
PredictionInterval ConformalInterval(const std::vector<double>& scores, const IntervalPrior& prior,
                                     double estimate_ns, double paper_ns,
                                     const SamplingInterval& sampling, double level,
                                     double mixing = 0, double serialization = 0);

// The standard normal quantile, p in (0, 1).
double NormalQuantile(double p);

// Whether `measured_ns` lies in [lo_ns, hi_ns].
inline bool Inside(const PredictionInterval& interval, double measured_ns) {
  return interval.lo_ns <= measured_ns && measured_ns <= interval.hi_ns;
}

}  // namespace tiergym

#endif  // TIERGYM_ESTIMATOR_PREDICTION_INTERVAL_H_

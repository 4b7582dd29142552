// Synthetic contention data: sensitivity families, solo bandwidths and measured pairs for
// the synthetic applications of traces/synth (minife, lulesh, nekbone, lammps, hotset),
// made by the documented contention model of CONTENTION.md ("The synthetic contention
// model"), with measurement noise and outliers. `tiergym contention synth` writes them;
// the bundled data in estimator/contention/data/ is its output for seed 1.
//
// The model reuses the synthetic applications' time model (traces/synth/time_model.h):
// an interferer's traffic on the target's tier raises that tier's loaded latency and
// takes away bandwidth; the target's normalized performance is its solo runtime over its
// runtime on the loaded tier. Everything is deterministic in the seed: the same options
// give the same data on every platform (std::mt19937_64 streams, traces/synth/rng.h).
//
// Thread-safe: pure function of its options.
#ifndef TIERGYM_ESTIMATOR_CONTENTION_SYNTH_CONTENTION_SYNTH_H_
#define TIERGYM_ESTIMATOR_CONTENTION_SYNTH_CONTENTION_SYNTH_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "estimator/contention/sensitivity_csv.h"

namespace tiergym::contention {

struct SynthApp {
  std::string model;     // bundled application model name or JSON path (traces/synth)
  double read_pct = 75;  // share of its memory traffic that is reads
};

struct ContentionSynthOptions {
  uint64_t seed = 1;
  std::string machine = "knl";  // bundled machine or JSON path; default "knl"
  std::string tier;             // the contended tier; default "" = machine.tiers[0]
  // Default: the five bundled applications with the read shares of CONTENTION.md.
  std::vector<SynthApp> apps = DefaultSynthApps();

  // Each application also interferes with these shares of its threads (named
  // "<app>-<threads>t"; the full scale keeps the app's name).
  std::vector<double> interferer_scales = {1.0, 0.5, 0.25};

  // Memory and interconnect (CONTENTION.md, section 2).
  double write_weight = 1.6;       // channel time of a written byte / of a read byte
  double link_read_gbps = 45;      // most a read-only remote stream reaches
  double link_write_factor = 0.6;  // at 0 % reads the link reaches this share of it
  double remote_latency_ns = 60;   // added to the tier's latency for a remote access
  double queueing = 0.8;           // kappa in latency x (1 + kappa u^2 / (1 - u))
  double fair_share = 0.5;         // bandwidth the target keeps at least, share of tier
  double max_utilization = 0.95;   // cap of the interferer's utilization u

  // Measurement campaign (CONTENTION.md, section 3).
  std::vector<double> read_pcts = {50, 55, 60, 65, 70, 75, 80, 85, 90, 95, 100};
  std::vector<double> level_fractions = {0.10, 0.15, 0.20,  0.25, 0.30, 0.35, 0.40, 0.45,
                                         0.50, 0.55, 0.625, 0.70, 0.75, 0.83, 0.92, 1.00};
  int repeats = 2;                    // measurements per curve point
  double level_noise = 0.01;          // relative SD of a level's measured bandwidth
  double curve_noise = 0.015;         // relative SD of one curve measurement
  double outlier_probability = 0.08;  // of one curve measurement
  double outlier_min_drop = 0.04;     // an outlier loses U(min, max) of its performance
  double outlier_max_drop = 0.25;
  double solo_noise = 0.01;   // relative SD of a measured solo bandwidth
  double pair_noise = 0.004;  // relative SD of a measured pair (mean of 10 runs)

  static std::vector<SynthApp> DefaultSynthApps();
};

struct ContentionData {
  std::vector<SensitivityFamily> families;  // one per app, in option order
  std::vector<AppBandwidth> apps;           // every interferer's measured solo bandwidth
  std::vector<MeasuredPair> pairs;          // every target with every interferer
};

// Generates the data. InvalidArgument / NotFound for a model, machine or tier that does
// not load or exist, or options out of range (no apps, repeats < 1, a fraction outside
// (0, 1], a negative noise, a read share outside [0, 100], ...).
absl::StatusOr<ContentionData> SynthesizeContentionData(const ContentionSynthOptions& options);

}  // namespace tiergym::contention

#endif  // TIERGYM_ESTIMATOR_CONTENTION_SYNTH_CONTENTION_SYNTH_H_

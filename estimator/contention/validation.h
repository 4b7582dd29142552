// Validation of the contention estimator against measured pairs (the contention paper,
// section 4.2): every pair of pairs.csv is predicted with every method, from the target's family
// and the interferer's solo bandwidth and read share; the error of one prediction is |predicted -
// measured| normalized performance in percentage points.
//
// Thread-safe: pure functions of their arguments.
#ifndef TIERGYM_ESTIMATOR_CONTENTION_VALIDATION_H_
#define TIERGYM_ESTIMATOR_CONTENTION_VALIDATION_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "estimator/contention/contention_model.h"
#include "estimator/contention/sensitivity_csv.h"

namespace tiergym::contention {

struct ValidationRow {
  Method method;
  size_t pairs = 0;  // predictions made
  double mean = 0;   // mean absolute error, percentage points
  double sd = 0;     // sample standard deviation of the errors (n - 1), percentage points
  double max = 0;    // largest error, percentage points
  double cost = 0;   // ProfilingCost(), averaged over the target families
};

struct SkippedMethod {
  Method method;
  std::string reason;  // why the method does not apply to the data (a missing curve, ...)
};

struct ValidationReport {
  std::vector<ValidationRow> rows;  // in the order of the methods asked for
  std::vector<SkippedMethod> skipped;
  size_t targets = 0;  // distinct target applications among the pairs
};

// The methods of the seed's Tables 1-3, in table order: for each smoothing (poly2,
// linear, interpolation) and each point set (all, sampled), the curves right, 50, 75,
// 100 and estimated (interpolation/sampled/75 is Method::Memgen()).
std::vector<Method> StandardMethods();

// Predicts every pair with every method. InvalidArgument "PAIRS:LINE: unknown-target" /
// "unknown-interferer" for a pair whose target has no family or whose interferer is not
// in `apps` (`pairs_path` names the file). A method that cannot be built for some target
// (ContentionModel::Create fails) is listed in `skipped`, not in `rows`.
absl::StatusOr<ValidationReport> Validate(const std::vector<SensitivityFamily>& families,
                                          const std::vector<AppBandwidth>& apps,
                                          const std::vector<MeasuredPair>& pairs,
                                          const std::vector<Method>& methods,
                                          const std::string& pairs_path);

}  // namespace tiergym::contention

#endif  // TIERGYM_ESTIMATOR_CONTENTION_VALIDATION_H_

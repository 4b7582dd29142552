// Sensitivity data of the contention estimator: measured sensitivity curves (curves.csv),
// solo bandwidths (apps.csv) and measured pairwise co-runs (pairs.csv), in the formats of
// estimator/contention/SENSITIVITY_CSV.md, with strict readers and writers.
//
// Performance is normalized performance: solo runtime / runtime under interference.
// The readers find columns by name (any order, extra columns ignored), ignore blank lines
// and accept CRLF. A file breaking a rule is refused whole with InvalidArgument
// "FILE:LINE: RULE: detail" (NotFound when it cannot be opened). Rules of every file:
//   truncated-last-line  the file does not end with a newline (it was cut short)
//   empty                no column line
//   duplicate-column     a column name appears twice in the column line
//   missing-column       the column line lacks a column of the format
//   field-count          a row has more or fewer fields than the column line
//   non-numeric          a numeric field is not a finite decimal number
// curves.csv (app,read_pct,interference_gbps,normalized_perf):
//   empty-app            the app field is empty
//   read-pct-range       read_pct outside [0, 100]
//   interference-range   interference_gbps <= 0 (zero interference is the solo run,
//                        normalized performance 1.0 by definition)
//   perf-range           normalized_perf outside (0, 2] (above 2 is taken as a unit
//                        mistake, e.g. percent instead of a fraction)
// apps.csv (app,read_gbps,write_gbps):
//   empty-app, negative-bandwidth (read_gbps or write_gbps < 0), zero-bandwidth (both 0:
//   the read share is undefined), duplicate-app (both lines named)
// pairs.csv (target,interferer,normalized_perf):
//   empty-name (target or interferer empty), perf-range (as for curves.csv)
// A file with a column line and no rows is valid and empty. Repeated rows are separate
// measurements (curves: of the same point; pairs: of the same pair).
//
// Everything here is a plain value; functions are thread-safe.
#ifndef TIERGYM_ESTIMATOR_CONTENTION_SENSITIVITY_CSV_H_
#define TIERGYM_ESTIMATOR_CONTENTION_SENSITIVITY_CSV_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tiergym::contention {

struct CurvePoint {
  double interference_gbps = 0;  // the interferer's solo bandwidth, > 0
  double normalized_perf = 1;    // of the target, in (0, 2]
  int line = 0;                  // 1-based line in curves.csv; 0 when made in memory
};

// One sensitivity curve: the target under an interferer with `read_pct` % reads.
struct SensitivityCurve {
  double read_pct = 100;
  std::vector<CurvePoint> points;  // ascending interference; repeats in file order
};

// All curves of one application.
struct SensitivityFamily {
  std::string app;
  std::vector<SensitivityCurve> curves;  // ascending read_pct, unique

  // The curve measured at exactly `read_pct`, or nullptr.
  const SensitivityCurve* FindCurve(double read_pct) const;
};

// Contentiousness: what the application puts on the memory when it runs alone.
struct AppBandwidth {
  std::string app;
  double read_gbps = 0;
  double write_gbps = 0;
  int line = 0;

  double total_gbps() const { return read_gbps + write_gbps; }
  // 100 * read / (read + write). REQUIRES: total_gbps() > 0.
  double read_pct() const { return 100.0 * read_gbps / total_gbps(); }
};

struct MeasuredPair {
  std::string target;
  std::string interferer;
  double normalized_perf = 1;  // of the target while the interferer ran
  int line = 0;
};

// Parse `text` read from `path` (which names it in errors). Families come out sorted by
// app name; apps and pairs in file order.
absl::StatusOr<std::vector<SensitivityFamily>> ParseCurvesCsv(std::string_view text,
                                                              const std::string& path);
absl::StatusOr<std::vector<AppBandwidth>> ParseAppsCsv(std::string_view text,
                                                       const std::string& path);
absl::StatusOr<std::vector<MeasuredPair>> ParsePairsCsv(std::string_view text,
                                                        const std::string& path);

// Read and parse the file at `path`.
absl::StatusOr<std::vector<SensitivityFamily>> ReadCurvesCsv(const std::string& path);
absl::StatusOr<std::vector<AppBandwidth>> ReadAppsCsv(const std::string& path);
absl::StatusOr<std::vector<MeasuredPair>> ReadPairsCsv(const std::string& path);

// The family / app named `app`, or nullptr.
const SensitivityFamily* FindFamily(const std::vector<SensitivityFamily>& families,
                                    std::string_view app);
const AppBandwidth* FindApp(const std::vector<AppBandwidth>& apps, std::string_view app);

// The files' text: the column line of the format, then one row per point / app / pair in
// the given order (interference with 4 decimals, performance with 5). InvalidArgument for
// data the readers would refuse (an empty name or one holding a comma or line break, a
// value outside its range).
absl::StatusOr<std::string> CurvesCsvText(const std::vector<SensitivityFamily>& families);
absl::StatusOr<std::string> AppsCsvText(const std::vector<AppBandwidth>& apps);
absl::StatusOr<std::string> PairsCsvText(const std::vector<MeasuredPair>& pairs);

}  // namespace tiergym::contention

#endif  // TIERGYM_ESTIMATOR_CONTENTION_SENSITIVITY_CSV_H_

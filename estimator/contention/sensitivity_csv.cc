#include "estimator/contention/sensitivity_csv.h"

#include <algorithm>
#include <map>
#include <optional>

#include "traces/base/csv_table.h"
#include "traces/base/file.h"
#include "traces/base/status_macros.h"
#include "traces/base/strings.h"

namespace tiergym::contention {
namespace {

constexpr double kMaxNormalizedPerf = 2.0;

// The numeric field `i` of `row`, named `column` in the error.
absl::StatusOr<double> Number(const std::string& path, const CsvRow& row, size_t i,
                              std::string_view column) {
  const std::optional<double> v = ParseFiniteNumber(row.fields[i]);
  if (!v.has_value()) {
    return RuleError(path, row.line, "non-numeric",
                     StrCat(column, " \"", row.fields[i], "\" is not a finite decimal number"));
  }
  return *v;
}

absl::Status CheckPerf(const std::string& path, int line, double perf) {
  if (perf <= 0 || perf > kMaxNormalizedPerf) {
    return RuleError(path, line, "perf-range",
                     StrCat("normalized_perf ", perf,
                            " is outside (0, 2]; it is solo runtime / runtime under "
                            "interference (1.0 = unharmed)"));
  }
  return absl::OkStatus();
}

absl::Status CheckName(std::string_view what, const std::string& name) {
  if (name.empty()) return absl::InvalidArgumentError(StrCat("cannot write an empty ", what));
  if (name.find_first_of(",\r\n\"") != std::string::npos) {
    return absl::InvalidArgumentError(StrCat("cannot write ", what, " \"", name,
                                             "\": it holds a comma, quote or line break, which "
                                             "the unquoted CSV cannot carry"));
  }
  return absl::OkStatus();
}

}  // namespace

const SensitivityCurve* SensitivityFamily::FindCurve(double read_pct) const {
  for (const SensitivityCurve& c : curves) {
    if (c.read_pct == read_pct) return &c;
  }
  return nullptr;
}

absl::StatusOr<std::vector<SensitivityFamily>> ParseCurvesCsv(std::string_view text,
                                                              const std::string& path) {
  TG_ASSIGN_OR_RETURN(
      CsvTable table,
      ParseCsvTable(text, path, {"app", "read_pct", "interference_gbps", "normalized_perf"}));
  std::map<std::string, std::map<double, SensitivityCurve>> by_app;
  for (const CsvRow& row : table.rows) {
    if (row.fields[0].empty()) return RuleError(path, row.line, "empty-app", "the app is empty");
    TG_ASSIGN_OR_RETURN(double read_pct, Number(path, row, 1, "read_pct"));
    TG_ASSIGN_OR_RETURN(double gbps, Number(path, row, 2, "interference_gbps"));
    TG_ASSIGN_OR_RETURN(double perf, Number(path, row, 3, "normalized_perf"));
    if (read_pct < 0 || read_pct > 100) {
      return RuleError(path, row.line, "read-pct-range",
                       StrCat("read_pct ", read_pct, " is outside [0, 100]"));
    }
    if (gbps <= 0) {
      return RuleError(path, row.line, "interference-range",
                       StrCat("interference_gbps ", gbps,
                              " is not positive; zero interference is the solo run, whose "
                              "normalized performance is 1.0 by definition"));
    }
    TG_RETURN_IF_ERROR(CheckPerf(path, row.line, perf));
    SensitivityCurve& curve = by_app[std::string(row.fields[0])][read_pct];
    curve.read_pct = read_pct;
    curve.points.push_back(CurvePoint{gbps, perf, row.line});
  }
  std::vector<SensitivityFamily> families;
  for (auto& [app, curves] : by_app) {
    SensitivityFamily family;
    family.app = app;
    for (auto& [read_pct, curve] : curves) {
      std::stable_sort(curve.points.begin(), curve.points.end(),
                       [](const CurvePoint& a, const CurvePoint& b) {
                         return a.interference_gbps < b.interference_gbps;
                       });
      family.curves.push_back(std::move(curve));
    }
    families.push_back(std::move(family));
  }
  return families;
}

absl::StatusOr<std::vector<AppBandwidth>> ParseAppsCsv(std::string_view text,
                                                       const std::string& path) {
  TG_ASSIGN_OR_RETURN(CsvTable table,
                      ParseCsvTable(text, path, {"app", "read_gbps", "write_gbps"}));
  std::vector<AppBandwidth> apps;
  std::map<std::string, int, std::less<>> line_of;
  for (const CsvRow& row : table.rows) {
    if (row.fields[0].empty()) return RuleError(path, row.line, "empty-app", "the app is empty");
    AppBandwidth app;
    app.app = std::string(row.fields[0]);
    app.line = row.line;
    TG_ASSIGN_OR_RETURN(app.read_gbps, Number(path, row, 1, "read_gbps"));
    TG_ASSIGN_OR_RETURN(app.write_gbps, Number(path, row, 2, "write_gbps"));
    if (app.read_gbps < 0 || app.write_gbps < 0) {
      return RuleError(path, row.line, "negative-bandwidth",
                       StrCat("read_gbps ", app.read_gbps, " and write_gbps ", app.write_gbps,
                              " must not be negative"));
    }
    if (app.total_gbps() == 0) {
      return RuleError(path, row.line, "zero-bandwidth",
                       StrCat("app \"", app.app,
                              "\" has read_gbps and write_gbps 0; its read share is undefined"));
    }
    const auto [it, inserted] = line_of.emplace(app.app, row.line);
    if (!inserted) {
      return RuleError(path, row.line, "duplicate-app",
                       StrCat("app \"", app.app, "\" already appears on line ", it->second));
    }
    apps.push_back(std::move(app));
  }
  return apps;
}

absl::StatusOr<std::vector<MeasuredPair>> ParsePairsCsv(std::string_view text,
                                                        const std::string& path) {
  TG_ASSIGN_OR_RETURN(CsvTable table,
                      ParseCsvTable(text, path, {"target", "interferer", "normalized_perf"}));
  std::vector<MeasuredPair> pairs;
  for (const CsvRow& row : table.rows) {
    if (row.fields[0].empty() || row.fields[1].empty()) {
      return RuleError(path, row.line, "empty-name",
                       row.fields[0].empty() ? "the target is empty" : "the interferer is empty");
    }
    MeasuredPair pair;
    pair.target = std::string(row.fields[0]);
    pair.interferer = std::string(row.fields[1]);
    pair.line = row.line;
    TG_ASSIGN_OR_RETURN(pair.normalized_perf, Number(path, row, 2, "normalized_perf"));
    TG_RETURN_IF_ERROR(CheckPerf(path, row.line, pair.normalized_perf));
    pairs.push_back(std::move(pair));
  }
  return pairs;
}

absl::StatusOr<std::vector<SensitivityFamily>> ReadCurvesCsv(const std::string& path) {
  TG_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  return ParseCurvesCsv(text, path);
}

absl::StatusOr<std::vector<AppBandwidth>> ReadAppsCsv(const std::string& path) {
  TG_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  return ParseAppsCsv(text, path);
}

absl::StatusOr<std::vector<MeasuredPair>> ReadPairsCsv(const std::string& path) {
  TG_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  return ParsePairsCsv(text, path);
}

const SensitivityFamily* FindFamily(const std::vector<SensitivityFamily>& families,
                                    std::string_view app) {
  for (const SensitivityFamily& f : families) {
    if (f.app == app) return &f;
  }
  return nullptr;
}

const AppBandwidth* FindApp(const std::vector<AppBandwidth>& apps, std::string_view app) {
  for (const AppBandwidth& a : apps) {
    if (a.app == app) return &a;
  }
  return nullptr;
}

// The writers build the text, then read it back with the strict reader, so that what
// they write is always readable (ranges, rounding to the printed decimals).
absl::StatusOr<std::string> CurvesCsvText(const std::vector<SensitivityFamily>& families) {
  std::string out = "app,read_pct,interference_gbps,normalized_perf\n";
  for (const SensitivityFamily& f : families) {
    TG_RETURN_IF_ERROR(CheckName("app name", f.app));
    for (const SensitivityCurve& c : f.curves) {
      for (const CurvePoint& p : c.points) {
        StrAppend(&out, f.app, ",", c.read_pct, ",", FixedDecimal(p.interference_gbps, 4), ",",
                  FixedDecimal(p.normalized_perf, 5), "\n");
      }
    }
  }
  TG_RETURN_IF_ERROR(ParseCurvesCsv(out, "<curves.csv being written>").status());
  return out;
}

absl::StatusOr<std::string> AppsCsvText(const std::vector<AppBandwidth>& apps) {
  std::string out = "app,read_gbps,write_gbps\n";
  for (const AppBandwidth& a : apps) {
    TG_RETURN_IF_ERROR(CheckName("app name", a.app));
    StrAppend(&out, a.app, ",", FixedDecimal(a.read_gbps, 4), ",", FixedDecimal(a.write_gbps, 4),
              "\n");
  }
  TG_RETURN_IF_ERROR(ParseAppsCsv(out, "<apps.csv being written>").status());
  return out;
}

absl::StatusOr<std::string> PairsCsvText(const std::vector<MeasuredPair>& pairs) {
  std::string out = "target,interferer,normalized_perf\n";
  for (const MeasuredPair& p : pairs) {
    TG_RETURN_IF_ERROR(CheckName("target", p.target));
    TG_RETURN_IF_ERROR(CheckName("interferer", p.interferer));
    StrAppend(&out, p.target, ",", p.interferer, ",", FixedDecimal(p.normalized_perf, 5), "\n");
  }
  TG_RETURN_IF_ERROR(ParsePairsCsv(out, "<pairs.csv being written>").status());
  return out;
}

}  // namespace tiergym::contention

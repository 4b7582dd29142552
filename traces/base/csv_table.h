// Strict comma-separated tables with a column line: the project's one reader of CSV files
// with a header (the sensitivity data of estimator/contention, for one).
//
// A table is a column line followed by rows. Fields are not quoted (no field may hold a
// comma), blank lines are ignored, CRLF line ends are accepted, and columns are found by
// name, in any order; extra columns are ignored. Errors read "FILE:LINE: RULE: detail".
// Rules checked here:
//   truncated-last-line  the file does not end with a newline (it was cut short)
//   empty                no column line
//   duplicate-column     a column name appears twice in the column line
//   missing-column       the column line lacks a required column
//   field-count          a row has more or fewer fields than the column line
//
// A CsvTable holds string_views into the text it was parsed from, which must outlive it.
// Thread-safe: immutable after parsing.
#ifndef TIERGYM_TRACES_BASE_CSV_TABLE_H_
#define TIERGYM_TRACES_BASE_CSV_TABLE_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tiergym {

struct CsvRow {
  int line = 0;                          // 1-based line number in the file
  std::vector<std::string_view> fields;  // one per required column, in `required` order
};

struct CsvTable {
  std::vector<CsvRow> rows;
};

// Parses `text` (read from `path`, which names it in errors). Each row's fields are the
// values of the `required` columns, in that order. InvalidArgument on a broken rule.
absl::StatusOr<CsvTable> ParseCsvTable(std::string_view text, const std::string& path,
                                       const std::vector<std::string_view>& required);

// InvalidArgument "PATH:LINE: RULE: DETAIL".
absl::Status RuleError(const std::string& path, int line, std::string_view rule,
                       std::string_view detail);

// A finite decimal number written without spaces or sign prefix '+' ("0.5", "-1",
// "1e-3"); nullopt for anything else (empty, "nan", "inf", "1,5", " 2", "0x10").
std::optional<double> ParseFiniteNumber(std::string_view text);

}  // namespace tiergym

#endif  // TIERGYM_TRACES_BASE_CSV_TABLE_H_

#include "traces/base/csv_table.h"

#include <charconv>
#include <cmath>
#include <system_error>

#include "traces/base/strings.h"

namespace tiergym {
namespace {

bool IsBlank(std::string_view line) {
  return line.find_first_not_of(" \t") == std::string_view::npos;
}

std::string ColumnLine(const std::vector<std::string_view>& required) {
  std::string out;
  for (size_t i = 0; i < required.size(); ++i) StrAppend(&out, i ? "," : "", required[i]);
  return out;
}

}  // namespace

absl::Status RuleError(const std::string& path, int line, std::string_view rule,
                       std::string_view detail) {
  return absl::InvalidArgumentError(StrCat(path, ":", line, ": ", rule, ": ", detail));
}

std::optional<double> ParseFiniteNumber(std::string_view text) {
  if (text.empty()) return std::nullopt;
  double v = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || ptr != text.data() + text.size() || !std::isfinite(v)) {
    return std::nullopt;
  }
  return v;
}

absl::StatusOr<CsvTable> ParseCsvTable(std::string_view text, const std::string& path,
                                       const std::vector<std::string_view>& required) {
  if (!text.empty() && text.back() != '\n') {
    int last_line = 1;
    for (char c : text) last_line += c == '\n';
    return RuleError(path, last_line, "truncated-last-line",
                     "the file does not end with a newline; it may have been cut short");
  }
  // Split into lines (without their LF or CRLF ends), numbered from 1.
  std::vector<std::string_view> lines;
  for (size_t pos = 0; pos < text.size();) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    lines.push_back(line);
    pos = end + 1;
  }
  size_t header = 0;
  while (header < lines.size() && IsBlank(lines[header])) ++header;
  if (header == lines.size()) {
    return RuleError(path, lines.empty() ? 1 : static_cast<int>(lines.size()), "empty",
                     StrCat("no column line; expected \"", ColumnLine(required), "\""));
  }
  const int header_line = static_cast<int>(header) + 1;
  const std::vector<std::string_view> columns = SplitFields(lines[header]);
  for (size_t i = 0; i < columns.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (columns[j] == columns[i]) {
        return RuleError(path, header_line, "duplicate-column",
                         StrCat("column \"", columns[i], "\" appears twice (fields ", j + 1,
                                " and ", i + 1, ")"));
      }
    }
  }
  std::vector<size_t> index(required.size());
  for (size_t r = 0; r < required.size(); ++r) {
    size_t i = 0;
    while (i < columns.size() && columns[i] != required[r]) ++i;
    if (i == columns.size()) {
      return RuleError(path, header_line, "missing-column",
                       StrCat("the column line \"", lines[header], "\" has no \"", required[r],
                              "\" column; expected at least \"", ColumnLine(required), "\""));
    }
    index[r] = i;
  }
  CsvTable table;
  for (size_t l = header + 1; l < lines.size(); ++l) {
    if (IsBlank(lines[l])) continue;
    const int number = static_cast<int>(l) + 1;
    const std::vector<std::string_view> fields = SplitFields(lines[l]);
    if (fields.size() != columns.size()) {
      return RuleError(path, number, "field-count",
                       StrCat("expected ", columns.size(), " fields as in the column line, got ",
                              fields.size()));
    }
    CsvRow row;
    row.line = number;
    row.fields.reserve(required.size());
    for (size_t i : index) row.fields.push_back(fields[i]);
    table.rows.push_back(std::move(row));
  }
  return table;
}

}  // namespace tiergym

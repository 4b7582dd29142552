#include "traces/measured_runs.h"

#include <filesystem>
#include <optional>

#include "absl/container/flat_hash_map.h"
#include "traces/base/file.h"
#include "traces/base/status_macros.h"
#include "traces/base/strings.h"

namespace tiergym {
namespace {

constexpr std::string_view kColumnLine = "name,placement,runtime_ns";

absl::Status RuleError(const std::string& path, int line, std::string_view rule,
                       std::string_view detail) {
  return absl::InvalidArgumentError(StrCat(path, ":", line, ": ", rule, ": ", detail));
}

// Iterates over the lines of a text, giving each its 1-based number, without its
// line end (LF or CRLF).
class LineCursor {
 public:
  explicit LineCursor(std::string_view text) : text_(text) {}

  bool Next(std::string_view& line, int& number) {
    if (pos_ >= text_.size()) return false;
    size_t end = text_.find('\n', pos_);
    if (end == std::string_view::npos) end = text_.size();
    line = text_.substr(pos_, end - pos_);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    pos_ = end + 1;
    number = ++line_;
    return true;
  }

 private:
  std::string_view text_;
  size_t pos_ = 0;
  int line_ = 0;
};

bool IsBlank(std::string_view line) {
  return line.find_first_not_of(" \t") == std::string_view::npos;
}

}  // namespace

absl::StatusOr<std::vector<MeasuredRun>> ParseMeasuredRuns(std::string_view text,
                                                           const std::string& path) {
  if (!text.empty() && text.back() != '\n') {
    int last_line = 1;
    for (char c : text) last_line += c == '\n';
    return RuleError(path, last_line, "truncated-last-line",
                     "the file does not end with a newline; it may have been cut short");
  }
  LineCursor cursor(text);
  std::string_view line;
  int number = 0;
  bool have_header = false;
  while (cursor.Next(line, number)) {
    if (!IsBlank(line)) {
      have_header = true;
      break;
    }
  }
  if (!have_header) {
    return RuleError(path, number == 0 ? 1 : number, "empty",
                     StrCat("no column line; expected \"", kColumnLine, "\""));
  }

  const std::vector<std::string_view> columns = SplitFields(line);
  int name_col = -1, placement_col = -1, runtime_col = -1;
  for (size_t i = 0; i < columns.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (columns[j] == columns[i]) {
        return RuleError(path, number, "duplicate-column",
                         StrCat("column \"", columns[i], "\" appears twice (fields ", j + 1,
                                " and ", i + 1, ")"));
      }
    }
    if (columns[i] == "name") name_col = static_cast<int>(i);
    if (columns[i] == "placement") placement_col = static_cast<int>(i);
    if (columns[i] == "runtime_ns") runtime_col = static_cast<int>(i);
  }
  for (const auto& [col, col_name] :
       {std::pair{name_col, "name"}, std::pair{placement_col, "placement"},
        std::pair{runtime_col, "runtime_ns"}}) {
    if (col < 0) {
      return RuleError(path, number, "missing-column",
                       StrCat("the column line \"", line, "\" has no \"", col_name,
                              "\" column; expected \"", kColumnLine, "\""));
    }
  }

  std::vector<MeasuredRun> runs;
  absl::flat_hash_map<std::string, int> line_of_name;
  while (cursor.Next(line, number)) {
    if (IsBlank(line)) continue;
    const std::vector<std::string_view> fields = SplitFields(line);
    if (fields.size() != columns.size()) {
      return RuleError(path, number, "field-count",
                       StrCat("expected ", columns.size(), " fields as in the column line, got ",
                              fields.size()));
    }
    MeasuredRun run;
    run.line = number;
    run.name = std::string(fields[name_col]);
    if (run.name.empty()) return RuleError(path, number, "empty-name", "the run has no name");
    const auto [it, inserted] = line_of_name.emplace(run.name, number);
    if (!inserted) {
      return RuleError(path, number, "duplicate-name",
                       StrCat("run \"", run.name, "\" already appears on line ", it->second));
    }
    const std::string_view runtime = fields[runtime_col];
    const std::optional<uint64_t> runtime_ns = ParseDecimal<uint64_t>(runtime);
    if (!runtime_ns.has_value()) {
      return RuleError(path, number, "non-numeric",
                       StrCat("runtime_ns \"", runtime,
                              "\" is not a decimal integer of nanoseconds below 2^64"));
    }
    if (*runtime_ns == 0) {
      return RuleError(path, number, "zero-runtime",
                       StrCat("run \"", run.name, "\" has runtime_ns 0; a run takes time"));
    }
    run.runtime_ns = *runtime_ns;
    const std::string_view placement = fields[placement_col];
    if (placement.empty()) {
      return RuleError(path, number, "empty-placement",
                       StrCat("run \"", run.name, "\" names no placement file"));
    }
    run.placement_path = PathBeside(path, placement);
    std::error_code ec;
    if (!std::filesystem::is_regular_file(run.placement_path, ec)) {
      const bool exists = std::filesystem::exists(run.placement_path, ec);
      return RuleError(
          path, number, "missing-placement",
          StrCat("placement \"", placement, "\" of run \"", run.name, "\": ", run.placement_path,
                 exists ? " is not a regular file" : " does not exist"));
    }
    runs.push_back(std::move(run));
  }
  return runs;
}

absl::StatusOr<std::vector<MeasuredRun>> ReadMeasuredRuns(const std::string& path) {
  TG_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  return ParseMeasuredRuns(text, path);
}

absl::StatusOr<std::vector<std::pair<MeasuredRun, Placement>>> ReadMeasuredRunsWithPlacements(
    const std::string& path) {
  TG_ASSIGN_OR_RETURN(std::vector<MeasuredRun> runs, ReadMeasuredRuns(path));
  std::vector<std::pair<MeasuredRun, Placement>> out;
  out.reserve(runs.size());
  for (MeasuredRun& run : runs) {
    absl::StatusOr<Placement> placement = ReadPlacement(run.placement_path);
    if (!placement.ok()) {
      return absl::Status(placement.status().code(),
                          StrCat(path, ":", run.line, ": placement of run \"", run.name,
                                 "\": ", std::string(placement.status().message())));
    }
    out.emplace_back(std::move(run), *std::move(placement));
  }
  return out;
}

absl::Status WriteMeasuredRuns(const std::vector<MeasuredRun>& runs, const std::string& path) {
  std::error_code ec;
  const std::filesystem::path csv_dir =
      std::filesystem::absolute(std::filesystem::path(path), ec).parent_path().lexically_normal();
  if (ec) return ErrnoStatus(ec.value(), StrCat("resolving ", path));

  std::string out(kColumnLine);
  out.push_back('\n');
  absl::flat_hash_map<std::string, size_t> index_of_name;
  for (size_t i = 0; i < runs.size(); ++i) {
    const MeasuredRun& run = runs[i];
    const auto bad = [&](std::string_view why) {
      return absl::InvalidArgumentError(
          StrCat("cannot write run ", i, " (\"", run.name, "\") to ", path, ": ", why));
    };
    if (run.name.empty()) return bad("empty name");
    if (run.placement_path.empty()) return bad("empty placement path");
    if (run.runtime_ns == 0) return bad("runtime_ns is 0");
    for (const std::string* field : {&run.name, &run.placement_path}) {
      if (field->find_first_of(",\"\r\n") != std::string::npos) {
        return bad(StrCat("\"", *field,
                          "\" holds a comma, quote or line break, which the "
                          "unquoted CSV cannot carry"));
      }
    }
    const auto [it, inserted] = index_of_name.emplace(run.name, i);
    if (!inserted) return bad(StrCat("the name is already used by run ", it->second));

    std::filesystem::path placement = std::filesystem::absolute(run.placement_path, ec);
    if (ec) return ErrnoStatus(ec.value(), StrCat("resolving ", run.placement_path));
    placement = placement.lexically_normal();
    std::filesystem::path relative = placement.lexically_relative(csv_dir);
    if (relative.empty()) relative = placement;
    if (relative.string().find_first_of(",\"\r\n") != std::string::npos) {
      return bad(StrCat("the placement path as written, \"", relative.string(),
                        "\", holds a comma, quote or line break"));
    }
    StrAppend(&out, run.name, ",", relative.string(), ",", run.runtime_ns, "\n");
  }
  return WriteFileAtomically(path, out);
}

}  // namespace tiergym

#include "traces/corun_runs.h"

#include <filesystem>
#include <map>
#include <optional>
#include <utility>

#include "traces/base/csv_table.h"
#include "traces/base/file.h"
#include "traces/base/status_macros.h"
#include "traces/base/strings.h"

namespace tiergym {
namespace {

const std::vector<std::string_view> kColumns = {"scenario", "machine",    "tenant",
                                                "app",      "placement",  "start_ns",
                                                "read_pct", "runtime_ns", "solo_runtime_ns"};
enum Column { kScenario, kMachine, kTenant, kApp, kPlacement, kStart, kReadPct, kRuntime, kSolo };

}  // namespace

absl::StatusOr<std::vector<CorunRun>> ParseCorunRuns(std::string_view text,
                                                     const std::string& path) {
  TG_ASSIGN_OR_RETURN(CsvTable table, ParseCsvTable(text, path, kColumns));
  std::vector<CorunRun> runs;
  std::map<std::pair<std::string, std::string>, int> line_of_tenant;
  std::map<std::string, std::pair<std::string, int>> machine_of_scenario;
  for (const CsvRow& row : table.rows) {
    const int line = row.line;
    for (int c : {kScenario, kMachine, kTenant, kApp, kPlacement}) {
      if (row.fields[c].empty()) {
        return RuleError(path, line, "empty-field", StrCat(kColumns[c], " is empty"));
      }
    }
    CorunRun run;
    run.line = line;
    run.scenario = std::string(row.fields[kScenario]);
    run.machine = std::string(row.fields[kMachine]);
    run.tenant = std::string(row.fields[kTenant]);
    run.app = std::string(row.fields[kApp]);
    const auto [it, inserted] = line_of_tenant.emplace(std::pair{run.scenario, run.tenant}, line);
    if (!inserted) {
      return RuleError(path, line, "duplicate-tenant",
                       StrCat("tenant \"", run.tenant, "\" of scenario \"", run.scenario,
                              "\" already appears on line ", it->second));
    }
    const auto [m, first] = machine_of_scenario.emplace(run.scenario, std::pair{run.machine, line});
    if (!first && m->second.first != run.machine) {
      return RuleError(
          path, line, "machine-mismatch",
          StrCat("machine \"", run.machine, "\" but line ", m->second.second, " runs scenario \"",
                 run.scenario, "\" on \"", m->second.first, "\"; a scenario runs on one machine"));
    }
    for (const auto& [c, out] :
         {std::pair{kStart, &run.start_ns}, std::pair{kRuntime, &run.runtime_ns},
          std::pair{kSolo, &run.solo_runtime_ns}}) {
      const std::optional<uint64_t> v = ParseDecimal<uint64_t>(row.fields[c]);
      if (!v.has_value()) {
        return RuleError(path, line, "non-numeric",
                         StrCat(kColumns[c], " \"", row.fields[c],
                                "\" is not a decimal integer of nanoseconds below 2^64"));
      }
      *out = *v;
    }
    for (int c : {kRuntime, kSolo}) {
      if ((c == kRuntime ? run.runtime_ns : run.solo_runtime_ns) == 0) {
        return RuleError(
            path, line, "zero-runtime",
            StrCat(kColumns[c], " of tenant \"", run.tenant, "\" is 0; a run takes time"));
      }
    }
    const std::optional<double> read = ParseFiniteNumber(row.fields[kReadPct]);
    if (!read.has_value()) {
      return RuleError(path, line, "non-numeric",
                       StrCat("read_pct \"", row.fields[kReadPct], "\" is not a finite number"));
    }
    if (!(*read >= 0 && *read <= 100)) {
      return RuleError(path, line, "read-pct-range",
                       StrCat("read_pct ", row.fields[kReadPct], " is outside [0, 100]"));
    }
    run.read_pct = *read;
    run.placement_path = PathBeside(path, row.fields[kPlacement]);
    std::error_code ec;
    if (!std::filesystem::is_regular_file(run.placement_path, ec)) {
      return RuleError(path, line, "missing-placement",
                       StrCat("placement file ", run.placement_path, " (from \"",
                              row.fields[kPlacement], "\") does not exist or is not a file"));
    }
    runs.push_back(std::move(run));
  }
  return runs;
}

absl::StatusOr<std::vector<CorunRun>> ReadCorunRuns(const std::string& path) {
  TG_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  return ParseCorunRuns(text, path);
}

absl::Status WriteCorunRuns(const std::vector<CorunRun>& runs, const std::string& path) {
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  std::string out;
  for (size_t c = 0; c < kColumns.size(); ++c) StrAppend(&out, c ? "," : "", kColumns[c]);
  out += "\n";
  for (size_t i = 0; i < runs.size(); ++i) {
    const CorunRun& r = runs[i];
    std::string placement = r.placement_path;
    const std::filesystem::path p(placement);
    if (!dir.empty() && p.is_relative() == dir.is_relative()) {
      placement = std::filesystem::path(p).lexically_relative(dir).string();
      if (placement.empty()) placement = r.placement_path;
    }
    for (std::string_view field :
         {std::string_view(r.scenario), std::string_view(r.machine), std::string_view(r.tenant),
          std::string_view(r.app), std::string_view(placement)}) {
      if (field.empty() || field.find_first_of(",\"\r\n") != std::string_view::npos) {
        return absl::InvalidArgumentError(
            StrCat("co-run row ", i, ": field \"", field,
                   "\" is empty or holds a comma, quote or line break"));
      }
    }
    if (r.runtime_ns == 0 || r.solo_runtime_ns == 0) {
      return absl::InvalidArgumentError(StrCat("co-run row ", i, ": a runtime is 0"));
    }
    if (!(r.read_pct >= 0 && r.read_pct <= 100)) {
      return absl::InvalidArgumentError(StrCat("co-run row ", i, ": read_pct outside [0, 100]"));
    }
    StrAppend(&out, r.scenario, ",", r.machine, ",", r.tenant, ",", r.app, ",", placement, ",",
              r.start_ns, ",", r.read_pct, ",", r.runtime_ns, ",", r.solo_runtime_ns, "\n");
  }
  return WriteFileAtomically(path, out);
}

}  // namespace tiergym

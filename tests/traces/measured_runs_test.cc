#include "traces/measured_runs.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tiergym {
namespace {

using ::testing::HasSubstr;

std::string RunsDir() { return std::string(TIERGYM_TESTDATA_DIR) + "/runs"; }
std::string Data(const std::string& name) { return RunsDir() + "/" + name; }

// The error of reading testdata CSV `name`, which must be refused with InvalidArgument;
// the message must start with the CSV's path, which is cut off.
std::string ReadError(const std::string& name) {
  absl::StatusOr<std::vector<MeasuredRun>> runs = ReadMeasuredRuns(Data(name));
  EXPECT_FALSE(runs.ok()) << name << " was accepted";
  if (runs.ok()) return "";
  EXPECT_EQ(runs.status().code(), absl::StatusCode::kInvalidArgument) << runs.status();
  std::string message(runs.status().message());
  const std::string prefix = Data(name) + ":";
  EXPECT_EQ(message.substr(0, prefix.size()), prefix);
  return message.substr(std::min(prefix.size(), message.size()));
}

bool SameFile(const std::string& a, const std::string& b) {
  std::error_code ec;
  return std::filesystem::equivalent(a, b, ec);
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(MeasuredRunsTest, ReadsRunsResolvingPlacementsAgainstTheCsvDirectory) {
  absl::StatusOr<std::vector<MeasuredRun>> runs = ReadMeasuredRuns(Data("runs.csv"));
  ASSERT_TRUE(runs.ok()) << runs.status();
  ASSERT_EQ(runs->size(), 3u);
  EXPECT_EQ((*runs)[0].name, "hbm30");
  EXPECT_EQ((*runs)[0].placement_path, RunsDir() + "/placements/hbm30.json");
  EXPECT_EQ((*runs)[0].runtime_ns, 30412000000u);
  EXPECT_EQ((*runs)[0].line, 2);
  EXPECT_EQ((*runs)[1].name, "ddr");
  EXPECT_EQ((*runs)[1].runtime_ns, 41000000000u);
  EXPECT_EQ((*runs)[1].line, 3);
  EXPECT_EQ((*runs)[2].name, "ranges");
  EXPECT_TRUE(SameFile((*runs)[2].placement_path,
                       std::string(TIERGYM_TESTDATA_DIR) + "/placements/ranges.json"));
  EXPECT_EQ((*runs)[2].runtime_ns, 18446744073709551615u);
}

TEST(MeasuredRunsTest, ResolvesRelativeToTheCsvEvenFromAnotherWorkingDirectory) {
  const std::filesystem::path old_cwd = std::filesystem::current_path();
  std::filesystem::current_path(std::string(TIERGYM_TESTDATA_DIR));
  absl::StatusOr<std::vector<MeasuredRun>> runs = ReadMeasuredRuns("runs/runs.csv");
  std::filesystem::current_path(old_cwd);
  ASSERT_TRUE(runs.ok()) << runs.status();
  EXPECT_EQ((*runs)[0].placement_path, "runs/placements/hbm30.json");
}

TEST(MeasuredRunsTest, FindsColumnsByNameIgnoringOthersBlankLinesAndCrlf) {
  absl::StatusOr<std::vector<MeasuredRun>> runs = ReadMeasuredRuns(Data("reordered_crlf.csv"));
  ASSERT_TRUE(runs.ok()) << runs.status();
  ASSERT_EQ(runs->size(), 2u);
  EXPECT_EQ((*runs)[0].name, "hbm30");
  EXPECT_EQ((*runs)[0].placement_path, RunsDir() + "/placements/hbm30.json");
  EXPECT_EQ((*runs)[0].runtime_ns, 30412000000u);
  EXPECT_EQ((*runs)[0].line, 3);
  EXPECT_EQ((*runs)[1].name, "ddr");
  EXPECT_EQ((*runs)[1].line, 5);
}

TEST(MeasuredRunsTest, ColumnLineWithoutRowsHoldsNoRuns) {
  absl::StatusOr<std::vector<MeasuredRun>> runs = ReadMeasuredRuns(Data("header_only.csv"));
  ASSERT_TRUE(runs.ok()) << runs.status();
  EXPECT_TRUE(runs->empty());
}

TEST(MeasuredRunsTest, MissingCsvIsNotFound) {
  EXPECT_EQ(ReadMeasuredRuns(Data("no_such.csv")).status().code(), absl::StatusCode::kNotFound);
}

TEST(MeasuredRunsTest, RejectsEmptyFile) {
  EXPECT_EQ(ReadError("empty.csv"),
            "1: empty: no column line; expected \"name,placement,runtime_ns\"");
  EXPECT_EQ(ReadError("blank_only.csv"),
            "2: empty: no column line; expected \"name,placement,runtime_ns\"");
}

TEST(MeasuredRunsTest, RejectsMissingColumn) {
  EXPECT_EQ(ReadError("missing_column.csv"),
            "1: missing-column: the column line \"name,placement_path,runtime_ns\" has no "
            "\"placement\" column; expected \"name,placement,runtime_ns\"");
}

TEST(MeasuredRunsTest, RejectsDuplicateColumn) {
  EXPECT_EQ(ReadError("duplicate_column.csv"),
            "1: duplicate-column: column \"name\" appears twice (fields 1 and 4)");
}

TEST(MeasuredRunsTest, RejectsWrongFieldCount) {
  EXPECT_EQ(ReadError("field_count.csv"),
            "3: field-count: expected 3 fields as in the column line, got 2");
}

TEST(MeasuredRunsTest, RejectsNonNumericRuntime) {
  EXPECT_EQ(ReadError("non_numeric.csv"),
            "2: non-numeric: runtime_ns \"30.4e9\" is not a decimal integer of nanoseconds "
            "below 2^64");
  EXPECT_THAT(ReadError("runtime_overflow.csv"), HasSubstr("2: non-numeric: runtime_ns "
                                                           "\"99999999999999999999\""));
}

TEST(MeasuredRunsTest, RejectsZeroRuntime) {
  EXPECT_EQ(ReadError("zero_runtime.csv"),
            "3: zero-runtime: run \"hbm30\" has runtime_ns 0; a run takes time");
}

TEST(MeasuredRunsTest, RejectsEmptyName) {
  EXPECT_EQ(ReadError("empty_name.csv"), "2: empty-name: the run has no name");
}

TEST(MeasuredRunsTest, RejectsDuplicateNameNamingBothLines) {
  EXPECT_EQ(ReadError("duplicate_name.csv"),
            "4: duplicate-name: run \"hbm30\" already appears on line 2");
}

TEST(MeasuredRunsTest, RejectsTruncatedLastLine) {
  EXPECT_EQ(ReadError("truncated.csv"),
            "3: truncated-last-line: the file does not end with a newline; it may have been "
            "cut short");
}

TEST(MeasuredRunsTest, RejectsMissingPlacementNamingTheResolvedPath) {
  EXPECT_EQ(ReadError("missing_placement.csv"),
            "3: missing-placement: placement \"placements/hbm50.json\" of run \"hbm50\": " +
                RunsDir() + "/placements/hbm50.json does not exist");
}

TEST(MeasuredRunsTest, RejectsPlacementThatIsADirectory) {
  EXPECT_EQ(ReadError("placement_is_directory.csv"),
            "2: missing-placement: placement \"placements\" of run \"hbm30\": " + RunsDir() +
                "/placements is not a regular file");
}

TEST(MeasuredRunsTest, RejectsEmptyPlacement) {
  EXPECT_EQ(ReadError("empty_placement.csv"),
            "2: empty-placement: run \"hbm30\" names no placement file");
}

TEST(MeasuredRunsTest, LoadsEveryRunsPlacement) {
  auto runs = ReadMeasuredRunsWithPlacements(Data("runs.csv"));
  ASSERT_TRUE(runs.ok()) << runs.status();
  ASSERT_EQ(runs->size(), 3u);
  EXPECT_EQ((*runs)[0].first.name, "hbm30");
  EXPECT_TRUE((*runs)[0].second.uses_fractions());
  EXPECT_EQ((*runs)[1].second.default_tier, "ddr");
  EXPECT_EQ((*runs)[2].second.ranges.size(), 3u);
}

TEST(MeasuredRunsTest, BadPlacementFailsTheLoadNamingCsvLineAndPlacementFile) {
  auto runs = ReadMeasuredRunsWithPlacements(Data("bad_placement.csv"));
  ASSERT_FALSE(runs.ok());
  EXPECT_EQ(runs.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(std::string(runs.status().message()),
            Data("bad_placement.csv") + ":3: placement of run \"bad\": " + RunsDir() +
                "/placements/bad.json:1:41: fractions.hbm: fraction 2 is outside [0, 1]");
}

class MeasuredRunsWriteTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ("measured_runs_test_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_ / "out" / "placements");
    std::filesystem::create_directories(dir_ / "elsewhere");
    for (const char* p : {"out/placements/a.json", "elsewhere/b.json"}) {
      std::ofstream(dir_ / p) << "{\"default\": \"ddr\"}\n";
    }
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::filesystem::path dir_;
};

TEST_F(MeasuredRunsWriteTest, WritesPathsRelativeToTheCsvAndReadsThemBack) {
  std::vector<MeasuredRun> runs = {
      {.name = "a", .placement_path = (dir_ / "out/placements/a.json").string(), .runtime_ns = 5},
      {.name = "b",
       .placement_path = (dir_ / "elsewhere/b.json").string(),
       .runtime_ns = 18446744073709551615u},
  };
  const std::string csv = (dir_ / "out" / "runs.csv").string();
  ASSERT_TRUE(WriteMeasuredRuns(runs, csv).ok());
  EXPECT_EQ(Slurp(csv),
            "name,placement,runtime_ns\n"
            "a,placements/a.json,5\n"
            "b,../elsewhere/b.json,18446744073709551615\n");
  absl::StatusOr<std::vector<MeasuredRun>> again = ReadMeasuredRuns(csv);
  ASSERT_TRUE(again.ok()) << again.status();
  ASSERT_EQ(again->size(), 2u);
  for (size_t i = 0; i < runs.size(); ++i) {
    EXPECT_EQ((*again)[i].name, runs[i].name);
    EXPECT_EQ((*again)[i].runtime_ns, runs[i].runtime_ns);
    EXPECT_TRUE(SameFile((*again)[i].placement_path, runs[i].placement_path))
        << (*again)[i].placement_path;
  }
}

TEST_F(MeasuredRunsWriteTest, RefusesRunsThatCouldNotBeReadBack) {
  const std::string csv = (dir_ / "out" / "runs.csv").string();
  const std::string a = (dir_ / "out/placements/a.json").string();
  const auto refused = [&](std::vector<MeasuredRun> runs) {
    absl::Status s = WriteMeasuredRuns(runs, csv);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    return std::string(s.message());
  };
  EXPECT_THAT(refused({{.name = "", .placement_path = a, .runtime_ns = 1}}),
              HasSubstr("empty name"));
  EXPECT_THAT(refused({{.name = "x,y", .placement_path = a, .runtime_ns = 1}}), HasSubstr("comma"));
  EXPECT_THAT(refused({{.name = "x", .placement_path = a, .runtime_ns = 0}}),
              HasSubstr("runtime_ns is 0"));
  EXPECT_THAT(refused({{.name = "x", .placement_path = "", .runtime_ns = 1}}),
              HasSubstr("empty placement path"));
  EXPECT_THAT(refused({{.name = "x", .placement_path = a, .runtime_ns = 1},
                       {.name = "x", .placement_path = a, .runtime_ns = 2}}),
              HasSubstr("already used by run 0"));
  EXPECT_FALSE(std::filesystem::exists(csv));
}

}  // namespace
}  // namespace tiergym

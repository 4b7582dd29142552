// Tests of `tiergym-prof sweep` on the test application: curves.csv rows in the
// sensitivity-csv format, resumption, and refusals. The values measured on this VM are
// not checked beyond being plausible: the test is about the mechanics.
#include "profiler/sweep.h"

#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/run_tiergym.h"
#include "traces/base/file.h"

namespace tiergym::prof {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

const std::string kBin = TIERGYM_BIN_DIR;

using CommandResult = ::tiergym::testing::Result;
using ::tiergym::testing::Shell;

std::vector<std::vector<std::string>> ReadCsv(const std::string& path) {
  std::vector<std::vector<std::string>> rows;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> fields;
    size_t pos = 0;
    while (true) {
      const size_t comma = line.find(',', pos);
      fields.push_back(line.substr(pos, comma - pos));
      if (comma == std::string::npos) break;
      pos = comma + 1;
    }
    rows.push_back(fields);
  }
  return rows;
}

TEST(SweepLevelsTest, SpansTenToOneHundredPercent) {
  const std::vector<double> l = SweepLevels(20.0, 4);
  ASSERT_EQ(l.size(), 4u);
  EXPECT_DOUBLE_EQ(l[0], 2.0);
  EXPECT_DOUBLE_EQ(l[1], 8.0);
  EXPECT_DOUBLE_EQ(l[3], 20.0);
  EXPECT_EQ(SweepLevels(5.0, 1), std::vector<double>{5.0});
}

class SweepCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tiergym_sweep." + std::to_string(::getpid()));
    fs::create_directories(dir_);
    curves_ = (dir_ / "curves.csv").string();
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  CommandResult Sweep(const std::string& options, const std::string& app_args = "") {
    return Shell(kBin + "/tiergym-prof sweep --no-progress --buffer-mb 8 --solo-repeats 1 -o " +
                 curves_ + " " + options + " -- " + kBin +
                 "/tiergym-testapp --size-mb 2 --chase-mb 2 --iterations 1 --chase-steps 20000" +
                 app_args);
  }
  fs::path dir_;
  std::string curves_;
};

TEST_F(SweepCommandTest, WritesCurvesAndResumes) {
  const CommandResult first = Sweep("--levels 2 --read-pcts 50 --max-gbps 1");
  ASSERT_EQ(first.exit_code, 0) << first.out;
  EXPECT_THAT(first.out, HasSubstr("2 points measured, 0 already there"));
  auto rows = ReadCsv(curves_);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0],
            (std::vector<std::string>{"app", "read_pct", "interference_gbps", "normalized_perf",
                                      "runtime_ns", "solo_runtime_ns"}));
  EXPECT_EQ(rows[1][0], "tiergym-testapp");
  EXPECT_EQ(rows[1][1], "50");
  EXPECT_EQ(rows[1][2], "0.1000");
  EXPECT_EQ(rows[2][2], "1.0000");
  for (size_t i = 1; i < rows.size(); ++i) {
    const double perf = std::stod(rows[i][3]);
    EXPECT_GT(perf, 0.0);
    EXPECT_LT(perf, 10.0);
    EXPECT_GT(std::stoull(rows[i][4]), 0u);
  }
  auto state_before = ReadFile(curves_ + ".state.json");
  ASSERT_TRUE(state_before.ok());

  // Same sweep with one more read share: only the new points are measured.
  const CommandResult second = Sweep("--levels 2 --read-pcts 50,100 --max-gbps 1");
  ASSERT_EQ(second.exit_code, 0) << second.out;
  EXPECT_THAT(second.out, HasSubstr("2 points measured, 2 already there"));
  rows = ReadCsv(curves_);
  ASSERT_EQ(rows.size(), 5u);
  EXPECT_EQ(rows[3][1], "100");
  EXPECT_EQ(*ReadFile(curves_ + ".state.json"), *state_before);  // solo runs reused
}

TEST_F(SweepCommandTest, CalibratesTheGeneratorsMaximum) {
  const CommandResult r = Sweep("--levels 1 --read-pcts 75 --calibrate-s 0.2");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  auto state = ReadFile(curves_ + ".state.json");
  ASSERT_TRUE(state.ok());
  EXPECT_THAT(*state, HasSubstr("\"75\": "));
  auto rows = ReadCsv(curves_);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_GT(std::stod(rows[1][2]), 0.1);  // the level is the measured maximum
}

TEST_F(SweepCommandTest, RefusesTheStateOfAnotherSweepAndAnotherLayout) {
  ASSERT_EQ(Sweep("--levels 1 --read-pcts 50 --max-gbps 1").exit_code, 0);
  const CommandResult other = Sweep("--levels 1 --read-pcts 50 --max-gbps 1", " --threads 2");
  EXPECT_EQ(other.exit_code, 1);
  EXPECT_THAT(other.out, HasSubstr("belongs to another sweep"));

  fs::remove(curves_ + ".state.json");
  std::ofstream(curves_) << "target,interferer,normalized_perf\n";  // a pairs.csv
  const CommandResult layout = Sweep("--levels 1 --read-pcts 50 --max-gbps 1");
  EXPECT_EQ(layout.exit_code, 1);
  EXPECT_THAT(layout.out, HasSubstr("column-line"));
}

TEST_F(SweepCommandTest, RefusesReadSharesOutsideTheModel) {
  const CommandResult r = Sweep("--levels 1 --read-pcts 40 --max-gbps 1");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.out, HasSubstr("outside 50..100"));
}

}  // namespace
}  // namespace tiergym::prof

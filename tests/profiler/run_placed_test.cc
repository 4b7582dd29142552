// Tests of placed runs: the schedule reader (every refusal rule on a real file), page
// placement on this process, and `tiergym-prof run-placed` on the test application.
#include "profiler/run_placed.h"

#include <numa.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "profiler/perf_session.h"
#include "tests/run_tiergym.h"
#include "traces/measured_runs.h"

namespace tiergym::prof {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

const std::string kData = std::string(TIERGYM_TESTDATA_DIR) + "/../../profiler/testdata/schedules/";
const std::string kBin = TIERGYM_BIN_DIR;

TEST(ReadScheduleTest, ReadsStepsAndTheirPlacements) {
  auto steps = ReadSchedule(kData + "valid.json");
  ASSERT_TRUE(steps.ok()) << steps.status();
  ASSERT_EQ(steps->size(), 2u);
  EXPECT_EQ((*steps)[0].from_phase, 2u);
  EXPECT_EQ((*steps)[0].placement.default_tier, "ddr");
  EXPECT_EQ((*steps)[1].from_phase, 4u);
  ASSERT_EQ((*steps)[1].placement.ranges.size(), 1u);
  EXPECT_EQ((*steps)[1].placement.ranges[0].tier, "hbm");
  EXPECT_THAT((*steps)[1].placement_path, HasSubstr("schedules/hbm_a.json"));
}

struct Refusal {
  const char* file;
  const char* rule;
};

class ScheduleRefusalTest : public ::testing::TestWithParam<Refusal> {};

TEST_P(ScheduleRefusalTest, RefusesTheFileNamingTheRule) {
  auto steps = ReadSchedule(kData + GetParam().file);
  ASSERT_FALSE(steps.ok());
  EXPECT_EQ(steps.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string message(steps.status().message());
  EXPECT_THAT(message, HasSubstr(GetParam().file));  // FILE:LINE:COL
  EXPECT_THAT(message, HasSubstr(GetParam().rule));
}

INSTANTIATE_TEST_SUITE_P(Rules, ScheduleRefusalTest,
                         ::testing::Values(Refusal{"bad_not_increasing.json",
                                                   "from_phase must increase"},
                                           Refusal{"bad_unknown_key.json", "tier"},
                                           Refusal{"bad_empty_steps.json", "empty"},
                                           Refusal{"bad_missing_placement.json", "cannot be read"},
                                           Refusal{"bad_fractions.json", "fractions"},
                                           Refusal{"bad_phase_not_integer.json", "from_phase"},
                                           Refusal{"bad_top_level_key.json", "step"}),
                         [](const auto& info) {
                           std::string name = info.param.file;
                           name = name.substr(0, name.find('.'));
                           return name;
                         });

TEST(ApplyPlacementTest, PlacesTheTouchedPagesOfARangeOnThisProcess) {
  if (numa_available() < 0) GTEST_SKIP() << "no NUMA support in this kernel";
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const size_t pages = 256;
  auto* buf = static_cast<char*>(
      ::mmap(nullptr, pages * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(buf, MAP_FAILED);
  for (size_t i = 0; i < pages / 2; ++i) buf[i * page] = 1;  // touch the first half
  Placement p;
  p.default_tier = "ddr";
  const uint64_t start = reinterpret_cast<uint64_t>(buf);
  p.ranges.push_back(PlacementRange{start, start + pages * page, "hbm"});
  // On a single-node machine both tiers are node 0: the pages are found in place; on a
  // two-node machine hbm=1 would move them.
  const int far_node = numa_max_node();
  auto counts = ApplyPlacement(::getpid(), p, {}, {{"ddr", 0}, {"hbm", far_node}});
  ASSERT_TRUE(counts.ok()) << counts.status();
  EXPECT_EQ(counts->pages, pages);
  EXPECT_EQ(counts->absent, pages / 2);
  EXPECT_EQ(counts->moved + counts->in_place, pages / 2);
  EXPECT_EQ(counts->failed, 0u);
  if (far_node > 0) {
    EXPECT_EQ(counts->moved, pages / 2);
  }
  // Back to ddr: the pages the earlier placement moved are named by previous_ranges.
  Placement back;
  back.default_tier = "ddr";
  auto undo = ApplyPlacement(::getpid(), back, p.ranges, {{"ddr", 0}, {"hbm", far_node}});
  ASSERT_TRUE(undo.ok()) << undo.status();
  EXPECT_EQ(undo->pages, pages);
  EXPECT_EQ(undo->moved + undo->in_place, pages / 2);
  ::munmap(buf, pages * page);
}

TEST(ApplyPlacementTest, RefusesATierWithoutANode) {
  Placement p;
  p.default_tier = "ddr";
  p.ranges.push_back(PlacementRange{0x1000, 0x2000, "remote"});
  auto counts = ApplyPlacement(::getpid(), p, {}, {{"ddr", 0}});
  EXPECT_EQ(counts.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(counts.status().message()), HasSubstr("--tier-node remote=N"));
}

using CommandResult = ::tiergym::testing::Result;
using ::tiergym::testing::Shell;

class RunPlacedCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tiergym_run_placed." + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string App() const {
    return kBin +
           "/tiergym-testapp --print-layout --size-mb 4 --chase-mb 4 --iterations 2 "
           "--chase-steps 200000";
  }
  fs::path dir_;
};

TEST_F(RunPlacedCommandTest, PlacesAnArrayAndAppendsRuns) {
  // A first run prints where array a lives (ASLR is off, so it stays there).
  const fs::path all_ddr = dir_ / "all_ddr.json";
  std::ofstream(all_ddr) << "{\"default\": \"ddr\"}\n";
  const std::string runs = (dir_ / "runs.csv").string();
  const std::string base = kBin +
                           "/tiergym-prof run-placed --tier-node ddr=0 --tier-node hbm=0 "
                           "--interval-ms 10 --runs " +
                           runs;
  const CommandResult first = Shell(base + " --placement " + all_ddr.string() + " -- " + App());
  ASSERT_EQ(first.exit_code, 0) << first.out;
  const size_t at = first.out.find("a=0x");
  ASSERT_NE(at, std::string::npos) << first.out;
  const uint64_t a = std::stoull(first.out.substr(at + 2), nullptr, 16);
  const fs::path a_on_hbm = dir_ / "a_on_hbm.json";
  char text[200];
  std::snprintf(text, sizeof text,
                "{\"default\": \"ddr\", \"ranges\": [{\"start\": \"0x%llx\", \"end\": \"0x%llx\","
                " \"tier\": \"hbm\"}]}\n",
                static_cast<unsigned long long>(a & ~uint64_t{4095}),
                static_cast<unsigned long long>(a + (4 << 20)));
  std::ofstream(a_on_hbm) << text;

  const CommandResult placed = Shell(base + " --placement " + a_on_hbm.string() + " -- " + App());
  ASSERT_EQ(placed.exit_code, 0) << placed.out;
  EXPECT_THAT(placed.out, HasSubstr("run a_on_hbm: runtime"));
  // The array's pages were found and placed (in place on a single node).
  const size_t pages_at = placed.out.find("pages ");
  ASSERT_NE(pages_at, std::string::npos);
  EXPECT_GT(std::stoull(placed.out.substr(pages_at + 6)), 1000u) << placed.out;

  const CommandResult again = Shell(base + " --placement " + a_on_hbm.string() + " -- " + App());
  ASSERT_EQ(again.exit_code, 0) << again.out;
  auto read = ReadMeasuredRuns(runs);
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_EQ(read->size(), 3u);
  EXPECT_EQ((*read)[0].name, "all_ddr");
  EXPECT_EQ((*read)[1].name, "a_on_hbm");
  EXPECT_EQ((*read)[2].name, "a_on_hbm-2");
  EXPECT_GT((*read)[2].runtime_ns, 0u);
}

TEST_F(RunPlacedCommandTest, SwitchesPlacementsAtPhasemarks) {
  if (!UprobePmuType().ok() || (::geteuid() != 0 && PerfEventParanoid() > 0)) {
    GTEST_SKIP() << "phasemarks need the uprobe PMU and root (or perf_event_paranoid <= 0)";
  }
  const CommandResult r =
      Shell(kBin + "/tiergym-prof run-placed --tier-node ddr=0 --tier-node hbm=0 --placement " +
            kData + "all_ddr.json --schedule " + kData + "valid.json -- " + App());
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("phasemarks 12,"));  // 1 + 5 x 2 + 1 calls
  const size_t at = r.out.find("steps applied ");
  ASSERT_NE(at, std::string::npos) << r.out;
  EXPECT_GE(std::stoi(r.out.substr(at + 14)), 1) << r.out;
}

TEST_F(RunPlacedCommandTest, RefusesFractionPlacements) {
  const CommandResult r = Shell(kBin +
                                "/tiergym-prof run-placed --tier-node ddr=0 "
                                "--tier-node hbm=0 --placement " +
                                kData + "fractions.json -- true");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.out, HasSubstr("fractions"));
}

}  // namespace
}  // namespace tiergym::prof

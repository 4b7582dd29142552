#include "traces/profile.h"

#include <filesystem>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "traces/trace_csv.h"
#include "traces/trace_file.h"

namespace tiergym {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

// One run: two phases whose instruction counts are scaled by `instr_scale`.
Trace MakeRun(const std::string& device, const std::string& app = "minife", int phases = 2,
              double instr_scale = 1.0, uint32_t page_size = 4096) {
  TraceBuilder b(device + ".csv", TraceMetadata::Make(app, device, "", std::nullopt, page_size));
  uint64_t t = 0;
  for (int p = 0; p < phases; ++p) {
    b.AddMark({t, 0, static_cast<uint32_t>(p),
               p == 0 ? 0 : static_cast<uint64_t>(1000000 * instr_scale)});
    b.AddSample(t + 1, 0, static_cast<uint32_t>(p), 10, 0x1000 * (p + 1));
    t += 100;
  }
  b.SetEnd({t, 0, static_cast<uint32_t>(phases - 1), static_cast<uint64_t>(1000000 * instr_scale)});
  return *b.Finish();
}

std::string FreshDir(const std::string& name) {
  std::string dir = ::testing::TempDir() + "/profile_test_" + name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

TEST(ProfileTest, LoadsOneRunPerDeviceFromADirectoryOfMixedFormats) {
  const std::string dir = FreshDir("mixed");
  ASSERT_TRUE(WriteTraceCsv(MakeRun("ddr"), dir + "/a.csv").ok());
  ASSERT_TRUE(
      SaveTrace(MakeRun("hbm", "minife", 2, 0.99), dir + "/b.tgt", TraceFormat::kBinary).ok());
  std::ofstream(dir + "/README.txt") << "not a trace";  // other files are not traces
  auto p = LoadProfile(dir);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->app(), "minife");
  EXPECT_EQ(p->devices(), (std::vector<std::string>{"ddr", "hbm"}));
  ASSERT_NE(p->Find("hbm"), nullptr);
  EXPECT_EQ(p->Find("remote"), nullptr);
  EXPECT_EQ(p->num_phases(), 2u);
  // Instruction counts of each phase differ by 1 %.
  EXPECT_NEAR(p->instruction_spread().max, 0.01, 1e-9);
  EXPECT_NEAR(p->instruction_spread().mean, 0.01, 1e-9);
}

TEST(ProfileTest, DeviceComesFromTheHeaderNotTheFileName) {
  const std::string dir = FreshDir("names");
  ASSERT_TRUE(WriteTraceCsv(MakeRun("hbm"), dir + "/ddr.csv").ok());
  auto p = LoadProfile(dir);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->devices(), std::vector<std::string>{"hbm"});
}

TEST(ProfileTest, RefusesTwoRunsForOneDevice) {
  auto p = Profile::FromRuns("dup", {MakeRun("ddr"), MakeRun("ddr")});
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(std::string(p.status().message()), HasSubstr("two runs for device 'ddr'"));
}

TEST(ProfileTest, RefusesRunsOfDifferentApps) {
  auto p = Profile::FromRuns("apps", {MakeRun("ddr", "minife"), MakeRun("hbm", "lulesh")});
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(std::string(p.status().message()), HasSubstr("different applications"));
}

TEST(ProfileTest, RefusesRunsWithDifferentNumbersOfPhases) {
  auto p = Profile::FromRuns("phases", {MakeRun("ddr", "minife", 2), MakeRun("hbm", "minife", 3)});
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(std::string(p.status().message()),
              HasSubstr("disagree on the number of phases: ddr.csv has 2, hbm.csv has 3"));
}

TEST(ProfileTest, RefusesRunsWithDifferentPageSizes) {
  auto p = Profile::FromRuns("pages", {MakeRun("ddr"), MakeRun("hbm", "minife", 2, 1.0, 8192)});
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(std::string(p.status().message()), HasSubstr("page_size"));
}

TEST(ProfileTest, ABadRunFailsTheWholeProfileWithItsOwnError) {
  const std::string dir = FreshDir("bad");
  ASSERT_TRUE(WriteTraceCsv(MakeRun("ddr"), dir + "/ddr.csv").ok());
  fs::copy_file(std::string(TIERGYM_TESTDATA_DIR) + "/csv/bad_unsorted_time.csv", dir + "/hbm.csv");
  auto p = LoadProfile(dir);
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(std::string(p.status().message()), HasSubstr("hbm.csv:6: unsorted-time"));
}

TEST(ProfileTest, MissingOrEmptyDirectoryIsNotFound) {
  EXPECT_EQ(LoadProfile(FreshDir("empty")).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(LoadProfile("/nonexistent/profile").status().code(), absl::StatusCode::kNotFound);
}

TEST(ProfileTest, ASingleFileIsAProfileOfOneRun) {
  const std::string dir = FreshDir("single");
  ASSERT_TRUE(WriteTraceCsv(MakeRun("ddr"), dir + "/x.csv").ok());
  auto p = LoadProfile(dir + "/x.csv");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->runs().size(), 1u);
}

}  // namespace
}  // namespace tiergym

// `tiergym-prof profile`: from a command to a served profile in one step, and on bad input
// a message that says what to do with nothing left at --out (nor its .partial).
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "profiler/perf_session.h"
#include "tests/run_tiergym.h"
#include "traces/profile.h"

namespace tiergym::prof {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;
using ::tiergym::testing::Shell;

const std::string kBin = TIERGYM_BIN_DIR;
const std::string kPrograms = TIERGYM_PROF_PROGRAMS_DIR;

class ProfileCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!UprobePmuType().ok()) GTEST_SKIP() << "no uprobe PMU: phasemarks cannot be recorded";
    if (::geteuid() != 0 && PerfEventParanoid() > 0) {
      GTEST_SKIP() << "uprobe events need root or kernel.perf_event_paranoid <= 0";
    }
    dir_ = fs::temp_directory_path() / ("tiergym_profile." + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    out_ = (dir_ / "prof").string();
  }
  void TearDown() override {
    std::error_code ec;
    if (!dir_.empty()) fs::remove_all(dir_, ec);
  }
  ::tiergym::testing::Result Profile(const std::string& args) {
    return Shell(kBin + "/tiergym-prof profile --out " + out_ + " " + args);
  }
  void ExpectNothingWritten() {
    EXPECT_FALSE(fs::exists(out_));
    EXPECT_FALSE(fs::exists(out_ + ".partial"));
  }
  fs::path dir_;
  std::string out_;
};

TEST_F(ProfileCliTest, TurnsACommandIntoAProfileForTheMachineAndSaysHowToServeIt) {
  const auto r = Profile("--machine knl -- " + kPrograms + "/prof-test-access_mix hotcold 0.2");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("tiergym serve --machine knl --profiles "));
  EXPECT_THAT(r.out, HasSubstr("gymnasium.make(\"tiergym/TierPlacement-v1\", machine=\"knl\""));
  auto profile = LoadProfile(out_ + "/profile");
  ASSERT_TRUE(profile.ok()) << profile.status();
  EXPECT_NE(profile->Find("ddr"), nullptr);
  EXPECT_NE(profile->Find("hbm"), nullptr);
  EXPECT_GT(profile->Find("hbm")->num_samples(), 100u);
  EXPECT_TRUE(fs::exists(out_ + "/recording/ddr.csv"));
  EXPECT_FALSE(fs::exists(out_ + ".partial"));
  // An existing --out is never overwritten.
  const auto again = Profile("--machine knl -- " + kPrograms + "/prof-test-access_mix read 0.1");
  EXPECT_EQ(again.exit_code, 1) << again.out;
  EXPECT_THAT(again.out, HasSubstr("exists: remove it or choose another --out"));
}

TEST_F(ProfileCliTest, RefusesAOneTierMachineBeforeRecording) {
  const fs::path one = dir_ / "one.json";
  std::ofstream(one) << R"({"name": "one", "cores": 4, "tiers": [{"name": "ddr",)"
                     << R"( "capacity_bytes": 1073741824, "bandwidth_gbps": 90,)"
                     << R"( "latency_ns": 130, "migration_gbps": 5}]})";
  const auto r = Profile("--machine " + one.string() + " -- true");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_THAT(r.out, HasSubstr("has one tier"));
  EXPECT_THAT(r.out, HasSubstr("two or more"));
  EXPECT_THAT(r.out, Not(HasSubstr("recording")));
  ExpectNothingWritten();
}

TEST_F(ProfileCliTest, ACommandThatFailsLeavesNoProfile) {
  const auto r = Profile("--machine knl -- sh -c 'exit 3'");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_THAT(r.out, HasSubstr("the recording failed"));
  EXPECT_THAT(r.out, HasSubstr("run to completion alone first"));
  ExpectNothingWritten();
}

TEST_F(ProfileCliTest, AnUnknownSymbolIsNamed) {
  const auto r = Profile("--machine knl --phasemark-at no_such_function_here -- " + kPrograms +
                         "/prof-test-access_mix read 0.1");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_THAT(r.out, HasSubstr("no_such_function_here"));
  ExpectNothingWritten();
}

TEST_F(ProfileCliTest, ARecordingWithoutSamplesSaysWhatToDo) {
  // One tick per second of CPU time: `true` ends long before the first.
  const auto r = Profile("--machine knl --period 1000000000 -- true");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_THAT(r.out, HasSubstr("no samples"));
  EXPECT_THAT(r.out, HasSubstr("smaller --period"));
  ExpectNothingWritten();
}

}  // namespace
}  // namespace tiergym::prof

// The recorder never harms the program it records. Small programs that do
// what broke the first software backend (four threads writing shared arrays with their
// own malloc arenas; heap buffers through read/write/pread/pwrite/readv/writev and raw
// syscall(); an allocator churning sizes on both sides of the mmap threshold with its own
// mmap/mremap/mprotect; fork, exec, its own signal handlers and atexit) are recorded
// kRuns times each with the software backend. Every run must end exactly as the program
// does alone: exit 0, no signal, no EFAULT, the same standard output. A 1 % failure rate
// would fail one of the 80 runs with probability 55 %, a 5 % rate with 98 %. The traces
// must validate, load as a profile (one run per device) and estimate.
//
// And the recorder must say when a run was harmed: a command that dies by a signal is a
// failed recording (exit 1, "RECORDING FAILED"), and so is one whose system calls failed
// with EFAULT (counted where tracefs is mounted).
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
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
using ::tiergym::testing::RunShell;
using ::tiergym::testing::Shell;

const std::string kBin = TIERGYM_BIN_DIR;
const std::string kPrograms = TIERGYM_PROF_PROGRAMS_DIR;
constexpr int kRuns = 20;

std::string Slurp(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class RecordRobustnessTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (!UprobePmuType().ok()) GTEST_SKIP() << "no uprobe PMU: phasemarks cannot be recorded";
    if (::geteuid() != 0 && PerfEventParanoid() > 0) {
      GTEST_SKIP() << "uprobe events need root or kernel.perf_event_paranoid <= 0";
    }
    dir_ = fs::temp_directory_path() / ("tiergym_robustness." + std::to_string(::getpid()));
    fs::create_directories(dir_ / "profile");
  }
  void TearDown() override {
    std::error_code ec;
    if (!dir_.empty()) fs::remove_all(dir_, ec);
  }
  fs::path dir_;
};

TEST_P(RecordRobustnessTest, EndsExactlyAsItDoesAloneEveryTimeAndItsTracesEstimate) {
  const std::string program = kPrograms + "/prof-test-" + GetParam();
  const auto alone = RunShell(program + " 2>/dev/null");
  ASSERT_EQ(alone.exit_code, 0) << alone.out;
  ASSERT_FALSE(alone.out.empty());

  int signals = 0, efaults = 0, failed = 0, different = 0;
  std::string first_problem;
  for (int run = 0; run < kRuns; ++run) {
    const std::string device = run % 2 == 0 ? "ddr" : "hbm";
    const fs::path trace = run < 2 ? dir_ / "profile" / (device + ".csv")
                                   : dir_ / ("run" + std::to_string(run) + ".csv");
    const fs::path summary = dir_ / "summary.txt";
    // The program's stdout is captured; the recorder's summary (and the program's
    // stderr, which it writes only on failure) go to a file.
    const auto r = RunShell(kBin + "/tiergym-prof record --backend software --device " + device +
                            " -o " + trace.string() + " -- " + program + " 2>" + summary.string());
    const std::string text = Slurp(summary);
    const bool signaled = text.find("killed by signal") != std::string::npos;
    const size_t at = text.find("EFAULT returns: ");
    const bool efault = r.out.find("EFAULT") != std::string::npos ||
                        (at != std::string::npos && text.compare(at + 16, 1, "0") != 0 &&
                         text.compare(at + 16, 3, "not") != 0);
    signals += signaled;
    efaults += efault;
    failed += r.exit_code != 0;
    different += r.out != alone.out;
    if (first_problem.empty() && (signaled || efault || r.exit_code != 0 || r.out != alone.out)) {
      first_problem = "run " + std::to_string(run) + ": exit " + std::to_string(r.exit_code) +
                      "\n" + r.out + "\n" + text;
    }
    if (run < 2) {
      EXPECT_THAT(text, HasSubstr("recording succeeded")) << text;
      // Every process image hands its userfaultfd over: lifecycle execs itself once.
      EXPECT_THAT(text, HasSubstr(GetParam() == "lifecycle" ? "write tracking: 2 processes"
                                                            : "write tracking: 1 processes"))
          << text;
    }
  }
  EXPECT_EQ(signals, 0) << first_problem;
  EXPECT_EQ(efaults, 0) << first_problem;
  EXPECT_EQ(failed, 0) << first_problem;
  EXPECT_EQ(different, 0) << first_problem;
  RecordProperty("runs", kRuns);
  RecordProperty("signals", signals);
  RecordProperty("efaults", efaults);
  RecordProperty("different_output", different);

  for (const char* device : {"ddr", "hbm"}) {
    const std::string path = (dir_ / "profile" / (std::string(device) + ".csv")).string();
    const auto v = Shell(kBin + "/tiergym trace validate " + path);
    EXPECT_EQ(v.exit_code, 0) << v.out;
  }
  auto profile = LoadProfile((dir_ / "profile").string());
  ASSERT_TRUE(profile.ok()) << profile.status();
  EXPECT_GT(profile->Find("ddr")->num_samples(), 100u);
  const fs::path placement = dir_ / "all_hbm.json";
  std::ofstream(placement) << "{\"default\": \"hbm\", \"ranges\": []}\n";
  const auto est = Shell(kBin + "/tiergym estimate --profile " + (dir_ / "profile").string() +
                         " --placement " + placement.string());
  EXPECT_EQ(est.exit_code, 0) << est.out;
}

INSTANTIATE_TEST_SUITE_P(Programs, RecordRobustnessTest,
                         ::testing::Values("mt_writers", "syscall_buffers", "alloc_churn",
                                           "lifecycle"));

class RecordHarmReportTest : public RecordRobustnessTest {};

TEST_F(RecordHarmReportTest, CallsARunThatEndsByASignalAFailure) {
  const std::string out = (dir_ / "segv.csv").string();
  const auto r = Shell(kBin + "/tiergym-prof record --backend software --device ddr -o " + out +
                       " -- sh -c 'kill -SEGV $$'");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_THAT(r.out, HasSubstr("RECORDING FAILED: the command was killed by signal 11"));
  EXPECT_THAT(r.out, Not(HasSubstr("recording succeeded")));
}

TEST_F(RecordHarmReportTest, CallsARunWhoseSystemCallsFailWithEfaultAFailure) {
  const std::string out = (dir_ / "efault.csv").string();
  const auto r = Shell(kBin + "/tiergym-prof record --backend software --device ddr -o " + out +
                       " -- " + kPrograms + "/prof-test-syscall_buffers --bad-pointer");
  if (r.out.find("EFAULT returns: not counted") != std::string::npos) {
    GTEST_SKIP() << "EFAULT returns cannot be counted here: " << r.out;
  }
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_THAT(r.out, HasSubstr("EFAULT returns: 1\n"));
  EXPECT_THAT(r.out,
              HasSubstr("RECORDING FAILED: 1 system calls of the command failed with EFAULT"));
}

TEST_F(RecordHarmReportTest, SaysWhenTheSignalThatEndedTheCommandWasPassedOnByTheRecorder) {
  const std::string out = (dir_ / "term.csv").string();
  const auto r =
      Shell("(" + kBin + "/tiergym-prof record --backend software --device ddr -o " + out +
            " -- sleep 30 & p=$!;"
            // The signal goes to the recorder once it has started the command
            // (its child exists), however slowly a loaded machine gets there.
            " for i in $(seq 200); do pgrep -P $p >/dev/null && break; sleep 0.05; done;"
            " sleep 0.2; kill -TERM $p; wait $p)");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_THAT(r.out, HasSubstr("RECORDING FAILED: the command was ended by signal 15"));
  EXPECT_THAT(r.out, HasSubstr("passed on"));
}

TEST_F(RecordHarmReportTest, PassesStandardInputAndOutputThroughAndTheExitStatusBack) {
  const std::string out = (dir_ / "cat.csv").string();
  const auto r = RunShell("printf 'one\\ntwo\\n' | " + kBin +
                          "/tiergym-prof record --backend software --device ddr -o " + out +
                          " -- sh -c 'cat; exit 5' 2>/dev/null");
  EXPECT_EQ(r.out, "one\ntwo\n");
  EXPECT_EQ(r.exit_code, 1);
  const auto summary = Shell(kBin + "/tiergym-prof record --backend software --device ddr -o " +
                             out + " -- sh -c 'exit 5' </dev/null");
  EXPECT_THAT(summary.out, HasSubstr("RECORDING FAILED: the command ended with exit 5"));
}

}  // namespace
}  // namespace tiergym::prof

// End to end on a real program: `tiergym-prof record` (software backend, uprobe
// phasemarks) of the bundled test application once per device, the profile loaded with
// LoadProfile, and `tiergym estimate` on it. On a single-node machine both "devices" bind
// NUMA node 0, so they are two runs of the same placement; the test checks the pipeline
// and the data (where samples land, phase structure), not a tier difference.
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "profiler/event_presets.h"
#include "profiler/perf_session.h"
#include "tests/run_tiergym.h"
#include "traces/base/json.h"
#include "traces/profile.h"
#include "traces/trace_file.h"

namespace tiergym::prof {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

const std::string kBin = TIERGYM_BIN_DIR;

using CommandResult = ::tiergym::testing::Result;
using ::tiergym::testing::Shell;

// Parses "layout a=0x.. b=0x.. c=0x.. chase=0x.. array_bytes=N chase_bytes=M".
std::map<std::string, uint64_t> ParseLayout(const std::string& output) {
  std::map<std::string, uint64_t> out;
  const size_t at = output.find("layout ");
  if (at == std::string::npos) return out;
  const std::string line = output.substr(at + 7, output.find('\n', at) - at - 7);
  size_t pos = 0;
  while (pos < line.size()) {
    size_t end = line.find(' ', pos);
    if (end == std::string::npos) end = line.size();
    const std::string item = line.substr(pos, end - pos);
    const size_t eq = item.find('=');
    if (eq != std::string::npos)
      out[item.substr(0, eq)] = std::stoull(item.substr(eq + 1), nullptr, 0);
    pos = end + 1;
  }
  return out;
}

class RecordEndToEndTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!UprobePmuType().ok()) GTEST_SKIP() << "no uprobe PMU: phasemarks cannot be recorded";
    if (::geteuid() != 0 && PerfEventParanoid() > 0) {
      GTEST_SKIP() << "uprobe events need root or kernel.perf_event_paranoid <= 0";
    }
    dir_ = fs::temp_directory_path() / ("tiergym_record_e2e." + std::to_string(::getpid()));
    fs::create_directories(dir_ / "profile");
  }
  void TearDown() override {
    std::error_code ec;
    if (!dir_.empty()) fs::remove_all(dir_, ec);
  }

  // Records the test app placed on `device` and returns the command's result.
  CommandResult RecordApp(const std::string& device) {
    return Shell(kBin + "/tiergym-prof record --backend software --rearm-us 5000 --device " +
                 device + " --numa-node 0 -o " + (dir_ / "profile" / (device + ".csv")).string() +
                 " -- " + kBin +
                 "/tiergym-testapp --print-layout --size-mb 4 --chase-mb 4 --iterations 2 "
                 "--chase-steps 1500000");
  }

  fs::path dir_;
};

TEST_F(RecordEndToEndTest, RecordsLoadsAndEstimatesAProfileOfTheTestApp) {
  const CommandResult ddr = RecordApp("ddr");
  ASSERT_EQ(ddr.exit_code, 0) << ddr.out;
  const CommandResult hbm = RecordApp("hbm");
  ASSERT_EQ(hbm.exit_code, 0) << hbm.out;
  EXPECT_THAT(ddr.out, HasSubstr("backend software"));
  EXPECT_THAT(ddr.out, HasSubstr("probes libphasemark.so:phasemark"));

  // ASLR is off: both runs put the arrays at the same addresses.
  const auto layout = ParseLayout(ddr.out);
  ASSERT_EQ(layout.size(), 6u) << ddr.out;
  EXPECT_EQ(layout, ParseLayout(hbm.out));
  EXPECT_TRUE(fs::exists(dir_ / "profile" / "ddr.csv.mmaps"));

  auto profile = LoadProfile((dir_ / "profile").string());
  ASSERT_TRUE(profile.ok()) << profile.status();
  ASSERT_EQ(profile->devices(), (std::vector<std::string>{"ddr", "hbm"}));
  // Phase 0 (start-up), 1 (init), copy, scale, add, triad, chase per iteration, checksum.
  EXPECT_EQ(profile->num_phases(), 1u + 1u + 5u * 2u + 1u);

  const Trace& t = *profile->Find("ddr");
  EXPECT_EQ(t.metadata().app, "tiergym-testapp");
  EXPECT_EQ(t.metadata().event, "page-faults");
  ASSERT_GT(t.num_samples(), 1000u);
  for (size_t p = 1; p < t.num_phases(); ++p) {
    EXPECT_GT(t.marks()[p].time_ns, t.marks()[p - 1].time_ns) << "phase " << p;
  }

  // Samples land where each phase writes (after the first touch, the software backend
  // samples the first write to each page per re-arm interval): copy (phases 2 and 7,
  // c = a) and add (4 and 9, c = a + b) in array c, scale (3 and 8, b = s c) in b, triad
  // (5 and 10, a = b + s c) in a; the chase phases (6 and 11) only read, so next to
  // nothing lands in the chase cycle.
  const uint64_t a = layout.at("a"), b = layout.at("b"), c = layout.at("c");
  const uint64_t chase = layout.at("chase");
  const uint64_t array_bytes = layout.at("array_bytes"), chase_bytes = layout.at("chase_bytes");
  auto in = [](uint64_t addr, uint64_t start, uint64_t bytes) {
    return addr >= start && addr < start + bytes;
  };
  const std::vector<std::pair<uint32_t, uint64_t>> written = {{2, c}, {7, c}, {4, c}, {9, c},
                                                              {3, b}, {8, b}, {5, a}, {10, a}};
  size_t kernel_samples = 0;
  for (const auto& [phase, array] : written) {
    size_t n = 0, hits = 0;
    for (size_t i = t.PhaseBegin(phase); i < t.PhaseBegin(phase + 1); ++i, ++n) {
      hits += in(t.address()[i], array, array_bytes);
    }
    kernel_samples += n;
    // A kernel that ran entirely between two re-arms after another one wrote the same
    // array has no samples; whatever a phase has lands in its array.
    EXPECT_GE(hits * 10, n * 8) << "phase " << phase << ": " << hits << " of " << n;
  }
  // 4 MiB arrays: 1024 pages written per kernel; with a re-arm every 5 ms most kernels
  // see a protected array, and together at least one array's worth.
  EXPECT_GT(kernel_samples, 1024u);
  for (uint32_t chase_phase : {6u, 11u}) {
    size_t hits = 0;
    for (size_t i = t.PhaseBegin(chase_phase); i < t.PhaseBegin(chase_phase + 1); ++i) {
      hits += in(t.address()[i], chase, chase_bytes);
    }
    EXPECT_LT(hits, 16u) << "phase " << chase_phase;
  }
  // Instructions (the task-clock stand-in) grow within a phase and reset at each mark.
  for (size_t p = 0; p < t.num_phases(); ++p) {
    uint64_t last = 0;
    for (size_t i = t.PhaseBegin(p); i < t.PhaseBegin(p + 1); ++i) {
      EXPECT_GE(t.instructions()[i], last);
      last = t.instructions()[i];
    }
    EXPECT_LE(last, t.PhaseInstructions(p));
  }

  // Array a on hbm, the rest on ddr, estimated with the estimator's command.
  const fs::path placement = dir_ / "a_on_hbm.json";
  char range[200];
  std::snprintf(range, sizeof range,
                "{\"start\": \"0x%llx\", \"end\": \"0x%llx\", \"tier\": \"hbm\"}",
                static_cast<unsigned long long>(a & ~uint64_t{4095}),
                static_cast<unsigned long long>(a + array_bytes));
  std::ofstream(placement) << "{\"default\": \"ddr\", \"ranges\": [" << range << "]}\n";
  const CommandResult est =
      Shell(kBin + "/tiergym estimate --json --window 100000 --profile " +
            (dir_ / "profile").string() + " --placement " + placement.string());
  ASSERT_EQ(est.exit_code, 0) << est.out;
  auto doc = json::Parse(est.out, "estimate");
  ASSERT_TRUE(doc.ok()) << doc.status() << "\n" << est.out;
  const json::Value* runtime_value = doc->Find("runtime_ns");
  ASSERT_NE(runtime_value, nullptr) << est.out;
  const double runtime = runtime_value->number();
  // Each phase's estimate is a weighting of the devices' times for it, so the total lies
  // between the sums of the per-phase minima and maxima.
  double lo = 0, hi = 0;
  for (size_t p = 0; p < profile->num_phases(); ++p) {
    const Trace& r0 = profile->runs()[0];
    const Trace& r1 = profile->runs()[1];
    const double d0 = static_cast<double>(r0.PhaseEndNs(p) - r0.PhaseStartNs(p));
    const double d1 = static_cast<double>(r1.PhaseEndNs(p) - r1.PhaseStartNs(p));
    lo += std::min(d0, d1);
    hi += std::max(d0, d1);
  }
  EXPECT_GE(runtime, 0.999 * lo);
  EXPECT_LE(runtime, 1.001 * hi);
  RecordProperty("ddr_runtime_ns", std::to_string(profile->Find("ddr")->runtime_ns()));
  RecordProperty("estimate_ns", std::to_string(static_cast<uint64_t>(runtime)));
}

TEST_F(RecordEndToEndTest, MarksPhasesAtAFunctionOfAnUnmodifiedBinary) {
  // RunSlice runs once for init and once per kernel: 1 + 4 x 2 entries (phase 0 before).
  const std::string out = (dir_ / "at.csv").string();
  const CommandResult r = Shell(kBin +
                                "/tiergym-prof record --backend software --device ddr "
                                "--phasemark-lib none --phasemark-at RunSlice -o " +
                                out + " -- " + kBin +
                                "/tiergym-testapp --size-mb 2 --chase-mb 2 "
                                "--iterations 2 --chase-steps 10000");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  auto t = LoadTrace(out);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->num_phases(), 1u + 1u + 4u * 2u);
}

TEST_F(RecordEndToEndTest, WritesTheBinaryFormatAndReportsAFailingCommand) {
  const std::string out = (dir_ / "fail.tgt").string();
  const CommandResult r = Shell(kBin + "/tiergym-prof record --backend software --device ddr -o " +
                                out + " -- sh -c 'exit 3'");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_THAT(r.out, HasSubstr("exit 3"));
  auto t = LoadTrace(out);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->metadata().device, "ddr");
}

TEST_F(RecordEndToEndTest, RecordsAScriptWithAnExplicitPhasemarkLibrary) {
  const fs::path script = dir_ / "run.sh";
  std::ofstream(script) << "#!/bin/sh\nexec " << kBin
                        << "/tiergym-testapp --size-mb 2 --chase-mb 2 --iterations 1 "
                           "--chase-steps 1000\n";
  fs::permissions(script, fs::perms::owner_all);
  const std::string out = (dir_ / "script.csv").string();
  const CommandResult without = Shell(kBin +
                                      "/tiergym-prof record --backend software "
                                      "--device ddr -o " +
                                      out + " -- " + script.string());
  ASSERT_EQ(without.exit_code, 0) << without.out;
  EXPECT_THAT(without.out, HasSubstr("is not an ELF executable"));
  const CommandResult with =
      Shell(kBin +
            "/tiergym-prof record --backend software --device ddr "
            "--phasemark-lib " +
            kBin + "/../lib/libphasemark.so -o " + out + " -- " + script.string());
  ASSERT_EQ(with.exit_code, 0) << with.out;
  auto t = LoadTrace(out);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->num_phases(), 1u + 1u + 5u + 1u);  // the probe follows the exec'd program
}

TEST_F(RecordEndToEndTest, CountsRecordsLostToASmallRing) {
  // A one-page ring holds about 40 records: the first touch of the test app's 4 arrays
  // (4 x 1024 page faults within milliseconds) overflows it unless the drain thread keeps
  // up. Whatever was lost, samples + lost records cover every first-touch fault, and the
  // trace header carries the count the summary reports.
  const std::string out = (dir_ / "small_ring.csv").string();
  const CommandResult r = Shell(kBin +
                                "/tiergym-prof record --backend software --device ddr "
                                "--mmap-pages 1 --phasemark-lib none -o " +
                                out + " -- " + kBin +
                                "/tiergym-testapp --size-mb 4 --chase-mb 4 --iterations 1 "
                                "--chase-steps 1000");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const size_t at = r.out.find("lost records ");
  ASSERT_NE(at, std::string::npos) << r.out;
  const uint64_t lost = std::stoull(r.out.substr(at + 13));
  auto t = LoadTrace(out);
  ASSERT_TRUE(t.ok()) << t.status();
  std::string header_lost;
  for (const auto& [k, v] : t->metadata().entries) {
    if (k == "lost_records") header_lost = v;
  }
  EXPECT_EQ(header_lost, std::to_string(lost));
  EXPECT_GE(t->num_samples() + lost, 4u * 1024u);
  if (lost > 0) {
    EXPECT_THAT(r.out, HasSubstr("Use a larger --mmap-pages (now 1)"));
  }
  RecordProperty("lost_records", std::to_string(lost));
}

TEST_F(RecordEndToEndTest, RecordsDataAddressesWithPebs) {
  const std::string out = (dir_ / "pebs_run.csv").string();
  const CommandResult r =
      Shell(kBin + "/tiergym-prof record --backend pebs --device ddr -o " + out + " -- " + kBin +
            "/tiergym-testapp --size-mb 16 "
            "--chase-mb 16 --iterations 2");
  if (r.exit_code != 0 && r.out.find("--backend software") != std::string::npos) {
    GTEST_SKIP() << "PEBS is not available on this machine: " << r.out;
  }
  ASSERT_EQ(r.exit_code, 0) << r.out;
  auto t = LoadTrace(out);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->metadata().event, PresetEventName(*PresetForThisCpu(), 128));
  EXPECT_GT(t->num_samples(), 100u);
  EXPECT_EQ(t->num_phases(), 1u + 1u + 5u * 2u + 1u);
}

// The binaries (and the shared libraries they load from outside the system directories)
// copied into a fresh directory under /tmp that every user can enter: user nobody must
// reach what it runs wherever the project was checked out (a clone under /root is mode
// 0700). Removed with the object.
class WorldReachableCopy {
 public:
  WorldReachableCopy() {
    char tmpl[] = "/tmp/tiergym_nobody.XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) return;
    dir_ = tmpl;
    std::error_code ec;
    fs::create_directories(dir_ / "bin", ec);
    fs::create_directories(dir_ / "lib", ec);
  }
  ~WorldReachableCopy() {
    std::error_code ec;
    if (!dir_.empty()) fs::remove_all(dir_, ec);
  }
  // Copies `from` into bin/ or lib/ with the libraries it needs; false on failure.
  bool Add(const fs::path& from, const std::string& sub) {
    std::error_code ec;
    const fs::path to = dir_ / sub / from.filename();
    if (!fs::exists(to) && !fs::copy_file(from, to, fs::copy_options::overwrite_existing, ec)) {
      return false;
    }
    // Libraries resolved outside /lib and /usr (the build tree's) come along.
    const CommandResult ldd = Shell("ldd " + from.string());
    size_t pos = 0;
    while ((pos = ldd.out.find("=> /", pos)) != std::string::npos) {
      const size_t start = pos + 3;
      const size_t end = ldd.out.find(' ', start);
      pos = start;
      const std::string lib = ldd.out.substr(start, end - start);
      if (lib.rfind("/lib", 0) == 0 || lib.rfind("/usr/", 0) == 0) continue;
      if (!Add(lib, "lib")) return false;
    }
    return true;
  }
  // Makes everything readable and enterable by all.
  bool Open() {
    std::error_code ec;
    fs::permissions(dir_,
                    fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                        fs::perms::others_read | fs::perms::others_exec,
                    ec);
    return !ec && Shell("chmod -R a+rX " + dir_.string()).exit_code == 0;
  }
  const fs::path& dir() const { return dir_; }

 private:
  fs::path dir_;
};

TEST_F(RecordEndToEndTest, ExplainsWhatToDoWithoutThePrivilegeForProbes) {
  if (::geteuid() != 0 || ::access("/usr/bin/setpriv", X_OK) != 0) {
    GTEST_SKIP() << "needs root and setpriv to run the recorder as an unprivileged user";
  }
  WorldReachableCopy copy;
  ASSERT_FALSE(copy.dir().empty()) << "mkdtemp under /tmp failed";
  ASSERT_TRUE(copy.Add(kBin + "/tiergym-prof", "bin"));
  ASSERT_TRUE(copy.Add(kBin + "/tiergym-testapp", "bin"));
  ASSERT_TRUE(copy.Add(kBin + "/../lib/libphasemark.so", "lib"));
  ASSERT_TRUE(copy.Add(kBin + "/../lib/libtiergym_swsample.so", "lib"));
  ASSERT_TRUE(copy.Open());
  const std::string as_nobody = "/usr/bin/setpriv --reuid=65534 --regid=65534 --clear-groups ";
  const std::string env = "LD_LIBRARY_PATH=" + (copy.dir() / "lib").string() + " ";
  const std::string prof = (copy.dir() / "bin" / "tiergym-prof").string();
  const CommandResult reachable = Shell(env + as_nobody + prof + " record --help");
  if (reachable.exit_code != 0) {
    GTEST_SKIP() << "user nobody cannot run a copy under /tmp (mounted noexec?): " << reachable.out;
  }
  // As user nobody: per-process sampling stays allowed (perf_event_paranoid <= 2), uprobe
  // events need CAP_PERFMON.
  const std::string out = "/tmp/tiergym_nobody." + std::to_string(::getpid()) + ".csv";
  const CommandResult r =
      Shell(env + as_nobody + prof + " record --backend software --device ddr -o " + out + " -- " +
            (copy.dir() / "bin" / "tiergym-testapp").string() + " --size-mb 1 --iterations 1");
  ::unlink(out.c_str());
  ::unlink((out + ".mmaps").c_str());
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_THAT(r.out, HasSubstr("need root or CAP_PERFMON"));
  EXPECT_THAT(r.out, HasSubstr("--phasemark-lib none"));
}

TEST_F(RecordEndToEndTest, ExplainsWhatToDoWhenPebsIsAbsent) {
  const CommandResult r = Shell(kBin + "/tiergym-prof record --backend pebs --device ddr -o " +
                                (dir_ / "pebs.csv").string() + " -- true");
  if (r.exit_code == 0) GTEST_SKIP() << "PEBS is available here: nothing to explain";
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.out, HasSubstr("--backend software"));
}

}  // namespace
}  // namespace tiergym::prof

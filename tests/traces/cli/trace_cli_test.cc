// Runs the real `tiergym` binary as a user would and checks its output and exit status.
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/run_tiergym.h"
#include "traces/base/json.h"
#include "traces/trace_binary.h"
#include "traces/trace_csv.h"

namespace tiergym {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

using testing::Result;
using testing::Tiergym;

std::string Data(const std::string& name) {
  return std::string(TIERGYM_TESTDATA_DIR) + "/csv/" + name;
}

TEST(TraceCliTest, InfoPrintsTheSummary) {
  Result r = Tiergym("trace info " + Data("valid_format_example.csv"));
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.out, HasSubstr("app          minife"));
  EXPECT_THAT(r.out, HasSubstr("runtime      41.000 s"));
  EXPECT_THAT(r.out, HasSubstr("phases       2"));
}

TEST(TraceCliTest, InfoJsonIsOneObjectWithTheDocumentedKeys) {
  Result r = Tiergym("trace info --json " + Data("valid_format_example.csv"));
  ASSERT_EQ(r.exit_code, 0);
  auto v = json::Parse(r.out, "stdout");
  ASSERT_TRUE(v.ok()) << v.status() << r.out;
  for (const char* key : {"source", "app", "device", "event", "pebs_reset", "page_size",
                          "runtime_ns", "samples", "threads", "total_instructions",
                          "footprint_pages", "footprint_bytes", "phases", "ranges"}) {
    EXPECT_NE(v->Find(key), nullptr) << key;
  }
  EXPECT_EQ(v->Find("runtime_ns")->number(), 41000000000.0);
  EXPECT_EQ(v->Find("samples")->number(), 3);
}

TEST(TraceCliTest, ValidateReportsTheRuleAndExitsNonZero) {
  Result bad = Tiergym("trace validate " + Data("bad_phase_skip.csv"));
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_THAT(bad.out, HasSubstr("bad_phase_skip.csv:6: phase-skip"));
  Result good = Tiergym("trace validate " + Data("valid_format_example.csv"));
  EXPECT_EQ(good.exit_code, 0);
  EXPECT_THAT(good.out, HasSubstr("ok "));
}

TEST(TraceCliTest, ValidateJsonListsEveryFileOfADirectory) {
  const std::string dir = ::testing::TempDir() + "/cli_validate";
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::copy_file(Data("valid_format_example.csv"), dir + "/ddr.csv");
  fs::copy_file(Data("bad_missing_end.csv"), dir + "/hbm.csv");
  Result r = Tiergym("trace validate --json " + dir);
  EXPECT_EQ(r.exit_code, 1);
  auto v = json::Parse(r.out, "stdout");
  ASSERT_TRUE(v.ok()) << v.status() << r.out;
  EXPECT_FALSE(v->Find("valid")->bool_value());
  ASSERT_EQ(v->Find("files")->array().size(), 2u);
  EXPECT_TRUE(v->Find("files")->array()[0].Find("valid")->bool_value());
  EXPECT_THAT(v->Find("files")->array()[1].Find("error")->string(), HasSubstr("missing-end"));
}

TEST(TraceCliTest, ConvertToBinaryAndBackIsLossless) {
  const std::string dir = ::testing::TempDir() + "/cli_convert";
  fs::remove_all(dir);
  fs::create_directories(dir);
  ASSERT_EQ(
      Tiergym("trace convert " + Data("valid_extras_crlf.csv") + " " + dir + "/t.tgt").exit_code,
      0);
  ASSERT_EQ(Tiergym("trace convert " + dir + "/t.tgt " + dir + "/t.csv").exit_code, 0);
  auto original = ReadTraceCsv(Data("valid_extras_crlf.csv"));
  auto back = ReadTraceCsv(dir + "/t.csv");
  ASSERT_TRUE(original.ok() && back.ok());
  EXPECT_TRUE(SameContents(*original, *back));
}

// A device named as the output (here a link to the process's own standard output, as
// /dev/stdout is) is written in place: the trace comes out on the pipe, and the link is not
// replaced by a file (as root, that once replaced the machine's /dev/stdout).
TEST(TraceCliTest, ConvertWritesIntoADeviceInPlace) {
  const std::string dir = ::testing::TempDir() + "/cli_convert_device";
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (const std::string name : {"out.csv", "out.tgt"}) {
    const fs::path link = fs::path(dir) / name;
    fs::create_symlink("/proc/self/fd/1", link);
    Result r = Tiergym("trace convert " + Data("valid_format_example.csv") + " " + link.string());
    EXPECT_EQ(r.exit_code, 0) << name << ": " << r.out;
    EXPECT_TRUE(fs::is_symlink(link)) << name << " was replaced by a file";
    EXPECT_EQ(fs::read_symlink(link), "/proc/self/fd/1");
    if (name == "out.csv") {
      EXPECT_THAT(r.out, HasSubstr("# device=")) << r.out.substr(0, 200);
    } else {
      EXPECT_TRUE(LooksLikeTraceBinary(r.out)) << "standard output is not a binary trace";
    }
  }
  fs::remove_all(dir);
}

TEST(TraceCliTest, UsageErrorsExitWithTwoAndHelpWithZero) {
  EXPECT_EQ(Tiergym("trace frobnicate").exit_code, 2);
  EXPECT_EQ(Tiergym("nosuchcommand").exit_code, 2);
  Result missing = Tiergym("trace info", true);
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_THAT(missing.out, HasSubstr("PATH is required"));
  Result help = Tiergym("trace info --help");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_THAT(help.out, HasSubstr("--json"));
  EXPECT_THAT(help.out, HasSubstr("footprint_bytes"));  // JSON keys are documented
  EXPECT_EQ(Tiergym("--help").exit_code, 0);
  Result no_placement = Tiergym("estimate --profile " + Data(""), true);
  EXPECT_EQ(no_placement.exit_code, 2);
  EXPECT_THAT(no_placement.out, HasSubstr("--placement FILE is required"));
  Result no_profile = Tiergym("validate --runs runs.csv", true);
  EXPECT_EQ(no_profile.exit_code, 2);
  EXPECT_THAT(no_profile.out, HasSubstr("--profile DIR is required"));
}

TEST(TraceCliTest, MissingFileSaysWhichFile) {
  Result r = Tiergym("trace info /nonexistent/x.csv", true);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.out, HasSubstr("/nonexistent/x.csv"));
  Result v = Tiergym("trace validate /nonexistent/x.csv");
  EXPECT_EQ(v.exit_code, 1);
  EXPECT_THAT(v.out, HasSubstr("INVALID /nonexistent/x.csv: no such file or directory"));
}

// The acceptance check: `trace info` on a CSV of at least 5 million samples.
TEST(TraceCliTest, InfoHandlesAFiveMillionSampleCsv) {
  const std::string dir = ::testing::TempDir() + "/cli_5m";
  fs::remove_all(dir);
  ASSERT_EQ(Tiergym("trace synth --app minife --machine knl --seed 3 --samples 5000000 "
                    "--no-runs --quiet --out " +
                    dir)
                .exit_code,
            0);
  const std::string csv = dir + "/minife/profile/ddr.csv";
  Result r = Tiergym("trace info --json " + csv);
  ASSERT_EQ(r.exit_code, 0);
  auto v = json::Parse(r.out, "stdout");
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_GE(v->Find("samples")->number(), 5'000'000);
  EXPECT_GT(v->Find("footprint_pages")->number(), 1000);
  EXPECT_EQ(v->Find("device")->string(), "ddr");
  fs::remove_all(dir);
}

TEST(TraceCliTest, ProjectWritesOneTracePerTierAndNothingOnBadInput) {
  const fs::path dir = fs::temp_directory_path() / ("tiergym_project." + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string out = (dir / "prof").string();
  Result r = Tiergym("trace project --machine knl " + Data("valid_format_example.csv") + " " + out);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("onto knl"));
  EXPECT_TRUE(fs::exists(dir / "prof" / "ddr.csv"));
  EXPECT_TRUE(fs::exists(dir / "prof" / "hbm.csv"));
  EXPECT_FALSE(fs::exists(dir / "prof.partial"));
  Result v = Tiergym("trace validate " + out);
  EXPECT_EQ(v.exit_code, 0) << v.out;
  // A one-tier machine: refused, saying why, and nothing written.
  const fs::path one = dir / "one.json";
  const std::string text =
      R"({"name": "one", "cores": 4, "tiers": [{"name": "ddr", "capacity_bytes": 1073741824,)"
      R"( "bandwidth_gbps": 90, "latency_ns": 130, "migration_gbps": 5}]})";
  FILE* f = std::fopen(one.string().c_str(), "w");
  std::fputs(text.c_str(), f);
  std::fclose(f);
  const std::string bad = (dir / "bad").string();
  Result b = Tiergym("trace project --machine " + one.string() + " " +
                         Data("valid_format_example.csv") + " " + bad,
                     /*merge_stderr=*/true);
  EXPECT_EQ(b.exit_code, 1) << b.out;
  EXPECT_THAT(b.out, HasSubstr("needs at least two"));
  EXPECT_FALSE(fs::exists(bad));
  EXPECT_FALSE(fs::exists(bad + ".partial"));
  // Options out of their range: refused, naming the option, nothing written.
  for (const std::string& option :
       {std::string("--prior stream_mpl=3"), std::string("--tails sideways"),
        std::string("--mlp 0"), std::string("--overlap 1.5")}) {
    Result o = Tiergym("trace project --machine knl " + option + " " +
                           Data("valid_format_example.csv") + " " + bad,
                       /*merge_stderr=*/true);
    EXPECT_EQ(o.exit_code, 2) << option << ": " << o.out;
    EXPECT_THAT(o.out, HasSubstr(option.substr(0, option.find(' ')))) << o.out;
    EXPECT_FALSE(fs::exists(bad)) << option;
  }
  // An OUT that is not an earlier projection's profile is refused and left as it was: a
  // file, and a directory holding anything but the machine's tier files.
  const fs::path notes = dir / "notes.txt";
  FILE* n = std::fopen(notes.string().c_str(), "w");
  std::fputs("mine\n", n);
  std::fclose(n);
  const fs::path mixed = dir / "mixed";
  fs::create_directories(mixed);
  fs::copy_file(notes, mixed / "data.csv");
  for (const fs::path& target : {notes, mixed}) {
    Result o = Tiergym(
        "trace project --machine knl " + Data("valid_format_example.csv") + " " + target.string(),
        /*merge_stderr=*/true);
    EXPECT_EQ(o.exit_code, 1) << o.out;
    EXPECT_THAT(o.out, HasSubstr("remove it or name another OUT")) << o.out;
  }
  EXPECT_TRUE(fs::is_regular_file(notes));
  EXPECT_TRUE(fs::is_regular_file(mixed / "data.csv"));
  // The earlier projection's own profile is replaced.
  EXPECT_EQ(Tiergym("trace project --machine knl " + Data("valid_format_example.csv") + " " + out)
                .exit_code,
            0);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tiergym

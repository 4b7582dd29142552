#include <filesystem>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "profiler/cli/import_cli.h"
#include "tests/profiler/mckernel_dump_bytes.h"
#include "traces/base/file.h"
#include "traces/trace_file.h"

namespace tiergym::mckernel {
namespace {

using ::testing::StartsWith;
namespace fs = std::filesystem;

std::string FreshDir(const std::string& name) {
  const std::string dir = ::testing::TempDir() + "/mckernel_import_cli_test_" + name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::string WriteDump(const std::string& dir, const std::string& name, const DumpBytes& b) {
  const std::string path = dir + "/" + name;
  std::ofstream(path, std::ios::binary) << b.bytes();
  return path;
}

// Thread 11 of pid 10 calls phasemark() once; thread 12 catches up at its exit.
std::vector<std::string> TwoThreadDumps(const std::string& dir) {
  DumpBytes main_thread;
  main_thread.Vma(100, 0x2aaaab000000, 8 << 20).EndSection().EndSection();
  main_thread.Batch(1500, 700, {0x2aaaab000000, 0x2aaaab000040}).Phasemark();
  main_thread.Batch(2900, 400, {0x2aaaab100000});
  DumpBytes worker = Stream();
  worker.Batch(1400, 650, {0x2aaaab200000});
  worker.Batch(3000, 900, {0x2aaaab300000}).Phasemark();
  return {WriteDump(dir, "app-PEBS-countdown-32-PEBS-buffer-0-pid-10-tid-11.dat", main_thread),
          WriteDump(dir, "app-PEBS-countdown-32-PEBS-buffer-0-pid-10-tid-12.dat", worker)};
}

TEST(ImportMckernelCliTest, WritesOneTraceAndTheMapsFromTheDumpsOfARun) {
  const std::string dir = FreshDir("ok");
  std::vector<std::string> args = TwoThreadDumps(dir);
  const std::string out = dir + "/hbm.tgt", maps = dir + "/maps.csv";
  for (const char* a : {"--device", "hbm", "--tsc-ghz", "1", "-o"}) args.push_back(a);
  args.push_back(out);
  args.push_back("--maps=" + maps);
  ASSERT_EQ(RunImportMckernelCommand(args), 0);
  auto t = LoadTrace(out);  // binary, from the extension
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->metadata().app, "app");
  EXPECT_EQ(t->metadata().device, "hbm");
  EXPECT_EQ(t->metadata().pebs_reset, 32u);
  EXPECT_EQ(t->num_samples(), 5u);
  EXPECT_EQ(t->num_phases(), 2u);
  EXPECT_EQ(t->marks()[1].time_ns, 1400u);  // TSC 1500 - 100 at 1 GHz
  EXPECT_EQ(t->runtime_ns(), 2900u);        // TSC 3000 - 100
  auto text = ReadFile(maps);
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, "type,time_ns,tid,start,length\nmmap,0,11,0x2aaaab000000,0x800000\n");
}

TEST(ImportMckernelCliTest, FormatOptionOverridesTheExtension) {
  const std::string dir = FreshDir("format");
  std::vector<std::string> args = TwoThreadDumps(dir);
  const std::string out = dir + "/trace.tgt";
  for (const std::string& a : {std::string("--device=ddr"), std::string("--output"), out,
                               std::string("--format"), std::string("csv")}) {
    args.push_back(a);
  }
  ASSERT_EQ(RunImportMckernelCommand(args), 0);
  auto text = ReadFile(out);
  ASSERT_TRUE(text.ok());
  EXPECT_THAT(*text, StartsWith("# tiergym trace v1\n"));
}

TEST(ImportMckernelCliTest, UsageErrorsExitWithTwoAndWriteNothing) {
  const std::string dir = FreshDir("usage");
  const std::vector<std::string> dumps = TwoThreadDumps(dir);
  const std::string out = dir + "/out.csv";
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> a = dumps;
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  };
  EXPECT_EQ(RunImportMckernelCommand(with({"-o", out})), 2);               // no --device
  EXPECT_EQ(RunImportMckernelCommand(with({"--device", "ddr"})), 2);       // no output
  EXPECT_EQ(RunImportMckernelCommand({"--device", "ddr", "-o", out}), 2);  // no dumps
  EXPECT_EQ(RunImportMckernelCommand(with({"--device", "ddr", "-o", out, "--tsc-ghz", "fast"})), 2);
  EXPECT_EQ(RunImportMckernelCommand(with({"--device", "ddr", "-o", out, "--tsc-ghz", "0"})), 2);
  EXPECT_EQ(RunImportMckernelCommand(with({"--device", "ddr", "-o", out, "--format", "xml"})), 2);
  EXPECT_EQ(RunImportMckernelCommand(with({"--device", "ddr", "-o", out, "--bogus"})), 2);
  EXPECT_FALSE(fs::exists(out));
  EXPECT_EQ(RunImportMckernelCommand({"--help"}), 0);
}

TEST(ImportMckernelCliTest, NamesTheCommandItRunsAs) {
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(RunImportMckernelCommand({"--device", "ddr"}, "tiergym-prof import-mckernel"), 2);
  EXPECT_THAT(::testing::internal::GetCapturedStderr(),
              StartsWith("tiergym-prof import-mckernel: --output OUT is required"));
}

TEST(ImportMckernelCliTest, ARefusedDumpExitsWithOneAndWritesNothing) {
  const std::string dir = FreshDir("refused");
  std::vector<std::string> args = TwoThreadDumps(dir);
  DumpBytes cut = Stream();
  cut.Batch(10, 0, {1, 2}).Cut(8);  // count beyond the end
  args.push_back(WriteDump(dir, "app-PEBS-countdown-32-PEBS-buffer-0-pid-10-tid-13.dat", cut));
  const std::string out = dir + "/out.csv";
  for (const std::string& a :
       {std::string("--device"), std::string("ddr"), std::string("-o"), out}) {
    args.push_back(a);
  }
  EXPECT_EQ(RunImportMckernelCommand(args), 1);
  EXPECT_FALSE(fs::exists(out));
  // A missing dump, and the phasemark rule (the worker listed first has more marks).
  EXPECT_EQ(RunImportMckernelCommand({dir + "/missing.dat", "--device", "ddr", "-o", out}), 1);
  std::vector<std::string> swapped = TwoThreadDumps(dir);
  std::swap(swapped[0], swapped[1]);
  DumpBytes no_marks = Stream();
  no_marks.Batch(10, 0, {1});
  swapped[0] = WriteDump(dir, "app-PEBS-countdown-32-PEBS-buffer-0-pid-10-tid-14.dat", no_marks);
  for (const std::string& a :
       {std::string("--device"), std::string("ddr"), std::string("-o"), out}) {
    swapped.push_back(a);
  }
  EXPECT_EQ(RunImportMckernelCommand(swapped), 1);
  EXPECT_FALSE(fs::exists(out));
}

}  // namespace
}  // namespace tiergym::mckernel

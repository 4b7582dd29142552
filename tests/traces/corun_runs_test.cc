// The co-runs CSV (traces/corun_runs.h, traces/CORUN_CSV.md): strict reading, writing.
#include "traces/corun_runs.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tiergym {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

constexpr char kHeader[] =
    "scenario,machine,tenant,app,placement,start_ns,read_pct,runtime_ns,solo_runtime_ns\n";

class CorunRunsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tiergym-corun-runs-" + std::to_string(getpid()));
    fs::create_directories(dir_ / "placements");
    std::ofstream(dir_ / "placements" / "a.json") << R"({"default": "ddr"})"
                                                  << "\n";
  }
  void TearDown() override { fs::remove_all(dir_); }

  absl::StatusOr<std::vector<CorunRun>> Parse(const std::string& text) {
    return ParseCorunRuns(text, (dir_ / "coruns.csv").string());
  }
  // The error of a file with the header and `rows`, which must be refused.
  std::string Refusal(const std::string& rows) {
    auto r = Parse(kHeader + rows);
    EXPECT_FALSE(r.ok()) << rows;
    return std::string(r.status().message());
  }

  fs::path dir_;
};

TEST_F(CorunRunsTest, ReadsRowsWithColumnsInAnyOrderAndResolvesPlacements) {
  auto r = Parse(
      "runtime_ns,scenario,machine,tenant,app,placement,start_ns,read_pct,solo_runtime_ns,note\r\n"
      "12,s1,knl,a,minife,placements/a.json,0,85,10,x\r\n"
      "\n"
      "30,s1,knl,b,lulesh,placements/a.json,5000,62.5,20,y\r\n");
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[1].tenant, "b");
  EXPECT_EQ((*r)[1].app, "lulesh");
  EXPECT_EQ((*r)[1].start_ns, 5000u);
  EXPECT_EQ((*r)[1].read_pct, 62.5);
  EXPECT_EQ((*r)[1].runtime_ns, 30u);
  EXPECT_EQ((*r)[1].solo_runtime_ns, 20u);
  EXPECT_EQ((*r)[1].line, 4);
  EXPECT_EQ((*r)[0].placement_path, (dir_ / "placements" / "a.json").string());
  EXPECT_TRUE(Parse(kHeader).ok());  // no co-runs
}

TEST_F(CorunRunsTest, RefusesMalformedFilesNamingFileLineAndField) {
  const std::string ok = "s1,knl,a,minife,placements/a.json,0,85,12,10\n";
  const std::string file = (dir_ / "coruns.csv").string();
  EXPECT_THAT(Refusal(ok + "s1,knl,a,lulesh,placements/a.json,0,85,12,10\n"),
              HasSubstr(file + ":3: duplicate-tenant: tenant \"a\" of scenario \"s1\" already "
                               "appears on line 2"));
  EXPECT_THAT(Refusal(ok + "s1,disagg,b,lulesh,placements/a.json,0,85,12,10\n"),
              HasSubstr(":3: machine-mismatch"));
  EXPECT_THAT(Refusal("s1,knl,a,minife,placements/a.json,0,85,12s,10\n"),
              HasSubstr(":2: non-numeric: runtime_ns \"12s\""));
  EXPECT_THAT(Refusal("s1,knl,a,minife,placements/a.json,-5,85,12,10\n"),
              HasSubstr(":2: non-numeric: start_ns"));
  EXPECT_THAT(Refusal("s1,knl,a,minife,placements/a.json,0,nan,12,10\n"),
              HasSubstr(":2: non-numeric: read_pct"));
  EXPECT_THAT(Refusal("s1,knl,a,minife,placements/a.json,0,101,12,10\n"),
              HasSubstr(":2: read-pct-range"));
  EXPECT_THAT(Refusal("s1,knl,a,minife,placements/a.json,0,85,12,0\n"),
              HasSubstr(":2: zero-runtime: solo_runtime_ns"));
  EXPECT_THAT(Refusal("s1,knl,,minife,placements/a.json,0,85,12,10\n"),
              HasSubstr(":2: empty-field: tenant"));
  EXPECT_THAT(Refusal("s1,knl,a,minife,placements/none.json,0,85,12,10\n"),
              HasSubstr(":2: missing-placement"));
  EXPECT_THAT(Refusal("s1,knl,a,minife,placements/a.json,0,85,12\n"), HasSubstr(":2: field-count"));
  EXPECT_THAT(Refusal("s1,knl,a,minife,placements/a.json,0,85,12,10"),
              HasSubstr("truncated-last-line"));
  auto no_column = Parse("scenario,machine,tenant,app,placement,start_ns,read_pct,runtime_ns\n");
  EXPECT_THAT(no_column.status().message(), HasSubstr(":1: missing-column"));
  EXPECT_THAT(no_column.status().message(), HasSubstr("solo_runtime_ns"));
  EXPECT_EQ(ReadCorunRuns((dir_ / "absent.csv").string()).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(CorunRunsTest, WritesWhatItReadsBack) {
  const std::string placement = (dir_ / "placements" / "a.json").string();
  const std::vector<CorunRun> runs = {{"s1", "knl", "a", "minife", placement, 0, 85, 12, 10, 0},
                                      {"s1", "knl", "b", "lulesh", placement, 7, 62.5, 30, 20, 0}};
  const std::string path = (dir_ / "out.csv").string();
  ASSERT_TRUE(WriteCorunRuns(runs, path).ok());
  auto back = ReadCorunRuns(path);
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->size(), 2u);
  EXPECT_EQ((*back)[1].read_pct, 62.5);
  EXPECT_EQ((*back)[1].start_ns, 7u);
  EXPECT_EQ(fs::path((*back)[0].placement_path).lexically_normal(),
            fs::path(placement).lexically_normal());
  std::vector<CorunRun> bad = runs;
  bad[0].tenant = "a,b";
  EXPECT_FALSE(WriteCorunRuns(bad, path).ok());
  bad = runs;
  bad[1].runtime_ns = 0;
  EXPECT_FALSE(WriteCorunRuns(bad, path).ok());
}

}  // namespace
}  // namespace tiergym

// Tests of the contentiousness measurement: the uncore CAS events of each model encoded by
// libpfm4 (expected codes from its tables: intel_skx_unc_imc_events.h UNC_M_CAS_COUNT 0x04
// with RD 0x03 / WR 0x0c; intel_knl_unc_imc_events.h 0x03 with RD 0x01 / WR 0x02;
// intel_knl_unc_edc_events.h RPQ/WPQ inserts 0x0101 / 0x0102), the measurement where
// uncore PMUs exist, and the apps.csv writer.
#include "profiler/contentiousness.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "profiler/event_presets.h"
#include "traces/base/file.h"

namespace tiergym::prof {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

// Lets libpfm4 encode events of PMUs this machine does not have.
class EncodeInactive {
 public:
  EncodeInactive() {
    ::setenv("LIBPFM_ENCODE_INACTIVE", "1", 1);
    ok_ = InitializeLibpfm(/*reinitialize=*/true).ok();
  }
  ~EncodeInactive() {
    ::unsetenv("LIBPFM_ENCODE_INACTIVE");
    (void)InitializeLibpfm(/*reinitialize=*/true);
  }
  bool ok() const { return ok_; }

 private:
  bool ok_ = false;
};

TEST(CasEventsTest, EncodeToTheRawCodesOfLibpfmTables) {
  EncodeInactive inactive;
  ASSERT_TRUE(inactive.ok());
  struct Case {
    const char* name;
    uint64_t code;
  };
  for (const Case c : {Case{"skx_unc_imc0::UNC_M_CAS_COUNT:RD", 0x0304},
                       Case{"skx_unc_imc5::UNC_M_CAS_COUNT:WR", 0x0c04},
                       Case{"knl_unc_imc0::UNC_M_CAS_COUNT:RD", 0x0103},
                       Case{"knl_unc_imc3::UNC_M_CAS_COUNT:WR", 0x0203},
                       Case{"knl_unc_edc_eclk0::UNC_E_RPQ_INSERTS", 0x0101},
                       Case{"knl_unc_edc_eclk7::UNC_E_WPQ_INSERTS", 0x0102}}) {
    auto code = EncodeRawEvent(c.name);
    ASSERT_TRUE(code.ok()) << c.name << ": " << code.status();
    EXPECT_EQ(*code, c.code) << c.name;
  }
}

TEST(CasEventsTest, EverySetNamesEventsLibpfmKnowsOrIsNewer) {
  EncodeInactive inactive;
  ASSERT_TRUE(inactive.ok());
  int encoded = 0;
  for (const CasCounterSet& set : CasCounterSets()) {
    const std::string pmu = set.pmu_prefix + "0::";
    auto read = EncodeRawEvent(pmu + set.read_event);
    auto write = EncodeRawEvent(pmu + set.write_event);
    if (!read.ok()) {
      // icx and spr uncore tables came after Debian's libpfm4 4.13.
      std::printf("%s: not in this libpfm4 (%s)\n", set.pmu_prefix.c_str(),
                  std::string(read.status().message()).c_str());
      continue;
    }
    ASSERT_TRUE(write.ok()) << write.status();
    EXPECT_NE(*read, *write) << set.pmu_prefix;
    ++encoded;
  }
  EXPECT_GE(encoded, 3);  // knl imc, knl edc, skx imc at least
}

TEST(MeasureContentiousnessTest, MeasuresASoloRunOrSaysWhyNot) {
  LaunchOptions launch;
  launch.argv = {"dd", "if=/dev/zero", "of=/dev/null", "bs=1M", "count=64"};
  auto r = MeasureContentiousness(launch);
  if (!r.ok() && r.status().code() == absl::StatusCode::kUnimplemented) {
    EXPECT_THAT(std::string(r.status().message()), HasSubstr("uncore"));
    GTEST_SKIP() << r.status().message();
  }
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_GT(r->runtime_ns, 0u);
  EXPECT_FALSE(r->boxes.empty());
  EXPECT_GT(r->read_cas + r->write_cas, 0u);
}

class AppsCsvTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = (fs::temp_directory_path() / ("tiergym_apps." + std::to_string(::getpid()) + ".csv"))
                .string();
  }
  void TearDown() override { fs::remove(path_); }
  std::string path_;
};

TEST_F(AppsCsvTest, WritesTheColumnLineOnceAndAppends) {
  ASSERT_TRUE(AppendAppsCsv(path_, "lulesh", 7.21, 2.9).ok());
  ASSERT_TRUE(AppendAppsCsv(path_, "minife", 10.123456, 0).ok());
  auto text = ReadFile(path_);
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, "app,read_gbps,write_gbps\nlulesh,7.2100,2.9000\nminife,10.1235,0.0000\n");
}

TEST_F(AppsCsvTest, RefusesAnotherLayoutAndBadNames) {
  std::ofstream(path_) << "app,read_pct,interference_gbps,normalized_perf\n";
  absl::Status s = AppendAppsCsv(path_, "lulesh", 1, 1);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr(":1: column-line"));
  EXPECT_EQ(AppendAppsCsv(path_ + ".new", "a,b", 1, 1).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tiergym::prof

// Tests of the PEBS presets encoded by libpfm4 for every CPU model, on any machine:
// LIBPFM_FORCE_PMU makes libpfm4 take the named core PMU as this CPU's. Expected codes
// are those of libpfm4's event tables (lib/events/intel_knl_events.h: MEM_UOPS_RETIRED
// 0x04 with L2_MISS_LOADS 0x04; intel_skl_events.h, used for skx/clx, and
// intel_icl_events.h: MEM_LOAD_RETIRED 0xd1 with L3_MISS 0x20; intel_spr_events.h:
// MEM_TRANS_RETIRED 0xcd with LOAD_LATENCY 0x01, threshold in config1).
#include "profiler/event_presets.h"

#include <cstdlib>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tiergym::prof {
namespace {

using ::testing::HasSubstr;

// Forces libpfm4's core PMU for the lifetime of the object.
class ForcedPmu {
 public:
  explicit ForcedPmu(const char* pmu) {
    ::setenv("LIBPFM_FORCE_PMU", pmu, 1);
    ok_ = InitializeLibpfm(/*reinitialize=*/true).ok();
  }
  ~ForcedPmu() {
    ::unsetenv("LIBPFM_FORCE_PMU");
    (void)InitializeLibpfm(/*reinitialize=*/true);
  }
  bool ok() const { return ok_; }

 private:
  bool ok_ = false;
};

// First in the file: libpfm4 is still initialised for this CPU, nothing forced.
TEST(UnforcedPresetTest, ReportsNoPresetForAnotherCpu) {
  auto preset = PresetForThisCpu();
  auto pmu = ActiveCorePmu();
  if (preset.ok()) GTEST_SKIP() << "this CPU has a preset (" << preset->pmu << ")";
  EXPECT_EQ(preset.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(preset.status().message()), HasSubstr("knl MEM_UOPS_RETIRED"));
  if (pmu.ok()) {
    EXPECT_THAT(std::string(preset.status().message()), HasSubstr(*pmu));
  }
}

struct Expected {
  const char* pmu;
  uint64_t config;
};

class PresetEncodingTest : public ::testing::TestWithParam<Expected> {};

TEST_P(PresetEncodingTest, EncodesThePresetOfTheModelToItsRawCode) {
  const Expected e = GetParam();
  ForcedPmu force(e.pmu);
  ASSERT_TRUE(force.ok());
  auto pmu = ActiveCorePmu();
  ASSERT_TRUE(pmu.ok()) << pmu.status();
  EXPECT_EQ(*pmu, e.pmu);
  auto preset = PresetForThisCpu();
  ASSERT_TRUE(preset.ok()) << preset.status();
  EXPECT_EQ(preset->pmu, e.pmu);
  auto enc = EncodeEvent(PresetEventName(*preset, 64), /*precise_ip=*/2);
  ASSERT_TRUE(enc.ok()) << enc.status();
  EXPECT_EQ(enc->attr.type, static_cast<uint32_t>(PERF_TYPE_RAW));
  EXPECT_EQ(enc->attr.config, e.config) << enc->fully_qualified;
  EXPECT_EQ(enc->attr.precise_ip, 2u);
  EXPECT_EQ(enc->attr.exclude_kernel, 1u);  // user level only
  EXPECT_THAT(enc->fully_qualified, HasSubstr(std::string(e.pmu) + "::"));
  if (preset->load_latency) {
    EXPECT_EQ(enc->attr.config1, 64u);  // the ldlat threshold
  } else {
    EXPECT_EQ(enc->attr.config1, 0u);
  }
}

INSTANTIATE_TEST_SUITE_P(Models, PresetEncodingTest,
                         ::testing::Values(Expected{"knl", 0x0404}, Expected{"skx", 0x20d1},
                                           Expected{"clx", 0x20d1}, Expected{"icx", 0x20d1},
                                           Expected{"spr", 0x01cd}),
                         [](const auto& info) { return std::string(info.param.pmu); });

TEST(EventPresetsTest, NamesThePresetsWhenAnEventIsUnknownForTheCpu) {
  ForcedPmu force("knl");
  ASSERT_TRUE(force.ok());
  auto enc = EncodeEvent("MEM_LOAD_RETIRED:L3_MISS", 2);  // a Xeon event, not KNL's
  ASSERT_FALSE(enc.ok());
  EXPECT_EQ(enc.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(enc.status().message()), HasSubstr("core PMU knl"));
  EXPECT_THAT(std::string(enc.status().message()), HasSubstr("MEM_UOPS_RETIRED:L2_MISS_LOADS"));
}

TEST(EventPresetsTest, RefusesABadAttribute) {
  ForcedPmu force("skx");
  ASSERT_TRUE(force.ok());
  auto enc = EncodeEvent("MEM_LOAD_RETIRED:NO_SUCH_UMASK", 2);
  ASSERT_FALSE(enc.ok());
  EXPECT_NE(enc.status().code(), absl::StatusCode::kOk);
}

TEST(EventPresetsTest, DescribesEveryPreset) {
  const std::string d = DescribePresets();
  for (const EventPreset& p : EventPresets()) EXPECT_THAT(d, HasSubstr(p.event));
  EXPECT_THAT(d, HasSubstr("ldlat=N"));
}

}  // namespace
}  // namespace tiergym::prof

#include "estimator/contention/synth/contention_synth.h"

#include <algorithm>
#include <string>

#include "estimator/contention/smoothing.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "traces/base/file.h"

namespace tiergym::contention {
namespace {

using ::testing::HasSubstr;

ContentionData Synth(const ContentionSynthOptions& o) {
  auto data = SynthesizeContentionData(o);
  EXPECT_TRUE(data.ok()) << data.status();
  return data.ok() ? *std::move(data) : ContentionData{};
}

ContentionSynthOptions NoiseFree() {
  ContentionSynthOptions o;
  o.level_noise = o.curve_noise = o.solo_noise = o.pair_noise = 0;
  o.outlier_probability = 0;
  return o;
}

std::string Text(const ContentionData& d) {
  return *CurvesCsvText(d.families) + *AppsCsvText(d.apps) + *PairsCsvText(d.pairs);
}

TEST(ContentionSynthTest, TheBundledDataIsTheGeneratorsOutputForSeedOne) {
  const ContentionData d = Synth(ContentionSynthOptions());
  const std::string dir = std::string(TIERGYM_SOURCE_DIR) + "/estimator/contention/data/";
  EXPECT_EQ(*ReadFile(dir + "curves.csv"), *CurvesCsvText(d.families))
      << "regenerate with: tiergym contention synth --out estimator/contention/data";
  EXPECT_EQ(*ReadFile(dir + "apps.csv"), *AppsCsvText(d.apps));
  EXPECT_EQ(*ReadFile(dir + "pairs.csv"), *PairsCsvText(d.pairs));
}

TEST(ContentionSynthTest, SameSeedSameDataOtherSeedOtherNoise) {
  ContentionSynthOptions o;
  const ContentionData a = Synth(o);
  EXPECT_EQ(Text(a), Text(Synth(o)));
  o.seed = 2;
  const ContentionData b = Synth(o);
  EXPECT_NE(*CurvesCsvText(a.families), *CurvesCsvText(b.families));
  EXPECT_NE(*PairsCsvText(a.pairs), *PairsCsvText(b.pairs));
  ASSERT_EQ(a.families.size(), b.families.size());
  EXPECT_EQ(a.families[0].curves.size(), b.families[0].curves.size());
}

TEST(ContentionSynthTest, CoversEveryAppReadShareLevelAndPair) {
  const ContentionData d = Synth(ContentionSynthOptions());
  ASSERT_EQ(d.families.size(), 5u);
  EXPECT_EQ(d.families[0].app, "minife");
  EXPECT_EQ(d.families[4].app, "hotset");
  for (const SensitivityFamily& f : d.families) {
    ASSERT_EQ(f.curves.size(), 11u) << f.app;
    EXPECT_EQ(f.curves.front().read_pct, 50);
    EXPECT_EQ(f.curves.back().read_pct, 100);
    for (const SensitivityCurve& c : f.curves) EXPECT_EQ(c.points.size(), 32u);  // 16 x 2
  }
  // Each app interferes with all, half and a quarter of its threads.
  ASSERT_EQ(d.apps.size(), 15u);
  EXPECT_EQ(d.apps[0].app, "minife");
  EXPECT_EQ(d.apps[1].app, "minife-32t");
  EXPECT_EQ(d.apps[2].app, "minife-16t");
  EXPECT_EQ(d.apps[14].app, "hotset-8t");  // hotset runs 32 threads
  EXPECT_NEAR(d.apps[0].read_pct(), 85, 1.0);
  EXPECT_EQ(d.pairs.size(), 75u);
}

TEST(ContentionSynthTest, NoiseFreeCurvesFallWithBandwidthAndWritesHurtMore) {
  const ContentionData d = Synth(NoiseFree());
  for (const SensitivityFamily& f : d.families) {
    for (const SensitivityCurve& c : f.curves) {
      double last = 1.0;
      for (const CurvePoint& p : c.points) {
        EXPECT_LE(p.normalized_perf, last + 1e-12) << f.app << " " << c.read_pct;
        last = p.normalized_perf;
      }
    }
    // At the same interferer bandwidth, fewer reads (more writes) harm more.
    const auto s50 = SmoothCurve(*f.FindCurve(50), Smoothing::kInterpolation, PointSet::kAll);
    const auto s100 = SmoothCurve(*f.FindCurve(100), Smoothing::kInterpolation, PointSet::kAll);
    ASSERT_TRUE(s50.ok() && s100.ok());
    for (double x = 5; x <= s50->max_gbps(); x += 5) {
      EXPECT_LT(s50->Evaluate(x), s100->Evaluate(x)) << f.app << " at " << x;
    }
    // The most a 100 % read stream reaches (the link, 45 GB/s) harms every application.
    EXPECT_LT(f.FindCurve(100)->points.back().normalized_perf, 0.9) << f.app;
  }
  // Bigger interferers put more on the memory.
  EXPECT_GT(d.apps[0].total_gbps(), d.apps[2].total_gbps());
  EXPECT_GT(d.apps[6].total_gbps(), d.apps[8].total_gbps());
}

TEST(ContentionSynthTest, OutliersHitAboutTheirShareOfMeasurements) {
  ContentionSynthOptions quiet = NoiseFree();
  quiet.level_noise = ContentionSynthOptions().level_noise;
  ContentionSynthOptions outliers = quiet;
  outliers.outlier_probability = 0.08;
  const ContentionData a = Synth(quiet);
  const ContentionData b = Synth(outliers);
  size_t total = 0, hit = 0;
  for (size_t f = 0; f < a.families.size(); ++f) {
    for (size_t c = 0; c < a.families[f].curves.size(); ++c) {
      const auto& pa = a.families[f].curves[c].points;
      const auto& pb = b.families[f].curves[c].points;
      ASSERT_EQ(pa.size(), pb.size());
      for (size_t i = 0; i < pa.size(); ++i) {
        EXPECT_EQ(pa[i].interference_gbps, pb[i].interference_gbps);
        ++total;
        if (pb[i].normalized_perf < pa[i].normalized_perf * (1 - 0.04 + 1e-9)) ++hit;
      }
    }
  }
  EXPECT_GT(hit, total * 4 / 100);
  EXPECT_LT(hit, total * 12 / 100);
}

TEST(ContentionSynthTest, RefusesBadOptions) {
  ContentionSynthOptions o;
  o.apps.clear();
  EXPECT_EQ(SynthesizeContentionData(o).status().code(), absl::StatusCode::kInvalidArgument);
  o = ContentionSynthOptions();
  o.repeats = 0;
  EXPECT_FALSE(SynthesizeContentionData(o).ok());
  o = ContentionSynthOptions();
  o.level_fractions = {0.5, 1.5};
  EXPECT_THAT(SynthesizeContentionData(o).status().message(), HasSubstr("1.5"));
  o = ContentionSynthOptions();
  o.tier = "nvme";
  EXPECT_EQ(SynthesizeContentionData(o).status().code(), absl::StatusCode::kNotFound);
  o = ContentionSynthOptions();
  o.apps = {{"no_such_model", 75}};
  EXPECT_FALSE(SynthesizeContentionData(o).ok());
}

TEST(ContentionSynthTest, AnotherTierGivesAnotherFamily) {
  ContentionSynthOptions o;
  o.machine = "disagg";
  o.tier = "remote";
  o.apps = {{"nekbone", 72}};
  const ContentionData d = Synth(o);
  ASSERT_EQ(d.families.size(), 1u);
  EXPECT_EQ(d.pairs.size(), 3u);  // nekbone against its three sizes
}

TEST(ContentionSynthTest, TheCxlExpanderOfDdr5CxlIsHarmedSoonerThanItsDdr5) {
  // A machine from measured curves (traces/SYNTH.md): the same application and interferers
  // on the CXL expander (26.8 GB/s) lose more at the same interferer bandwidth than on the
  // socket's DDR5 (263.6 GB/s).
  ContentionSynthOptions o = NoiseFree();
  o.machine = "ddr5cxl";
  o.apps = {{"nekbone", 72}};
  o.tier = "ddr";
  const ContentionData ddr = Synth(o);
  o.tier = "cxl";
  const ContentionData cxl = Synth(o);
  ASSERT_EQ(ddr.families.size(), 1u);
  ASSERT_EQ(cxl.families.size(), 1u);
  const auto on_ddr =
      SmoothCurve(*ddr.families[0].FindCurve(100), Smoothing::kInterpolation, PointSet::kAll);
  const auto on_cxl =
      SmoothCurve(*cxl.families[0].FindCurve(100), Smoothing::kInterpolation, PointSet::kAll);
  ASSERT_TRUE(on_ddr.ok() && on_cxl.ok());
  for (double x = 2; x <= std::min(on_cxl->max_gbps(), on_ddr->max_gbps()); x += 2) {
    EXPECT_LT(on_cxl->Evaluate(x), on_ddr->Evaluate(x)) << "at " << x << " GB/s";
  }
  EXPECT_LT(on_cxl->Evaluate(on_cxl->max_gbps()), 0.9);
  o.tier = "hbm";
  EXPECT_FALSE(SynthesizeContentionData(o).ok());  // ddr5cxl has none
}

}  // namespace
}  // namespace tiergym::contention

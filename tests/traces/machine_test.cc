#include "traces/machine.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "traces/base/file.h"

namespace tiergym {
namespace {

constexpr char kTwoTiers[] = R"({
  "name": "toy",
  "cores": 8,
  "tiers": [
    {"name": "ddr", "capacity_bytes": 1073741824, "bandwidth_gbps": 50, "latency_ns": 100,
     "migration_gbps": 4, "numa_node": 0},
    {"name": "hbm", "capacity_bytes": "0x10000000", "bandwidth_gbps": 200, "latency_ns": 120,
     "migration_gbps": 4}
  ]
})";

TEST(MachineTest, LoadsKnlPresetWithDdrDefaultAndMcdram) {
  absl::StatusOr<Machine> m = LoadMachine("knl");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->name, "knl");
  ASSERT_EQ(m->tiers.size(), 2u);
  EXPECT_EQ(m->tiers[0].name, "ddr");
  EXPECT_EQ(m->tiers[0].capacity_bytes, 96ull << 30);
  EXPECT_EQ(m->tiers[0].numa_node, 0);
  const TierSpec* hbm = m->Find("hbm");
  ASSERT_NE(hbm, nullptr);
  EXPECT_EQ(hbm->capacity_bytes, 16ull << 30);
  EXPECT_EQ(hbm->numa_node, 1);
  EXPECT_GT(hbm->bandwidth_gbps, 4 * m->tiers[0].bandwidth_gbps);
  EXPECT_GT(hbm->latency_ns, m->tiers[0].latency_ns);
  EXPECT_EQ(m->cache_line_bytes, 64);
  EXPECT_EQ(m->Find("remote"), nullptr);
  EXPECT_EQ(m->IndexOf("hbm"), 1);
  EXPECT_EQ(m->IndexOf("nvm"), -1);
}

TEST(MachineTest, LoadsDisaggPresetWithSlowLargeRemoteTier) {
  absl::StatusOr<Machine> m = LoadMachine("disagg");
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ(m->tiers.size(), 3u);
  const TierSpec* remote = m->Find("remote");
  ASSERT_NE(remote, nullptr);
  EXPECT_LT(remote->bandwidth_gbps, m->tiers[0].bandwidth_gbps);
  EXPECT_GT(remote->latency_ns, 4 * m->tiers[0].latency_ns);
  EXPECT_GT(remote->capacity_bytes, m->tiers[0].capacity_bytes);
  // The full bundled name works as well.
  absl::StatusOr<Machine> again = LoadMachine("machine_disagg");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, *m);
}

TEST(MachineTest, ListsBundledPresets) {
  std::vector<std::string> names = BundledMachineNames();
  EXPECT_NE(std::find(names.begin(), names.end(), "knl"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "disagg"), names.end());
}

TEST(MachineTest, ParsesDefaultsAndHexCapacity) {
  absl::StatusOr<Machine> m = ParseMachine(kTwoTiers, "toy.json");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->cores, 8);
  EXPECT_EQ(m->tiers[1].capacity_bytes, 0x10000000u);
  EXPECT_EQ(m->tiers[1].numa_node, -1);
  EXPECT_EQ(m->pebs_event, "MEM_UOPS_RETIRED:L2_MISS_LOADS");
}

TEST(MachineTest, LoadsFromFilePath) {
  const std::string path = ::testing::TempDir() + "/machine_test_toy.json";
  ASSERT_TRUE(WriteFileAtomically(path, kTwoTiers).ok());
  absl::StatusOr<Machine> m = LoadMachine(path);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->name, "toy");
}

TEST(MachineTest, UnknownNameIsNotFoundAndNamesThePresets) {
  absl::StatusOr<Machine> m = LoadMachine("no-such-machine");
  ASSERT_FALSE(m.ok());
  EXPECT_TRUE(absl::IsNotFound(m.status())) << m.status();
  EXPECT_NE(m.status().ToString().find("knl"), std::string::npos) << m.status();
}

TEST(MachineTest, RejectsMisspeltKeyWithFileAndLine) {
  const std::string text = R"({
  "name": "bad",
  "tiers": [
    {"name": "ddr", "capacity_bytes": 1024, "bandwith_gbps": 50, "latency_ns": 100,
     "migration_gbps": 4}
  ]
})";
  absl::StatusOr<Machine> m = ParseMachine(text, "bad.json");
  ASSERT_FALSE(m.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(m.status()));
  const std::string msg(m.status().message());
  EXPECT_NE(msg.find("bad.json:4:"), std::string::npos) << msg;
  EXPECT_NE(msg.find("bandwith_gbps"), std::string::npos) << msg;
}

TEST(MachineTest, RejectsNonPositiveLatencyWithFileAndLine) {
  const std::string text = R"({
  "name": "bad",
  "tiers": [
    {"name": "ddr", "capacity_bytes": 1024, "bandwidth_gbps": 50, "latency_ns": 100,
     "migration_gbps": 4},
    {"name": "hbm", "capacity_bytes": 1024, "bandwidth_gbps": 50,
     "latency_ns": 0, "migration_gbps": 4}
  ]
})";
  absl::StatusOr<Machine> m = ParseMachine(text, "bad.json");
  ASSERT_FALSE(m.ok());
  const std::string msg(m.status().message());
  EXPECT_NE(msg.find("bad.json:7:"), std::string::npos) << msg;
  EXPECT_NE(msg.find("tiers[1].latency_ns"), std::string::npos) << msg;
}

TEST(MachineTest, RejectsDuplicateTiersAndEmptyTierList) {
  const std::string dup = R"({"name": "d", "tiers": [
    {"name": "ddr", "capacity_bytes": 1, "bandwidth_gbps": 1, "latency_ns": 1, "migration_gbps": 1},
    {"name": "ddr", "capacity_bytes": 1, "bandwidth_gbps": 1, "latency_ns": 1, "migration_gbps": 1}
  ]})";
  absl::StatusOr<Machine> m = ParseMachine(dup, "dup.json");
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().ToString().find("duplicate tier"), std::string::npos) << m.status();
  EXPECT_FALSE(ParseMachine(R"({"name": "e", "tiers": []})", "e.json").ok());
  EXPECT_FALSE(ParseMachine(R"({"name": "e"})", "e.json").ok());
}

TEST(MachineTest, JsonRoundTrips) {
  absl::StatusOr<Machine> m = LoadMachine("disagg");
  ASSERT_TRUE(m.ok()) << m.status();
  absl::StatusOr<Machine> back = ParseMachine(MachineToJson(*m), "roundtrip.json");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, *m);
}

TEST(MachineTest, LoadsXeonMaxWithMeasuredCurvesAndDerivesPeakAndIdleLatency) {
  absl::StatusOr<Machine> m = LoadMachine("xeonmax");
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ(m->tiers.size(), 2u);
  const TierSpec& ddr = m->tiers[0];
  ASSERT_EQ(ddr.curves.size(), 2u);
  EXPECT_EQ(ddr.curves[0].read_pct, 69);
  EXPECT_EQ(ddr.curves[1].read_pct, 100);
  // The all-reads curve's last bandwidth and first latency (Mess, Xeon Platinum 8480+).
  EXPECT_DOUBLE_EQ(ddr.bandwidth_gbps, 263.57);
  EXPECT_DOUBLE_EQ(ddr.latency_ns, 109.982);
  const TierSpec* hbm = m->Find("hbm");
  ASSERT_NE(hbm, nullptr);
  // The A64FX's measured HBM2E (Mess simulator data): its own peak and idle latency.
  ASSERT_EQ(hbm->curves.size(), 2u);
  EXPECT_DOUBLE_EQ(hbm->bandwidth_gbps, 942.607);
  EXPECT_DOUBLE_EQ(hbm->latency_ns, 128.938);
  // Its 68/70 % files are in cycles at 2.2 GHz, the 100 % file in ns (derive_machines.py):
  // converted, one memory idles and saturates alike at both read shares (read as all ns,
  // the 69 % curve idled at 284 ns against 129).
  const LoadCurve hbm69 = hbm->CurveAt(69);
  const LoadCurve hbm100 = hbm->CurveAt(100);
  EXPECT_NEAR(hbm69.idle_latency_ns, 284.1 / 2.2, 0.2);
  EXPECT_NEAR(hbm69.idle_latency_ns, hbm100.idle_latency_ns, 0.5);
  EXPECT_NEAR(hbm69.Ratio(1.0) * hbm69.idle_latency_ns, hbm100.Ratio(1.0) * hbm100.idle_latency_ns,
              2.0);
  // At its peak the all-reads curve has 234.932 ns; with 69 % reads the peak is lower.
  const LoadCurve all_reads = ddr.CurveAt(100);
  EXPECT_NEAR(all_reads.Ratio(1.0) * all_reads.idle_latency_ns, 234.932, 1e-9);
  EXPECT_NEAR(ddr.CurveAt(69).peak_gbps, 236.567, 1e-9);
  EXPECT_NEAR(ddr.CurveAt(84.5).peak_gbps, 0.5 * (236.567 + 263.57), 1e-9);
  // Outside the measured shares the nearest curve applies.
  EXPECT_NEAR(ddr.CurveAt(10).peak_gbps, 236.567, 1e-9);
  // The ratio grows with the load.
  double previous = 0;
  for (double u = 0; u <= 1.2; u += 0.05) {
    const double r = all_reads.Ratio(u);
    EXPECT_GE(r, previous - 1e-12) << u;
    previous = r;
  }
  EXPECT_DOUBLE_EQ(all_reads.Ratio(0), 1.0);
}

TEST(MachineTest, LoadsDdr5CxlWithACpulessCxlTier) {
  absl::StatusOr<Machine> m = LoadMachine("ddr5cxl");
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ(m->tiers.size(), 2u);
  const TierSpec* ddr = m->Find("ddr");
  const TierSpec* cxl = m->Find("cxl");
  ASSERT_NE(ddr, nullptr);
  ASSERT_NE(cxl, nullptr);
  EXPECT_EQ(*ddr, *LoadMachine("xeonmax")->Find("ddr"));
  // The Mess simulator's CXL expander (cycles at 2.1 GHz, host port to memory) plus 51 ns
  // from core to host port: 26.76 GB/s at 1282.36 / 2.1 + 51 ns with all reads, 225.58 /
  // 2.1 + 51 ns idle; slower than local DDR5 when idle, as a core sees it.
  ASSERT_EQ(cxl->curves.size(), 2u);
  EXPECT_NEAR(cxl->bandwidth_gbps, 26.759, 0.001);
  EXPECT_NEAR(cxl->latency_ns, 225.5841 / 2.1 + 51, 0.01);
  const LoadCurve cxl100 = cxl->CurveAt(100);
  EXPECT_NEAR(cxl100.Ratio(1.0) * cxl100.idle_latency_ns, 1282.3587 / 2.1 + 51, 0.01);
  EXPECT_GT(cxl->latency_ns, ddr->latency_ns + 40);
  // The 69 % curve lies half way between the 68 % (cycles) and 70 % (ns) files: the same
  // idle latency, a higher peak than with all reads.
  EXPECT_NEAR(cxl->CurveAt(69).idle_latency_ns, cxl->latency_ns, 0.1);
  EXPECT_GT(cxl->CurveAt(69).peak_gbps, cxl->CurveAt(100).peak_gbps);
}

TEST(MachineTest, JsonRoundTripsWithCurves) {
  absl::StatusOr<Machine> m = LoadMachine("xeonmax");
  ASSERT_TRUE(m.ok()) << m.status();
  absl::StatusOr<Machine> back = ParseMachine(MachineToJson(*m), "roundtrip.json");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, *m);
}

TEST(MachineTest, TierWithoutCurvesHasAFlatCurve) {
  absl::StatusOr<Machine> m = ParseMachine(kTwoTiers, "toy.json");
  ASSERT_TRUE(m.ok()) << m.status();
  const LoadCurve c = m->tiers[0].CurveAt(70);
  EXPECT_TRUE(c.flat());
  EXPECT_EQ(c.peak_gbps, 50);
  EXPECT_EQ(c.idle_latency_ns, 100);
  EXPECT_EQ(c.Ratio(0.99), 1.0);
}

// A machine whose first tier's curves are `curves` (JSON), for the refusals below.
std::string WithCurves(const std::string& curves, const std::string& second = "") {
  std::string text =
      "{\n"
      "  \"name\": \"c\",\n"
      "  \"tiers\": [\n"
      "    {\"name\": \"ddr\", \"capacity_bytes\": 1024, \"migration_gbps\": 4,\n"
      "     \"curves\": " +
      curves + "}";
  if (!second.empty()) text += ",\n    " + second;
  return text + "\n  ]\n}";
}

struct CurveCase {
  std::string name;
  std::string text;
  std::string where;  // "FILE:LINE:" and path the message must name
  std::string rule;   // words of the rule
};

TEST(MachineTest, RefusesMalformedCurvesNamingLineFieldAndRule) {
  const std::string ok_curve = R"([{"read_pct": 100, "points": [[1, 100], [50, 150]]}])";
  const std::vector<CurveCase> cases = {
      {"non-monotonic bandwidth",
       WithCurves(R"([{"read_pct": 100, "points": [[1, 100], [50, 150], [40, 170]]}])"),
       "c.json:5:67: tiers[0].curves[0].points[2]", "bandwidth must increase"},
      {"falling latency", WithCurves(R"([{"read_pct": 100, "points": [[1, 100], [50, 90]]}])"),
       "tiers[0].curves[0].points[1]", "latency must not fall"},
      {"negative bandwidth", WithCurves(R"([{"read_pct": 100, "points": [[-1, 100], [5, 90]]}])"),
       "tiers[0].curves[0].points[0]", "must be > 0"},
      {"negative latency", WithCurves(R"([{"read_pct": 100, "points": [[1, -100], [5, 90]]}])"),
       "tiers[0].curves[0].points[0]", "latency -100 ns must be > 0"},
      {"read share out of range",
       WithCurves(R"([{"read_pct": 101, "points": [[1, 100], [5, 190]]}])"),
       "tiers[0].curves[0].read_pct", "[0, 100]"},
      {"read shares not ascending",
       WithCurves(
           R"([{"read_pct": 100, "points": [[1, 100], [5, 190]]}, {"read_pct": 50, "points": [[1, 100], [5, 190]]}])"),
       "tiers[0].curves[1].read_pct", "ascending read_pct"},
      {"missing read shares on another tier",
       WithCurves(
           R"([{"read_pct": 50, "points": [[1, 100], [5, 190]]}, {"read_pct": 100, "points": [[1, 100], [5, 190]]}])",
           R"({"name": "hbm", "capacity_bytes": 1024, "migration_gbps": 4, "curves": )" + ok_curve +
               "}"),
       "tiers[1].curves", "read shares 100 differ from tier \"ddr\"'s 50, 100"},
      {"one point", WithCurves(R"([{"read_pct": 100, "points": [[1, 100]]}])"),
       "tiers[0].curves[0].points", "at least two"},
      {"point not a pair", WithCurves(R"([{"read_pct": 100, "points": [[1, 100], [5]]}])"),
       "tiers[0].curves[0].points[1]", "pair of numbers"},
      {"no curve", WithCurves("[]"), "tiers[0].curves", "at least one curve"},
      {"missing points", WithCurves(R"([{"read_pct": 100}])"), "tiers[0].curves[0]",
       "missing required key \"points\""},
      {"curves and numbers",
       R"({"name": "c", "tiers": [{"name": "ddr", "capacity_bytes": 1024, "migration_gbps": 4,
          "bandwidth_gbps": 10, "curves": )" +
           ok_curve + "}]}",
       "tiers[0].bandwidth_gbps", "not both"},
  };
  for (const CurveCase& c : cases) {
    absl::StatusOr<Machine> m = ParseMachine(c.text, "c.json");
    ASSERT_FALSE(m.ok()) << c.name;
    const std::string msg(m.status().message());
    EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument) << c.name;
    EXPECT_NE(msg.find(c.where), std::string::npos) << c.name << ": " << msg;
    EXPECT_NE(msg.find(c.rule), std::string::npos) << c.name << ": " << msg;
  }
}

TEST(MachineTest, LoadedMemoryTimeIsTheTwoNumberModelOnFlatCurves) {
  const std::vector<double> latency = {30, 50}, band = {70, 20};
  const std::vector<const LoadCurve*> flat = {nullptr, nullptr};
  EXPECT_EQ(LoadedMemoryTimeNs(latency, band, flat), 80);  // latency adds up
  const std::vector<double> band_bound = {120, 20};
  EXPECT_EQ(LoadedMemoryTimeNs(latency, band_bound, flat), 120);  // the slowest transfer
}

TEST(MachineTest, LoadedLatencyRisesWithTheTiersLoadAndSolvesItsFixedPoint) {
  LoadCurve curve;
  curve.idle_latency_ns = 100;
  curve.peak_gbps = 10;
  curve.ratio = {{0.5, 1.0}, {1.0, 3.0}};  // flat to half the peak, then 3x at the peak
  const std::vector<const LoadCurve*> c = {&curve};
  // Low load (band time 10 of a latency time 100: u = 0.1): idle latency.
  EXPECT_NEAR(LoadedMemoryTimeNs(std::vector<double>{100}, std::vector<double>{10}, c), 100, 1e-9);
  // Band time 80: at m = 100, u = 0.8 gives a ratio of 2.2, so m rises until
  // m = 100 * (1 + 4 * (80 / m - 0.5)) = 400 * 80 / m - 100 holds.
  const double m = LoadedMemoryTimeNs(std::vector<double>{100}, std::vector<double>{80}, c);
  EXPECT_NEAR(m, 100 * curve.Ratio(80 / m), 1e-6 * m);
  EXPECT_GT(m, 100);
  EXPECT_GT(m, 80);
  // Bandwidth-bound work runs at the peak: band time 500 against latency 100 * 3.
  EXPECT_NEAR(LoadedMemoryTimeNs(std::vector<double>{100}, std::vector<double>{500}, c), 500, 1e-9);
}

TEST(MachineTest, TheCombinedMemoryTimeSolvesItsFixedPointForEverySmoothness) {
  // Two loaded tiers whose bandwidth times overlap by 60 %, latency- and bandwidth-bound
  // time combined as the p-norm: the time m returned is the one whose loads give it,
  // m = ((sum_t l_t r_t(b_t / m))^p + T_b^p)^(1/p), for the norms computed without pow
  // (1, 2, 4) and with it, and for the hard maximum.
  LoadCurve a, b;
  a.idle_latency_ns = b.idle_latency_ns = 100;
  a.peak_gbps = b.peak_gbps = 10;
  a.ratio = {{0.3, 1.0}, {0.7, 1.6}, {1.0, 4.0}};
  b.ratio = {{0.5, 1.0}, {1.0, 2.5}};
  const std::vector<const LoadCurve*> curves = {&a, &b};
  const std::vector<double> latency = {90, 60}, band = {70, 40};
  for (double p : {0.0, 1.0, 2.0, 3.0, 4.0, 8.0}) {
    SCOPED_TRACE(p);
    const MemoryCombination how{0.6, p};
    const double m = LoadedMemoryTimeNs(latency, band, curves, how);
    const double band_time = 70 + 0.4 * 40;
    const double lat = 90 * a.Ratio(70 / m) + 60 * b.Ratio(40 / m);
    const double expected = p == 0 ? std::max(lat, band_time)
                                   : std::pow(std::pow(lat, p) + std::pow(band_time, p), 1 / p);
    EXPECT_NEAR(m, expected, 1e-9 * m);
    EXPECT_GT(m, std::max(150.0, band_time));  // loaded above the idle latencies' sum
  }
}

}  // namespace
}  // namespace tiergym

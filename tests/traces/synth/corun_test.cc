// Synthetic co-runs (traces/synth/corun_synth.h): the ground truth of tenants sharing the
// synthetic machine.
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "traces/machine.h"
#include "traces/synth/corun_synth.h"
#include "traces/synth/generator.h"

namespace tiergym::synth {
namespace {

using ::testing::HasSubstr;

constexpr int kChunks = 20;  // coarse chunks keep the suite fast; the rules do not change

CorunOptions Options(uint64_t seed = 1) {
  CorunOptions o;
  o.seed = seed;
  o.chunks_per_phase = kChunks;
  return o;
}

CorunTenant Tenant(const std::string& app, std::vector<std::pair<std::string, double>> fractions,
                   uint64_t start_ns = 0, double read_pct = 80) {
  CorunTenant t;
  t.name = app;
  t.app = *LoadAppModel(app);
  t.placement.default_tier = "ddr";
  t.placement.fractions = std::move(fractions);
  t.start_ns = start_ns;
  t.read_pct = read_pct;
  return t;
}

const Machine& Knl() {
  static const Machine* m = new Machine(*LoadMachine("knl"));
  return *m;
}

uint64_t RuntimeOf(const CorunScenario& s, const std::string& tenant) {
  absl::StatusOr<CorunResult> r = SimulateCorun(Knl(), s, Options());
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok()) return 0;
  for (const CorunTenantResult& t : r->tenants) {
    if (t.name == tenant) return t.runtime_ns;
  }
  ADD_FAILURE() << "no tenant " << tenant;
  return 0;
}

TEST(CorunTest, TheGroundTruthIsDeterministicUnderASeed) {
  const CorunScenario s{"pair",
                        {Tenant("minife", {}), Tenant("nekbone", {{"hbm", 0.3}}, 2'000'000'000)}};
  auto a = SimulateCorun(Knl(), s, Options(7));
  auto b = SimulateCorun(Knl(), s, Options(7));
  auto c = SimulateCorun(Knl(), s, Options(8));
  ASSERT_TRUE(a.ok() && b.ok() && c.ok()) << a.status();
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(a->tenants[i].runtime_ns, b->tenants[i].runtime_ns);
    EXPECT_EQ(a->tenants[i].solo_runtime_ns, b->tenants[i].solo_runtime_ns);
    ASSERT_EQ(a->tenants[i].bandwidth.size(), b->tenants[i].bandwidth.size());
    for (size_t k = 0; k < a->tenants[i].bandwidth.size(); ++k) {
      EXPECT_EQ(a->tenants[i].bandwidth[k].gbps, b->tenants[i].bandwidth[k].gbps);
    }
    EXPECT_NE(a->tenants[i].runtime_ns, c->tenants[i].runtime_ns);  // another seed's noise
  }
}

TEST(CorunTest, OneApplicationAloneReproducesTheSoloSyntheticRuntime) {
  for (const auto& fractions : std::vector<std::vector<std::pair<std::string, double>>>{
           {}, {{"hbm", 0.5}}, {{"hbm", 1.0}}}) {
    CorunTenant t = Tenant("lulesh", fractions, 3'000'000'000);
    t.run = "hbm50";
    const CorunScenario s{"alone", {t}};
    auto r = SimulateCorun(Knl(), s, Options());
    ASSERT_TRUE(r.ok()) << r.status();
    auto solo = GroundTruthRuntimeNs(t.app, Knl(), t.placement, 1, "hbm50", kChunks);
    ASSERT_TRUE(solo.ok());
    EXPECT_NEAR(static_cast<double>(r->tenants[0].runtime_ns), static_cast<double>(*solo), 1.0);
    EXPECT_EQ(r->tenants[0].solo_runtime_ns, *solo);
    EXPECT_EQ(r->tenants[0].bandwidth.size(), t.app.schedule.size());
    EXPECT_EQ(r->tenants[0].bandwidth.front().from_ns, 3'000'000'000u);
  }
}

TEST(CorunTest, MoreCoRunnerTrafficNeverMakesAnApplicationFaster) {
  // Everyone on ddr: each added co-runner adds traffic on the target's only tier.
  std::vector<CorunTenant> tenants = {Tenant("lulesh", {})};
  uint64_t previous = RuntimeOf({"t", tenants}, "lulesh");
  for (const char* app : {"nekbone", "minife", "lammps"}) {
    tenants.push_back(Tenant(app, {}));
    const uint64_t t = RuntimeOf({"t", tenants}, "lulesh");
    EXPECT_GT(t, previous) << "adding " << app;
    previous = t;
  }
  // A co-runner writing more loads the channel more (a write costs more than a read).
  const uint64_t reads =
      RuntimeOf({"r", {Tenant("lulesh", {}), Tenant("minife", {}, 0, 100)}}, "lulesh");
  const uint64_t writes =
      RuntimeOf({"w", {Tenant("lulesh", {}), Tenant("minife", {}, 0, 40)}}, "lulesh");
  EXPECT_GT(writes, reads);
  // The law itself: more load never gives more bandwidth or less latency.
  const SharedTierLaw law;
  TierLoad last = TierLoadFor(90, 0, 80, 0.5, law);
  EXPECT_EQ(last.bandwidth_factor, 1.0);
  EXPECT_EQ(last.latency_factor, 1.0);
  for (double gbps = 1; gbps < 300; gbps *= 1.5) {
    const TierLoad l = TierLoadFor(90, gbps, 80, 0.5, law);
    EXPECT_LE(l.bandwidth_factor, last.bandwidth_factor);
    EXPECT_GE(l.latency_factor, last.latency_factor);
    EXPECT_GE(l.bandwidth_factor, 0.5);  // the fair share
    last = l;
  }
}

TEST(CorunTest, TenantsOnOtherTiersOrAtOtherTimesDoNotInterfere) {
  CorunTenant nekbone = Tenant("nekbone", {});
  nekbone.run = "same-noise";  // the default stream names the scenario
  const uint64_t alone = RuntimeOf({"a", {nekbone}}, "nekbone");
  // A co-runner entirely on hbm leaves ddr alone.
  // (Equal up to the rounding of the extra events the co-runner's chunks cut.)
  EXPECT_NEAR(
      static_cast<double>(RuntimeOf({"b", {nekbone, Tenant("minife", {{"hbm", 1.0}})}}, "nekbone")),
      static_cast<double>(alone), 2.0);
  // A co-runner that starts after nekbone has finished never meets it.
  EXPECT_NEAR(
      static_cast<double>(RuntimeOf({"c", {nekbone, Tenant("minife", {}, alone + 1)}}, "nekbone")),
      static_cast<double>(alone), 2.0);
}

TEST(CorunTest, RefusesBadScenarios) {
  EXPECT_THAT(SimulateCorun(Knl(), {"empty", {}}, Options()).status().message(),
              HasSubstr("no tenants"));
  EXPECT_THAT(
      SimulateCorun(Knl(), {"twice", {Tenant("minife", {}), Tenant("minife", {})}}, Options())
          .status()
          .message(),
      HasSubstr("appears twice"));
  EXPECT_THAT(
      SimulateCorun(Knl(), {"read", {Tenant("minife", {}, 0, 120)}}, Options()).status().message(),
      HasSubstr("read_pct"));
  // Together the tenants' pages do not fit a 4 GiB hbm, though each alone does.
  Machine small = Knl();
  small.tiers[1].capacity_bytes = 4ull << 30;
  const CorunScenario full{"full",
                           {Tenant("minife", {{"hbm", 1.0}}), Tenant("lulesh", {{"hbm", 1.0}})}};
  absl::Status s = SimulateCorun(small, full, Options()).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_THAT(s.message(), HasSubstr("tier hbm"));
}

TEST(CorunTest, BundledScenariosHaveTwoAndFourTenantsOnKnlAndDisagg) {
  for (const char* name : {"knl", "disagg"}) {
    auto machine = LoadMachine(name);
    ASSERT_TRUE(machine.ok());
    auto scenarios = BundledCorunScenarios(*machine);
    ASSERT_TRUE(scenarios.ok());
    bool two = false, four = false;
    for (const CorunScenario& s : *scenarios) {
      two |= s.tenants.size() == 2;
      four |= s.tenants.size() == 4;
      for (const CorunTenant& t : s.tenants) {
        EXPECT_TRUE(ResolvePlacement(t.app, *machine, t.placement).ok()) << s.name << t.name;
      }
    }
    EXPECT_TRUE(two && four) << name;
  }
}

}  // namespace
}  // namespace tiergym::synth

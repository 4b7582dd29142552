// The composed co-run estimate (estimator/corun.h).
#include "estimator/corun.h"

#include <memory>
#include <string>
#include <vector>

#include "estimator/contention/synth/contention_synth.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/test_root.h"
#include "traces/synth/app_model.h"
#include "traces/synth/generator.h"

namespace tiergym {
namespace {

using ::testing::HasSubstr;

struct App {
  std::unique_ptr<Profile> profile;
  std::shared_ptr<const EstimatorIndex> index;
};

const App& Load(const std::string& name) {
  static auto* apps = new std::map<std::string, App>();
  auto it = apps->find(name);
  if (it == apps->end()) {
    auto model = synth::LoadAppModel(name);
    auto machine = LoadMachine("knl");
    auto generated = synth::GenerateProfile(*model, *machine, testing::SmallProfileOptions());
    App a;
    a.profile = std::make_unique<Profile>(*Profile::FromRuns(name, generated->traces));
    IndexOptions io;
    io.base_device = "ddr";
    io.machine = *machine;
    a.index = *EstimatorIndex::Build(*a.profile, io);
    it = apps->emplace(name, std::move(a)).first;
  }
  return it->second;
}

// The synthetic sensitivity of `app` on knl's ddr (the curves' campaign, CONTENTION.md).
const contention::ContentionModel& Sensitivity(const std::string& app) {
  static auto* data = new contention::ContentionData(*[] {
    contention::ContentionSynthOptions o;
    o.interferer_scales = {1.0};
    o.apps = {{"minife", 85}, {"lulesh", 65}, {"nekbone", 72}};
    return contention::SynthesizeContentionData(o);
  }());
  static auto* models = new std::map<std::string, contention::ContentionModel>();
  auto it = models->find(app);
  if (it == models->end()) {
    it = models
             ->emplace(app, *contention::ContentionModel::Create(
                                *contention::FindFamily(data->families, app), {}))
             .first;
  }
  return it->second;
}

CorunTenantInput Tenant(const std::string& app, double hbm_fraction = 0, bool sensitive = true) {
  const App& a = Load(app);
  Placement p;
  p.default_tier = "ddr";
  if (hbm_fraction > 0) p.fractions = {{"hbm", hbm_fraction}};
  CorunTenantInput in;
  in.name = app;
  in.index = a.index;
  in.placement = *a.index->Resolve(p);
  in.read_pct = 75;
  in.misses_per_sample = CorunMissesPerSample(*a.profile);
  in.sensitivity.resize(a.index->devices().size());
  if (sensitive) in.sensitivity[0] = Sensitivity(app);  // ddr
  return in;
}

TEST(CorunEstimateTest, WithNoCoRunnersTheComposedEstimateIsThePlainEstimate) {
  for (Model model : {Model::kPaper, Model::kRoofline}) {
    CorunEstimateOptions o;
    o.model = model;
    CorunTenantInput t = Tenant("lulesh", 0.3);
    t.start_ns = 5e9;
    auto e = EstimateCorun({t}, o);
    ASSERT_TRUE(e.ok()) << e.status();
    const PlacementState plain(t.index, t.placement, model);
    EXPECT_NEAR(e->tenants[0].blind_ns, plain.runtime_ns(), 1e-9 * plain.runtime_ns());
    EXPECT_NEAR(e->tenants[0].composed_ns, plain.runtime_ns(), 1e-6 * plain.runtime_ns());
    EXPECT_THAT(e->tenants[0].mean_slowdown, ::testing::Each(1.0));
    EXPECT_TRUE(e->converged);
  }
  // Co-runners the tenant is not sensitive to (no curves on any tier) change nothing
  // either.
  auto e = EstimateCorun({Tenant("lulesh", 0, false), Tenant("minife", 0, false)}, {});
  ASSERT_TRUE(e.ok());
  for (const CorunTenantEstimate& t : e->tenants) EXPECT_DOUBLE_EQ(t.composed_ns, t.blind_ns);
}

TEST(CorunEstimateTest, CoRunnersOnTheSameTierSlowEachOtherDown) {
  auto two = EstimateCorun({Tenant("lulesh"), Tenant("minife")}, {});
  ASSERT_TRUE(two.ok()) << two.status();
  EXPECT_TRUE(two->converged);
  for (const CorunTenantEstimate& t : two->tenants) {
    EXPECT_GT(t.composed_ns, 1.05 * t.blind_ns) << t.name;
    EXPECT_GT(t.mean_slowdown[0], 1.0);
    EXPECT_EQ(t.mean_slowdown[1], 1.0);  // hbm: no curves given
  }
  // One pass at the co-runners' unslowed bandwidth slows more than the fixed point, where
  // slowed co-runners put less on the tier.
  CorunEstimateOptions one_pass;
  one_pass.fixed_point = false;
  auto solo = EstimateCorun({Tenant("lulesh"), Tenant("minife")}, one_pass);
  ASSERT_TRUE(solo.ok());
  EXPECT_EQ(solo->iterations, 1);
  EXPECT_GT(solo->tenants[0].composed_ns, two->tenants[0].composed_ns);
  // A third co-runner on ddr slows lulesh further.
  auto three = EstimateCorun({Tenant("lulesh"), Tenant("minife"), Tenant("nekbone")}, {});
  ASSERT_TRUE(three.ok());
  EXPECT_GT(three->tenants[0].composed_ns, two->tenants[0].composed_ns);
  // A co-runner whose pages are all on hbm does not touch ddr.
  auto apart = EstimateCorun({Tenant("lulesh"), Tenant("minife", 1.0)}, {});
  ASSERT_TRUE(apart.ok());
  EXPECT_NEAR(apart->tenants[0].composed_ns, apart->tenants[0].blind_ns,
              1e-9 * apart->tenants[0].blind_ns);
}

TEST(CorunEstimateTest, RefusesBadInput) {
  EXPECT_THAT(EstimateCorun({}, {}).status().message(), HasSubstr("no tenants"));
  CorunTenantInput t = Tenant("lulesh");
  t.sensitivity.pop_back();
  EXPECT_THAT(EstimateCorun({t}, {}).status().message(), HasSubstr("sensitivities for"));
  t = Tenant("lulesh");
  t.read_pct = 101;
  EXPECT_THAT(EstimateCorun({t}, {}).status().message(), HasSubstr("read_pct"));
  CorunEstimateOptions o;
  o.pieces_per_phase = 0;
  EXPECT_FALSE(EstimateCorun({Tenant("lulesh")}, o).ok());
}

}  // namespace
}  // namespace tiergym

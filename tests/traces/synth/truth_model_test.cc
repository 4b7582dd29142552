#include "traces/synth/truth_model.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "traces/machine.h"
#include "traces/synth/app_model.h"
#include "traces/synth/generator.h"
#include "traces/synth/time_model.h"

namespace tiergym::synth {
namespace {

using ::testing::HasSubstr;

// One bandwidth-bound and one compute-bound phase over two arrays.
constexpr char kApp[] = R"({
  "name": "two",
  "threads": 64,
  "arrays": [{"name": "a", "size_bytes": 67108864}, {"name": "b", "size_bytes": 67108864}],
  "phases": [
    {"name": "stream", "instructions": 2000000000, "mpki": 80, "compute_gips": 60, "mlp": 16,
     "overlap": 0.5,
     "accesses": [{"array": "a", "pattern": "sequential"}, {"array": "b", "pattern": "uniform"}]},
    {"name": "compute", "instructions": 2000000000, "mpki": 0.5, "compute_gips": 40,
     "accesses": [{"array": "b", "pattern": "uniform"}]},
    {"name": "gather", "instructions": 1000000000, "mpki": 80, "compute_gips": 60, "mlp": 2,
     "accesses": [{"array": "b", "pattern": "uniform"}]}
  ],
  "schedule": [{"repeat": 3, "phases": ["stream", "compute"]}, "gather"]
})";

AppModel App() {
  absl::StatusOr<AppModel> app = ParseAppModel(kApp, "two.json");
  EXPECT_TRUE(app.ok()) << app.status();
  return *app;
}

Machine Load(const std::string& name) {
  absl::StatusOr<Machine> m = LoadMachine(name);
  EXPECT_TRUE(m.ok()) << m.status();
  return *m;
}

double Chunk(const TruthModel& truth, const Machine& machine, std::vector<double> shares,
             int phase = 0) {
  const AppModel app = App();
  return TimeModel::ChunkTimeNs(app.phases[phase], machine, truth, app.threads, 1e7, shares, {});
}

TEST(TruthModelTest, TheSpecMemberIsTheDefaultModelExactly) {
  absl::StatusOr<TruthModel> spec = LoadTruthModel("spec");
  ASSERT_TRUE(spec.ok()) << spec.status();
  const AppModel app = App();
  const Machine knl = Load("knl");
  SynthOptions plain;
  plain.target_samples = 5000;
  plain.chunks_per_phase = 20;
  SynthOptions with = plain;
  with.truth = *spec;
  auto a = GenerateProfile(app, knl, plain);
  auto b = GenerateProfile(app, knl, with);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(a->runs.size(), b->runs.size());
  for (size_t i = 0; i < a->runs.size(); ++i)
    EXPECT_EQ(a->runs[i].runtime_ns, b->runs[i].runtime_ns);
  for (size_t t = 0; t < a->traces.size(); ++t) {
    EXPECT_EQ(a->traces[t].runtime_ns(), b->traces[t].runtime_ns());
    EXPECT_EQ(a->traces[t].num_samples(), b->traces[t].num_samples());
  }
}

TEST(TruthModelTest, PartlyOverlappingTiersSlowASplitButNotOneTier) {
  const Machine knl = Load("knl");
  TruthModel serial;
  serial.tier_overlap = 0.5;
  const TruthModel spec;
  EXPECT_DOUBLE_EQ(Chunk(serial, knl, {1, 0}), Chunk(spec, knl, {1, 0}));
  EXPECT_DOUBLE_EQ(Chunk(serial, knl, {0, 1}), Chunk(spec, knl, {0, 1}));
  EXPECT_GT(Chunk(serial, knl, {0.5, 0.5}), Chunk(spec, knl, {0.5, 0.5}) * 1.01);
}

TEST(TruthModelTest, ASmoothLimitIsSlowerThanTheHardOneAndTendsToIt) {
  const Machine knl = Load("knl");
  const TruthModel hard;
  TruthModel smooth, sharp;
  smooth.limit_smoothness = 2;
  sharp.limit_smoothness = 64;
  for (std::vector<double> shares : {std::vector<double>{1, 0}, {0.5, 0.5}, {0, 1}}) {
    EXPECT_GT(Chunk(smooth, knl, shares), Chunk(hard, knl, shares));
    EXPECT_NEAR(Chunk(sharp, knl, shares), Chunk(hard, knl, shares),
                0.03 * Chunk(hard, knl, shares));
  }
}

TEST(TruthModelTest, ComputeOverlapReplacesThePhasesOwn) {
  const Machine knl = Load("knl");
  TruthModel all, none;
  all.compute_overlap = 1;
  none.compute_overlap = 0;
  EXPECT_LT(Chunk(all, knl, {1, 0}), Chunk(TruthModel{}, knl, {1, 0}));
  EXPECT_GT(Chunk(none, knl, {1, 0}), Chunk(TruthModel{}, knl, {1, 0}));
}

TEST(TruthModelTest, FlatTiersQueueAlongTheCurveTheyAreGivenAndMeasuredOnesKeepTheirOwn) {
  absl::StatusOr<TruthModel> queueing = LoadTruthModel("queueing");
  ASSERT_TRUE(queueing.ok()) << queueing.status();
  ASSERT_TRUE(queueing->queueing_like.has_value());
  const Machine knl = Load("knl");
  // The gather phase is latency-bound with its bandwidth at 70 % of ddr's peak: queued.
  EXPECT_GT(Chunk(*queueing, knl, {1, 0}, 2), Chunk(TruthModel{}, knl, {1, 0}, 2) * 1.05);
  // Every xeonmax tier has measured curves: nothing changes.
  const Machine xeonmax = Load("xeonmax");
  EXPECT_DOUBLE_EQ(Chunk(*queueing, xeonmax, {0.5, 0.5}), Chunk(TruthModel{}, xeonmax, {0.5, 0.5}));
}

TEST(TruthModelTest, DriftedInstructionsRetireWithoutMissesOnTheirTierOnly) {
  const AppModel app = App();
  const Machine knl = Load("knl");
  TruthModel drift;
  drift.instruction_drift = {{"hbm", 0.1}, {"remote", 0.5}};  // knl has no remote: ignored
  SynthOptions options;
  options.target_samples = 20000;
  options.chunks_per_phase = 20;
  options.measured_runs = false;
  auto plain = GenerateProfile(app, knl, options);
  options.truth = drift;
  auto drifted = GenerateProfile(app, knl, options);
  ASSERT_TRUE(plain.ok() && drifted.ok());
  // ddr: unchanged. hbm: the same samples (misses), 10 % more instructions in the phases
  // with misses, and slower.
  EXPECT_EQ(plain->traces[0].runtime_ns(), drifted->traces[0].runtime_ns());
  EXPECT_EQ(plain->traces[1].num_samples(), drifted->traces[1].num_samples());
  EXPECT_GT(drifted->traces[1].runtime_ns(), plain->traces[1].runtime_ns());
  const auto& p = plain->traces[1].marks();
  const auto& d = drifted->traces[1].marks();
  ASSERT_EQ(p.size(), d.size());
  ASSERT_GE(p.size(), 2u);
  // The first phasemark after the start closes the first (stream) phase instance.
  EXPECT_NEAR(static_cast<double>(d[1].instructions) / static_cast<double>(p[1].instructions), 1.1,
              1e-6);
}

TEST(TruthModelTest, ParsesWhatItWritesAndRefusesBadInputByField) {
  for (const TruthModel& t : BundledTruths()) {
    auto back = ParseTruthModel(TruthModelToJson(t), "t.json");
    ASSERT_TRUE(back.ok()) << t.name << ": " << back.status();
    EXPECT_EQ(back->name, t.name);
    EXPECT_EQ(back->tier_overlap, t.tier_overlap);
    EXPECT_EQ(back->limit_smoothness, t.limit_smoothness);
    EXPECT_EQ(back->compute_overlap, t.compute_overlap);
    EXPECT_EQ(back->queueing_like.has_value(), t.queueing_like.has_value());
    EXPECT_EQ(back->instruction_drift, t.instruction_drift);
  }
  struct Bad {
    std::string json, where;
  };
  for (const Bad& b : std::vector<Bad>{
           {R"({"name": "x", "tier_overlap": 1.5})", "tier_overlap: must be in [0, 1]"},
           {R"({"name": "x", "limit_smoothness": 0.5})", "limit_smoothness: must be in [1, 64]"},
           {R"({"name": "x", "tier_overlpa": 1})", "tier_overlpa"},
           {R"({"name": "x", "instruction_drift": {"hbm": "a"}})", "instruction_drift.hbm"},
           {R"({"name": "x", "queueing_like": {"machine": "knl", "tier": "ddr"}})",
            "has no measured curves"},
           {R"({"name": "x", "queueing_like": {"machine": "xeonmax", "tier": "nvm"}})",
            "has no tier \"nvm\""},
           {R"({"tier_overlap": 1})", "name"}}) {
    auto t = ParseTruthModel(b.json, "t.json");
    ASSERT_FALSE(t.ok()) << b.json;
    EXPECT_THAT(t.status().message(), HasSubstr(b.where)) << b.json;
    EXPECT_THAT(t.status().message(), HasSubstr("t.json:")) << b.json;
  }
  EXPECT_FALSE(LoadTruthModel("no-such-member").ok());
}

}  // namespace
}  // namespace tiergym::synth

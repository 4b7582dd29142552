#include "traces/synth/procedural.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
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

TEST(ProceduralTest, TheSameSeedGivesTheSameModel) {
  EXPECT_EQ(ProceduralAppJson(7), ProceduralAppJson(7));
  EXPECT_NE(ProceduralAppJson(7), ProceduralAppJson(8));
  absl::StatusOr<AppModel> a = ProceduralAppModel(7);
  absl::StatusOr<AppModel> b = LoadAppModel("procedural:7");
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(a->name, "procedural-v1-7");
  EXPECT_EQ(b->name, a->name);
  EXPECT_EQ(b->schedule, a->schedule);
  ASSERT_EQ(b->arrays.size(), a->arrays.size());
  for (size_t i = 0; i < a->arrays.size(); ++i) {
    EXPECT_EQ(b->arrays[i].size_bytes, a->arrays[i].size_bytes);
    EXPECT_EQ(b->arrays[i].start_address, a->arrays[i].start_address);
  }
  absl::StatusOr<std::string> text = BundledModelText("procedural:7");
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, ProceduralAppJson(7));
  // The largest seed is a seed like any other.
  EXPECT_TRUE(LoadAppModel("procedural:18446744073709551615").ok());
}

TEST(ProceduralTest, RefusesMalformedSeeds) {
  for (const char* bad : {"procedural:", "procedural:x", "procedural:-1", "procedural:1.5",
                          "procedural:18446744073709551616"}) {
    absl::StatusOr<AppModel> m = LoadAppModel(bad);
    ASSERT_FALSE(m.ok()) << bad;
    EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(m.status().message()), HasSubstr("procedural:SEED")) << bad;
  }
}

// What one model does, machine-independent: footprint, the densest array's misses per
// byte against the average, the misses' share of the hottest tenth of the footprint
// (arrays taken densest first), the number of kernels, and its speedup on knl's hbm.
struct Behaviour {
  double footprint_gib = 0, densest = 0, hottest_tenth = 0, speedup = 0;
  size_t kernels = 0;
};

Behaviour Describe(const AppModel& app, const Machine& knl) {
  Behaviour b;
  const auto footprint = static_cast<double>(app.FootprintBytes());
  b.footprint_gib = footprint / (1 << 30);
  std::vector<double> misses(app.arrays.size(), 0.0);
  for (int p : app.schedule) {
    const PhaseSpec& phase = app.phases[static_cast<size_t>(p)];
    if (phase.serial) continue;
    double weights = 0;
    for (const ArrayAccess& a : phase.accesses) weights += a.weight;
    const double total = static_cast<double>(phase.instructions) * phase.mpki / 1000;
    for (const ArrayAccess& a : phase.accesses) {
      misses[static_cast<size_t>(a.array)] += total * a.weight / weights;
    }
  }
  double all = 0;
  for (double m : misses) all += m;
  std::vector<std::pair<double, double>> density;  // (misses per byte, bytes)
  for (size_t i = 0; i < app.arrays.size(); ++i) {
    const auto bytes = static_cast<double>(app.arrays[i].size_bytes);
    density.emplace_back(misses[i] / bytes, bytes);
  }
  std::sort(density.rbegin(), density.rend());
  b.densest = density[0].first / (all / footprint);
  double room = footprint / 10, hot = 0;
  for (const auto& [d, bytes] : density) {
    const double take = std::min(room, bytes);
    hot += d * take;
    room -= take;
  }
  b.hottest_tenth = hot / all;
  std::set<int> kernels;
  for (int p : app.schedule) {
    if (!app.phases[static_cast<size_t>(p)].serial) kernels.insert(p);
  }
  b.kernels = kernels.size();
  TimeModel model(app, knl, /*chunks_per_phase=*/8);
  b.speedup = model.RuntimeNs(WholeTier(0)) / model.RuntimeNs(WholeTier(1));
  return b;
}

// The distribution contains the bundled mini-apps' behaviours: each of minife, lulesh,
// nekbone and lammps lies inside the range that procedural models span on every measure,
// and not at its edge (at least 3 of 120 models on each side).
TEST(ProceduralTest, TheDistributionSpansTheBundledApplications) {
  absl::StatusOr<Machine> knl = LoadMachine("knl");
  ASSERT_TRUE(knl.ok());
  std::vector<Behaviour> drawn;
  size_t two_stages = 0, drifting = 0, periodic = 0;
  std::set<size_t> array_counts;
  for (uint64_t seed = 0; seed < 120; ++seed) {
    absl::StatusOr<AppModel> app = ProceduralAppModel(seed);
    ASSERT_TRUE(app.ok()) << seed << ": " << app.status();
    drawn.push_back(Describe(*app, *knl));
    array_counts.insert(app->arrays.size());
    bool drift = false, second = false;
    for (const PhaseSpec& p : app->phases) {
      drift |= p.name.find("_d1") != std::string::npos;
      second |= p.name.starts_with("s1");
    }
    drifting += drift ? 1 : 0;
    two_stages += second ? 1 : 0;
    // A periodic kernel runs fewer times than the others of its stage.
    std::map<int, int> runs;
    for (int p : app->schedule) ++runs[p];
    int lo = 1 << 30, hi = 0;
    for (const auto& [p, n] : runs) {
      if (app->phases[static_cast<size_t>(p)].serial) continue;
      lo = std::min(lo, n);
      hi = std::max(hi, n);
    }
    periodic += hi >= 3 * lo ? 1 : 0;
  }
  EXPECT_GE(array_counts.size(), 6u);
  EXPECT_GT(two_stages, 20u);
  EXPECT_GT(drifting, 10u);
  EXPECT_GT(periodic, 10u);
  const auto inside = [&](const char* what, double value, auto measure) {
    size_t below = 0, above = 0;
    for (const Behaviour& b : drawn) {
      below += measure(b) < value ? 1 : 0;
      above += measure(b) > value ? 1 : 0;
    }
    EXPECT_GE(below, 3u) << what << " " << value;
    EXPECT_GE(above, 3u) << what << " " << value;
  };
  for (const char* name : {"minife", "lulesh", "nekbone", "lammps"}) {
    absl::StatusOr<AppModel> app = LoadAppModel(name);
    ASSERT_TRUE(app.ok());
    const Behaviour b = Describe(*app, *knl);
    SCOPED_TRACE(name);
    inside("footprint GiB", b.footprint_gib, [](const Behaviour& x) { return x.footprint_gib; });
    inside("densest array", b.densest, [](const Behaviour& x) { return x.densest; });
    inside("hottest tenth", b.hottest_tenth, [](const Behaviour& x) { return x.hottest_tenth; });
    inside("hbm speedup", b.speedup, [](const Behaviour& x) { return x.speedup; });
    inside("kernels", static_cast<double>(b.kernels),
           [](const Behaviour& x) { return static_cast<double>(x.kernels); });
  }
}

TEST(ProceduralTest, AModelMakesAProfileLikeAnyOther) {
  absl::StatusOr<AppModel> app = ProceduralAppModel(3);
  absl::StatusOr<Machine> knl = LoadMachine("knl");
  ASSERT_TRUE(app.ok() && knl.ok());
  SynthOptions options;
  options.target_samples = 5000;
  options.chunks_per_phase = 10;
  options.measured_runs = false;
  absl::StatusOr<SynthProfile> p = GenerateProfile(*app, *knl, options);
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->traces.size(), 2u);
  EXPECT_GT(p->traces[0].num_samples(), 2500u);
}

}  // namespace
}  // namespace tiergym::synth

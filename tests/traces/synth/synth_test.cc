#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "traces/base/file.h"
#include "traces/base/json.h"
#include "traces/cli/synth_cli.h"
#include "traces/machine.h"
#include "traces/placement.h"
#include "traces/synth/app_model.h"
#include "traces/synth/generator.h"
#include "traces/synth/time_model.h"
#include "traces/trace_csv.h"
#include "traces/trace_file.h"

namespace tiergym::synth {
namespace {

// A small model: a serial first-touch phase, a bandwidth-bound streaming phase and a
// compute-bound phase.
constexpr char kToyModel[] = R"({
  "name": "toy",
  "threads": 64,
  "arrays": [
    {"name": "meta", "size_bytes": 1048576, "region": "heap"},
    {"name": "big", "size_bytes": 268435456},
    {"name": "vec", "size_bytes": 67108864}
  ],
  "phases": [
    {"name": "init", "instructions": 2000000000, "mpki": 3, "compute_gips": 40, "serial": true,
     "accesses": [
       {"array": "meta", "pattern": "sequential", "weight": 1},
       {"array": "big", "pattern": "sequential", "weight": 256},
       {"array": "vec", "pattern": "sequential", "weight": 64}
     ]},
    {"name": "stream", "instructions": 4000000000, "mpki": 100, "compute_gips": 80, "mlp": 16,
     "overlap": 0.8,
     "accesses": [
       {"array": "big", "pattern": "sequential", "weight": 4, "passes": 2},
       {"array": "vec", "pattern": "skewed", "weight": 1, "hot_fraction": 0.2, "hot_share": 0.8}
     ]},
    {"name": "compute", "instructions": 8000000000, "mpki": 0.2, "compute_gips": 40, "mlp": 4,
     "accesses": [{"array": "meta", "pattern": "uniform"}]}
  ],
  "schedule": ["init", {"repeat": 5, "phases": ["stream", "compute"]}]
})";

AppModel Toy() {
  absl::StatusOr<AppModel> app = ParseAppModel(kToyModel, "toy.json");
  EXPECT_TRUE(app.ok()) << app.status();
  return *app;
}

Machine Knl() {
  absl::StatusOr<Machine> m = LoadMachine("knl");
  EXPECT_TRUE(m.ok()) << m.status();
  return *m;
}

SynthOptions SmallOptions(uint64_t seed) {
  SynthOptions o;
  o.seed = seed;
  o.target_samples = 20000;
  o.chunks_per_phase = 50;
  return o;
}

std::string TempDir(const std::string& name) {
  const std::string dir = ::testing::TempDir() + "/synth_test_" + name;
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  std::filesystem::create_directories(dir, ec);
  return dir;
}

std::string Read(const std::string& path) {
  absl::StatusOr<std::string> s = ReadFile(path);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *s : "";
}

// ---------------------------------------------------------------------------------------
// Models.

TEST(AppModelTest, LaysOutArraysPageAlignedWithGapsAndHeapArraysLow) {
  AppModel app = Toy();
  ASSERT_EQ(app.arrays.size(), 3u);
  EXPECT_EQ(app.arrays[0].start_address, kHeapBase);
  EXPECT_EQ(app.arrays[1].start_address, kMmapBase);
  EXPECT_GT(app.arrays[2].start_address, app.arrays[1].end_address());
  for (const ArraySpec& a : app.arrays) EXPECT_EQ(a.start_address % kSynthPageBytes, 0u);
  EXPECT_EQ(app.schedule.size(), 11u);
  EXPECT_EQ(app.schedule[0], 0);
  EXPECT_EQ(app.schedule[1], 1);
  EXPECT_EQ(app.schedule[2], 2);
}

TEST(AppModelTest, EveryBundledModelLoads) {
  std::vector<std::string> names = BundledAppNames();
  for (const char* expected : {"minife", "lulesh", "nekbone", "lammps", "hotset", "phasedrift"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), expected), names.end()) << expected;
  }
  for (const std::string& name : names) {
    absl::StatusOr<AppModel> app = LoadAppModel(name);
    ASSERT_TRUE(app.ok()) << name << ": " << app.status();
    EXPECT_EQ(app->name, name);
    EXPECT_GE(app->phases.size(), 3u) << name;
  }
}

// Parses `text` as "app.json" and returns the error message ("" when it parsed).
std::string ModelError(const std::string& text) {
  absl::StatusOr<AppModel> app = ParseAppModel(text, "app.json");
  if (app.ok()) return "";
  EXPECT_TRUE(absl::IsInvalidArgument(app.status())) << app.status();
  return std::string(app.status().message());
}

TEST(AppModelTest, RefusesUnknownKeyWithFileAndLine) {
  const std::string msg = ModelError(R"({
  "name": "x",
  "arrays": [{"name": "a", "size_bytes": 4096}],
  "phases": [{"name": "p", "instructions": 10, "mpki": 1, "compute_gips": 1,
              "mlp": 2, "imbalanse": 0.1,
              "accesses": [{"array": "a", "pattern": "uniform"}]}]
})");
  EXPECT_NE(msg.find("app.json:5:"), std::string::npos) << msg;
  EXPECT_NE(msg.find("imbalanse"), std::string::npos) << msg;
}

TEST(AppModelTest, RefusesAccessToUndeclaredArrayWithFileAndLine) {
  const std::string msg = ModelError(R"({
  "name": "x",
  "arrays": [{"name": "a", "size_bytes": 4096}],
  "phases": [{"name": "p", "instructions": 10, "mpki": 1, "compute_gips": 1,
              "accesses": [{"array": "a", "pattern": "uniform"},
                           {"array": "b", "pattern": "uniform"}]}]
})");
  EXPECT_NE(msg.find("app.json:6:"), std::string::npos) << msg;
  EXPECT_NE(msg.find("phases[0].accesses[1]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("unknown array \"b\""), std::string::npos) << msg;
}

TEST(AppModelTest, RefusesNegativeSizeWithFileAndLine) {
  const std::string msg = ModelError(R"({
  "name": "x",
  "arrays": [{"name": "a", "size_bytes": 4096},
             {"name": "b", "size_bytes": -5}],
  "phases": [{"name": "p", "instructions": 10, "mpki": 1, "compute_gips": 1,
              "accesses": [{"array": "a", "pattern": "uniform"}]}]
})");
  EXPECT_NE(msg.find("app.json:4:"), std::string::npos) << msg;
  EXPECT_NE(msg.find("arrays[1].size_bytes"), std::string::npos) << msg;
}

TEST(AppModelTest, RefusesBadPatternsParametersAndSchedules) {
  const std::string base_head = R"({"name": "x", "arrays": [{"name": "a", "size_bytes": 4096}],
  "phases": [{"name": "p", "instructions": 10, "mpki": 1, "compute_gips": 1, "accesses": [)";
  EXPECT_NE(
      ModelError(base_head + R"({"array": "a", "pattern": "random"}]}]})").find("unknown pattern"),
      std::string::npos);
  EXPECT_NE(ModelError(base_head + R"({"array": "a", "pattern": "uniform", "passes": 2}]}]})")
                .find("only applies"),
            std::string::npos);
  EXPECT_NE(
      ModelError(base_head + R"({"array": "a", "pattern": "skewed", "hot_fraction": 1.5}]}]})")
          .find("hot_fraction"),
      std::string::npos);
  EXPECT_NE(ModelError(base_head + R"({"array": "a", "pattern": "uniform"}]}],
                       "schedule": ["p", "q"]})")
                .find("unknown phase \"q\""),
            std::string::npos);
  EXPECT_NE(ModelError(base_head + R"({"array": "a", "pattern": "uniform"}]}],
                       "schedule": [{"repeat": 0, "phases": ["p"]}]})")
                .find("repeat"),
            std::string::npos);
  EXPECT_EQ(ModelError(base_head + R"({"array": "a", "pattern": "uniform"}]}],
                       "schedule": [{"repeat": 3, "phases": ["p", {"repeat": 2, "phases": ["p"]}]}]})"),
            "");
}

// ---------------------------------------------------------------------------------------
// Time model.

TEST(TimeModelTest, HbmSpeedsUpBandwidthBoundPhaseButNotComputeBoundOne) {
  AppModel app = Toy();
  Machine knl = Knl();
  TimeModel model(app, knl, 50);
  const double stream_ddr = model.PhaseTimeNs(1, WholeTier(0));
  const double stream_hbm = model.PhaseTimeNs(1, WholeTier(1));
  const double compute_ddr = model.PhaseTimeNs(2, WholeTier(0));
  const double compute_hbm = model.PhaseTimeNs(2, WholeTier(1));
  EXPECT_GT(stream_ddr / stream_hbm, 2.0);
  EXPECT_NEAR(compute_ddr / compute_hbm, 1.0, 0.02);
}

TEST(TimeModelTest, SplittingABandwidthBoundChunkBeatsLinearInterpolation) {
  AppModel app = Toy();
  Machine knl = Knl();
  const PhaseSpec& stream = app.phases[1];
  const double instructions = 1e8;
  const double ddr =
      TimeModel::ChunkTimeNs(stream, knl, app.threads, instructions, std::vector<double>{1, 0});
  const double hbm =
      TimeModel::ChunkTimeNs(stream, knl, app.threads, instructions, std::vector<double>{0, 1});
  const double half =
      TimeModel::ChunkTimeNs(stream, knl, app.threads, instructions, std::vector<double>{0.5, 0.5});
  const double linear = ddr - (ddr - hbm) * 0.5;
  EXPECT_LT(half, 0.9 * linear);

  // When HBM alone is latency-bound, a split can even beat both tiers alone.
  PhaseSpec latency_bound = stream;
  latency_bound.mlp = 4;
  latency_bound.compute_gips = 1000;
  const double d =
      TimeModel::ChunkTimeNs(latency_bound, knl, 64, instructions, std::vector<double>{1, 0});
  const double h =
      TimeModel::ChunkTimeNs(latency_bound, knl, 64, instructions, std::vector<double>{0, 1});
  const double s =
      TimeModel::ChunkTimeNs(latency_bound, knl, 64, instructions, std::vector<double>{0.5, 0.5});
  EXPECT_LT(s, std::min(d, h));
}

TEST(TimeModelTest, FractionsFollowDeclaredFirstTouchOrder) {
  AppModel app = Toy();
  Machine knl = Knl();
  Placement p;
  p.default_tier = "ddr";
  p.fractions.emplace_back("hbm", 0.5);
  absl::StatusOr<TierMap> map = ResolvePlacement(app, knl, p);
  ASSERT_TRUE(map.ok()) << map.status();
  // meta (256 pages) then the first pages of big: 50 % of 256 + 65536 + 16384 pages.
  const uint64_t quota = (256 + 65536 + 16384 + 1) / 2;
  uint64_t pages = 0;
  for (const TierRange& r : map->ranges) {
    EXPECT_EQ(r.tier, 1);
    pages += (r.end - r.start) / kSynthPageBytes;
  }
  EXPECT_EQ(pages, quota);
  ASSERT_EQ(map->ranges.size(), 2u);
  EXPECT_EQ(map->ranges[0].start, app.arrays[0].start_address);
  EXPECT_EQ(map->ranges[1].start, app.arrays[1].start_address);
}

TEST(TimeModelTest, RefusesPlacementsBeyondCapacityOrOverlapping) {
  AppModel app = Toy();
  Machine knl = Knl();
  knl.tiers[1].capacity_bytes = 64ull << 20;
  Placement p;
  p.default_tier = "ddr";
  p.ranges.push_back({app.arrays[1].start_address, app.arrays[1].end_address(), "hbm"});
  EXPECT_TRUE(absl::IsResourceExhausted(ResolvePlacement(app, knl, p).status()));
  p.ranges = {{app.arrays[2].start_address, app.arrays[2].start_address + 8192, "hbm"},
              {app.arrays[2].start_address + 4096, app.arrays[2].start_address + 12288, "hbm"}};
  EXPECT_TRUE(absl::IsInvalidArgument(ResolvePlacement(app, knl, p).status()));
  p.ranges = {{app.arrays[2].start_address, app.arrays[2].start_address + 8192, "nvm"}};
  EXPECT_TRUE(absl::IsInvalidArgument(ResolvePlacement(app, knl, p).status()));
}

TEST(TimeModelTest, GroundTruthFallsAsMoreOfABandwidthBoundAppIsInHbm) {
  absl::StatusOr<AppModel> app = LoadAppModel("minife");
  ASSERT_TRUE(app.ok()) << app.status();
  Machine knl = Knl();
  TimeModel model(*app, knl, 50);
  std::vector<double> runtimes;
  for (int pct = 0; pct <= 100; pct += 10) {
    Placement p;
    p.default_tier = "ddr";
    p.fractions.emplace_back("hbm", pct / 100.0);
    absl::StatusOr<TierMap> map = ResolvePlacement(*app, knl, p);
    ASSERT_TRUE(map.ok()) << map.status();
    runtimes.push_back(model.RuntimeNs(*map));
  }
  for (size_t i = 1; i < runtimes.size(); ++i) {
    EXPECT_LT(runtimes[i], runtimes[i - 1] * 1.02) << "at " << i * 10 << " %";
  }
  EXPECT_LT(runtimes.back(), runtimes.front() / 1.3);
  EXPECT_LT(runtimes[5], runtimes[0] * 0.8);
}

// ---------------------------------------------------------------------------------------
// Generator.

TEST(GeneratorTest, SameSeedGivesIdenticalTracesAndRuns) {
  AppModel app = Toy();
  Machine knl = Knl();
  absl::StatusOr<SynthProfile> a = GenerateProfile(app, knl, SmallOptions(7));
  absl::StatusOr<SynthProfile> b = GenerateProfile(app, knl, SmallOptions(7));
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  ASSERT_EQ(a->traces.size(), 2u);
  ASSERT_EQ(b->traces.size(), 2u);
  for (size_t t = 0; t < 2; ++t) EXPECT_TRUE(SameContents(a->traces[t], b->traces[t]));
  EXPECT_FALSE(a->runs.empty());
  EXPECT_EQ(FormatRunsCsv(a->runs), FormatRunsCsv(b->runs));
}

TEST(GeneratorTest, DifferentSeedGivesDifferentSamplesAndRuntimes) {
  AppModel app = Toy();
  Machine knl = Knl();
  absl::StatusOr<SynthProfile> a = GenerateProfile(app, knl, SmallOptions(1));
  absl::StatusOr<SynthProfile> b = GenerateProfile(app, knl, SmallOptions(2));
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_FALSE(SameContents(a->traces[0], b->traces[0]));
  EXPECT_NE(a->traces[0].runtime_ns(), b->traces[0].runtime_ns());
  EXPECT_NE(FormatRunsCsv(a->runs), FormatRunsCsv(b->runs));
  // ... but only by the noise: about half a percent.
  EXPECT_NEAR(static_cast<double>(a->traces[0].runtime_ns()) / b->traces[0].runtime_ns(), 1.0,
              0.05);
}

TEST(GeneratorTest, TracesAreValidAndSurviveTheCsvRoundTrip) {
  AppModel app = Toy();
  absl::StatusOr<Machine> disagg = LoadMachine("disagg");
  ASSERT_TRUE(disagg.ok());
  absl::StatusOr<SynthProfile> p = GenerateProfile(app, *disagg, SmallOptions(3));
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->traces.size(), 3u);
  for (const Trace& t : p->traces) {
    // A Trace only exists when ValidateTrace accepted it; check again explicitly.
    TraceColumns c;
    c.time_ns = t.time_ns();
    c.tid = t.tid();
    c.phase = t.phase();
    c.instructions = t.instructions();
    c.address = t.address();
    EXPECT_TRUE(
        ValidateTrace(t.source(), t.metadata(), t.optional_columns(), c, t.marks(), t.end()).ok());
    EXPECT_EQ(t.metadata().app, "toy");
    EXPECT_EQ(t.metadata().pebs_reset, p->pebs_reset);
    EXPECT_EQ(t.metadata().event, "MEM_UOPS_RETIRED:L2_MISS_LOADS");
    absl::StatusOr<Trace> back = ParseTraceCsv(FormatTraceCsv(t), "back.csv");
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_TRUE(SameContents(t, *back));
    // Every sampled address lies inside one of the model's arrays; tids are the app's.
    for (size_t i = 0; i < t.num_samples(); i += 97) {
      const uint64_t addr = t.address()[i];
      bool inside = false;
      for (const ArraySpec& a : app.arrays) {
        inside |= addr >= a.start_address && addr < a.end_address();
      }
      EXPECT_TRUE(inside) << std::hex << addr;
      EXPECT_LT(t.tid()[i], 64u);
    }
  }
  EXPECT_EQ(p->traces[0].metadata().device, "ddr");
  EXPECT_EQ(p->traces[1].metadata().device, "hbm");
  EXPECT_EQ(p->traces[2].metadata().device, "remote");
}

TEST(GeneratorTest, DevicesAgreeOnPhasesButInstructionCountsDifferSlightly) {
  AppModel app = Toy();
  absl::StatusOr<SynthProfile> p = GenerateProfile(app, Knl(), SmallOptions(5));
  ASSERT_TRUE(p.ok()) << p.status();
  const Trace& ddr = p->traces[0];
  const Trace& hbm = p->traces[1];
  ASSERT_EQ(ddr.num_phases(), app.schedule.size());
  ASSERT_EQ(hbm.num_phases(), ddr.num_phases());
  int differing = 0;
  for (size_t ph = 0; ph < ddr.num_phases(); ++ph) {
    const double a = static_cast<double>(ddr.PhaseInstructions(ph));
    const double b = static_cast<double>(hbm.PhaseInstructions(ph));
    const double nominal = static_cast<double>(app.phases[app.schedule[ph]].instructions);
    EXPECT_NEAR(a / nominal, 1.0, 0.01);
    EXPECT_NEAR(b / nominal, 1.0, 0.01);
    differing += a != b;
  }
  EXPECT_GT(differing, static_cast<int>(ddr.num_phases()) / 2);
}

TEST(GeneratorTest, BarrierSpinAddsInstructionsInProportionToTheWait) {
  std::string text = kToyModel;
  text.replace(text.find(R"("threads": 64,)"), 14, R"("threads": 64, "barrier_spin_gips": 40,)");
  text.replace(text.find(R"("overlap": 0.8,)"), 15, R"("overlap": 0.8, "imbalance": 0.5,)");
  absl::StatusOr<AppModel> app = ParseAppModel(text, "spin.json");
  ASSERT_TRUE(app.ok()) << app.status();
  app->instruction_jitter = 0;
  absl::StatusOr<SynthProfile> p = GenerateProfile(*app, Knl(), SmallOptions(5));
  ASSERT_TRUE(p.ok()) << p.status();
  const Trace& ddr = p->traces[0];
  const Trace& hbm = p->traces[1];
  for (size_t ph = 1; ph < ddr.num_phases(); ++ph) {
    const double nominal = static_cast<double>(app->phases[app->schedule[ph]].instructions);
    for (const Trace* t : {&ddr, &hbm}) {
      const double busy = static_cast<double>(t->PhaseEndNs(ph) - t->PhaseStartNs(ph)) / 1.5;
      const double expected =
          app->schedule[ph] == 1 ? nominal + 40 * 0.5 * busy : nominal;  // stream: spins
      EXPECT_NEAR(static_cast<double>(t->PhaseInstructions(ph)), expected, 1e-6 * expected + 2)
          << t->metadata().device << " phase " << ph;
    }
    if (app->schedule[ph] == 1) {
      EXPECT_GT(ddr.PhaseInstructions(ph), hbm.PhaseInstructions(ph) * 1.2) << "phase " << ph;
    }
  }
}

TEST(GeneratorTest, HbmRunIsFasterInTheStreamingPhaseOnly) {
  AppModel app = Toy();
  absl::StatusOr<SynthProfile> p = GenerateProfile(app, Knl(), SmallOptions(9));
  ASSERT_TRUE(p.ok()) << p.status();
  const Trace& ddr = p->traces[0];
  const Trace& hbm = p->traces[1];
  auto duration = [](const Trace& t, size_t ph) {
    return static_cast<double>(t.PhaseEndNs(ph) - t.PhaseStartNs(ph));
  };
  for (size_t ph = 1; ph < ddr.num_phases(); ++ph) {
    const double ratio = duration(ddr, ph) / duration(hbm, ph);
    if (app.schedule[ph] == 1) {
      EXPECT_GT(ratio, 2.0) << "phase " << ph;
    } else {
      EXPECT_NEAR(ratio, 1.0, 0.05) << "phase " << ph;
    }
  }
}

TEST(GeneratorTest, SampleCountFollowsTheTargetAndPebsReset) {
  AppModel app = Toy();
  Machine knl = Knl();
  SynthOptions small = SmallOptions(4);
  small.measured_runs = false;
  SynthOptions large = small;
  large.target_samples = 4 * small.target_samples;
  absl::StatusOr<SynthProfile> a = GenerateProfile(app, knl, small);
  absl::StatusOr<SynthProfile> b = GenerateProfile(app, knl, large);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_TRUE(a->runs.empty());
  const double na = static_cast<double>(a->traces[0].num_samples());
  const double nb = static_cast<double>(b->traces[0].num_samples());
  EXPECT_NEAR(na / small.target_samples, 1.0, 0.05);
  EXPECT_NEAR(nb / na, 4.0, 0.2);
  // The run times do not depend on the sampling rate.
  EXPECT_EQ(a->traces[0].runtime_ns(), b->traces[0].runtime_ns());

  SynthOptions explicit_reset = small;
  explicit_reset.pebs_reset = 2 * a->pebs_reset;
  absl::StatusOr<SynthProfile> c = GenerateProfile(app, knl, explicit_reset);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->traces[0].metadata().pebs_reset, 2 * a->pebs_reset);
  EXPECT_NEAR(static_cast<double>(c->traces[0].num_samples()) / na, 0.5, 0.05);
}

TEST(GeneratorTest, StandardRunsCoverFractionsRangesAndThreeTierMixes) {
  AppModel app = Toy();
  absl::StatusOr<Machine> disagg = LoadMachine("disagg");
  ASSERT_TRUE(disagg.ok());
  auto runs = StandardRuns(app, *disagg);
  std::vector<std::string> names;
  for (const auto& [name, placement] : runs) names.push_back(name);
  for (int pct = 10; pct <= 90; pct += 10) {
    EXPECT_NE(std::find(names.begin(), names.end(), "hbm" + std::to_string(pct)), names.end());
  }
  int ranges = 0, mixes = 0;
  for (const auto& [name, placement] : runs) {
    ranges += !placement.ranges.empty();
    bool uses_remote = false;
    for (const auto& [tier, f] : placement.fractions) uses_remote |= tier == "remote";
    for (const auto& r : placement.ranges) uses_remote |= r.tier == "remote";
    mixes += uses_remote;
  }
  EXPECT_GE(ranges, 4);
  EXPECT_GE(mixes, 3);
  // Two-tier machines get no three-tier mixes.
  for (const auto& [name, placement] : StandardRuns(app, Knl())) {
    for (const auto& r : placement.ranges) EXPECT_NE(r.tier, "remote");
  }
  // Nothing that does not fit: a 64 MiB fast tier cannot take 90 % of a 330 MiB app.
  Machine small = Knl();
  small.tiers[1].capacity_bytes = 64ull << 20;
  for (const auto& [name, placement] : StandardRuns(app, small)) {
    EXPECT_NE(name, "hbm90");
    EXPECT_TRUE(ResolvePlacement(app, small, placement).ok()) << name;
  }
}

TEST(GeneratorTest, WritesTheDocumentedLayoutByteIdenticallyForTheSameSeed) {
  AppModel app = Toy();
  Machine knl = Knl();
  absl::StatusOr<SynthProfile> p = GenerateProfile(app, knl, SmallOptions(11));
  ASSERT_TRUE(p.ok()) << p.status();
  const std::string d1 = TempDir("layout1");
  const std::string d2 = TempDir("layout2");
  ASSERT_TRUE(WriteSynthProfile(*p, d1, TraceFormat::kCsv).ok());
  absl::StatusOr<SynthProfile> q = GenerateProfile(app, knl, SmallOptions(11));
  ASSERT_TRUE(q.ok());
  ASSERT_TRUE(WriteSynthProfile(*q, d2, TraceFormat::kCsv).ok());
  for (const char* rel : {"toy/profile/ddr.csv", "toy/profile/hbm.csv", "toy/runs/runs.csv",
                          "toy/runs/placements/hbm50.json", "toy/model.json"}) {
    const std::string a = Read(d1 + "/" + rel);
    EXPECT_FALSE(a.empty()) << rel;
    EXPECT_EQ(a, Read(d2 + "/" + rel)) << rel;
  }
  absl::StatusOr<Trace> ddr = ReadTraceCsv(d1 + "/toy/profile/ddr.csv");
  ASSERT_TRUE(ddr.ok()) << ddr.status();
  EXPECT_TRUE(SameContents(*ddr, p->traces[0]));
  // runs.csv names each placement file, relative to itself, and every one parses.
  const std::string runs = Read(d1 + "/toy/runs/runs.csv");
  EXPECT_EQ(runs.rfind("name,placement,runtime_ns\n", 0), 0u);
  for (const SynthRun& r : p->runs) {
    EXPECT_NE(runs.find(r.name + ",placements/" + r.name + ".json,"), std::string::npos);
    absl::StatusOr<Placement> back = ReadPlacement(d1 + "/toy/runs/placements/" + r.name + ".json");
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(*back, r.placement) << r.name;
  }
  absl::StatusOr<json::Value> model = json::ParseFile(d1 + "/toy/model.json");
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_NE(model->Find("app"), nullptr);
  EXPECT_NE(model->Find("machine"), nullptr);
  EXPECT_NE(model->Find("layout"), nullptr);

  // Binary output replaces the CSV files of the same devices.
  ASSERT_TRUE(WriteSynthProfile(*p, d1, TraceFormat::kBinary).ok());
  EXPECT_FALSE(std::filesystem::exists(d1 + "/toy/profile/ddr.csv"));
  absl::StatusOr<Trace> bin = LoadTrace(d1 + "/toy/profile/ddr.tgt");
  ASSERT_TRUE(bin.ok()) << bin.status();
  EXPECT_TRUE(SameContents(*bin, p->traces[0]));
}

TEST(GeneratorTest, GroundTruthComesFromTheModelWithRunNoise) {
  AppModel app = Toy();
  Machine knl = Knl();
  Placement all_hbm;
  all_hbm.default_tier = "hbm";
  absl::StatusOr<uint64_t> a = GroundTruthRuntimeNs(app, knl, all_hbm, 1, "x", 50);
  absl::StatusOr<uint64_t> b = GroundTruthRuntimeNs(app, knl, all_hbm, 1, "y", 50);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(*a, *b);
  const double noise_free = TimeModel(app, knl, 50).RuntimeNs(WholeTier(1));
  EXPECT_NEAR(*a / noise_free, 1.0, 0.03);
  EXPECT_NEAR(*b / noise_free, 1.0, 0.03);
}

// ---------------------------------------------------------------------------------------
// Command line.

TEST(SynthCommandTest, GeneratesAProfileIntoTheOutputDirectory) {
  const std::string dir = TempDir("cli");
  const std::string model = dir + "/toy.json";
  ASSERT_TRUE(WriteFileAtomically(model, kToyModel).ok());
  EXPECT_EQ(RunSynthCommand({"--app", model, "--machine", "disagg", "--seed", "3", "--out", dir,
                             "--samples", "5000", "--chunks", "20", "--quiet"}),
            0);
  EXPECT_TRUE(std::filesystem::exists(dir + "/toy/profile/remote.csv"));
  EXPECT_TRUE(std::filesystem::exists(dir + "/toy/runs/runs.csv"));
  EXPECT_EQ(RunSynthCommand({"--app", model, "--out", dir + "/b", "--no-runs", "--quiet",
                             "--pebs-reset", "100000", "--format", "bin"}),
            0);
  EXPECT_TRUE(std::filesystem::exists(dir + "/b/toy/profile/hbm.tgt"));
  EXPECT_FALSE(std::filesystem::exists(dir + "/b/toy/runs/runs.csv"));
}

TEST(SynthCommandTest, ReportsUsageAndRuntimeErrorsWithDistinctCodes) {
  const std::string dir = TempDir("cli_errors");
  EXPECT_EQ(RunSynthCommand({"--app", "minife"}), 2);  // no --out
  EXPECT_EQ(RunSynthCommand({"--app", "minife", "--out", dir, "--format", "xml"}), 2);
  EXPECT_EQ(
      RunSynthCommand({"--app", "minife", "--out", dir, "--samples", "10", "--pebs-reset", "10"}),
      2);
  EXPECT_EQ(RunSynthCommand({"--bogus"}), 2);
  EXPECT_EQ(RunSynthCommand({"--print-model", "nope"}), 2);
  EXPECT_EQ(RunSynthCommand({"--app", dir + "/missing.json", "--out", dir}), 1);
  EXPECT_EQ(RunSynthCommand({"--list"}), 0);
  EXPECT_EQ(RunSynthCommand({"--print-model", "lulesh"}), 0);
  EXPECT_EQ(RunSynthCommand({"--help"}), 0);
}

}  // namespace
}  // namespace tiergym::synth

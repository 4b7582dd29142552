// ProjectTrace keeps what the program did and recomputes only the times per tier.
#include "traces/projection.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "traces/machine.h"
#include "traces/synth/app_model.h"
#include "traces/synth/generator.h"
#include "traces/synth/time_model.h"
#include "traces/trace.h"

namespace tiergym {
namespace {

// A recorded run on `device`: `phases` phases of `phase_ns`, each with `per_phase` samples
// evenly spread over 64 MiB and over the phase's first `busy_ns` (one every busy_ns /
// per_phase; the rest of the phase, if any, is a barrier wait without samples), 64 threads.
Trace Recording(const std::string& device, int phases, int per_phase, uint64_t reset,
                uint64_t phase_ns = 1'000'000, uint64_t busy_ns = 1'000'000) {
  TraceBuilder b("rec.csv", TraceMetadata::Make("app", device, "ev", reset));
  uint64_t instructions = 0;
  for (int p = 0; p < phases; ++p) {
    const uint64_t start = static_cast<uint64_t>(p) * phase_ns;
    b.AddMark(PhaseEvent{start, 0, static_cast<uint32_t>(p), p == 0 ? 0 : instructions});
    for (int s = 0; s < per_phase; ++s) {
      const uint64_t t = start + static_cast<uint64_t>(s) * busy_ns / per_phase + 1;
      b.AddSample(t, static_cast<uint32_t>(s % 64), static_cast<uint32_t>(p),
                  static_cast<uint64_t>(s) * 1000, 0x10000000 + (s * 4096ull) % (64 << 20));
    }
    instructions = static_cast<uint64_t>(per_phase) * 1000;
  }
  b.SetEnd(PhaseEvent{static_cast<uint64_t>(phases) * phase_ns, 0,
                      static_cast<uint32_t>(phases - 1), instructions});
  auto t = b.Finish();
  EXPECT_TRUE(t.ok()) << t.status();
  return *t;
}

// The runtime of each tier's projected run of `rec` on `machine` with options `o`.
std::vector<double> ProjectedRuntimes(const Trace& rec, const Machine& machine,
                                      const ProjectionOptions& o) {
  auto out = ProjectTrace(rec, machine, o);
  EXPECT_TRUE(out.ok()) << out.status();
  std::vector<double> ns;
  for (const Trace& t : out.ok() ? *out : std::vector<Trace>()) {
    ns.push_back(static_cast<double>(t.runtime_ns()));
  }
  ns.resize(machine.tiers.size());
  return ns;
}

TEST(ProjectTraceTest, KeepsAddressesPhasesAndInstructionsAndTheRecordedTiersTime) {
  auto knl = LoadMachine("knl");
  ASSERT_TRUE(knl.ok()) << knl.status();
  const Trace rec = Recording("ddr", 5, 200, 20000);
  auto out = ProjectTrace(rec, *knl);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), knl->tiers.size());
  for (size_t i = 0; i < out->size(); ++i) {
    const Trace& t = (*out)[i];
    EXPECT_EQ(t.metadata().device, knl->tiers[i].name);
    ASSERT_EQ(t.num_samples(), rec.num_samples());
    ASSERT_EQ(t.num_phases(), rec.num_phases());
    for (size_t s = 0; s < rec.num_samples(); ++s) {
      ASSERT_EQ(t.address()[s], rec.address()[s]);
      ASSERT_EQ(t.phase()[s], rec.phase()[s]);
      ASSERT_EQ(t.instructions()[s], rec.instructions()[s]);
      ASSERT_EQ(t.tid()[s], rec.tid()[s]);
    }
    for (size_t p = 0; p < rec.num_phases(); ++p) {
      EXPECT_EQ(t.PhaseInstructions(p), rec.PhaseInstructions(p));
    }
  }
  // The recorded tier keeps its time (to rounding); MCDRAM's bandwidth makes this
  // bandwidth-bound run (4 misses per ns, 256 GB/s asked of the DDR) shorter.
  EXPECT_NEAR(static_cast<double>((*out)[0].runtime_ns()), static_cast<double>(rec.runtime_ns()),
              1000.0);
  EXPECT_LT((*out)[1].runtime_ns(), rec.runtime_ns() * 9 / 10);
  EXPECT_GT((*out)[1].runtime_ns(), 0u);
}

TEST(ProjectTraceTest, AComputeBoundRecordingBarelyChanges) {
  auto knl = LoadMachine("knl");
  ASSERT_TRUE(knl.ok());
  const Trace rec = Recording("ddr", 5, 10, 1);  // ten misses per millisecond
  auto out = ProjectTrace(rec, *knl);
  ASSERT_TRUE(out.ok()) << out.status();
  const double ratio =
      static_cast<double>((*out)[1].runtime_ns()) / static_cast<double>((*out)[0].runtime_ns());
  EXPECT_NEAR(ratio, 1.0, 0.01);
}

TEST(ProjectTraceTest, RefusesWhatCannotBeProjectedSayingWhy) {
  auto knl = LoadMachine("knl");
  ASSERT_TRUE(knl.ok());
  Machine one = *knl;
  one.tiers.resize(1);
  auto r = ProjectTrace(Recording("ddr", 2, 10, 1), one);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("at least two"), std::string::npos) << r.status();

  TraceBuilder b("empty.csv", TraceMetadata::Make("app", "ddr"));
  b.AddMark(PhaseEvent{0, 0, 0, 0});
  b.SetEnd(PhaseEvent{1000, 0, 0, 10});
  auto empty = b.Finish();
  ASSERT_TRUE(empty.ok());
  r = ProjectTrace(*empty, *knl);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("no samples"), std::string::npos) << r.status();

  ProjectionOptions o;
  o.recorded_tier = "cxl";
  r = ProjectTrace(Recording("ddr", 2, 10, 1), *knl, o);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("'cxl' is not a tier"), std::string::npos) << r.status();
}

TEST(ProjectTraceTest, SaysInItsHeaderWhatMadeIt) {
  auto knl = LoadMachine("knl");
  ASSERT_TRUE(knl.ok());
  auto out = ProjectTrace(Recording("ddr", 3, 100, 1000), *knl);
  ASSERT_TRUE(out.ok()) << out.status();
  std::map<std::string, std::string> header;
  for (const auto& [k, v] : (*out)[1].metadata().entries) header[k] = v;
  EXPECT_EQ(header["projection_model"], "v3");
  EXPECT_EQ(header["projection_machine"], "knl");
  EXPECT_EQ(header["projected_from"], "ddr");
}

// A fixed memory-level parallelism replaces the prior: many misses in flight make this
// run bandwidth-bound (MCDRAM's bandwidth shortens it), one in flight makes it
// latency-bound (MCDRAM's latency, no lower than DDR's, does not).
TEST(ProjectTraceTest, AFixedParallelismDecidesWhatTheFastTierGains) {
  auto knl = LoadMachine("knl");
  ASSERT_TRUE(knl.ok());
  const Trace rec = Recording("ddr", 5, 200, 20000);
  auto speedup = [&](double mlp) {
    ProjectionOptions o;
    o.mlp = mlp;
    o.overlap = 0.7;
    auto out = ProjectTrace(rec, *knl, o);
    EXPECT_TRUE(out.ok()) << out.status();
    return static_cast<double>((*out)[0].runtime_ns()) /
           static_cast<double>((*out)[1].runtime_ns());
  };
  const double wide = speedup(16), narrow = speedup(1);
  EXPECT_GT(wide, 1.2);
  EXPECT_LT(narrow, 1.05);
}

TEST(ProjectTraceTest, ReadsAPriorAndRefusesUnknownKeysAndNonNumbers) {
  ProjectionPrior prior;
  ASSERT_TRUE(
      ParseProjectionPrior("stream_mlp=10,overlap_max=0.9,overlap_spread=0,stream_mpki=50", &prior)
          .ok());
  EXPECT_EQ(prior.stream_mlp, 10);
  EXPECT_EQ(prior.overlap_max, 0.9);
  EXPECT_EQ(prior.overlap_spread, 0);
  EXPECT_EQ(prior.stream_mpki, 50);
  EXPECT_EQ(prior.other_mlp, ProjectionPrior{}.other_mlp);
  absl::Status s = ParseProjectionPrior("stream_mpl=10", &prior);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("'stream_mpl=10'"), std::string::npos) << s;
  s = ParseProjectionPrior("mlp_min=low", &prior);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("mlp_min takes a number"), std::string::npos) << s;
  // A prior out of range is refused by the projection.
  ProjectionOptions o;
  o.prior.mlp_min = 20;  // above mlp_max
  auto knl = LoadMachine("knl");
  ASSERT_TRUE(knl.ok());
  auto r = ProjectTrace(Recording("ddr", 2, 10, 1), *knl, o);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("prior"), std::string::npos) << r.status();
  o.prior = ProjectionPrior{};
  o.prior.overlap_spread = -0.1;
  r = ProjectTrace(Recording("ddr", 2, 10, 1), *knl, o);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
}

// A phase's barrier wait (its time after the last sample) scales with the phase's work:
// a run whose phases wait as long as they work gains, on the fast tier, what the same
// work without the wait gains. In the last window (`--tails in-window`) the wait reads as
// compute time, which no tier shortens.
TEST(ProjectTraceTest, ABarrierWaitScalesWithThePhasesWork) {
  auto knl = LoadMachine("knl");
  ASSERT_TRUE(knl.ok());
  auto speedup = [&](const Trace& rec, bool separate_tails) {
    ProjectionOptions o;
    o.separate_tails = separate_tails;
    const std::vector<double> ns = ProjectedRuntimes(rec, *knl, o);
    return ns[0] / ns[1];
  };
  const Trace busy = Recording("ddr", 5, 200, 10000, 500'000, 500'000);
  const Trace waiting = Recording("ddr", 5, 200, 10000, 1'000'000, 500'000);
  const double alone = speedup(busy, true);
  ASSERT_GT(alone, 1.2);  // bandwidth-bound work: MCDRAM shortens it
  EXPECT_NEAR(speedup(waiting, true), alone, alone * 0.02);
  EXPECT_LT(speedup(waiting, false), alone * 0.9);
}

// A timer recording (a sample is a period of a thread's CPU time at a memory access) of
// one working thread, whose every phase of 1 ms wall time holds 0.5 ms of its CPU time
// (`counter`: the instructions column says so, as the recorder's does), most of it at
// memory, and a second tid (an MPI library's progress thread) that takes 3 samples in all.
Trace TimerRecording(bool counter = false) {
  TraceMetadata m = TraceMetadata::Make("app", "ddr", "task-clock-ip");
  m.entries.emplace_back("backend", "timer");
  m.entries.emplace_back("sample_period", "25000");
  if (counter) m.entries.emplace_back("instructions_counter", "task-clock-ns");
  TraceBuilder b("timer.csv", m);
  for (uint32_t p = 0; p < 5; ++p) {
    const uint64_t start = p * 1'000'000ull;
    b.AddMark(PhaseEvent{start, 0, p, p == 0 ? 0 : 500'000ull});
    for (uint64_t s = 0; s < 16; ++s) {
      b.AddSample(start + s * 50'000 + 1, 7, p, s * 25'000, 0x10000000 + s * 4096);
    }
    if (p < 3) b.AddSample(start + 900'000, 8, p, 1000, 0x20000000);
  }
  b.SetEnd(PhaseEvent{5'000'000, 0, 4, 500'000});
  auto t = b.Finish();
  EXPECT_TRUE(t.ok()) << t.status();
  return *t;
}

// The helper's few samples do not make it a worker: the projection is that of the one
// thread (as with --threads 1), not of two sharing the memory time.
TEST(ProjectTraceTest, AHelperThreadsFewSamplesDoNotCountAsAWorker) {
  auto knl = LoadMachine("knl");
  ASSERT_TRUE(knl.ok());
  ProjectionOptions one, two;
  one.threads = 1;
  two.threads = 2;
  const Trace rec = TimerRecording();
  const double counted = ProjectedRuntimes(rec, *knl, {})[1];
  EXPECT_EQ(counted, ProjectedRuntimes(rec, *knl, one)[1]);
  EXPECT_NE(counted, ProjectedRuntimes(rec, *knl, two)[1]);
}

// Recorded on a busy machine, the thread ran half of each phase's wall time: projected
// from its CPU time, the recorded tier's run takes that half, the fast tier's follows
// from it, and the header says how much was removed; --wall-time keeps the recording's.
TEST(ProjectTraceTest, ATimerRecordingIsProjectedFromItsCpuTime) {
  auto knl = LoadMachine("knl");
  ASSERT_TRUE(knl.ok());
  const Trace rec = TimerRecording(/*counter=*/true);
  auto cpu = ProjectTrace(rec, *knl);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  EXPECT_NEAR(static_cast<double>((*cpu)[0].runtime_ns()), 2.5e6, 10);
  ASSERT_EQ((*cpu)[0].num_samples(), rec.num_samples());
  for (size_t p = 0; p < rec.num_phases(); ++p) {
    EXPECT_NEAR(static_cast<double>((*cpu)[0].PhaseStartNs(p)), 5e5 * static_cast<double>(p), 2);
  }
  // Sample offsets in a phase halve too.
  EXPECT_NEAR(static_cast<double>((*cpu)[0].time_ns()[1] - (*cpu)[0].time_ns()[0]), 25'000, 2);
  bool said = false;
  for (const auto& [k, v] : (*cpu)[1].metadata().entries) {
    said |= k == "projection_time" && v == "cpu (50 % of the recording's wall time removed)";
  }
  EXPECT_TRUE(said);
  ProjectionOptions wall;
  wall.cpu_time = false;
  auto kept = ProjectTrace(rec, *knl, wall);
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_EQ((*kept)[0].runtime_ns(), rec.runtime_ns());
  // Without the counter's word (CPU time) the times stay as recorded.
  auto plain = ProjectTrace(TimerRecording(), *knl);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ((*plain)[0].runtime_ns(), rec.runtime_ns());
}

// The fast tier's projected runtime over the recorded tier's, against the generator's own
// (noise-free) ratio: `app`'s run on `machine`'s first tier, generated with 20,000 samples
// (seed 1), projected onto the machine with the default prior; the projected ratio
// divided by the true one, minus 1.
double FastTierError(const std::string& app_name, const std::string& machine_name) {
  auto app = synth::LoadAppModel(app_name);
  auto machine = LoadMachine(machine_name);
  EXPECT_TRUE(app.ok() && machine.ok());
  if (!app.ok() || !machine.ok()) return 1;
  auto rec = synth::GenerateTierTrace(*app, *machine, 0, 1, synth::DerivePebsReset(*app, 20000),
                                      synth::TimeModel::kDefaultChunksPerPhase);
  EXPECT_TRUE(rec.ok()) << rec.status();
  if (!rec.ok()) return 1;
  const std::vector<double> ns = ProjectedRuntimes(*rec, *machine, {});
  const synth::TimeModel model(*app, *machine);
  const double truth = model.RuntimeNs(synth::WholeTier(1)) / model.RuntimeNs(synth::WholeTier(0));
  return ns[1] / ns[0] / truth - 1;
}

// Model v3's overlap tied to the parallelism and its dense-miss streams: nekbone's
// compute-heavy `ax` (MLP 8, overlap 0.7) and lammps's mix of gathers and streams come out
// within a few per cent on knl's MCDRAM (model v2: -11.6 % and +5.1 %). These two
// applications and seed 1 were among those the prior was chosen on (traces/PROJECTION.md):
// this guards the model against regressions; the held-out error is measured by
// scripts/projection_error.py.
TEST(ProjectTraceTest, TheFastTierOfSyntheticApplicationsComesOutClose) {
  EXPECT_NEAR(FastTierError("nekbone", "knl"), 0, 0.05);
  EXPECT_NEAR(FastTierError("lammps", "knl"), 0, 0.04);
}

}  // namespace
}  // namespace tiergym

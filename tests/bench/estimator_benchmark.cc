// How fast the runtime estimator answers: the per-sample replay as published against the
// index (estimator/estimator_index.h), measured on the same profile in the same run.
//
//   build/bin/tiergym-bench-estimator [--samples N] [--benchmark_filter=...]
//
// Generates the bundled `lulesh` model on the `knl` machine in memory with about
// --samples samples per run (default 5,000,000, so some 10 M samples over both runs),
// builds the index, then times:
//   BM_Replay              EstimateByReplay: re-reads every sample (the baseline)
//   BM_IndexedFull         Resolve + RuntimeNs, paper model: a new placement, whole run
//   BM_IndexedDetailed     Resolve + EstimateDetailed (per-phase breakdown), paper model
//   BM_IndexedConcurrent   Resolve + RuntimeNs, concurrent model
//   BM_IncrementalMove     PlacementState::Move of one 2 MiB range (one action)
//   BM_Interval            PlacementState::IntervalNs over 1/100 of the run
// and prints the ratios the estimator issue sets as goals (indexed full >= 1000x faster
// than the replay, incremental >= 100x faster than the indexed full estimate), the index
// build time and its memory per sample.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "estimator/estimator_index.h"
#include "estimator/placement_state.h"
#include "estimator/replay_estimator.h"
#include "tests/bench/summary_reporter.h"
#include "traces/machine.h"
#include "traces/synth/app_model.h"
#include "traces/synth/generator.h"

namespace tiergym {
namespace {

struct World {
  std::unique_ptr<Profile> profile;
  std::shared_ptr<const EstimatorIndex> index;
  Placement placement;                // the benchmark's range placement
  std::vector<uint64_t> move_starts;  // 2 MiB ranges with samples, for the moves
  double build_seconds = 0;
};

World& TheWorld() {
  static World* w = new World();
  return *w;
}

void BM_Replay(benchmark::State& state) {
  const World& w = TheWorld();
  for (auto _ : state) {
    auto est = EstimateByReplay(*w.profile, w.placement);
    if (!est.ok()) state.SkipWithError(est.status().ToString().c_str());
    benchmark::DoNotOptimize(est);
  }
}

void IndexedFull(benchmark::State& state, Model model) {
  const World& w = TheWorld();
  for (auto _ : state) {
    auto resolved = w.index->Resolve(w.placement);
    auto ns = w.index->RuntimeNs(*resolved, model);
    benchmark::DoNotOptimize(ns);
  }
}
void BM_IndexedFull(benchmark::State& state) { IndexedFull(state, Model::kPaper); }
void BM_IndexedConcurrent(benchmark::State& state) { IndexedFull(state, Model::kConcurrent); }

void BM_IndexedDetailed(benchmark::State& state) {
  const World& w = TheWorld();
  for (auto _ : state) {
    auto est = w.index->EstimateDetailed(*w.index->Resolve(w.placement), Model::kPaper);
    benchmark::DoNotOptimize(est);
  }
}

void BM_IncrementalMove(benchmark::State& state) {
  const World& w = TheWorld();
  PlacementState s(w.index, *w.index->Resolve(w.placement), Model::kPaper);
  size_t i = 0;
  int tier = 1;
  for (auto _ : state) {
    const uint64_t start = w.move_starts[i];
    benchmark::DoNotOptimize(s.Move(start, start + (2 << 20), tier));
    benchmark::DoNotOptimize(s.runtime_ns());
    if (++i == w.move_starts.size()) {
      i = 0;
      tier ^= 1;
    }
  }
}

void BM_Interval(benchmark::State& state) {
  const World& w = TheWorld();
  PlacementState s(w.index, *w.index->Resolve(w.placement), Model::kPaper);
  const uint64_t total = w.index->total_instructions();
  uint64_t k = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(s.IntervalNs(total / 100 * k, total / 100 * (k + 1)));
    k = (k + 1) % 100;
  }
}

int Main(int argc, char** argv) {
  uint64_t samples = 5'000'000;
  std::vector<char*> rest = {argv[0]};
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--samples") == 0 && i + 1 < argc) {
      samples = std::strtoull(argv[++i], nullptr, 10);
    } else if (std::strcmp(argv[i], "--help") == 0) {
      std::printf("usage: %s [--samples N] [Google Benchmark options]\n", argv[0]);
      return 0;
    } else {
      rest.push_back(argv[i]);
    }
  }
  int rest_argc = static_cast<int>(rest.size());
  benchmark::Initialize(&rest_argc, rest.data());
  if (benchmark::ReportUnrecognizedArguments(rest_argc, rest.data())) return 1;

  World& w = TheWorld();
  std::fprintf(stderr, "generating lulesh on knl with about %llu samples per run ...\n",
               static_cast<unsigned long long>(samples));
  auto app = synth::LoadAppModel("lulesh");
  auto machine = LoadMachine("knl");
  synth::SynthOptions options;
  options.target_samples = samples;
  options.measured_runs = false;
  auto generated = app.ok() && machine.ok() ? synth::GenerateProfile(*app, *machine, options)
                                            : absl::StatusOr<synth::SynthProfile>(app.status());
  if (!generated.ok()) {
    std::fprintf(stderr, "cannot generate the profile: %s\n",
                 generated.status().ToString().c_str());
    return 1;
  }
  auto profile = Profile::FromRuns("lulesh", generated->traces);
  if (!profile.ok()) {
    std::fprintf(stderr, "%s\n", profile.status().ToString().c_str());
    return 1;
  }
  w.profile = std::make_unique<Profile>(*std::move(profile));
  generated->traces.clear();

  IndexOptions index_options;
  index_options.base_device = "ddr";
  index_options.machine = *machine;
  const auto t0 = std::chrono::steady_clock::now();
  auto index = EstimatorIndex::Build(*w.profile, index_options);
  w.build_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!index.ok()) {
    std::fprintf(stderr, "%s\n", index.status().ToString().c_str());
    return 1;
  }
  w.index = *index;

  // The placement: eight 64 MiB ranges spread over the footprint on hbm, as an agent's
  // placement of a few hot regions would be.
  const std::vector<uint64_t>& pages = w.index->pages();
  const int shift = w.index->page_shift();
  w.placement.default_tier = "ddr";
  for (int k = 0; k < 8; ++k) {
    const uint64_t start = pages[pages.size() * k / 8] << shift;
    w.placement.ranges.push_back({start, start + (64 << 20), "hbm"});
  }
  for (size_t k = 0; k < 256; ++k) {
    w.move_starts.push_back((pages[pages.size() * k / 256] << shift) & ~uint64_t{(2 << 20) - 1});
  }

  benchmark::RegisterBenchmark("BM_Replay", BM_Replay)
      ->Iterations(3)
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime();
  benchmark::RegisterBenchmark("BM_IndexedFull", BM_IndexedFull)
      ->Unit(benchmark::kMicrosecond)
      ->UseRealTime();
  benchmark::RegisterBenchmark("BM_IndexedDetailed", BM_IndexedDetailed)
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime();
  benchmark::RegisterBenchmark("BM_IndexedConcurrent", BM_IndexedConcurrent)
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime();
  benchmark::RegisterBenchmark("BM_IncrementalMove", BM_IncrementalMove)
      ->Unit(benchmark::kMicrosecond)
      ->UseRealTime();
  benchmark::RegisterBenchmark("BM_Interval", BM_Interval)
      ->Unit(benchmark::kMicrosecond)
      ->UseRealTime();
  SummaryReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();

  const double replay = reporter.Seconds("BM_Replay");
  const double full = reporter.Seconds("BM_IndexedFull");
  const double detailed = reporter.Seconds("BM_IndexedDetailed");
  const double concurrent = reporter.Seconds("BM_IndexedConcurrent");
  const double move = reporter.Seconds("BM_IncrementalMove");
  const EstimatorIndex& x = *w.index;
  std::printf("\n=== estimator summary: lulesh on knl, %llu samples over %zu runs ===\n",
              static_cast<unsigned long long>(x.num_samples()), w.profile->runs().size());
  std::printf(
      "index: built in %.2f s; %zu footprint pages, %llu windows (%zu with samples), "
      "%zu blocks\n",
      w.build_seconds, x.pages().size(), static_cast<unsigned long long>(x.num_windows()),
      x.num_nonempty_windows(), x.num_blocks());
  std::printf("index memory: %.1f MB, %.1f bytes per sample\n", x.MemoryBytes() / 1e6,
              static_cast<double>(x.MemoryBytes()) / static_cast<double>(x.num_samples()));
  auto ratio = [](const char* what, double slow, double fast, double goal) {
    if (slow <= 0 || fast <= 0) return;
    std::printf("%-52s %12.0fx", what, slow / fast);
    if (goal > 0)
      std::printf("   (goal >= %.0fx: %s)", goal, slow / fast >= goal ? "met" : "NOT met");
    std::printf("\n");
  };
  ratio("replay / indexed full estimate (paper)", replay, full, 1000);
  ratio("indexed full estimate / incremental move", full, move, 100);
  ratio("replay / indexed detailed estimate", replay, detailed, 0);
  ratio("replay / indexed full estimate (concurrent)", replay, concurrent, 0);
  ratio("indexed full (concurrent) / incremental move", concurrent, move, 0);
  return 0;
}

}  // namespace
}  // namespace tiergym

int main(int argc, char** argv) { return tiergym::Main(argc, argv); }

// How fast traces load: CSV v1 parsing against the binary format (traces/FORMAT.md),
// with a plain read() of the binary file, measured in the same run, as the yardstick.
//
//   build/bin/tiergym-bench-traces [--benchmark_filter=...]
//
// Generates a deterministic trace of kNumSamples samples (several phases, a few threads,
// addresses over 4 GiB, instruction counts growing within each phase), writes it as CSV
// and as binary into $TIERGYM_BENCH_DIR (or a temporary directory, removed afterwards),
// runs the benchmarks, then prints a summary: CSV MB/s and samples/s, binary load time,
// plain read time and their ratio. The files are read from a warm page cache (they were
// just written), so the figures are CPU costs, not disk speed.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "tests/bench/summary_reporter.h"
#include "traces/trace.h"
#include "traces/trace_binary.h"
#include "traces/trace_csv.h"

namespace tiergym {
namespace {

constexpr size_t kNumSamples = 6'000'000;
constexpr uint32_t kNumPhases = 10;
constexpr uint32_t kNumThreads = 4;
constexpr uint64_t kAddressBase = 0x7f0000000000ull;
constexpr uint64_t kAddressSpan = 4ull << 30;  // 4 GiB

struct Files {
  std::string csv_path;
  std::string binary_path;
  uint64_t csv_bytes = 0;
  uint64_t binary_bytes = 0;
};

Files& TheFiles() {
  static Files files;
  return files;
}

// Each phase streams through its own 1 GiB-aligned region with some threads while the
// others hit random lines anywhere in the 4 GiB span, as a stencil plus a gather would.
absl::StatusOr<Trace> MakeTrace() {
  std::mt19937_64 rng(20240611);
  TraceBuilder b("bench",
                 TraceMetadata::Make("bench", "ddr", "MEM_UOPS_RETIRED:L2_MISS_LOADS", 16, 4096));
  b.Reserve(kNumSamples);
  uint64_t t = 0;
  uint64_t last_phase_instructions = 0;
  const size_t per_phase = kNumSamples / kNumPhases;
  for (uint32_t phase = 0; phase < kNumPhases; ++phase) {
    b.AddMark({t, 0, phase, last_phase_instructions});
    uint64_t instructions[kNumThreads] = {};
    uint64_t stream[kNumThreads];
    for (uint32_t tid = 0; tid < kNumThreads; ++tid) {
      stream[tid] = (phase % 4) * (1ull << 30) + tid * (256ull << 20);
    }
    const size_t n = phase + 1 == kNumPhases ? kNumSamples - per_phase * phase : per_phase;
    for (size_t i = 0; i < n; ++i) {
      const uint64_t r = rng();
      t += 200 + (r & 0x7ff);  // 200..2247 ns between samples
      const uint32_t tid = static_cast<uint32_t>((r >> 11) % kNumThreads);
      instructions[tid] += 500 + ((r >> 13) & 0x3fff);
      uint64_t offset;
      if (((r >> 27) & 3) != 0) {  // three in four samples stream
        stream[tid] = (stream[tid] + 64 * (1 + ((r >> 29) & 3))) % kAddressSpan;
        offset = stream[tid];
      } else {
        offset = (r >> 31) % kAddressSpan;
      }
      b.AddSample(t, tid, phase, instructions[tid], kAddressBase + (offset & ~63ull));
    }
    last_phase_instructions = 0;
    for (uint64_t v : instructions) last_phase_instructions += v;
    t += 5000;
  }
  b.SetEnd({t, 0, kNumPhases - 1, last_phase_instructions});
  return b.Finish();
}

uint64_t FileSize(const std::string& path) {
  std::error_code ec;
  const uintmax_t size = std::filesystem::file_size(path, ec);
  return ec ? 0 : size;
}

void BM_PlainFileRead(benchmark::State& state) {
  const Files& f = TheFiles();
  std::vector<char> buffer(f.binary_bytes);  // allocated and touched outside the timing
  for (auto _ : state) {
    int fd = ::open(f.binary_path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      state.SkipWithError("cannot open the binary trace");
      break;
    }
    size_t done = 0;
    while (done < buffer.size()) {
      ssize_t r = ::read(fd, buffer.data() + done, buffer.size() - done);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) break;
      done += static_cast<size_t>(r);
    }
    ::close(fd);
    if (done != buffer.size()) state.SkipWithError("short read");
    benchmark::DoNotOptimize(buffer.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * f.binary_bytes));
}

void CountSamples(benchmark::State& state, size_t samples_per_iteration) {
  state.counters["samples_per_s"] = benchmark::Counter(
      static_cast<double>(samples_per_iteration * state.iterations()), benchmark::Counter::kIsRate);
}

void BM_CsvParse(benchmark::State& state) {
  const Files& f = TheFiles();
  for (auto _ : state) {
    absl::StatusOr<Trace> trace = ReadTraceCsv(f.csv_path);
    if (!trace.ok() || trace->num_samples() != kNumSamples) {
      state.SkipWithError(trace.ok() ? "wrong sample count" : trace.status().ToString().c_str());
      break;
    }
    benchmark::DoNotOptimize(trace->address().data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * f.csv_bytes));
  CountSamples(state, kNumSamples);
}

void BinaryLoad(benchmark::State& state, bool verify) {
  const Files& f = TheFiles();
  BinaryReadOptions options;
  options.verify_checksums = verify;
  for (auto _ : state) {
    absl::StatusOr<Trace> trace = ReadTraceBinary(f.binary_path, options);
    if (!trace.ok() || trace->num_samples() != kNumSamples) {
      state.SkipWithError(trace.ok() ? "wrong sample count" : trace.status().ToString().c_str());
      break;
    }
    benchmark::DoNotOptimize(trace->address().data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * f.binary_bytes));
  CountSamples(state, kNumSamples);
}

void BM_BinaryLoad(benchmark::State& state) { BinaryLoad(state, true); }
void BM_BinaryLoadNoVerify(benchmark::State& state) { BinaryLoad(state, false); }

void PrintSummary(const SummaryReporter& r) {
  const Files& f = TheFiles();
  const double csv = r.Seconds("BM_CsvParse");
  const double plain = r.Seconds("BM_PlainFileRead");
  const double binary = r.Seconds("BM_BinaryLoad");
  const double binary_nv = r.Seconds("BM_BinaryLoadNoVerify");
  std::printf("\n=== trace I/O summary: %zu samples; CSV %.1f MB, binary %.1f MB ===\n",
              kNumSamples, f.csv_bytes / 1e6, f.binary_bytes / 1e6);
  if (csv > 0) {
    std::printf("CSV parse (ReadTraceCsv):            %8.1f ms  %7.1f MB/s  %6.1f M samples/s\n",
                csv * 1e3, f.csv_bytes / csv / 1e6, kNumSamples / csv / 1e6);
  }
  if (plain > 0) {
    std::printf("plain read() of the binary file:     %8.1f ms  %7.1f MB/s\n", plain * 1e3,
                f.binary_bytes / plain / 1e6);
  }
  if (binary > 0) {
    std::printf("binary load, checksums verified:     %8.1f ms  %7.1f MB/s  %6.1f M samples/s\n",
                binary * 1e3, f.binary_bytes / binary / 1e6, kNumSamples / binary / 1e6);
  }
  if (binary_nv > 0) {
    std::printf("binary load, checksums not verified: %8.1f ms  %7.1f MB/s  %6.1f M samples/s\n",
                binary_nv * 1e3, f.binary_bytes / binary_nv / 1e6, kNumSamples / binary_nv / 1e6);
  }
  if (plain > 0 && binary > 0) {
    std::printf("ratio binary load / plain read:      %8.2f (verified)", binary / plain);
    if (binary_nv > 0) std::printf("  %.2f (not verified)", binary_nv / plain);
    std::printf("\n");
  }
  if (csv > 0 && binary > 0) {
    std::printf("binary load is %.1fx faster than CSV parsing\n", csv / binary);
  }
}

int Main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;

  namespace fs = std::filesystem;
  const char* env_dir = std::getenv("TIERGYM_BENCH_DIR");
  std::string dir;
  bool remove_dir = false;
  if (env_dir != nullptr && *env_dir != '\0') {
    dir = env_dir;
    std::error_code ec;
    fs::create_directories(dir, ec);
  } else {
    std::string tmpl = (fs::temp_directory_path() / "tiergym-bench-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) {
      std::fprintf(stderr, "cannot create a temporary directory: %s\n", std::strerror(errno));
      return 1;
    }
    dir = tmpl;
    remove_dir = true;
  }
  Files& f = TheFiles();
  f.csv_path = dir + "/bench_trace.csv";
  f.binary_path = dir + "/bench_trace.tgt";

  std::fprintf(stderr, "generating %zu samples into %s ...\n", kNumSamples, dir.c_str());
  {
    absl::StatusOr<Trace> trace = MakeTrace();
    absl::Status status = trace.ok() ? WriteTraceCsv(*trace, f.csv_path) : trace.status();
    if (status.ok()) status = WriteTraceBinary(*trace, f.binary_path);
    if (!status.ok()) {
      std::fprintf(stderr, "cannot generate the benchmark trace: %s\n", status.ToString().c_str());
      if (remove_dir) fs::remove_all(dir);
      return 1;
    }
  }
  f.csv_bytes = FileSize(f.csv_path);
  f.binary_bytes = FileSize(f.binary_path);

  benchmark::RegisterBenchmark("BM_PlainFileRead", BM_PlainFileRead)
      ->Iterations(10)
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("BM_CsvParse", BM_CsvParse)
      ->Iterations(3)
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("BM_BinaryLoad", BM_BinaryLoad)
      ->Iterations(10)
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("BM_BinaryLoadNoVerify", BM_BinaryLoadNoVerify)
      ->Iterations(10)
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);

  SummaryReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  PrintSummary(reporter);

  if (remove_dir) fs::remove_all(dir);
  return 0;
}

}  // namespace
}  // namespace tiergym

int main(int argc, char** argv) { return tiergym::Main(argc, argv); }

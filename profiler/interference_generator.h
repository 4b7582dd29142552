// The STREAM-derived interference generator of Zacarias et al. (section 3.3): threads that
// stream through private buffers at a requested bandwidth and read share.
//
// Each thread owns a buffer (default 64 MiB, larger than any last-level cache) bound to
// `mem_node` and moves it in 64 KiB chunks: a chunk is either read (loads summed, so
// nothing is optimised away) or written with non-temporal stores (no read-for-ownership,
// so written bytes are bytes on the memory bus), chosen so that the bytes read stay at
// `read_pct` percent of the bytes moved. The bandwidth is held by duty-cycle throttling:
// time is cut into slices (default 1 ms); in each slice a thread moves its share of the
// target and sleeps for the rest of the slice. A thread that cannot reach its share in a
// slice runs flat out. target 0 means as fast as possible.
//
// The achieved bandwidth is what the generator itself moved divided by wall time (the
// memory side is measured by `contentiousness` where uncore counters exist).
//
// Thread-safety: Stats() may be called from any thread while the generator runs; Start
// and Stop from the owner only.
#ifndef TIERGYM_PROFILER_INTERFERENCE_GENERATOR_H_
#define TIERGYM_PROFILER_INTERFERENCE_GENERATOR_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"

namespace tiergym::prof {

struct InterferenceOptions {
  double target_gbps = 0;  // GB/s (1e9 bytes/s) over all threads; 0 (default): maximum
  int read_pct = 100;      // 50..100 (default 100): share of moved bytes that are reads
  int threads = 1;         // default 1
  std::vector<int> cpus;   // pin thread i to cpus[i % size]; empty (default): no pinning
  int cpu_node = -1;       // when cpus is empty: run on this node's CPUs; -1: anywhere
  int mem_node = -1;       // bind the buffers to this node (mbind); -1 (default): local
  uint64_t buffer_bytes = 64ull << 20;  // per thread; default 64 MiB
  uint32_t slice_us = 1000;             // duty-cycle slice; default 1 ms
};

struct InterferenceStats {
  double seconds = 0;  // since Start
  uint64_t read_bytes = 0;
  uint64_t write_bytes = 0;
  double gbps() const;        // (read + write) / seconds / 1e9
  double read_share() const;  // read / (read + write), 0 when nothing moved
};

class InterferenceGenerator {
 public:
  // Validates the options (InvalidArgument: read_pct outside 50..100, threads < 1, a
  // negative target, a buffer under 1 MiB), allocates and binds the buffers (touching
  // them before timing starts), and starts the threads.
  static absl::StatusOr<std::unique_ptr<InterferenceGenerator>> Start(
      const InterferenceOptions& options);
  ~InterferenceGenerator();  // stops

  // Stops the threads and waits for them. Idempotent.
  void Stop();

  InterferenceStats Stats() const;

 private:
  struct Worker;

  explicit InterferenceGenerator(InterferenceOptions options);
  void Run(Worker* w);

  InterferenceOptions options_;
  std::atomic<bool> stop_{false};
  uint64_t start_ns_ = 0;
  std::vector<std::unique_ptr<Worker>> workers_;
  std::vector<std::thread> threads_;
};

// One line of the per-second report: "t=3.0 s  2.013 GB/s  read 75.0 %".
std::string FormatInterferenceLine(const InterferenceStats& interval, double at_seconds);

}  // namespace tiergym::prof

#endif  // TIERGYM_PROFILER_INTERFERENCE_GENERATOR_H_

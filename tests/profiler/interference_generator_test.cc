// How well the interference generator holds a requested bandwidth and read share on this
// machine. It is a measurement, so the bounds are loose; the figures are printed and
// recorded as test properties (ctest --output-on-failure, or the XML report).
#include "profiler/interference_generator.h"

#include <numa.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "gtest/gtest.h"

namespace tiergym::prof {
namespace {

// Whether the 1-minute load average exceeds the number of cores.
bool Oversubscribed() {
  double load = 0;
  return getloadavg(&load, 1) == 1 && load > std::thread::hardware_concurrency();
}

InterferenceStats RunFor(const InterferenceOptions& o, double seconds) {
  auto g = InterferenceGenerator::Start(o);
  EXPECT_TRUE(g.ok()) << g.status();
  if (!g.ok()) return {};
  // Skip the first 0.2 s (thread start, first slices), then measure an interval.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const InterferenceStats a = (*g)->Stats();
  std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<int>(seconds * 1000)));
  const InterferenceStats b = (*g)->Stats();
  (*g)->Stop();
  InterferenceStats d;
  d.seconds = b.seconds - a.seconds;
  d.read_bytes = b.read_bytes - a.read_bytes;
  d.write_bytes = b.write_bytes - a.write_bytes;
  return d;
}

TEST(InterferenceGeneratorTest, HoldsTheRequestedBandwidthAndReadShare) {
  InterferenceOptions o;
  o.buffer_bytes = 32 << 20;
  o.read_pct = 75;
  if (numa_available() >= 0) o.mem_node = 0;  // exercises mbind
  const InterferenceStats max = RunFor(o, 0.5);
  std::printf("maximum (1 thread, read 75 %%): %.3f GB/s, read share %.3f\n", max.gbps(),
              max.read_share());
  RecordProperty("max_gbps", std::to_string(max.gbps()));
  ASSERT_GT(max.gbps(), 0.1);
  EXPECT_NEAR(max.read_share(), 0.75, 0.01);

  struct Case {
    double fraction;
    int read_pct;
  };
  for (const Case c : {Case{0.25, 75}, Case{0.5, 50}, Case{0.5, 100}}) {
    o.target_gbps = c.fraction * max.gbps();
    o.read_pct = c.read_pct;
    const InterferenceStats got = RunFor(o, 0.8);
    const double ratio = got.gbps() / o.target_gbps;
    std::printf(
        "target %.3f GB/s read %d %%: achieved %.3f GB/s (%.1f %% of target), read share %.3f\n",
        o.target_gbps, c.read_pct, got.gbps(), 100 * ratio, got.read_share());
    RecordProperty("achieved_over_target_" + std::to_string(c.read_pct) + "_" +
                       std::to_string(static_cast<int>(c.fraction * 100)),
                   std::to_string(ratio));
    // Never above the target, whatever the load: the pacing's own property.
    EXPECT_LT(ratio, 1.15);
    // Reaching it needs the cores the generator was measured with. The suite runs this
    // test alone (tests/CMakeLists.txt), but other processes may not; on a machine with
    // more runnable work than cores the shortfall is the scheduler's, not the pacing's.
    if (Oversubscribed()) {
      std::printf("  (load average above %ld cores: the lower bound is not checked)\n",
                  std::thread::hardware_concurrency() + 0L);
    } else {
      EXPECT_GT(ratio, 0.5);
    }
    EXPECT_NEAR(got.read_share(), c.read_pct / 100.0, 0.02);
  }
}

TEST(InterferenceGeneratorTest, RefusesOptionsOutsideTheModel) {
  InterferenceOptions o;
  o.read_pct = 40;  // the curves of Zacarias et al. span 50..100 % reads
  EXPECT_EQ(InterferenceGenerator::Start(o).status().code(), absl::StatusCode::kInvalidArgument);
  o.read_pct = 100;
  o.threads = 0;
  EXPECT_EQ(InterferenceGenerator::Start(o).status().code(), absl::StatusCode::kInvalidArgument);
  o.threads = 1;
  o.mem_node = 4096;
  EXPECT_EQ(InterferenceGenerator::Start(o).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(InterferenceGeneratorTest, PinsThreadsAndStops) {
  InterferenceOptions o;
  o.buffer_bytes = 4 << 20;
  o.threads = 2;
  o.cpus = {0};
  o.target_gbps = 0.5;
  auto g = InterferenceGenerator::Start(o);
  ASSERT_TRUE(g.ok()) << g.status();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  (*g)->Stop();
  const InterferenceStats s = (*g)->Stats();
  EXPECT_GT(s.read_bytes, 0u);
  (*g)->Stop();  // idempotent
}

}  // namespace
}  // namespace tiergym::prof

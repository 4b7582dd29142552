#include "profiler/interference_generator.h"

#include <emmintrin.h>
#include <numa.h>
#include <numaif.h>
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <utility>

#include "traces/base/file.h"
#include "traces/base/strings.h"

namespace tiergym::prof {
namespace {

constexpr size_t kChunkBytes = 64 << 10;

uint64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

void SleepUntil(uint64_t ns) {
  timespec ts;
  ts.tv_sec = static_cast<time_t>(ns / 1'000'000'000ull);
  ts.tv_nsec = static_cast<long>(ns % 1'000'000'000ull);
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
  }
}

// Loads a chunk and returns a value depending on every byte, so the loads stay.
uint64_t ReadChunk(const uint64_t* p) {
  uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  for (size_t i = 0; i < kChunkBytes / 8; i += 4) {
    s0 += p[i];
    s1 += p[i + 1];
    s2 += p[i + 2];
    s3 += p[i + 3];
  }
  return s0 + s1 + s2 + s3;
}

// Writes a chunk with non-temporal stores (no read for ownership).
void WriteChunk(uint64_t* p, uint64_t value) {
  const __m128i v = _mm_set1_epi64x(static_cast<long long>(value));
  auto* q = reinterpret_cast<__m128i*>(p);
  for (size_t i = 0; i < kChunkBytes / 16; i += 4) {
    _mm_stream_si128(q + i, v);
    _mm_stream_si128(q + i + 1, v);
    _mm_stream_si128(q + i + 2, v);
    _mm_stream_si128(q + i + 3, v);
  }
}

}  // namespace

struct InterferenceGenerator::Worker {
  std::atomic<uint64_t> read_bytes{0};
  std::atomic<uint64_t> write_bytes{0};
  uint64_t* buffer = nullptr;
  size_t bytes = 0;
  int cpu = -1;
  uint64_t sink = 0;
  ~Worker() {
    if (buffer != nullptr) ::munmap(buffer, bytes);
  }
};

double InterferenceStats::gbps() const {
  return seconds > 0 ? static_cast<double>(read_bytes + write_bytes) / seconds / 1e9 : 0;
}

double InterferenceStats::read_share() const {
  const uint64_t total = read_bytes + write_bytes;
  return total > 0 ? static_cast<double>(read_bytes) / static_cast<double>(total) : 0;
}

std::string FormatInterferenceLine(const InterferenceStats& s, double at_seconds) {
  return StrCat("t=", FixedDecimal(at_seconds, 1), " s  ", FixedDecimal(s.gbps(), 3),
                " GB/s  read ", FixedDecimal(100 * s.read_share(), 1), " %");
}

InterferenceGenerator::InterferenceGenerator(InterferenceOptions options)
    : options_(std::move(options)) {}

InterferenceGenerator::~InterferenceGenerator() { Stop(); }

absl::StatusOr<std::unique_ptr<InterferenceGenerator>> InterferenceGenerator::Start(
    const InterferenceOptions& options) {
  if (options.read_pct < 50 || options.read_pct > 100) {
    return absl::InvalidArgumentError(
        StrCat("read share ", options.read_pct, " % is outside 50..100 %"));
  }
  if (options.threads < 1) return absl::InvalidArgumentError("at least one thread");
  if (options.target_gbps < 0) return absl::InvalidArgumentError("negative bandwidth");
  if (options.buffer_bytes < (1u << 20)) {
    return absl::InvalidArgumentError("buffers under 1 MiB would sit in a cache");
  }
  if (options.slice_us == 0) return absl::InvalidArgumentError("slice of 0 us");
  std::vector<int> cpus = options.cpus;
  if (cpus.empty() && options.cpu_node >= 0) {
    if (numa_available() < 0 || options.cpu_node > numa_max_node()) {
      return absl::InvalidArgumentError(StrCat("NUMA node ", options.cpu_node, " does not exist"));
    }
    struct bitmask* bm = numa_allocate_cpumask();
    if (numa_node_to_cpus(options.cpu_node, bm) == 0) {
      for (unsigned i = 0; i < bm->size; ++i) {
        if (numa_bitmask_isbitset(bm, i)) cpus.push_back(static_cast<int>(i));
      }
    }
    numa_free_cpumask(bm);
    if (cpus.empty()) {
      return absl::InvalidArgumentError(StrCat("NUMA node ", options.cpu_node, " has no CPUs"));
    }
  }
  if (options.mem_node >= 0 && (numa_available() < 0 || options.mem_node > numa_max_node())) {
    return absl::InvalidArgumentError(StrCat("NUMA node ", options.mem_node, " does not exist"));
  }
  std::unique_ptr<InterferenceGenerator> g(new InterferenceGenerator(options));
  const size_t bytes = (options.buffer_bytes + kChunkBytes - 1) / kChunkBytes * kChunkBytes;
  for (int t = 0; t < options.threads; ++t) {
    auto w = std::make_unique<Worker>();
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return ErrnoStatus(errno, "cannot allocate the interference buffer");
    w->buffer = static_cast<uint64_t*>(p);
    w->bytes = bytes;
    if (options.mem_node >= 0) {
      unsigned long mask[16] = {};
      mask[options.mem_node / 64] |= 1UL << (options.mem_node % 64);
      if (::mbind(p, bytes, MPOL_BIND, mask, 1024, MPOL_MF_STRICT) != 0) {
        return ErrnoStatus(errno, StrCat("mbind of the buffer to node ", options.mem_node));
      }
    }
    std::memset(p, 1, bytes);  // allocate the pages now, on the bound node
    w->cpu = cpus.empty() ? -1 : cpus[static_cast<size_t>(t) % cpus.size()];
    g->workers_.push_back(std::move(w));
  }
  g->start_ns_ = NowNs();
  for (auto& w : g->workers_) {
    Worker* raw = w.get();
    g->threads_.emplace_back([gen = g.get(), raw] { gen->Run(raw); });
  }
  return g;
}

void InterferenceGenerator::Run(Worker* w) {
  if (w->cpu >= 0) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(w->cpu, &set);
    pthread_setaffinity_np(pthread_self(), sizeof set, &set);
  }
  const uint64_t slice_ns = uint64_t{options_.slice_us} * 1000;
  // Bytes this thread may move per slice; 0 means no limit.
  const double quota = options_.target_gbps > 0 ? options_.target_gbps * 1e9 / options_.threads *
                                                      static_cast<double>(slice_ns) / 1e9
                                                : 0;
  const size_t chunks = w->bytes / kChunkBytes;
  size_t read_at = 0, write_at = chunks / 2;
  uint64_t read = 0, written = 0;
  double allowance = 0;
  uint64_t next_slice = NowNs();
  while (!stop_.load(std::memory_order_relaxed)) {
    if (quota > 0) {
      // Token bucket: one slice's quota per slice, at most two slices saved up, so a
      // thread that was descheduled does not burst far above the target afterwards.
      allowance = std::min(allowance + quota, 2 * quota);
      if (allowance < static_cast<double>(kChunkBytes)) {
        next_slice += slice_ns;
        SleepUntil(next_slice);
        continue;
      }
    }
    const uint64_t slice_end = next_slice + slice_ns;
    while (quota == 0 || allowance >= static_cast<double>(kChunkBytes)) {
      const bool do_read = read * 100 <= uint64_t(options_.read_pct) * (read + written);
      if (do_read) {
        w->sink += ReadChunk(w->buffer + read_at * (kChunkBytes / 8));
        read_at = (read_at + 1) % chunks;
        read += kChunkBytes;
        w->read_bytes.fetch_add(kChunkBytes, std::memory_order_relaxed);
      } else {
        WriteChunk(w->buffer + write_at * (kChunkBytes / 8), read);
        write_at = (write_at + 1) % chunks;
        written += kChunkBytes;
        w->write_bytes.fetch_add(kChunkBytes, std::memory_order_relaxed);
      }
      allowance -= static_cast<double>(kChunkBytes);
      if (quota == 0 && ((read + written) & ((64 << 20) - 1)) == 0) break;  // check stop_
      if (quota > 0 && NowNs() >= slice_end) break;  // behind: the next slice goes on
    }
    _mm_sfence();
    if (quota > 0) {
      next_slice = slice_end;
      const uint64_t now = NowNs();
      if (now < next_slice) {
        SleepUntil(next_slice);
      } else if (now > next_slice + slice_ns) {
        next_slice = now;  // far behind: restart the slices from now
      }
    }
  }
}

void InterferenceGenerator::Stop() {
  stop_ = true;
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
}

InterferenceStats InterferenceGenerator::Stats() const {
  InterferenceStats s;
  s.seconds = static_cast<double>(NowNs() - start_ns_) / 1e9;
  for (const auto& w : workers_) {
    s.read_bytes += w->read_bytes.load(std::memory_order_relaxed);
    s.write_bytes += w->write_bytes.load(std::memory_order_relaxed);
  }
  return s;
}

}  // namespace tiergym::prof

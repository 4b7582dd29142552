#include "traces/projection.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>
#include <optional>
#include <unordered_map>

#include "traces/base/strings.h"

namespace tiergym {
namespace {

// Standard normal quantiles at (i + 0.5) / 9: nine equally likely points of the MLP prior.
constexpr std::array<double, 9> kNormalQuantiles = {-1.5932, -0.9674, -0.5894, -0.2822, 0.0,
                                                    0.2822,  0.5894,  0.9674,  1.5932};
constexpr int kOverlapPoints = 8;
constexpr int kComputePoints = 12;
// Below this many samples a phase's end is not told apart from a barrier wait.
constexpr size_t kMinSamplesForTail = 8;

double Roof(double compute, double memory, double overlap) {
  return std::max(compute, memory) + (1 - overlap) * std::min(compute, memory);
}

// The metadata value of `key`, or "".
std::string MetadataValue(const TraceMetadata& metadata, std::string_view key) {
  for (const auto& [k, v] : metadata.entries) {
    if (k == key) return v;
  }
  return "";
}

// One window of a phase, in recorded time: it lasts [start, end]; its samples are
// [begin, stop); what it shows (the span, instructions and misses the posterior reads) is
// measured up to `observed_end`.
struct Window {
  size_t begin = 0, stop = 0;
  double start = 0, end = 0, observed_end = 0;
  double instructions = 0;
};

// The posterior of model v3 (traces/PROJECTION.md): for a window, the mean over the prior's
// candidates (MLP, overlap, compute rate), weighted by how well each reproduces the recorded
// window, of the ratio of the window's duration on each tier to its recorded duration.
class Posterior {
 public:
  Posterior(const Machine& machine, size_t recorded, const ProjectionOptions& options,
            double threads, double reference_rate, bool have_instructions, double misses_per_sample,
            double memory_ns_per_sample)
      : machine_(machine),
        recorded_(recorded),
        prior_(options.prior),
        threads_(threads),
        have_instructions_(have_instructions),
        misses_per_sample_(misses_per_sample),
        memory_ns_per_sample_(memory_ns_per_sample),
        fixed_mlp_(options.mlp) {
    if (options.overlap >= 0) {
      overlaps_ = {options.overlap};
    } else {
      for (int i = 0; i < kOverlapPoints; ++i) {
        overlaps_.push_back(prior_.overlap_min +
                            (prior_.overlap_max - prior_.overlap_min) * (i + 0.5) / kOverlapPoints);
      }
    }
    if (have_instructions_ && reference_rate > 0) {
      const double lo = std::log(prior_.compute_low * reference_rate);
      const double hi = std::log(prior_.compute_high * reference_rate);
      for (int i = 0; i < kComputePoints; ++i) {
        rates_.push_back(std::exp(lo + (hi - lo) * (i + 0.5) / kComputePoints));
      }
    } else {
      have_instructions_ = false;
    }
  }

  // ratio[tier] for a window of `t` ns (as observed) with `samples` samples,
  // `instructions` retired, `read_pct` % reads and a streaming share `streaming` in [0, 1]
  // (< 0: unknown).
  void Ratios(double t, double samples, double instructions, int read_pct, double streaming,
              std::vector<double>* ratio) {
    const size_t tiers = machine_.tiers.size();
    ratio->assign(tiers, 1.0);
    if (t <= 0 || samples <= 0) return;
    double mpki = -1;
    if (have_instructions_ && memory_ns_per_sample_ <= 0 && instructions > 0) {
      mpki = 1000 * samples * misses_per_sample_ / instructions;
    }
    const std::vector<double>& mlps = MlpPoints(streaming, mpki);
    const std::vector<std::vector<double>>& cost = CostPerMiss(read_pct, mlps);
    sum_.assign(tiers, 0.0);
    double best = -std::numeric_limits<double>::infinity();
    candidates_.clear();
    for (size_t z = 0; z < mlps.size(); ++z) {
      // The window's memory time on each tier for this MLP.
      double memory_rec = 0, misses = 0;
      if (memory_ns_per_sample_ > 0) {
        memory_rec = std::min(t, samples * memory_ns_per_sample_);  // measured
        misses = memory_rec / cost[recorded_][z];
      } else {
        misses = samples * misses_per_sample_;
        memory_rec = misses * cost[recorded_][z];
      }
      for (double o : overlaps_) {
        const double o_prior = OverlapLogPrior(o, mlps[z]);
        if (have_instructions_ && memory_ns_per_sample_ <= 0) {
          for (double rate : rates_) {
            const double compute = instructions / (rate * threads_);
            const double rec = Roof(compute, memory_rec, o);
            const double miss = std::log(rec / t) / prior_.time_tolerance;
            AddCandidate(o_prior - 0.5 * miss * miss, compute, misses, z, o, rec, &best);
          }
          continue;
        }
        // No instruction count: the compute time is what the recorded time leaves (the
        // roof read backwards); a memory time above the recorded time is penalised.
        double compute = 0, memory = memory_rec, log_like = 0;
        if (t >= (2 - o) * memory) {
          compute = t - (1 - o) * memory;
        } else if (t >= memory) {
          compute = o < 1 ? (t - memory) / (1 - o) : 0;
        } else {
          const double miss = std::log(memory / t) / prior_.time_tolerance;
          log_like = -0.5 * miss * miss;
        }
        AddCandidate(o_prior + log_like, compute, misses, z, o, Roof(compute, memory, o), &best);
      }
    }
    double total = 0;
    for (const Candidate& c : candidates_) {
      const double w = std::exp(c.log_like - best);
      total += w;
      for (size_t k = 0; k < tiers; ++k) {
        const double m = c.misses * cost[k][c.mlp];
        sum_[k] +=
            w * (k == recorded_ ? 0.0 : std::log(Roof(c.compute, m, c.overlap) / c.recorded));
      }
    }
    if (total > 0) {
      for (size_t k = 0; k < tiers; ++k) (*ratio)[k] = std::exp(sum_[k] / total);
    }
  }

 private:
  struct Candidate {
    double log_like, compute, misses;
    size_t mlp;
    double overlap, recorded;
  };

  // The log prior density (up to a constant) of overlap `o` at MLP `mlp`: the overlap is
  // tied to the parallelism (independent misses let the core work on; dependent ones stall
  // it), its centre rising with ln MLP from overlap_min at mlp_min to overlap_max at
  // mlp_max, with a normal spread overlap_spread (0: uniform on the range, as model v2 had it).
  [[nodiscard]] double OverlapLogPrior(double o, double mlp) const {
    if (prior_.overlap_spread <= 0 || overlaps_.size() < 2) return 0;
    const double span = std::log(prior_.mlp_max / prior_.mlp_min);
    const double x = span > 0 ? std::clamp(std::log(mlp / prior_.mlp_min) / span, 0.0, 1.0) : 0.5;
    const double centre = prior_.overlap_min + (prior_.overlap_max - prior_.overlap_min) * x;
    const double d = (o - centre) / prior_.overlap_spread;
    return -0.5 * d * d;
  }

  void AddCandidate(double log_like, double compute, double misses, size_t z, double o,
                    double recorded, double* best) {
    if (!(recorded > 0)) return;
    candidates_.push_back({log_like, compute, misses, z, o, recorded});
    *best = std::max(*best, log_like);
  }

  // The MLP points of a window: the prior's nine around its centre, or the fixed value.
  const std::vector<double>& MlpPoints(double streaming, double mpki) {
    mlps_.clear();
    if (fixed_mlp_ > 0) {
      mlps_.push_back(fixed_mlp_);
      return mlps_;
    }
    double centre = prior_.mlp_unknown;
    if (prior_.stream_mpki > 0 && mpki > 0) {
      // Misses this dense are a stream's: at least as streaming as the intensity says.
      const double q =
          std::clamp(std::log(mpki * 4 / prior_.stream_mpki) / std::log(4.0), 0.0, 1.0);
      streaming = std::max(streaming, q);
    }
    if (streaming >= 0) {
      centre = std::exp(streaming * std::log(prior_.stream_mlp) +
                        (1 - streaming) * std::log(prior_.other_mlp));
    }
    centre = std::clamp(centre, prior_.mlp_min, prior_.mlp_max);
    for (double q : kNormalQuantiles) {
      mlps_.push_back(
          std::clamp(centre * std::exp(prior_.mlp_spread * q), prior_.mlp_min, prior_.mlp_max));
    }
    return mlps_;
  }

  // cost[tier][z]: the memory time of one miss on the tier at MLP mlps[z] (the memory time
  // of SYNTH.md section 4 is linear in the misses at a given parallelism, loaded curves
  // included: latency and bandwidth terms both scale with them).
  const std::vector<std::vector<double>>& CostPerMiss(int read_pct,
                                                      const std::vector<double>& mlps) {
    cost_.assign(machine_.tiers.size(), std::vector<double>(mlps.size(), 0.0));
    for (size_t k = 0; k < machine_.tiers.size(); ++k) {
      const LoadCurve& curve = CurveOf(k, read_pct);
      for (size_t z = 0; z < mlps.size(); ++z) {
        constexpr double kMisses = 1e6;
        const double latency_time[1] = {kMisses * curve.idle_latency_ns / (mlps[z] * threads_)};
        const double band_time[1] = {kMisses * machine_.cache_line_bytes / curve.peak_gbps};
        const LoadCurve* curves[1] = {curve.flat() ? nullptr : &curve};
        cost_[k][z] = LoadedMemoryTimeNs(latency_time, band_time, curves) / kMisses;
      }
    }
    return cost_;
  }

  const LoadCurve& CurveOf(size_t tier, int read_pct) {
    auto [it, inserted] = curves_.try_emplace({tier, read_pct});
    if (inserted) it->second = machine_.tiers[tier].CurveAt(read_pct);
    return it->second;
  }

  const Machine& machine_;
  size_t recorded_;
  ProjectionPrior prior_;
  double threads_;
  bool have_instructions_;
  double misses_per_sample_, memory_ns_per_sample_, fixed_mlp_;
  std::vector<double> overlaps_, rates_, mlps_, sum_;
  std::vector<std::vector<double>> cost_;
  std::vector<Candidate> candidates_;
  std::map<std::pair<size_t, int>, LoadCurve> curves_;
};

// Per sample, the streaming share of models v2 and v3 (traces/PROJECTION.md), or -1 where it
// cannot be read: among the samples of phases of its class (phases whose instruction counts
// agree within 5 %, the recurring steps of a program), the share of its kAffinityNeighbours
// nearest by address on either side that the same thread took, above what threads drawn at
// random would share, scaled to [0, 1]. A thread sweeping data of its own (a partitioned
// stream, which prefetchers follow) has its neighbours to itself; a gather over shared data
// has neighbours from all threads.
std::vector<float> StreamingShares(const Trace& recorded) {
  constexpr int kAffinityNeighbours = 4;
  std::vector<float> share(recorded.num_samples(), -1.0f);
  std::map<long, std::vector<uint32_t>> classes;  // class -> its samples
  for (size_t p = 0; p < recorded.num_phases(); ++p) {
    const double instructions =
        static_cast<double>(std::max<uint64_t>(1, recorded.PhaseInstructions(p)));
    const long key = std::lround(std::log(instructions) / std::log(1.05));
    std::vector<uint32_t>& members = classes[key];
    for (size_t s = recorded.PhaseBegin(p); s < recorded.PhaseBegin(p + 1); ++s) {
      members.push_back(static_cast<uint32_t>(s));
    }
  }
  const auto address = recorded.address();
  const auto tid = recorded.tid();
  for (auto& [key, members] : classes) {
    const size_t n = members.size();
    if (n < 2) continue;
    std::stable_sort(members.begin(), members.end(),
                     [&](uint32_t a, uint32_t b) { return address[a] < address[b]; });
    std::map<uint32_t, double> per_thread;
    for (uint32_t s : members) per_thread[tid[s]] += 1;
    double chance = 0;
    for (const auto& [t, count] : per_thread)
      chance += (count / static_cast<double>(n)) * (count / static_cast<double>(n));
    if (chance > 0.9) continue;  // (nearly) one thread: nothing to tell
    for (size_t i = 0; i < n; ++i) {
      int same = 0, seen = 0;
      for (int d = 1; d <= kAffinityNeighbours; ++d) {
        if (i >= static_cast<size_t>(d)) {
          same += tid[members[i - d]] == tid[members[i]];
          ++seen;
        }
        if (i + d < n) {
          same += tid[members[i + d]] == tid[members[i]];
          ++seen;
        }
      }
      const double affinity = static_cast<double>(same) / seen;
      share[members[i]] =
          static_cast<float>(std::clamp((affinity - chance) / (1 - chance), 0.0, 1.0));
    }
  }
  return share;
}

// The threads that did the program's work: the distinct tids holding at least a tenth of
// an even share of the samples. A real program's helper threads (an MPI library's progress
// thread, a runtime's timer) take a handful of samples; counted as workers they would
// divide its memory time among threads that never ran beside the one that did.
int WorkingThreads(const Trace& recorded) {
  std::unordered_map<uint32_t, size_t> samples;
  for (uint32_t t : recorded.tid()) ++samples[t];
  const double least = static_cast<double>(recorded.num_samples()) /
                       (10.0 * static_cast<double>(std::max<size_t>(1, samples.size())));
  int working = 0;
  for (const auto& [tid, count] : samples) working += static_cast<double>(count) >= least;
  return std::max(1, working);
}

// `recorded` with every phase lasting no longer than the CPU time its threads ran in it
// (its instruction count, which a timer recording's counter gives in ns of CPU time, over
// the working threads), the samples' offsets from the phase's start scaled alike. A timer
// recording's times are wall-clock: on a busy recording machine a phase also holds the
// time its threads waited for a CPU, which is no part of the program (traces/PROJECTION.md,
// "Timer recordings"). *shortened is the share of the recording's time removed.
absl::StatusOr<Trace> CpuTimed(const Trace& recorded, int threads, double* shortened) {
  TraceBuilder builder(recorded.source(), recorded.metadata(), recorded.optional_columns());
  builder.Reserve(recorded.num_samples());
  const auto times = recorded.time_ns();
  double now = 0, removed = 0;
  uint64_t last = 0;
  auto at = [&](double t) {
    last = std::max(last, static_cast<uint64_t>(std::llround(t)));
    return last;
  };
  for (size_t p = 0; p < recorded.num_phases(); ++p) {
    const auto start = static_cast<double>(recorded.PhaseStartNs(p));
    const double wall = static_cast<double>(recorded.PhaseEndNs(p)) - start;
    const double cpu = static_cast<double>(recorded.PhaseInstructions(p)) / threads;
    const double scale = wall > 0 && cpu > 0 ? std::min(1.0, cpu / wall) : 1.0;
    PhaseEvent mark = recorded.marks()[p];
    mark.time_ns = p == 0 ? mark.time_ns : at(now);
    if (p == 0) now = static_cast<double>(mark.time_ns);
    builder.AddMark(mark);
    for (size_t s = recorded.PhaseBegin(p); s < recorded.PhaseBegin(p + 1); ++s) {
      builder.AddSample(at(now + (static_cast<double>(times[s]) - start) * scale),
                        recorded.tid()[s], recorded.phase()[s], recorded.instructions()[s],
                        recorded.address()[s]);
      if (!recorded.op().empty()) builder.SetLastOp(recorded.op()[s]);
      if (!recorded.weight().empty()) builder.SetLastWeight(recorded.weight()[s]);
      if (!recorded.cpu().empty()) builder.SetLastCpu(recorded.cpu()[s]);
    }
    now += std::max(0.0, wall) * scale;
    removed += std::max(0.0, wall) * (1 - scale);
  }
  PhaseEvent end = recorded.end();
  end.time_ns = at(now);
  builder.SetEnd(end);
  const auto total = static_cast<double>(recorded.runtime_ns());
  *shortened = total > 0 ? removed / total : 0;
  return builder.Finish();
}

// The windows of phase p of `recorded` and the end of its sampled work (the phase's end
// when its tail is not told apart).
std::vector<Window> PhaseWindows(const Trace& recorded, size_t p, const ProjectionOptions& options,
                                 double* busy_end) {
  const auto times = recorded.time_ns();
  const auto instructions = recorded.instructions();
  const size_t begin = recorded.PhaseBegin(p), end = recorded.PhaseBegin(p + 1);
  const auto start = static_cast<double>(recorded.PhaseStartNs(p));
  const auto phase_end = static_cast<double>(recorded.PhaseEndNs(p));
  const size_t k = end - begin;
  *busy_end = phase_end;
  if (options.separate_tails && k >= kMinSamplesForTail) {
    // Samples spread evenly over the work: the last of k falls k / (k + 1) of the way.
    const auto last = static_cast<double>(times[end - 1]);
    const double work = (last - start) * static_cast<double>(k + 1) / static_cast<double>(k);
    *busy_end = std::min(phase_end, std::max(start + work, last));
  }
  std::vector<Window> windows;
  double window_start = start, start_instructions = 0;
  size_t i = begin;
  do {
    Window w;
    w.begin = i;
    w.stop = std::min(end, i + options.samples_per_window);
    w.start = window_start;
    if (w.stop == end) {
      w.end = *busy_end;
      if (*busy_end < phase_end || w.stop == w.begin) {
        // Observed up to its last sample (or, without samples, the whole window).
        w.observed_end = w.stop == w.begin ? w.end : static_cast<double>(times[w.stop - 1]);
        w.instructions = w.stop == w.begin ? static_cast<double>(recorded.PhaseInstructions(p))
                                           : static_cast<double>(instructions[w.stop - 1]);
      } else {
        w.observed_end = w.end;
        w.instructions = static_cast<double>(recorded.PhaseInstructions(p));
      }
    } else {
      w.end = w.observed_end = static_cast<double>(times[w.stop - 1]);
      w.instructions = static_cast<double>(instructions[w.stop - 1]);
    }
    w.instructions = std::max(0.0, w.instructions - start_instructions);
    start_instructions += w.instructions;
    windows.push_back(w);
    window_start = w.end;
    i = w.stop;
  } while (i < end);
  return windows;
}

}  // namespace

absl::Status ParseProjectionPrior(std::string_view text, ProjectionPrior* prior) {
  const std::pair<std::string_view, double*> fields[] = {
      {"stream_mlp", &prior->stream_mlp},
      {"other_mlp", &prior->other_mlp},
      {"mlp_min", &prior->mlp_min},
      {"mlp_max", &prior->mlp_max},
      {"mlp_spread", &prior->mlp_spread},
      {"mlp_unknown", &prior->mlp_unknown},
      {"overlap_min", &prior->overlap_min},
      {"overlap_max", &prior->overlap_max},
      {"overlap_spread", &prior->overlap_spread},
      {"stream_mpki", &prior->stream_mpki},
      {"compute_low", &prior->compute_low},
      {"compute_high", &prior->compute_high},
      {"time_tolerance", &prior->time_tolerance}};
  while (!text.empty()) {
    const size_t comma = text.find(',');
    const std::string_view item = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    const size_t eq = item.find('=');
    const std::string_view key = item.substr(0, eq);
    double* field = nullptr;
    for (const auto& [name, f] : fields) {
      if (name == key) field = f;
    }
    if (field == nullptr || eq == std::string_view::npos) {
      return absl::InvalidArgumentError(StrCat(
          "'", item, "': expected KEY=NUMBER with KEY one of stream_mlp, other_mlp, mlp_min, ",
          "mlp_max, mlp_spread, mlp_unknown, stream_mpki, overlap_min, overlap_max, ",
          "overlap_spread, compute_low, compute_high, time_tolerance"));
    }
    const std::string value(item.substr(eq + 1));
    char* end = nullptr;
    const double v = std::strtod(value.c_str(), &end);
    if (value.empty() || end != value.c_str() + value.size() || !std::isfinite(v)) {
      return absl::InvalidArgumentError(StrCat("'", item, "': ", key, " takes a number"));
    }
    *field = v;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Trace>> ProjectTrace(const Trace& recording, const Machine& machine,
                                                const ProjectionOptions& options) {
  if (machine.tiers.size() < 2) {
    return absl::InvalidArgumentError(
        StrCat("machine '", machine.name, "' has ", machine.tiers.size(),
               " tier: a projection needs at least two (a placement has nowhere to go)"));
  }
  if (recording.num_samples() == 0) {
    return absl::InvalidArgumentError(
        StrCat(recording.source(),
               ": the recording has no samples: nothing to project (record "
               "longer, or with a smaller --period)"));
  }
  const ProjectionPrior& prior = options.prior;
  if (options.mlp < 0 || options.overlap > 1 || options.samples_per_window == 0 ||
      options.misses_per_sample < 0 || options.threads < 0 || options.memory_ns_per_sample < 0 ||
      !(prior.mlp_min > 0 && prior.mlp_min <= prior.mlp_max && prior.mlp_unknown > 0 &&
        prior.stream_mlp > 0 && prior.other_mlp > 0 && prior.mlp_spread >= 0 &&
        prior.overlap_min >= 0 && prior.overlap_min <= prior.overlap_max &&
        prior.overlap_max <= 1 && prior.overlap_spread >= 0 && prior.stream_mpki >= 0 &&
        prior.compute_low > 0 && prior.compute_low <= prior.compute_high &&
        prior.time_tolerance > 0)) {
    return absl::InvalidArgumentError(
        "projection options: mlp >= 0, overlap <= 1, samples_per_window > 0, "
        "misses_per_sample >= 0 and threads >= 0 are required, and a prior with positive "
        "ranges (min <= max, overlaps in [0, 1])");
  }
  int recorded_index = -1;
  if (!options.recorded_tier.empty()) {
    recorded_index = machine.IndexOf(options.recorded_tier);
    if (recorded_index < 0) {
      return absl::InvalidArgumentError(StrCat("--recorded-tier '", options.recorded_tier,
                                               "' is not a tier of machine '", machine.name, "'"));
    }
  } else {
    recorded_index = std::max(0, machine.IndexOf(recording.metadata().device));
  }
  const double misses_per_sample = options.misses_per_sample > 0 ? options.misses_per_sample
                                   : recording.metadata().pebs_reset.has_value()
                                       ? static_cast<double>(*recording.metadata().pebs_reset)
                                       : 1.0;
  int threads = options.threads;
  if (threads == 0) threads = WorkingThreads(recording);
  threads = std::clamp(threads, 1, std::max(1, machine.cores));
  const std::string backend = MetadataValue(recording.metadata(), "backend");
  // A timer recording's phases, shortened to its threads' CPU time (unless told not to).
  std::optional<Trace> cpu_timed;
  double shortened = 0;
  if (backend == "timer" && options.cpu_time &&
      MetadataValue(recording.metadata(), "instructions_counter") == "task-clock-ns") {
    auto retimed = CpuTimed(recording, threads, &shortened);
    if (!retimed.ok()) return retimed.status();
    cpu_timed = *std::move(retimed);
  }
  // From here on, the recording as projected.
  const Trace& recorded = cpu_timed ? *cpu_timed : recording;
  // A timer recording (profiler/README.md): each sample is one period of a thread's CPU
  // time spent at a memory access.
  double memory_ns_per_sample = options.memory_ns_per_sample;
  if (memory_ns_per_sample == 0 && options.misses_per_sample == 0 && backend == "timer") {
    const std::string period = MetadataValue(recorded.metadata(), "sample_period");
    if (!period.empty()) memory_ns_per_sample = std::strtod(period.c_str(), nullptr) / threads;
  }
  // The instructions column counts instructions unless the recorder says otherwise (the
  // timer and software backends count CPU time there).
  const std::string counter = MetadataValue(recorded.metadata(), "instructions_counter");
  const bool have_instructions = counter.empty() || counter == "instructions";

  // Every phase's windows, and the recording's reference compute rate: the fastest
  // instruction rate per thread of a window with at least kMinSamplesForTail samples.
  std::vector<std::vector<Window>> windows(recorded.num_phases());
  std::vector<double> busy_end(recorded.num_phases());
  std::vector<double> rates;
  for (size_t p = 0; p < recorded.num_phases(); ++p) {
    windows[p] = PhaseWindows(recorded, p, options, &busy_end[p]);
    for (const Window& w : windows[p]) {
      const double span = w.observed_end - w.start;
      if (span > 0 && w.stop - w.begin >= kMinSamplesForTail) {
        rates.push_back(w.instructions / (span * threads));
      }
    }
  }
  const double reference_rate = rates.empty() ? 0 : *std::max_element(rates.begin(), rates.end());
  Posterior posterior(machine, static_cast<size_t>(recorded_index), options, threads,
                      reference_rate, have_instructions, misses_per_sample, memory_ns_per_sample);

  // ratios[p][w][tier]
  const size_t tiers = machine.tiers.size();
  const std::vector<float> streaming =
      options.mlp > 0 ? std::vector<float>() : StreamingShares(recorded);
  std::vector<std::vector<std::vector<double>>> ratios(recorded.num_phases());
  const auto ops = recorded.op();
  for (size_t p = 0; p < recorded.num_phases(); ++p) {
    for (const Window& w : windows[p]) {
      int read_pct = 100;
      if (!ops.empty()) {
        double loads = 0, stores = 0;
        for (size_t s = w.begin; s < w.stop; ++s) {
          loads += ops[s] == 'L' ? 1 : 0;
          stores += ops[s] == 'S' ? 1 : 0;
        }
        if (loads + stores > 0)
          read_pct = static_cast<int>(std::lround(100 * loads / (loads + stores)));
      }
      double share = -1, known = 0, sum = 0;
      for (size_t s = w.begin; s < w.stop && !streaming.empty(); ++s) {
        if (streaming[s] >= 0) {
          sum += streaming[s];
          ++known;
        }
      }
      if (known > 0) share = sum / known;
      std::vector<double> r;
      posterior.Ratios(w.observed_end - w.start, static_cast<double>(w.stop - w.begin),
                       w.instructions, read_pct, share, &r);
      ratios[p].push_back(std::move(r));
    }
  }

  const auto times = recorded.time_ns();
  std::vector<Trace> out;
  for (size_t k = 0; k < tiers; ++k) {
    const TierSpec& tier = machine.tiers[k];
    TraceMetadata metadata = recorded.metadata();
    metadata.device = tier.name;
    bool have_device = false;
    for (auto& [key, value] : metadata.entries) {
      if (key == "device") {
        value = tier.name;
        have_device = true;
      }
    }
    if (!have_device) metadata.entries.emplace_back("device", tier.name);
    metadata.entries.emplace_back("projected_from", recorded.metadata().device);
    metadata.entries.emplace_back("projection_machine", machine.name);
    metadata.entries.emplace_back("projection_model", "v3");
    if (cpu_timed) {
      metadata.entries.emplace_back("projection_time",
                                    StrCat("cpu (", std::lround(100 * shortened),
                                           " % of the recording's wall time removed)"));
    }
    TraceBuilder builder(recorded.source() + " -> " + tier.name, metadata,
                         recorded.optional_columns());
    builder.Reserve(recorded.num_samples());

    double now = 0;  // the projected time of the current window's start
    uint64_t last_written = 0;
    auto emit_time = [&](double t) {
      const auto v = std::max(last_written, static_cast<uint64_t>(std::floor(std::max(0.0, t))));
      last_written = v;
      return v;
    };
    for (size_t p = 0; p < recorded.num_phases(); ++p) {
      PhaseEvent mark = recorded.marks()[p];
      mark.time_ns = p == 0 ? 0 : emit_time(now);
      builder.AddMark(mark);
      double work_old = 0, work_new = 0;
      for (size_t wi = 0; wi < windows[p].size(); ++wi) {
        const Window& w = windows[p][wi];
        const double scale = k == static_cast<size_t>(recorded_index) ? 1.0 : ratios[p][wi][k];
        for (size_t s = w.begin; s < w.stop; ++s) {
          const double offset = static_cast<double>(times[s]) - w.start;
          builder.AddSample(emit_time(now + offset * scale), recorded.tid()[s], recorded.phase()[s],
                            recorded.instructions()[s], recorded.address()[s]);
          if (!recorded.op().empty()) builder.SetLastOp(recorded.op()[s]);
          if (!recorded.weight().empty()) builder.SetLastWeight(recorded.weight()[s]);
          if (!recorded.cpu().empty()) builder.SetLastCpu(recorded.cpu()[s]);
        }
        const double duration = std::max(0.0, w.end - w.start);
        now += duration * scale;
        work_old += duration;
        work_new += duration * scale;
      }
      // The phase's tail (a barrier wait) lasts as long relative to its work as recorded.
      const double tail = static_cast<double>(recorded.PhaseEndNs(p)) - busy_end[p];
      if (tail > 0) now += work_old > 0 ? tail * work_new / work_old : tail;
    }
    PhaseEvent end_event = recorded.end();
    end_event.time_ns = emit_time(now);
    builder.SetEnd(end_event);
    auto trace = builder.Finish();
    if (!trace.ok()) return trace.status();
    out.push_back(*std::move(trace));
  }
  return out;
}

}  // namespace tiergym

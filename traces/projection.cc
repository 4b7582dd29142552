#include "traces/projection.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <span>
#include <unordered_set>

#include "traces/base/strings.h"

namespace tiergym {
namespace {

// The memory time of `misses` LLC misses served by `tier` with `outstanding` misses in
// flight: latency-bound (Little's law) or bandwidth-bound, with the tier's loaded latency
// when it has measured curves (traces/SYNTH.md section 4).
double MemoryTimeNs(const TierSpec& tier, double misses, double outstanding, double line_bytes) {
  if (misses <= 0) return 0;
  const LoadCurve curve = tier.CurveAt(100);
  const double latency_time[1] = {misses * curve.idle_latency_ns / outstanding};
  const double band_time[1] = {misses * line_bytes / curve.peak_gbps};
  const LoadCurve* curves[1] = {curve.flat() ? nullptr : &curve};
  return LoadedMemoryTimeNs(latency_time, band_time, curves);
}

}  // namespace

absl::StatusOr<std::vector<Trace>> ProjectTrace(const Trace& recorded, const Machine& machine,
                                                const ProjectionOptions& options) {
  if (machine.tiers.size() < 2) {
    return absl::InvalidArgumentError(
        StrCat("machine '", machine.name, "' has ", machine.tiers.size(),
               " tier: a projection needs at least two (a placement has nowhere to go)"));
  }
  if (recorded.num_samples() == 0) {
    return absl::InvalidArgumentError(
        StrCat(recorded.source(),
               ": the recording has no samples: nothing to project (record "
               "longer, or with a smaller --period)"));
  }
  if (options.mlp <= 0 || options.overlap < 0 || options.overlap > 1 ||
      options.samples_per_window == 0 || options.misses_per_sample < 0 || options.threads < 0 ||
      options.memory_ns_per_sample < 0) {
    return absl::InvalidArgumentError(
        "projection options: mlp > 0, overlap in [0, 1], samples_per_window > 0, "
        "misses_per_sample >= 0 and threads >= 0 are required");
  }
  int recorded_index = -1;
  if (!options.recorded_tier.empty()) {
    recorded_index = machine.IndexOf(options.recorded_tier);
    if (recorded_index < 0) {
      return absl::InvalidArgumentError(StrCat("--recorded-tier '", options.recorded_tier,
                                               "' is not a tier of machine '", machine.name, "'"));
    }
  } else {
    recorded_index = std::max(0, machine.IndexOf(recorded.metadata().device));
  }
  const TierSpec& rec_tier = machine.tiers[static_cast<size_t>(recorded_index)];
  const double misses_per_sample = options.misses_per_sample > 0 ? options.misses_per_sample
                                   : recorded.metadata().pebs_reset.has_value()
                                       ? static_cast<double>(*recorded.metadata().pebs_reset)
                                       : 1.0;
  int threads = options.threads;
  if (threads == 0) {
    std::unordered_set<uint32_t> tids(recorded.tid().begin(), recorded.tid().end());
    threads = static_cast<int>(tids.size());
  }
  threads = std::clamp(threads, 1, std::max(1, machine.cores));
  const double outstanding = options.mlp * threads;
  // A timer recording (profiler/README.md): each sample is one period of a thread's CPU
  // time spent at a memory access.
  double memory_ns_per_sample = options.memory_ns_per_sample;
  if (memory_ns_per_sample == 0 && options.misses_per_sample == 0) {
    std::string backend, period;
    for (const auto& [key, value] : recorded.metadata().entries) {
      if (key == "backend") backend = value;
      if (key == "sample_period") period = value;
    }
    if (backend == "timer" && !period.empty()) {
      memory_ns_per_sample = std::strtod(period.c_str(), nullptr) / threads;
    }
  }
  const double o = options.overlap;
  const auto times = recorded.time_ns();

  std::vector<Trace> out;
  for (const TierSpec& tier : machine.tiers) {
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
    metadata.entries.emplace_back("projection_model", "v1");
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
      const size_t begin = recorded.PhaseBegin(p), end = recorded.PhaseBegin(p + 1);
      double window_start_old = static_cast<double>(recorded.PhaseStartNs(p));
      const double phase_end_old = static_cast<double>(recorded.PhaseEndNs(p));
      size_t i = begin;
      do {
        const size_t stop = std::min(end, i + options.samples_per_window);
        const double window_end_old =
            stop == end ? phase_end_old : static_cast<double>(times[stop - 1]);
        const double t = std::max(0.0, window_end_old - window_start_old);
        double misses = static_cast<double>(stop - i) * misses_per_sample;
        if (memory_ns_per_sample > 0) {
          // The samples measured the memory time: the misses that cost it on this tier.
          const double stalled = std::min(t, static_cast<double>(stop - i) * memory_ns_per_sample);
          const double per_miss =
              MemoryTimeNs(rec_tier, 1e6, outstanding, machine.cache_line_bytes) / 1e6;
          misses = per_miss > 0 ? stalled / per_miss : 0;
        }
        double scale = 1;  // projected duration / recorded duration
        const double m0 = MemoryTimeNs(rec_tier, misses, outstanding, machine.cache_line_bytes);
        if (t > 0 && m0 > 0) {
          double c = 0, m = m0;
          if (t >= (2 - o) * m0) {
            c = t - (1 - o) * m0;
          } else if (t >= m0) {
            c = o < 1 ? (t - m0) / (1 - o) : 0;
          } else {
            m = t;  // the model's memory time overshoots the recording: keep the recording
          }
          const double m_tier =
              m / m0 * MemoryTimeNs(tier, misses, outstanding, machine.cache_line_bytes);
          const double t_tier = std::max(c, m_tier) + (1 - o) * std::min(c, m_tier);
          scale = t_tier / t;
        }
        for (size_t s = i; s < stop; ++s) {
          const double offset = static_cast<double>(times[s]) - window_start_old;
          builder.AddSample(emit_time(now + offset * scale), recorded.tid()[s], recorded.phase()[s],
                            recorded.instructions()[s], recorded.address()[s]);
          if (!recorded.op().empty()) builder.SetLastOp(recorded.op()[s]);
          if (!recorded.weight().empty()) builder.SetLastWeight(recorded.weight()[s]);
          if (!recorded.cpu().empty()) builder.SetLastCpu(recorded.cpu()[s]);
        }
        now += t * scale;
        window_start_old = window_end_old;
        i = stop;
      } while (i < end);
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

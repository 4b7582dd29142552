// What `tiergym trace info` reports about one trace: phases with their instructions and
// durations, samples, threads, the footprint (distinct pages touched by samples) and the
// address ranges touched.
//
// Pure functions of an immutable Trace; thread-safe.
#ifndef TIERGYM_TRACES_TRACE_SUMMARY_H_
#define TIERGYM_TRACES_TRACE_SUMMARY_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "traces/base/json.h"
#include "traces/trace.h"

namespace tiergym {

struct PhaseSummary {
  uint32_t phase = 0;
  uint64_t start_ns = 0;
  uint64_t duration_ns = 0;
  uint64_t instructions = 0;
  uint64_t samples = 0;
};

// A maximal run of touched pages in which no two consecutive touched pages are more than
// the gap apart. [start, end) in bytes, page aligned.
struct AddressRange {
  uint64_t start = 0;
  uint64_t end = 0;
  uint64_t pages = 0;    // distinct touched pages inside
  uint64_t samples = 0;  // samples inside
};

struct SummaryOptions {
  // Touched pages closer than this (bytes between the end of one and the start of the
  // next) are reported as one range. Default 1 MiB: sampled pages of one array are rarely
  // further apart, separate mappings almost always are.
  uint64_t range_gap_bytes = 1 << 20;
};

struct TraceSummary {
  std::string source;
  TraceMetadata metadata;
  uint64_t runtime_ns = 0;
  uint64_t samples = 0;
  uint64_t threads = 0;  // distinct tids among samples
  std::vector<PhaseSummary> phases;
  uint64_t total_instructions = 0;
  uint64_t footprint_pages = 0;
  uint64_t footprint_bytes = 0;
  std::vector<AddressRange> ranges;
};

TraceSummary Summarize(const Trace& trace, const SummaryOptions& options = {});

// Human-readable report; at most `max_ranges` ranges are listed (the rest are counted).
std::string FormatSummaryText(const TraceSummary& summary, size_t max_ranges = 16);

// The summary as one JSON object. Keys: source, app, device, event, pebs_reset (null when
// absent), page_size, runtime_ns, samples, threads, total_instructions, footprint_pages,
// footprint_bytes, phases [{phase, start_ns, duration_ns, instructions, samples}],
// ranges [{start, end (hex strings), pages, samples}].
void WriteSummaryJson(const TraceSummary& summary, json::Writer& w);

// The distinct pages (address / page_size) touched by the trace's samples, ascending.
std::vector<uint64_t> TouchedPages(const Trace& trace);

// "41.000 s", "913.3 us", ... for reports.
std::string FormatDuration(uint64_t ns);
// "1.50 GiB", "12.0 KiB", "512 B".
std::string FormatBytes(uint64_t bytes);

}  // namespace tiergym

#endif  // TIERGYM_TRACES_TRACE_SUMMARY_H_

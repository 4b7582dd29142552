#include "traces/trace_summary.h"

#include <algorithm>
#include <bit>
#include <cinttypes>
#include <cstdio>

#include "absl/container/flat_hash_set.h"
#include "traces/base/strings.h"

namespace tiergym {
namespace {

// The page number of every sample, ascending (duplicates kept, so runs give counts).
std::vector<uint64_t> SortedSamplePages(const Trace& trace) {
  const int shift = std::countr_zero(trace.metadata().page_size);
  std::vector<uint64_t> pages(trace.address().begin(), trace.address().end());
  for (uint64_t& p : pages) p >>= shift;
  std::sort(pages.begin(), pages.end());
  return pages;
}

}  // namespace

std::string FormatDuration(uint64_t ns) {
  const double v = static_cast<double>(ns);
  if (ns >= 1'000'000'000) return StrCat(FixedDecimal(v / 1e9, 3), " s");
  if (ns >= 1'000'000) return StrCat(FixedDecimal(v / 1e6, 3), " ms");
  if (ns >= 1'000) return StrCat(FixedDecimal(v / 1e3, 1), " us");
  return StrCat(ns, " ns");
}

std::string FormatBytes(uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) v /= 1024, ++u;
  return u == 0 ? StrCat(bytes, " B") : StrCat(FixedDecimal(v, v < 10 ? 2 : 1), " ", units[u]);
}

std::vector<uint64_t> TouchedPages(const Trace& trace) {
  std::vector<uint64_t> pages = SortedSamplePages(trace);
  pages.erase(std::unique(pages.begin(), pages.end()), pages.end());
  return pages;
}

TraceSummary Summarize(const Trace& trace, const SummaryOptions& options) {
  TraceSummary s;
  s.source = trace.source();
  s.metadata = trace.metadata();
  s.runtime_ns = trace.runtime_ns();
  s.samples = trace.num_samples();
  for (size_t p = 0; p < trace.num_phases(); ++p) {
    PhaseSummary ph;
    ph.phase = static_cast<uint32_t>(p);
    ph.start_ns = trace.PhaseStartNs(p);
    ph.duration_ns = trace.PhaseEndNs(p) - ph.start_ns;
    ph.instructions = trace.PhaseInstructions(p);
    ph.samples = trace.PhaseBegin(p + 1) - trace.PhaseBegin(p);
    s.total_instructions += ph.instructions;
    s.phases.push_back(ph);
  }
  absl::flat_hash_set<uint32_t> tids(trace.tid().begin(), trace.tid().end());
  s.threads = tids.size();

  // Pages with their sample counts, ascending, then grouped into ranges.
  const uint64_t page_size = trace.metadata().page_size;
  const std::vector<uint64_t> pages = SortedSamplePages(trace);
  const uint64_t gap_pages = options.range_gap_bytes / page_size;
  for (size_t i = 0; i < pages.size();) {
    size_t j = i;
    while (j < pages.size() && pages[j] == pages[i]) ++j;
    const uint64_t page = pages[i];
    const uint64_t count = j - i;
    ++s.footprint_pages;
    if (s.ranges.empty() || page - s.ranges.back().end / page_size > gap_pages) {
      s.ranges.push_back({page * page_size, (page + 1) * page_size, 0, 0});
    }
    AddressRange& r = s.ranges.back();
    r.end = (page + 1) * page_size;
    r.pages += 1;
    r.samples += count;
    i = j;
  }
  s.footprint_bytes = s.footprint_pages * page_size;
  return s;
}

std::string FormatSummaryText(const TraceSummary& s, size_t max_ranges) {
  const TraceMetadata& m = s.metadata;
  std::string out = StrCat(s.source, "\n");
  StrAppend(&out, "  app          ", m.app.empty() ? "(not given)" : m.app, "\n");
  StrAppend(&out, "  device       ", m.device, "\n");
  if (!m.event.empty()) StrAppend(&out, "  event        ", m.event, "\n");
  if (m.pebs_reset) StrAppend(&out, "  pebs_reset   ", *m.pebs_reset, "\n");
  StrAppend(&out, "  runtime      ", FormatDuration(s.runtime_ns), " (", s.runtime_ns, " ns)\n");
  StrAppend(&out, "  samples      ", s.samples, " from ", s.threads, " thread(s)\n");
  StrAppend(&out, "  instructions ", s.total_instructions, "\n");
  StrAppend(&out, "  footprint    ", s.footprint_pages, " pages of ", m.page_size,
            " B = ", FormatBytes(s.footprint_bytes), " (pages seen in samples)\n");
  StrAppend(&out, "  phases       ", s.phases.size(), "\n");
  char line[160];
  std::snprintf(line, sizeof line, "    %6s %14s %14s %16s %10s\n", "phase", "start", "duration",
                "instructions", "samples");
  out += line;
  const size_t shown_phases = s.phases.size() <= 40 ? s.phases.size() : 30;
  for (size_t i = 0; i < shown_phases; ++i) {
    const PhaseSummary& p = s.phases[i];
    std::snprintf(line, sizeof line, "    %6u %14s %14s %16" PRIu64 " %10" PRIu64 "\n", p.phase,
                  FormatDuration(p.start_ns).c_str(), FormatDuration(p.duration_ns).c_str(),
                  p.instructions, p.samples);
    out += line;
  }
  if (shown_phases < s.phases.size()) {
    StrAppend(&out, "    ... ", s.phases.size() - shown_phases, " more phases (see --json)\n");
  }
  StrAppend(&out, "  address ranges touched: ", s.ranges.size(), "\n");
  std::snprintf(line, sizeof line, "    %18s %18s %12s %10s %10s\n", "start", "end", "size",
                "pages", "samples");
  out += line;
  for (size_t i = 0; i < s.ranges.size() && i < max_ranges; ++i) {
    const AddressRange& r = s.ranges[i];
    std::snprintf(line, sizeof line, "    %18s %18s %12s %10" PRIu64 " %10" PRIu64 "\n",
                  Hex(r.start).c_str(), Hex(r.end).c_str(), FormatBytes(r.end - r.start).c_str(),
                  r.pages, r.samples);
    out += line;
  }
  if (s.ranges.size() > max_ranges) {
    StrAppend(&out, "    ... ", s.ranges.size() - max_ranges, " more ranges (see --json)\n");
  }
  return out;
}

void WriteSummaryJson(const TraceSummary& s, json::Writer& w) {
  const TraceMetadata& m = s.metadata;
  w.BeginObject();
  w.Key("source");
  w.String(s.source);
  w.Key("app");
  w.String(m.app);
  w.Key("device");
  w.String(m.device);
  w.Key("event");
  w.String(m.event);
  w.Key("pebs_reset");
  if (m.pebs_reset) {
    w.Uint(*m.pebs_reset);
  } else {
    w.Null();
  }
  w.Key("page_size");
  w.Uint(m.page_size);
  w.Key("runtime_ns");
  w.Uint(s.runtime_ns);
  w.Key("samples");
  w.Uint(s.samples);
  w.Key("threads");
  w.Uint(s.threads);
  w.Key("total_instructions");
  w.Uint(s.total_instructions);
  w.Key("footprint_pages");
  w.Uint(s.footprint_pages);
  w.Key("footprint_bytes");
  w.Uint(s.footprint_bytes);
  w.Key("phases");
  w.BeginArray();
  for (const PhaseSummary& p : s.phases) {
    w.BeginObject();
    w.Key("phase");
    w.Uint(p.phase);
    w.Key("start_ns");
    w.Uint(p.start_ns);
    w.Key("duration_ns");
    w.Uint(p.duration_ns);
    w.Key("instructions");
    w.Uint(p.instructions);
    w.Key("samples");
    w.Uint(p.samples);
    w.EndObject();
  }
  w.EndArray();
  w.Key("ranges");
  w.BeginArray();
  for (const AddressRange& r : s.ranges) {
    w.BeginObject();
    w.Key("start");
    w.String(Hex(r.start));
    w.Key("end");
    w.String(Hex(r.end));
    w.Key("pages");
    w.Uint(r.pages);
    w.Key("samples");
    w.Uint(r.samples);
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
}

}  // namespace tiergym

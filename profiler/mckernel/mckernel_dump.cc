#include "profiler/mckernel/mckernel_dump.h"

#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>

#include "kernel_patches/abi/tiergym_mckernel.h"
#include "traces/base/file.h"
#include "traces/base/status_macros.h"
#include "traces/base/strings.h"

namespace tiergym::mckernel {
namespace {

static_assert(std::endian::native == std::endian::little,
              "dumps are read as native little-endian words (McKernel runs on x86_64)");

constexpr size_t kWordBytes = TIERGYM_DUMP_WORD_BYTES;
constexpr uint64_t kWatermark = TIERGYM_DUMP_WATERMARK;
constexpr uint64_t kPhasemark = TIERGYM_DUMP_PHASEMARK;
constexpr size_t kVmaWords = TIERGYM_DUMP_VMA_WORDS;
constexpr size_t kBatchHeaderWords = TIERGYM_DUMP_BATCH_HEADER_WORDS;
static_assert(kWordBytes == sizeof(uint64_t));

class DumpParser {
 public:
  DumpParser(std::string source, std::string_view bytes)
      : source_(std::move(source)), bytes_(bytes), num_words_(bytes.size() / kWordBytes) {}

  absl::StatusOr<Dump> Parse() {
    if (bytes_.size() % kWordBytes != 0) {
      return Error(num_words_, "partial-word",
                   StrCat("the dump is ", bytes_.size(), " bytes, not a multiple of ", kWordBytes,
                          "; it was cut short"));
    }
    Dump dump;
    dump.source = source_;
    size_t i = 0;
    TG_RETURN_IF_ERROR(ParseVmaSection(i, "mmap", dump.mmaps));
    TG_RETURN_IF_ERROR(ParseVmaSection(i, "munmap", dump.munmaps));
    dump.addresses.reserve(num_words_ - i);
    uint32_t phase = 0;
    while (i < num_words_) {
      const uint64_t w = Word(i);
      if (w == kWatermark) {
        if (num_words_ - i < kBatchHeaderWords) {
          return Error(i, "truncated-batch",
                       StrCat("the file ends ", (num_words_ - i) * kWordBytes, " bytes into a ",
                              kBatchHeaderWords * kWordBytes, "-byte batch header"));
        }
        Batch b;
        b.offset = i * kWordBytes;
        b.tsc = Word(i + TIERGYM_DUMP_BATCH_TSC);
        b.instructions = Word(i + TIERGYM_DUMP_BATCH_INSTRUCTIONS);
        const uint64_t count = Word(i + TIERGYM_DUMP_BATCH_COUNT);
        const size_t left = num_words_ - i - kBatchHeaderWords;
        if (count > left) {
          return Error(i, "count-beyond-end",
                       StrCat("the batch counts ", count, " addresses but only ", left,
                              " words follow its header"));
        }
        if (!dump.batches.empty()) {
          const Batch& prev = dump.batches.back();
          if (b.tsc < prev.tsc) {
            return Error(i, "tsc-decreasing",
                         StrCat("batch TSC ", b.tsc, " is below the previous batch's ", prev.tsc));
          }
          if (prev.phase == phase && b.instructions < prev.instructions) {
            return Error(i, "instructions-decreasing",
                         StrCat("batch counts ", b.instructions,
                                " instructions since the phasemark, the previous batch of "
                                "the phase ",
                                prev.instructions));
          }
        }
        b.phase = phase;
        b.first_address = dump.addresses.size();
        b.num_addresses = count;
        const size_t first = i + kBatchHeaderWords;
        for (size_t k = 0; k < count; ++k) dump.addresses.push_back(Word(first + k));
        dump.batches.push_back(b);
        i = first + count;
      } else if (w == kPhasemark) {
        if (dump.batches.empty()) {
          return Error(i, "phasemark-before-batch",
                       "a phasemark word with no batch before it (the kernel harvests a "
                       "batch before every phasemark)");
        }
        dump.marks.push_back({dump.batches.size() - 1, i * kWordBytes});
        ++phase;
        ++i;
      } else {
        return Error(i, "bad-marker",
                     StrCat("word ", Hex(w), " is neither a batch marker (", Hex(kWatermark),
                            ") nor a phasemark (", Hex(kPhasemark), ")"));
      }
    }
    if (dump.batches.empty()) {
      return Error(num_words_, "no-batch",
                   "the PEBS section holds no batch (the kernel writes one when the thread "
                   "exits)");
    }
    return dump;
  }

 private:
  uint64_t Word(size_t i) const {
    uint64_t w;
    std::memcpy(&w, bytes_.data() + i * kWordBytes, sizeof w);
    return w;
  }

  absl::Status Error(size_t word, std::string_view rule, std::string_view detail) const {
    return absl::DataLossError(
        StrCat(source_, ": byte ", word * kWordBytes, ": ", rule, ": ", detail));
  }

  // Records [TSC, start, length] up to and including the watermark that ends the section.
  absl::Status ParseVmaSection(size_t& i, std::string_view name, std::vector<VmaRecord>& out) {
    while (true) {
      if (i == num_words_) {
        return Error(i, StrCat("unterminated-", name),
                     StrCat("the file ends before the watermark that ends the ", name, " section"));
      }
      if (Word(i) == kWatermark) {
        ++i;
        return absl::OkStatus();
      }
      if (num_words_ - i < kVmaWords) {
        return Error(i, StrCat("truncated-", name, "-record"),
                     StrCat("the file ends ", (num_words_ - i) * kWordBytes, " bytes into a ",
                            kVmaWords * kWordBytes, "-byte ", name, " record"));
      }
      out.push_back({Word(i + TIERGYM_DUMP_VMA_TSC), Word(i + TIERGYM_DUMP_VMA_START),
                     Word(i + TIERGYM_DUMP_VMA_LENGTH), i * kWordBytes});
      i += kVmaWords;
    }
  }

  std::string source_;
  std::string_view bytes_;
  size_t num_words_;
};

// Reads an unsigned decimal number at the front of `s` and removes it.
bool ConsumeNumber(std::string_view& s, uint64_t& out) {
  auto r = std::from_chars(s.data(), s.data() + s.size(), out, 10);
  if (r.ec != std::errc() || r.ptr == s.data()) return false;
  s.remove_prefix(r.ptr - s.data());
  return true;
}

bool ConsumeLiteral(std::string_view& s, std::string_view literal) {
  if (!s.starts_with(literal)) return false;
  s.remove_prefix(literal.size());
  return true;
}

bool HasControlCharacter(std::string_view s) {
  return std::any_of(s.begin(), s.end(),
                     [](char c) { return static_cast<unsigned char>(c) < 0x20; });
}

// One sample row before the rows of all dumps are merged.
struct Row {
  uint64_t time_ns;
  uint32_t phase;
  uint32_t tid;
  uint64_t instructions;
  uint64_t address;
};

// `a + (b - a) * num / den` without overflow; REQUIRES: a <= b, num <= den, den > 0.
uint64_t Between(uint64_t a, uint64_t b, uint64_t num, uint64_t den) {
  return a + static_cast<uint64_t>(static_cast<unsigned __int128>(b - a) * num / den);
}

}  // namespace

absl::StatusOr<Dump> ParseDump(std::string source, std::string_view bytes) {
  return DumpParser(std::move(source), bytes).Parse();
}

absl::StatusOr<Dump> ReadDump(const std::string& path) {
  TG_ASSIGN_OR_RETURN(std::string bytes, ReadFile(path));
  return ParseDump(path, bytes);
}

std::optional<DumpName> ParseDumpName(std::string_view path) {
  const size_t slash = path.rfind('/');
  std::string_view name = slash == std::string_view::npos ? path : path.substr(slash + 1);
  if (!name.ends_with(".dat")) return std::nullopt;
  name.remove_suffix(4);
  constexpr std::string_view kCountdown = "-PEBS-countdown-";
  const size_t at = name.rfind(kCountdown);
  if (at == std::string_view::npos) return std::nullopt;
  DumpName out;
  out.exec = std::string(name.substr(0, at));
  std::string_view rest = name.substr(at + kCountdown.size());
  if (ConsumeNumber(rest, out.countdown) && ConsumeLiteral(rest, "-PEBS-buffer-") &&
      ConsumeNumber(rest, out.buffer_size) && ConsumeLiteral(rest, "-pid-") &&
      ConsumeNumber(rest, out.pid) && ConsumeLiteral(rest, "-tid-") &&
      ConsumeNumber(rest, out.tid) && rest.empty()) {
    return out;
  }
  return std::nullopt;
}

absl::StatusOr<ImportedRun> ImportDumps(std::span<const Dump> dumps, const ImportOptions& options) {
  if (dumps.empty()) return absl::InvalidArgumentError("no dumps to import");
  if (options.device.empty()) {
    return absl::InvalidArgumentError(
        "the device (the tier the whole run was placed on) is required");
  }
  for (const std::string* s : {&options.device, &options.app, &options.event}) {
    if (HasControlCharacter(*s)) {
      return absl::InvalidArgumentError(
          StrCat("device, app and event names may not hold control characters: '", *s, "'"));
    }
  }
  if (!(options.tsc_ghz > 0) || !std::isfinite(options.tsc_ghz)) {
    return absl::InvalidArgumentError(
        StrCat("the TSC rate must be a positive number of GHz, not ", options.tsc_ghz));
  }
  if (options.page_size == 0 || (options.page_size & (options.page_size - 1)) != 0) {
    return absl::InvalidArgumentError(
        StrCat("page size ", options.page_size, " is not a power of two"));
  }
  if (options.pebs_reset && *options.pebs_reset == 0) {
    return absl::InvalidArgumentError("the PEBS reset must be positive");
  }

  // Threads: the tid in each file name (else the dump's index); one process.
  const size_t n = dumps.size();
  std::vector<uint32_t> tids(n);
  std::optional<DumpName> first_name;
  for (size_t d = 0; d < n; ++d) {
    std::optional<DumpName> name = ParseDumpName(dumps[d].source);
    if (d == 0) first_name = name;
    uint64_t tid = d;
    if (name) {
      if (first_name && name->pid != first_name->pid) {
        return absl::InvalidArgumentError(StrCat(dumps[d].source, " is a dump of pid ", name->pid,
                                                 ", ", dumps[0].source, " of pid ", first_name->pid,
                                                 ": one trace is one process"));
      }
      tid = name->tid;
    }
    if (tid > std::numeric_limits<uint32_t>::max()) {
      return absl::InvalidArgumentError(StrCat(dumps[d].source, ": tid ", tid, " is too large"));
    }
    tids[d] = static_cast<uint32_t>(tid);
    for (size_t e = 0; e < d; ++e) {
      if (tids[e] == tids[d]) {
        return absl::InvalidArgumentError(StrCat(dumps[e].source, " and ", dumps[d].source,
                                                 " are both dumps of thread ", tids[d]));
      }
    }
  }
  const Dump& lead = dumps[0];
  const size_t num_marks = lead.marks.size();
  for (size_t d = 1; d < n; ++d) {
    if (dumps[d].marks.size() > num_marks) {
      return absl::InvalidArgumentError(
          StrCat(dumps[d].source, " holds ", dumps[d].marks.size(), " phasemarks, more than the ",
                 num_marks, " of ", lead.source,
                 ": list the dump of the thread that calls phasemark() first"));
    }
  }

  // Time base.
  uint64_t min_tsc = std::numeric_limits<uint64_t>::max(), max_tsc = 0;
  auto see = [&](uint64_t tsc) {
    min_tsc = std::min(min_tsc, tsc);
    max_tsc = std::max(max_tsc, tsc);
  };
  for (const Dump& dump : dumps) {
    for (const VmaRecord& r : dump.mmaps) see(r.tsc);
    for (const VmaRecord& r : dump.munmaps) see(r.tsc);
    for (const Batch& b : dump.batches) see(b.tsc);
  }
  const uint64_t t0 = options.start_tsc.value_or(min_tsc);
  if (t0 > min_tsc) {
    return absl::InvalidArgumentError(
        StrCat("a record has TSC ", min_tsc, ", before the start TSC ", t0));
  }
  const double ghz = options.tsc_ghz;
  auto ns = [t0, ghz](uint64_t tsc) {
    return static_cast<uint64_t>(std::llround(static_cast<double>(tsc - t0) / ghz));
  };

  // Phasemarks and end, from the leading dump.
  std::vector<PhaseEvent> marks;
  marks.reserve(num_marks + 1);
  marks.push_back({0, tids[0], 0, 0});
  for (size_t k = 0; k < num_marks; ++k) {
    const Batch& before = lead.batches[lead.marks[k].batch_before];
    marks.push_back({ns(before.tsc), tids[0], static_cast<uint32_t>(k + 1),
                     before.phase == k ? before.instructions : 0});
  }
  const Batch& last = lead.batches.back();
  const PhaseEvent end{ns(max_tsc), tids[0], static_cast<uint32_t>(num_marks),
                       last.phase == num_marks ? last.instructions : 0};
  // The TSC at which each phase starts in the leading dump's stream.
  auto phase_start_tsc = [&](uint32_t p) {
    return p == 0 ? t0 : lead.batches[lead.marks[p - 1].batch_before].tsc;
  };

  // The leading dump's progress per phase: (time_ns, instructions) points.
  std::vector<std::vector<std::pair<uint64_t, uint64_t>>> progress(num_marks + 1);
  for (size_t p = 0; p <= num_marks; ++p) progress[p].push_back({marks[p].time_ns, 0});
  for (const Batch& b : lead.batches) progress[b.phase].push_back({ns(b.tsc), b.instructions});
  for (size_t p = 0; p <= num_marks; ++p) {
    const PhaseEvent& next = p < num_marks ? marks[p + 1] : end;
    progress[p].push_back({next.time_ns, next.instructions});
  }
  auto progress_at = [&](uint32_t p, uint64_t t) -> uint64_t {
    const auto& pts = progress[p];
    auto it = std::upper_bound(pts.begin(), pts.end(), t,
                               [](uint64_t v, const auto& pt) { return v < pt.first; });
    if (it == pts.begin()) return 0;
    const auto& a = *(it - 1);
    if (it == pts.end() || it->first == a.first || it->second < a.second) return a.second;
    return Between(a.second, it->second, t - a.first, it->first - a.first);
  };
  std::vector<uint64_t> mark_times(marks.size());
  for (size_t p = 0; p < marks.size(); ++p) mark_times[p] = marks[p].time_ns;

  // Samples.
  size_t total = 0;
  for (const Dump& dump : dumps) total += dump.addresses.size();
  std::vector<Row> rows;
  rows.reserve(total);
  for (size_t d = 0; d < n; ++d) {
    const Dump& dump = dumps[d];
    for (size_t j = 0; j < dump.batches.size(); ++j) {
      const Batch& b = dump.batches[j];
      const size_t count = b.num_addresses;
      // Where a spread batch starts: the previous batch of the stream (of the same phase,
      // for the leading dump, whose instructions restart at each phasemark).
      uint64_t from_tsc = b.tsc, from_instructions = b.instructions;
      if (options.spread_within_batch) {
        if (d == 0) {
          const bool same_phase = j > 0 && dump.batches[j - 1].phase == b.phase;
          from_tsc = same_phase ? dump.batches[j - 1].tsc : phase_start_tsc(b.phase);
          from_instructions = same_phase ? dump.batches[j - 1].instructions : 0;
        } else {
          from_tsc = j > 0 ? dump.batches[j - 1].tsc : t0;
        }
      }
      for (size_t k = 0; k < count; ++k) {
        const uint64_t tsc = Between(from_tsc, b.tsc, k + 1, count);
        const uint64_t t = ns(tsc);
        Row r{t, 0, tids[d], 0, dump.addresses[b.first_address + k]};
        if (d == 0) {
          r.phase = b.phase;
          r.instructions = Between(from_instructions, b.instructions, k + 1, count);
        } else {
          r.phase = static_cast<uint32_t>(
              std::upper_bound(mark_times.begin(), mark_times.end(), t) - mark_times.begin() - 1);
          r.instructions = progress_at(r.phase, t);
        }
        rows.push_back(r);
      }
    }
  }
  if (n > 1) {
    std::stable_sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) {
      return a.time_ns != b.time_ns ? a.time_ns < b.time_ns : a.phase < b.phase;
    });
  }

  // The trace.
  std::string app = options.app;
  if (app.empty() && first_name) app = first_name->exec;
  if (HasControlCharacter(app)) {
    return absl::InvalidArgumentError(
        StrCat("application name '", app, "' from ", lead.source, " holds control characters"));
  }
  std::optional<uint64_t> pebs_reset = options.pebs_reset;
  if (!pebs_reset && first_name && first_name->countdown > 0) {
    pebs_reset = first_name->countdown;
  }
  TraceMetadata metadata =
      TraceMetadata::Make(app, options.device, options.event, pebs_reset, options.page_size);
  metadata.entries.emplace_back("tsc_ghz", StrCat(ghz));
  metadata.entries.emplace_back("start_tsc", StrCat(t0));
  TraceBuilder builder(lead.source, std::move(metadata));
  builder.Reserve(rows.size());
  for (const PhaseEvent& m : marks) builder.AddMark(m);
  for (const Row& r : rows) builder.AddSample(r.time_ns, r.tid, r.phase, r.instructions, r.address);
  builder.SetEnd(end);
  TG_ASSIGN_OR_RETURN(Trace trace, builder.Finish());

  std::vector<VmaEvent> vmas;
  for (size_t d = 0; d < n; ++d) {
    for (const VmaRecord& r : dumps[d].mmaps) {
      vmas.push_back({VmaEvent::Kind::kMmap, ns(r.tsc), tids[d], r.start, r.length});
    }
    for (const VmaRecord& r : dumps[d].munmaps) {
      vmas.push_back({VmaEvent::Kind::kMunmap, ns(r.tsc), tids[d], r.start, r.length});
    }
  }
  std::stable_sort(vmas.begin(), vmas.end(),
                   [](const VmaEvent& a, const VmaEvent& b) { return a.time_ns < b.time_ns; });
  return ImportedRun{std::move(trace), std::move(vmas), t0};
}

std::string FormatVmaCsv(std::span<const VmaEvent> vmas) {
  std::string out = "type,time_ns,tid,start,length\n";
  for (const VmaEvent& v : vmas) {
    StrAppend(&out, v.kind == VmaEvent::Kind::kMmap ? "mmap" : "munmap", ",", v.time_ns, ",", v.tid,
              ",", Hex(v.start), ",", Hex(v.length), "\n");
  }
  return out;
}

}  // namespace tiergym::mckernel

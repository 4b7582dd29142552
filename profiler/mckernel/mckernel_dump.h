// Reader of the PEBS dumps that McKernel with tiergym's kernel_patches writes, and their
// conversion into one trace (trace CSV v1 / binary, traces/trace.h).
//
// A dump is one thread's PEBS stream: mmap and munmap records, then batches of sampled
// data addresses stamped with the TSC and the instructions the thread retired since its
// last phasemark, and phasemark words. The layout is defined in
// kernel_patches/abi/tiergym_mckernel.h (shared with the kernel side) and described in
// kernel_patches/DUMP_FORMAT.md.
//
// ParseDump() is strict: a dump that breaks any rule is refused whole with a DataLoss error
// "FILE: byte OFFSET: RULE: detail" and nothing is returned. Rules (the RULE word):
//   partial-word             the size is not a multiple of 8 bytes
//   unterminated-mmap        the file ends before the watermark that ends the mmap section
//   truncated-mmap-record    the file ends inside an mmap record
//   unterminated-munmap      the file ends before the watermark that ends the munmap section
//   truncated-munmap-record  the file ends inside an munmap record
//   bad-marker               a PEBS-section word is neither a batch marker nor a phasemark
//   truncated-batch          the file ends inside a batch header
//   count-beyond-end         a batch counts more addresses than the file holds
//   phasemark-before-batch   a phasemark word with no batch before it
//   tsc-decreasing           a batch's TSC is below the previous batch's
//   instructions-decreasing  a batch counts fewer instructions than the previous batch of
//                            the same phase
//   no-batch                 the PEBS section holds no batch (the kernel always writes the
//                            one harvested at thread exit)
//
// ImportDumps() turns the dumps of one process (one per thread, the thread that calls
// phasemark() first) into one trace; see ImportOptions and DUMP_FORMAT.md for how times,
// phases and instructions are derived. Its errors are InvalidArgument.
//
// Everything here is a pure function of its inputs; thread-safe.
#ifndef TIERGYM_PROFILER_MCKERNEL_MCKERNEL_DUMP_H_
#define TIERGYM_PROFILER_MCKERNEL_MCKERNEL_DUMP_H_

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "traces/trace.h"

namespace tiergym::mckernel {

// An mmap or munmap record of a dump.
struct VmaRecord {
  uint64_t tsc = 0;
  uint64_t start = 0;
  uint64_t length = 0;
  uint64_t offset = 0;  // byte offset of the record in the dump
};

// One harvest of a CPU's PEBS buffer into the thread's stream.
struct Batch {
  uint64_t tsc = 0;
  uint64_t instructions = 0;  // retired by the thread since its last phasemark
  uint32_t phase = 0;         // phasemark words before the batch in the stream
  size_t first_address = 0;   // the batch's addresses are Dump::addresses[first, first + n)
  size_t num_addresses = 0;
  uint64_t offset = 0;  // byte offset of the batch marker
};

// One phasemark word.
struct PhaseMarkRecord {
  size_t batch_before = 0;  // index of the batch the word follows
  uint64_t offset = 0;
};

// A parsed dump. Records are in file order.
struct Dump {
  std::string source;  // names the dump in messages (its path)
  std::vector<VmaRecord> mmaps;
  std::vector<VmaRecord> munmaps;
  std::vector<Batch> batches;
  std::vector<uint64_t> addresses;  // every batch's addresses, in batch order
  std::vector<PhaseMarkRecord> marks;
};

// Parses the bytes of a dump (64-bit little-endian words). `source` names it in errors.
absl::StatusOr<Dump> ParseDump(std::string source, std::string_view bytes);

// Reads and parses the dump file at `path` (NotFound, PermissionDenied as ReadFile).
absl::StatusOr<Dump> ReadDump(const std::string& path);

// The fields of a dump file name in the kernel's format (TIERGYM_DUMP_NAME_FORMAT:
// EXEC-PEBS-countdown-N-PEBS-buffer-B-pid-P-tid-T.dat); any directory is ignored.
struct DumpName {
  std::string exec;
  uint64_t countdown = 0;
  uint64_t buffer_size = 0;
  uint64_t pid = 0;
  uint64_t tid = 0;
};
std::optional<DumpName> ParseDumpName(std::string_view path);

struct ImportOptions {
  // The tier the whole run was placed on (the trace's `device`); required.
  std::string device;
  // The application; default "": the executable in the first dump's file name, if any.
  std::string app;
  // TSC ticks per nanosecond. Default 1.4: the Xeon Phi 7250 of Denoyelle et al.
  double tsc_ghz = 1.4;
  // The sampled event; default: the one McKernel's PEBS driver programs.
  std::string event = "MEM_UOPS_RETIRED:L2_MISS_LOADS";
  // PEBS reset; default: the countdown in the first dump's file name, if any.
  std::optional<uint64_t> pebs_reset;
  // The TSC of time 0; default: the earliest TSC of any record of any dump.
  std::optional<uint64_t> start_tsc;
  // Default false: every sample of a batch gets the batch's TSC and instructions (as
  // pebsview.py reads them). True: the samples of a batch are spread evenly between the
  // previous batch of the stream (or the phase start) and this one, in time and, for the
  // first dump, in instructions.
  bool spread_within_batch = false;
  uint32_t page_size = 4096;  // the trace's page size; a power of two
};

// An mmap or munmap of the run, on the trace's time axis.
struct VmaEvent {
  enum class Kind { kMmap, kMunmap };
  Kind kind = Kind::kMmap;
  uint64_t time_ns = 0;
  uint32_t tid = 0;
  uint64_t start = 0;
  uint64_t length = 0;
};

struct ImportedRun {
  Trace trace;
  std::vector<VmaEvent> vmas;  // every dump's mmap and munmap records, by time
  uint64_t start_tsc = 0;      // the TSC of time 0
};

// Converts the dumps of one process into one trace.
//  - The first dump leads: its phasemark words are the trace's phasemarks, each at the TSC
//    of the batch before it with that batch's instructions (the phase that ended), and its
//    samples carry its own instruction counts. The other dumps may not hold more
//    phasemarks than the first (list the thread that calls phasemark() first).
//  - Samples of the other dumps take the phase in effect at their time and, as
//    instructions, the first dump's progress at that time (interpolated between its
//    batches), so that the trace has one instruction axis per phase.
//  - The tid of a sample is the `tid` of its dump's file name, else the dump's index.
//  - Time 0 is options.start_tsc (default: the earliest TSC); the end row is at the latest
//    TSC of any record; TSC differences are divided by options.tsc_ghz.
// InvalidArgument for options that are out of range, dumps of different processes (pids
// in their names), two dumps of one thread, or the phasemark rule above.
absl::StatusOr<ImportedRun> ImportDumps(std::span<const Dump> dumps, const ImportOptions& options);

// The VMA events as CSV: `type,time_ns,tid,start,length` then one `mmap` or `munmap` row
// each, addresses and lengths as 0x-prefixed hex.
std::string FormatVmaCsv(std::span<const VmaEvent> vmas);

}  // namespace tiergym::mckernel

#endif  // TIERGYM_PROFILER_MCKERNEL_MCKERNEL_DUMP_H_

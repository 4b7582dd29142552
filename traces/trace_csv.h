// Reader and writer of trace CSV v1, the interchange format of
// traces/TRACE_CSV.md.
//
// The reader is strict: a file that breaks any rule of the format is refused whole with
// an InvalidArgument error "FILE:LINE: RULE: detail" (NotFound when the file cannot be
// opened), and nothing is returned. Rules (the RULE word of the message):
//   version            first line is not `# tiergym trace v1`
//   missing-device     no `# device=` header line
//   bad-header         a known header key with a bad value (page_size, pebs_reset)
//   column-line        the column line does not start type,time_ns,tid,phase,instructions,address
//   field-count        a row has more or fewer fields than the column line
//   non-numeric        a numeric field (time_ns, tid, phase, instructions, address, weight,
//                      cpu) is empty, not a number, or out of range
//   bad-op             op is neither L nor S (nor empty)
//   unknown-row-type   type is not S, M or E
//   unsorted-time      time_ns decreases
//   sample-before-first-mark   an S row before the first M row
//   first-mark         the first data row is not M for phase 0 at time 0 with 0 instructions
//   phase-skip         an M row whose phase is not the previous phase + 1
//   phase-mismatch     an S or E row whose phase is not the current phase
//   address            an S row without address, or an M/E row with one
//   row-after-end      any row after the E row
//   missing-end        no E row
//   truncated-last-line  the file does not end with a newline (it was cut short)
//   empty              no column line
// Blank lines are ignored anywhere; CRLF line ends are accepted; unknown header keys are
// kept, unknown extra columns are ignored, `op`, `weight` and `cpu` are kept.
//
// Parsing runs over the whole file in memory without iostreams (hundreds of MB/s per
// core; see tests/bench/trace_io_benchmark.cc). Thread-safe: no shared state.
#ifndef TIERGYM_TRACES_TRACE_CSV_H_
#define TIERGYM_TRACES_TRACE_CSV_H_

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "traces/trace.h"

namespace tiergym {

// Parses CSV text; `source` names it in errors and becomes Trace::source().
absl::StatusOr<Trace> ParseTraceCsv(std::string_view text, std::string source);

// Reads and parses a file.
absl::StatusOr<Trace> ReadTraceCsv(const std::string& path);

// The trace as CSV v1 text: the version line, the header entries in order, the column
// line (with op/weight/cpu when the trace has them), then M, S and E rows in order.
// Addresses are written as 0x-prefixed lowercase hex. Parsing the result gives back a
// trace with SameContents().
std::string FormatTraceCsv(const Trace& trace);

// Writes FormatTraceCsv(trace) to `path` through a temporary file renamed into place,
// so a reader never sees a half-written trace.
absl::Status WriteTraceCsv(const Trace& trace, const std::string& path);

}  // namespace tiergym

#endif  // TIERGYM_TRACES_TRACE_CSV_H_

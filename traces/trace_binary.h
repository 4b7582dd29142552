// Reader and writer of tiergym's own binary trace format (.tgt), described byte by byte in
// traces/FORMAT.md, with its constants in traces/binary_format.h.
//
// A binary trace holds exactly what a trace CSV v1 file holds (header entries in order,
// marks, samples, end, the optional op/weight/cpu columns), stored column by column at
// 64-byte aligned offsets and checksummed with CRC-32C. The reader maps the file and hands
// out a Trace whose columns point into the mapping: nothing is parsed or copied, and the
// mapping lives as long as any copy of the Trace (the Trace's column storage owns it).
//
// A file that is not a binary trace, is truncated, has a wrong checksum or decodes to a
// trace that breaks the rules of ValidateTrace() is refused whole with an error naming the
// file and, where one is at fault, the column; nothing is ever read out of bounds.
// Thread-safe: no shared state. The mapped file must not be modified while a Trace of it
// is alive (the writer replaces files by rename(), which is safe).
#ifndef TIERGYM_TRACES_TRACE_BINARY_H_
#define TIERGYM_TRACES_TRACE_BINARY_H_

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "traces/trace.h"

namespace tiergym {

struct BinaryReadOptions {
  // Check the CRC-32C of every column (one pass over the data). The header checksum,
  // which covers the header, directory, metadata and marks, is always checked.
  // Default: true.
  bool verify_checksums = true;
  // Ask the kernel to fault in the whole mapping up front (MAP_POPULATE) rather than
  // page by page on first access. Default: true.
  bool populate = true;
};

// Writes `trace` to `path` in the binary format, through `path.tmp.<pid>` renamed into
// place, so that a reader sees the old file or the new one, never a partial one.
// Fails with InvalidArgument when the trace's metadata fields disagree with its header
// entries (the format stores the entries only, as the CSV does), or with the errno
// status of a failed open/write/rename naming the path.
absl::Status WriteTraceBinary(const Trace& trace, const std::string& path);

// Maps and checks a binary trace. NotFound when the file does not exist; DataLoss when it
// is not a binary trace, is truncated or inconsistent, or a checksum does not match;
// Unimplemented when it was written in a newer format version than this reader's;
// InvalidArgument when its contents break a rule of the trace format (ValidateTrace).
// The Trace's source() is `path`.
absl::StatusOr<Trace> ReadTraceBinary(const std::string& path,
                                      const BinaryReadOptions& options = {});

// True when `first_bytes` (the start of a file, any length) begins with the magic of a
// binary trace. Fewer than 8 bytes never match.
bool LooksLikeTraceBinary(std::string_view first_bytes);

}  // namespace tiergym

#endif  // TIERGYM_TRACES_TRACE_BINARY_H_

// Opening a trace whatever its format: binary traces (traces/FORMAT.md) are recognised by
// their magic bytes, anything else is read as trace CSV v1.
#ifndef TIERGYM_TRACES_TRACE_FILE_H_
#define TIERGYM_TRACES_TRACE_FILE_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "traces/trace.h"

namespace tiergym {

enum class TraceFormat { kCsv, kBinary };

// The format a path names by its extension: ".tgt" is binary, anything else CSV.
TraceFormat FormatForPath(const std::string& path);

// Loads a CSV or binary trace (sniffed from the first bytes, not the name).
absl::StatusOr<Trace> LoadTrace(const std::string& path);

// Writes the trace in `format`, atomically.
absl::Status SaveTrace(const Trace& trace, const std::string& path, TraceFormat format);

}  // namespace tiergym

#endif  // TIERGYM_TRACES_TRACE_FILE_H_

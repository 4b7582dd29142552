#include "traces/trace_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include "traces/base/file.h"
#include "traces/base/strings.h"
#include "traces/trace_binary.h"
#include "traces/trace_csv.h"

namespace tiergym {

TraceFormat FormatForPath(const std::string& path) {
  const std::string_view ext = ".tgt";
  return path.size() >= ext.size() && path.compare(path.size() - ext.size(), ext.size(), ext) == 0
             ? TraceFormat::kBinary
             : TraceFormat::kCsv;
}

absl::StatusOr<Trace> LoadTrace(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, StrCat("cannot open ", path));
  char head[16];
  ssize_t n = ::pread(fd, head, sizeof head, 0);
  ::close(fd);
  if (n > 0 && LooksLikeTraceBinary(std::string_view(head, static_cast<size_t>(n)))) {
    return ReadTraceBinary(path);
  }
  return ReadTraceCsv(path);
}

absl::Status SaveTrace(const Trace& trace, const std::string& path, TraceFormat format) {
  return format == TraceFormat::kBinary ? WriteTraceBinary(trace, path)
                                        : WriteTraceCsv(trace, path);
}

}  // namespace tiergym

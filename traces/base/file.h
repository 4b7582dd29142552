// Whole-file reads and atomic whole-file writes.
#ifndef TIERGYM_TRACES_BASE_FILE_H_
#define TIERGYM_TRACES_BASE_FILE_H_

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tiergym {

// The file's bytes. NotFound when it does not exist, PermissionDenied when it cannot be
// read, FailedPrecondition for a directory; the message names the path.
absl::StatusOr<std::string> ReadFile(const std::string& path);

// Writes `contents` to `path` via `path.tmp.<pid>` and rename(), so that readers see the
// old file or the new one, never a partial one. Where WritesInPlace(path), the file is
// truncated and written in place instead: renaming onto /dev/stdout would replace the
// device (for root, the whole machine's) by a file.
absl::Status WriteFileAtomically(const std::string& path, std::string_view contents);

// Whether a write to `path` must go through the name rather than replace it: `path` is a
// symbolic link (/dev/stdout, a user's link: the link stays, its target is written) or
// names an existing file that is neither regular nor a directory (a terminal, a pipe,
// /dev/null).
bool WritesInPlace(const std::string& path);

// `path` as written in the file `beside` names it: an absolute path as it is, a relative
// one against the directory of `beside` (a CSV naming the placement files next to it).
std::string PathBeside(const std::string& beside, std::string_view path);

// An errno value as a Status whose message starts with `context`.
absl::Status ErrnoStatus(int err, std::string_view context);

}  // namespace tiergym

#endif  // TIERGYM_TRACES_BASE_FILE_H_

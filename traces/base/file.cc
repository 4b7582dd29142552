#include "traces/base/file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <utility>

#include "absl/cleanup/cleanup.h"
#include "traces/base/strings.h"

namespace tiergym {

std::string PathBeside(const std::string& beside, std::string_view path) {
  const std::filesystem::path p{std::string(path)};
  if (p.is_absolute()) return p.string();
  return (std::filesystem::path(beside).parent_path() / p).string();
}

absl::Status ErrnoStatus(int err, std::string_view context) {
  std::string message = StrCat(context, ": ", std::strerror(err));
  switch (err) {
    case ENOENT:
    case ENOTDIR:
      return absl::NotFoundError(message);
    case EACCES:
    case EPERM:
      return absl::PermissionDeniedError(message);
    case ENOSPC:
    case EDQUOT:
      return absl::ResourceExhaustedError(message);
    default:
      return absl::InternalError(message);
  }
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, StrCat("cannot open ", path));
  const absl::Cleanup close_fd = [fd] { ::close(fd); };
  struct stat st;
  if (::fstat(fd, &st) != 0) return ErrnoStatus(errno, StrCat("cannot stat ", path));
  if (S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(StrCat(path, " is a directory, expected a file"));
  }
  std::string out;
  // Regular files are read in one allocation; pipes and /proc files grow as they come.
  out.resize(st.st_size > 0 ? static_cast<size_t>(st.st_size) : 65536);
  size_t used = 0;
  while (true) {
    if (used == out.size()) out.resize(out.size() * 2);
    const ssize_t r = ::read(fd, out.data() + used, out.size() - used);
    if (r < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(errno, StrCat("cannot read ", path));
    }
    if (r == 0) break;
    used += static_cast<size_t>(r);
  }
  out.resize(used);
  return out;
}

bool WritesInPlace(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return false;
  if (S_ISLNK(st.st_mode)) return true;
  return !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode);
}

absl::Status WriteFileAtomically(const std::string& path, std::string_view contents) {
  const bool in_place = WritesInPlace(path);
  const std::string tmp = in_place ? path : StrCat(path, ".tmp.", static_cast<int64_t>(::getpid()));
  int fd = in_place ? ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)
                    : ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoStatus(errno, StrCat("cannot create ", tmp));
  // Until the rename, a failure leaves neither the descriptor nor the temporary file (a
  // device written in place is never removed).
  absl::Cleanup discard = [&fd, &tmp, in_place] {
    const int err = errno;
    if (fd >= 0) ::close(fd);
    if (!in_place) ::unlink(tmp.c_str());
    errno = err;
  };
  size_t done = 0;
  while (done < contents.size()) {
    const ssize_t w = ::write(fd, contents.data() + done, contents.size() - done);
    if (w < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(errno, StrCat("cannot write ", tmp));
    }
    done += static_cast<size_t>(w);
  }
  const int closed = ::close(fd);
  fd = -1;
  if (closed != 0) return ErrnoStatus(errno, StrCat("cannot write ", tmp));
  if (!in_place && ::rename(tmp.c_str(), path.c_str()) != 0) {
    return ErrnoStatus(errno, StrCat("cannot rename ", tmp, " to ", path));
  }
  std::move(discard).Cancel();
  return absl::OkStatus();
}

}  // namespace tiergym

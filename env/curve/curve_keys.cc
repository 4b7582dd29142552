#include "env/curve/curve_keys.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <set>
#include <tuple>

#include "absl/cleanup/cleanup.h"
#include "traces/base/file.h"
#include "traces/base/strings.h"
#include "zmq.h"

namespace tiergym::env {
namespace {

constexpr size_t kKeyChars = 40;
constexpr size_t kKeyBytes = 32;
// Certificates are a few hundred bytes; anything much larger is not one.
constexpr off_t kMaxCertificateBytes = 64 << 10;

std::string Octal(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof text, "%04o", static_cast<unsigned>(mode & 07777));
  return text;
}

// The bytes of the regular file `path` (at most kMaxCertificateBytes) with its stat, read
// from one descriptor so that the checks and the bytes are of the same file.
struct FileRead {
  std::string bytes;
  struct stat st = {};
};

absl::StatusOr<FileRead> ReadSmallFile(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) return ErrnoStatus(errno, path);
  absl::Cleanup close_fd = [fd] { close(fd); };
  FileRead out;
  if (fstat(fd, &out.st) != 0) return ErrnoStatus(errno, path);
  if (!S_ISREG(out.st.st_mode)) {
    return absl::InvalidArgumentError(StrCat(path, ": not a regular file"));
  }
  if (out.st.st_size > kMaxCertificateBytes) {
    return absl::InvalidArgumentError(
        StrCat(path, ": ", out.st.st_size, " bytes; a certificate is a few hundred"));
  }
  out.bytes.resize(static_cast<size_t>(out.st.st_size));
  size_t got = 0;
  while (got < out.bytes.size()) {
    const ssize_t n = read(fd, out.bytes.data() + got, out.bytes.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus(errno, path);
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  out.bytes.resize(got);
  return out;
}

// A key list, or the directory holding one, that somebody else could change: anyone who
// can write it can let themselves in.
absl::Status CheckNotWritableByOthers(const std::string& path, const struct stat& st) {
  if (st.st_uid != geteuid() && st.st_uid != 0) {
    return absl::FailedPreconditionError(
        StrCat(path, ": owned by uid ", st.st_uid, ", neither this user (uid ", geteuid(),
               ") nor root: its owner could let anyone in; keep the allowed keys in files of "
               "your own"));
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    return absl::FailedPreconditionError(
        StrCat(path, ": writable by others (mode ", Octal(st.st_mode),
               "): anyone could add their key; chmod go-w ", path));
  }
  return absl::OkStatus();
}

// The value of `NAME = "VALUE"` when `line` (trimmed) is that ZPL line, else "".
std::string_view ZplValue(std::string_view line, std::string_view name) {
  if (line.substr(0, name.size()) != name) return {};
  std::string_view rest = line.substr(name.size());
  const size_t eq = rest.find('=');
  if (eq == std::string_view::npos ||
      rest.substr(0, eq).find_first_not_of(" \t") != std::string_view::npos) {
    return {};
  }
  rest = rest.substr(eq + 1);
  const size_t begin = rest.find_first_not_of(" \t\"'");
  if (begin == std::string_view::npos) return {};
  rest = rest.substr(begin);
  const size_t end = rest.find_first_of(" \t\"'");
  return end == std::string_view::npos ? rest : rest.substr(0, end);
}

std::string_view Trim(std::string_view s) {
  const size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string_view::npos) return {};
  const size_t e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

// Keys found in a certificate's text: public and secret (empty when absent), and bare keys
// (lines holding only a key). InvalidArgument names the line of a malformed key.
struct ParsedKeys {
  std::string public_key, secret_key;
  std::vector<std::string> bare;
};

absl::StatusOr<ParsedKeys> ParseKeys(const std::string& path, std::string_view text) {
  ParsedKeys out;
  int line_no = 0;
  for (std::string_view raw : SplitFields(text, '\n')) {
    ++line_no;
    std::string_view line = Trim(raw);
    if (line.empty() || line[0] == '#') continue;
    for (auto [name, into] :
         {std::pair<std::string_view, std::string*>{"public-key", &out.public_key},
          {"secret-key", &out.secret_key}}) {
      std::string_view value = ZplValue(line, name);
      if (value.empty() && line.substr(0, name.size()) != name) continue;
      if (!IsCurveKey(value)) {
        return absl::InvalidArgumentError(
            StrCat(path, ":", line_no, ": ", name, " is not a Z85 CURVE key (40 characters)"));
      }
      *into = std::string(value);
    }
    if (line.size() == kKeyChars && IsCurveKey(line)) out.bare.emplace_back(line);
  }
  return out;
}

}  // namespace

bool CurveAvailable() { return zmq_has("curve") != 0; }

bool IsCurveKey(std::string_view key) {
  if (key.size() != kKeyChars) return false;
  const std::string text(key);
  uint8_t bytes[kKeyBytes];
  return zmq_z85_decode(bytes, text.c_str()) != nullptr;
}

std::string CurveKeyBytes(std::string_view key) {
  const std::string text(key);
  uint8_t bytes[kKeyBytes];
  if (zmq_z85_decode(bytes, text.c_str()) == nullptr) return "";
  return std::string(reinterpret_cast<const char*>(bytes), kKeyBytes);
}

absl::StatusOr<CurveKeyPair> MakeCurveKeyPair() {
  if (!CurveAvailable()) {
    return absl::UnimplementedError(
        "this libzmq has no CURVE (built without libsodium); Debian's libzmq5 has it");
  }
  char public_key[kKeyChars + 1], secret_key[kKeyChars + 1];
  if (zmq_curve_keypair(public_key, secret_key) != 0) {
    return absl::InternalError(StrCat("zmq_curve_keypair: ", zmq_strerror(zmq_errno())));
  }
  return CurveKeyPair{public_key, secret_key};
}

absl::StatusOr<CurveKeyPair> ReadCurveCertificate(const std::string& path, bool require_secret) {
  absl::StatusOr<FileRead> file = ReadSmallFile(path);
  if (!file.ok()) return file.status();
  absl::StatusOr<ParsedKeys> keys = ParseKeys(path, file->bytes);
  if (!keys.ok()) return keys.status();
  if (keys->public_key.empty() && keys->secret_key.empty() && keys->bare.size() == 1) {
    keys->public_key = keys->bare[0];  // a file holding one bare public key
  }
  if (require_secret && keys->secret_key.empty()) {
    return absl::InvalidArgumentError(
        StrCat(path,
               ": no secret-key in it: give the secret certificate (NAME.key_secret, "
               "from tiergym keygen), not the public one"));
  }
  if (require_secret) {
    if (file->st.st_uid != geteuid()) {
      return absl::FailedPreconditionError(StrCat(path, ": owned by uid ", file->st.st_uid,
                                                  ", not this user (uid ", geteuid(),
                                                  "): a secret key must be its owner's alone"));
    }
    if ((file->st.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
      return absl::FailedPreconditionError(
          StrCat(path, ": the secret key is open to others (mode ", Octal(file->st.st_mode),
                 "): whoever read it can pose as its owner; chmod 600 ", path,
                 " (and make a new key pair if others may have read it)"));
    }
  }
  if (!keys->secret_key.empty()) {
    char derived[kKeyChars + 1];
    if (zmq_curve_public(derived, keys->secret_key.c_str()) != 0) {
      return absl::InternalError(StrCat("zmq_curve_public: ", zmq_strerror(zmq_errno())));
    }
    if (keys->public_key.empty()) {
      keys->public_key = derived;
    } else if (keys->public_key != derived) {
      return absl::InvalidArgumentError(
          StrCat(path, ": its public-key is not the secret-key's (the file was edited?)"));
    }
  }
  if (keys->public_key.empty()) {
    return absl::InvalidArgumentError(StrCat(path, ": no public-key in it (not a certificate)"));
  }
  return CurveKeyPair{keys->public_key, keys->secret_key};
}

absl::StatusOr<std::vector<std::string>> ReadAllowedCurveKeys(const std::string& path) {
  struct stat st = {};
  if (stat(path.c_str(), &st) != 0) return ErrnoStatus(errno, path);
  std::vector<std::string> files;
  if (S_ISDIR(st.st_mode)) {
    if (absl::Status s = CheckNotWritableByOthers(path, st); !s.ok()) return s;
    DIR* dir = opendir(path.c_str());
    if (dir == nullptr) return ErrnoStatus(errno, path);
    absl::Cleanup close_dir = [dir] { closedir(dir); };
    while (const dirent* entry = readdir(dir)) {
      const std::string_view name = entry->d_name;
      if (name.size() > 4 && name.substr(name.size() - 4) == ".key") {
        files.push_back(StrCat(path, "/", name));
      }
    }
    std::sort(files.begin(), files.end());
  } else {
    files.push_back(path);
  }
  std::set<std::string> seen;
  std::vector<std::string> keys;
  for (const std::string& file : files) {
    absl::StatusOr<FileRead> read = ReadSmallFile(file);
    if (!read.ok()) return read.status();
    if (absl::Status s = CheckNotWritableByOthers(file, read->st); !s.ok()) return s;
    absl::StatusOr<ParsedKeys> parsed = ParseKeys(file, read->bytes);
    if (!parsed.ok()) return parsed.status();
    if (!parsed->secret_key.empty()) {
      return absl::InvalidArgumentError(
          StrCat(file,
                 ": holds a secret key; list public certificates (NAME.key) only, and "
                 "keep secret ones private"));
    }
    std::vector<std::string> found = parsed->bare;
    if (!parsed->public_key.empty()) found.push_back(parsed->public_key);
    for (std::string& key : found) {
      if (seen.insert(key).second) keys.push_back(std::move(key));
    }
  }
  if (keys.empty()) {
    return absl::InvalidArgumentError(
        StrCat(path,
               ": no client key in it (expected public certificates NAME.key from "
               "tiergym keygen, or one Z85 key per line)"));
  }
  return keys;
}

absl::Status WriteCurveCertificates(const std::string& dir, const std::string& name,
                                    const CurveKeyPair& keys, bool overwrite,
                                    std::string_view generator) {
  if (name.empty() || name.find('/') != std::string::npos || name[0] == '.') {
    return absl::InvalidArgumentError(
        StrCat("key name '", name, "': a file name (no '/', not starting with '.')"));
  }
  if (!IsCurveKey(keys.public_key) || !IsCurveKey(keys.secret_key)) {
    return absl::InvalidArgumentError("not a CURVE key pair");
  }
  if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) return ErrnoStatus(errno, dir);
  const std::string public_path = StrCat(dir, "/", name, ".key");
  const std::string secret_path = StrCat(dir, "/", name, ".key_secret");
  if (!overwrite) {
    for (const std::string& p : {public_path, secret_path}) {
      if (access(p.c_str(), F_OK) == 0) {
        return absl::AlreadyExistsError(
            StrCat(p, ": exists; choose another name, or --force to replace the key pair"));
      }
    }
  }
  char when[32] = "";
  const time_t now = time(nullptr);
  struct tm tm_now = {};
  strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", localtime_r(&now, &tm_now));
  const std::string public_text =
      StrCat("#   ****  Generated on ", when, " by ", generator, "  ****\n",
             "#   ZeroMQ CURVE Public Certificate\n"
             "#   Exchange securely, or use a secure mechanism to verify the contents\n"
             "#   of this file after exchange. Store public certificates in your home\n"
             "#   directory, in the .curve subdirectory.\n\n"
             "metadata\ncurve\n    public-key = \"",
             keys.public_key, "\"\n");
  const std::string secret_text =
      StrCat("#   ****  Generated on ", when, " by ", generator, "  ****\n",
             "#   ZeroMQ CURVE **Secret** Certificate\n"
             "#   DO NOT PROVIDE THIS FILE TO OTHER USERS nor change its permissions.\n\n"
             "metadata\ncurve\n    public-key = \"",
             keys.public_key, "\"\n    secret-key = \"", keys.secret_key, "\"\n");
  // Each file is written beside its final name with its final mode from the start (the
  // secret one never exists readable by others), then renamed into place.
  for (const auto& [path, text, mode] :
       {std::tuple<std::string, std::string, mode_t>{secret_path, secret_text, 0600},
        {public_path, public_text, 0644}}) {
    const std::string tmp = StrCat(path, ".tmp.", getpid());
    const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
    if (fd < 0) return ErrnoStatus(errno, tmp);
    bool ok = fchmod(fd, mode) == 0;  // whatever the umask
    size_t done = 0;
    while (ok && done < text.size()) {
      const ssize_t n = write(fd, text.data() + done, text.size() - done);
      if (n < 0 && errno == EINTR) continue;
      ok = n > 0;
      if (ok) done += static_cast<size_t>(n);
    }
    const int err = errno;
    ok = close(fd) == 0 && ok;
    if (!ok || rename(tmp.c_str(), path.c_str()) != 0) {
      const int e = ok ? errno : err;
      unlink(tmp.c_str());
      return ErrnoStatus(e, path);
    }
  }
  return absl::OkStatus();
}

}  // namespace tiergym::env

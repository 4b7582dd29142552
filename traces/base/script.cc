#include "traces/base/script.h"

#include <sys/wait.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "traces/base/file.h"
#include "traces/base/strings.h"

#ifndef TIERGYM_SCRIPTS_DIR
#define TIERGYM_SCRIPTS_DIR "scripts"
#endif

namespace tiergym {
namespace {

std::string ShellQuote(std::string_view s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out.push_back(c);
    }
  }
  out.push_back('\'');
  return out;
}

}  // namespace

absl::Status RunScript(std::string_view script, const std::vector<std::string>& args,
                       std::string_view input) {
  const char* env_dir = std::getenv("TIERGYM_SCRIPTS_DIR");
  const std::string path = StrCat(env_dir != nullptr ? env_dir : TIERGYM_SCRIPTS_DIR, "/", script);
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    return absl::NotFoundError(StrCat("script ", path,
                                      " not found (set TIERGYM_SCRIPTS_DIR to the repository's "
                                      "scripts/ directory)"));
  }
  const char* env_python = std::getenv("TIERGYM_PYTHON");
  std::string cmd = StrCat(ShellQuote(env_python != nullptr ? env_python : "/usr/bin/python3"), " ",
                           ShellQuote(path));
  for (const std::string& a : args) StrAppend(&cmd, " ", ShellQuote(a));
  std::fflush(stdout);
  FILE* pipe = popen(cmd.c_str(), "w");
  if (pipe == nullptr) return ErrnoStatus(errno, StrCat("running ", cmd));
  // A script that fails before reading its input must not kill us with SIGPIPE.
  void (*previous)(int) = std::signal(SIGPIPE, SIG_IGN);
  const size_t written = std::fwrite(input.data(), 1, input.size(), pipe);
  const int status = pclose(pipe);
  std::signal(SIGPIPE, previous);
  if (written != input.size() || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return absl::InternalError(StrCat(cmd, " failed (exit status ",
                                      WIFEXITED(status) ? WEXITSTATUS(status) : -1,
                                      "; its message is above). Is python3-matplotlib installed?"));
  }
  return absl::OkStatus();
}

}  // namespace tiergym

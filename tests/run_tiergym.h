// Runs the built binaries as a user would (through the shell), for the command-line tests
// of every folder. TIERGYM_BIN_DIR is defined by tests/CMakeLists.txt.
#ifndef TIERGYM_TESTS_RUN_TIERGYM_H_
#define TIERGYM_TESTS_RUN_TIERGYM_H_

#include <sys/wait.h>

#include <cstdio>
#include <string>

namespace tiergym::testing {

struct Result {
  int exit_code = -1;
  std::string out;  // stdout, or stdout and stderr with merge_stderr
};

// Runs `cmd` through the shell and collects what it prints on stdout.
inline Result RunShell(const std::string& cmd) {
  Result r;
  FILE* f = popen(cmd.c_str(), "r");
  if (f == nullptr) return r;
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) r.out.append(buf, n);
  const int status = pclose(f);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

// `command` with its stdout and stderr.
inline Result Shell(const std::string& command) { return RunShell(command + " 2>&1"); }

inline Result Tiergym(const std::string& args, bool merge_stderr = false) {
  return RunShell(std::string(TIERGYM_BIN_DIR) + "/tiergym " + args +
                  (merge_stderr ? " 2>&1" : " 2>/dev/null"));
}

}  // namespace tiergym::testing

#endif  // TIERGYM_TESTS_RUN_TIERGYM_H_

// Starting the measured command: forked, configured, and held before exec.
//
// SpawnStopped() forks; the child applies the run's settings (memory policy bound to a
// NUMA node through libnuma's set_mempolicy, CPU affinity, ASLR off, extra environment)
// and then blocks reading a pipe, so the parent can open perf events on its pid before
// a single instruction of the command runs. Release() writes the go byte; the child then
// execs and the parent learns through a close-on-exec pipe whether exec succeeded. The
// memory policy and personality survive exec, so the whole run is bound.
//
// A StoppedChild that is destroyed without being waited for kills its process. Not
// thread-safe; one owner.
#ifndef TIERGYM_PROFILER_LAUNCHER_H_
#define TIERGYM_PROFILER_LAUNCHER_H_

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tiergym::prof {

struct LaunchOptions {
  std::vector<std::string> argv;  // argv[0] is looked up in PATH like execvp
  // Bind all memory of the run to this NUMA node (MPOL_BIND). -1 (default): no binding.
  int membind_node = -1;
  // MPOL_PREFERRED instead of MPOL_BIND (allocations may fall back). Default false.
  bool preferred = false;
  // Run the threads on the CPUs of this NUMA node. -1 (default): no CPU binding.
  int cpu_node = -1;
  // Run on these CPUs (sched_setaffinity); empty (default): no CPU binding.
  std::vector<int> cpus;
  // Keep address-space layout randomisation. Default false: runs are made with
  // ADDR_NO_RANDOMIZE so that repeated runs map their data at the same addresses (what
  // McKernel gives Denoyelle et al.), which lets traces of different tiers be compared.
  bool keep_aslr = false;
  // Environment variables set (or replaced) in the child.
  std::vector<std::pair<std::string, std::string>> env;
  // Send the command's standard output here (appending; "/dev/null" to discard). Empty
  // (default): inherit the caller's.
  std::string stdout_path;
};

class StoppedChild {
 public:
  // Forks the child and leaves it blocked before exec. InvalidArgument for an empty
  // argv or a NUMA node that does not exist or has no memory; FailedPrecondition when a
  // binding is asked for and the kernel has no NUMA support.
  static absl::StatusOr<StoppedChild> Spawn(const LaunchOptions& options);

  StoppedChild(StoppedChild&& other) noexcept;
  StoppedChild& operator=(StoppedChild&& other) noexcept;
  StoppedChild(const StoppedChild&) = delete;
  StoppedChild& operator=(const StoppedChild&) = delete;
  ~StoppedChild();

  pid_t pid() const { return pid_; }

  // Lets the child exec. NotFound/PermissionDenied (naming the command) when exec failed;
  // the child has then exited.
  absl::Status Release();

  // Waits for the child to end. Returns the wait status (as waitpid gives it).
  absl::StatusOr<int> Wait();

  // Kills and reaps the child if it still runs.
  void Kill();

 private:
  StoppedChild() = default;

  pid_t pid_ = -1;
  int go_fd_ = -1;     // write end: one byte releases the child
  int error_fd_ = -1;  // read end: errno of a failed exec, EOF after a successful one
  bool reaped_ = false;
};

// A wait status as text: "exit 0", "exit 3", "signal 9 (Killed)".
std::string DescribeWaitStatus(int status);

// The absolute path execvp would run for `command` ("" when not found).
std::string ResolveCommand(const std::string& command);

// Parses a CPU list "0-3,8,10-11". InvalidArgument on anything else.
absl::StatusOr<std::vector<int>> ParseCpuList(const std::string& text);

}  // namespace tiergym::prof

#endif  // TIERGYM_PROFILER_LAUNCHER_H_

// Counting a command's system calls that fail with EFAULT, the recorder's harm check.
//
// The counter is the raw_syscalls:sys_exit tracepoint as a perf counting event on the
// command's process (its threads and children included: inherit), filtered on
// `ret == -14` in the kernel: the kernel increments a counter, the process sees nothing.
//
// It must count only EFAULT returns, so it is opened disabled, gets its filter, and is
// enabled by the kernel when the command execs (enable_on_exec). An event that counts
// from perf_event_open on, with the filter set by a later ioctl, counts every system call
// the process finishes in between whatever it returns: the recorder's own launcher child
// when a loaded machine runs it only then (perf showed its set_robust_list and the two
// closes before it waits for the go byte there), which showed up as "EFAULT returns: 1"
// to "4" in runs where no call failed (profiler/README.md, "It reports harm").
//
// Thread-compatible; one owner.
#ifndef TIERGYM_PROFILER_EFAULT_COUNTER_H_
#define TIERGYM_PROFILER_EFAULT_COUNTER_H_

#include <sys/types.h>

#include <cstdint>

#include "absl/status/statusor.h"

namespace tiergym::prof {

class EfaultCounter {
 public:
  // Opens the counter on `pid`, a process that has not exec'd the command yet (held
  // before exec); counting starts at its exec. The tracepoint's id is read from tracefs
  // (/sys/kernel/tracing, /sys/kernel/debug/tracing) or, for root where none is mounted,
  // from a tracefs mounted in a private mount namespace of a short-lived child.
  // Unavailable when that is impossible; other errors when the kernel refuses the event
  // or its filter. The message says why.
  static absl::StatusOr<EfaultCounter> Open(pid_t pid);

  EfaultCounter(EfaultCounter&& o) noexcept;
  EfaultCounter& operator=(EfaultCounter&&) = delete;
  EfaultCounter(const EfaultCounter&) = delete;
  EfaultCounter& operator=(const EfaultCounter&) = delete;
  ~EfaultCounter();

  // The system calls that returned EFAULT since the exec, over the process, its threads
  // and its descendants (those that ended included); -1 on a read error.
  [[nodiscard]] int64_t Read() const;

 private:
  EfaultCounter() = default;
  int fd_ = -1;
};

}  // namespace tiergym::prof

#endif  // TIERGYM_PROFILER_EFAULT_COUNTER_H_

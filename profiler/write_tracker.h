// The software backend's re-arming, done entirely from the recorder's side.
//
// The recorded process's agent (swsample/swsample_agent.cc) creates a userfaultfd and
// sends it over an abstract Unix socket that a WriteTracker listens on. The tracker then
// owns that descriptor and, from its own thread, every interval:
//   - lists the process's mappings (/proc/PID/maps) and registers every private anonymous
//     one (heap, stacks and mmap'd memory, whatever its protection and size; runs of
//     adjacent ones as one range) for write-protect tracking (UFFDIO_REGISTER_MODE_WP).
//     Registering all of them keeps the userfaultfd flags the same on every anonymous
//     mapping, so the kernel merges neighbouring mappings as it would without the
//     recorder (mremap refuses a range spanning two mappings with EFAULT); a mapping
//     created since the last round is the one exception, until this round registers it;
//   - write-protects them again (UFFDIO_WRITEPROTECT).
// The descriptor was set up with UFFD_FEATURE_WP_ASYNC, so the next write to a protected
// page is a minor fault the kernel resolves on its own: the program gets no signal, never
// waits for the tracker, and a system call writing into the page (read, readv, raw
// syscall, futex, ...) succeeds as usual. The fault is what perf samples. Every way these
// calls can fail (the mapping vanished, changed, cannot be registered, the process
// exited) only means fewer samples: the calls cannot change the program's memory or
// behaviour, only when its writes fault.
//
// Thread-safety: Start/Stop/stats from one thread; the work happens on the tracker's.
#ifndef TIERGYM_PROFILER_WRITE_TRACKER_H_
#define TIERGYM_PROFILER_WRITE_TRACKER_H_

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "profiler/stoppable_thread.h"

namespace tiergym::prof {

struct WriteTrackerOptions {
  uint32_t interval_us = 10000;  // how often pages are write-protected again
};

struct WriteTrackerStats {
  uint64_t processes = 0;        // descriptors received (of processes tracked or already ended)
  uint64_t refused = 0;          // descriptors refused (not a descendant, not a userfaultfd)
  uint64_t rounds = 0;           // re-arm passes over all processes
  uint64_t registered = 0;       // UFFDIO_REGISTER calls that succeeded
  uint64_t protected_bytes = 0;  // bytes write-protected, summed over rounds
  uint64_t failed_calls = 0;     // register/write-protect calls that failed (vanished ranges)
  uint64_t busy_ns = 0;          // time spent listing and protecting
  std::string setup_error;       // why a received descriptor could not be used (first one)
};

class WriteTracker {
 public:
  // Creates the listening socket (a random abstract name). Internal on failure.
  static absl::StatusOr<std::unique_ptr<WriteTracker>> Listen(const WriteTrackerOptions& options);
  ~WriteTracker();

  // The value for TIERGYM_SWSAMPLE_SOCKET.
  const std::string& socket_name() const { return name_; }

  // Starts the thread; descriptors are accepted from `root` and its descendants.
  void Start(pid_t root);
  // Stops the thread, reads the descriptors still queued (counted in stats().processes)
  // and closes every descriptor (which unregisters what is left).
  void Stop();

  WriteTrackerStats stats() const;

 private:
  struct Process {
    pid_t pid;
    int uffd;
    std::vector<std::pair<uint64_t, uint64_t>> registered;  // maps lines registered as is
  };

  WriteTracker(int listen_fd, std::string name, const WriteTrackerOptions& options)
      : listen_fd_(listen_fd), name_(std::move(name)), options_(options) {}
  void Loop();
  void AcceptAll();
  // One pass over a process; false when it is gone.
  bool Rearm(Process& p);

  int listen_fd_;
  std::string name_;
  WriteTrackerOptions options_;
  pid_t root_ = -1;
  std::vector<Process> processes_;
  std::string maps_buffer_;
  mutable std::mutex mu_;
  WriteTrackerStats stats_;  // guarded by mu_
  StoppableThread thread_;   // last: stopped before the members its loop uses go
};

// Whether `pid` is `root` or one of its descendants (following /proc/PID/stat parents).
bool IsDescendant(pid_t pid, pid_t root);

}  // namespace tiergym::prof

#endif  // TIERGYM_PROFILER_WRITE_TRACKER_H_

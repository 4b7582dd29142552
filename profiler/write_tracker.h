// The software backend's re-arming, done entirely from the recorder's side.
//
// The recorded process's agent (swsample/swsample_agent.cc) creates a userfaultfd and
// sends it over an abstract Unix socket that a WriteTracker listens on. The tracker then
// owns that descriptor and, from its own thread, every interval:
//   - lists the process's mappings (/proc/PID/maps);
//   - registers the WHOLE address space for write-protect tracking
//     (UFFDIO_REGISTER_MODE_WP over [mmap_min_addr, the top of user space), in pieces only
//     around the kernel's special mappings [vvar], [vdso] and [uprobes]), whenever the
//     listing changed since the last round. A registration splits every mapping that
//     straddles one of its ends; ranges taken from a listing are stale by the time they
//     are registered (the program maps, unmaps and remaps meanwhile), so registering the
//     mappings of the listing one by one split mappings the program had made since, and
//     the program's mremap of such a mapping then failed with EFAULT. No mapping can
//     straddle the ends of the whole address space, nor those of a special mapping that
//     still exists, so this registration never splits one. With UFFD_FEATURE_WP_ASYNC the
//     kernel accepts every kind of mapping; only the private anonymous ones are then
//     write-protected, so file mappings carry the flag but never fault because of it;
//   - write-protects the private anonymous mappings of the listing (UFFDIO_WRITEPROTECT,
//     which changes page-table entries only and never splits a mapping; a range the
//     listing no longer matches fails with ENOENT, which costs samples and nothing else).
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
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "profiler/stoppable_thread.h"

namespace tiergym::prof {

struct WriteTrackerOptions {
  uint32_t interval_us = 10000;  // how often pages are write-protected again
  // For tests only: called on the tracker's thread with the process's pid after each
  // listing of its mappings and before anything is registered, so that a test can change
  // the mappings in between (what a busy machine does now and then). Default: nothing.
  std::function<void(pid_t)> after_listing_for_test;
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
  std::string stopped_reason;    // why write tracking stopped for a process (first one)
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
    std::string registered_listing;  // the listing the last registration followed
    // Mappings the registration must leave out besides the special ones: those the kernel
    // refuses (VM_DROPPABLE) or that cannot be an end of a range (hugetlb), found in
    // /proc/PID/smaps after a refusal.
    std::vector<std::pair<uint64_t, uint64_t>> excluded;
  };

  WriteTracker(int listen_fd, std::string name, const WriteTrackerOptions& options)
      : listen_fd_(listen_fd), name_(std::move(name)), options_(options) {}
  void Loop();
  void AcceptAll();
  // One pass over a process; false when it is gone or no longer tracked.
  bool Rearm(Process& p);
  // Registers [lowest, top) minus the listed special mappings and p.excluded. 0, or the
  // errno of the first refusal.
  int RegisterAll(Process& p, const std::vector<std::pair<uint64_t, uint64_t>>& special,
                  uint64_t* calls);

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

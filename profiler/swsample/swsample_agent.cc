// libtiergym_swsample.so: keeps page faults coming for the software backend.
//
// `tiergym-prof record --backend software` samples the software page-fault event with
// the faulting address. A page faults once, at first touch; to see later accesses this
// agent, preloaded into the recorded command (LD_PRELOAD), revokes access to the
// process's large anonymous private mappings every interval (mprotect PROT_NONE). The
// first access to each granule afterwards faults: the kernel counts the fault (the perf
// sample: real time, thread and data address), then delivers SIGSEGV, and the agent's
// handler gives the granule its access back (mprotect PROT_READ|PROT_WRITE) and returns,
// so the instruction re-executes. One sample per touched granule per interval.
//
// Which mappings: anonymous, private, read-write ("rw-p" without a file) of at least
// TIERGYM_SWSAMPLE_MIN_REGION_BYTES (default 1 MiB): the arrays of HPC codes (large
// malloc blocks are their own mappings). Never the brk heap (small objects, stdio
// buffers), the main stack, thread stacks (recorded when threads are created through the
// interposed pthread_create), nor the agent's own memory. Granule:
// TIERGYM_SWSAMPLE_GRANULE_BYTES, or 0 (default) for max(64 KiB, total / 4096) rounded
// up to a power of two, which bounds the number of VMAs the kernel has to keep.
// Interval: TIERGYM_SWSAMPLE_INTERVAL_US (default 10000).
//
// Limits (see profiler/README.md): a system call that reads or writes a revoked granule
// fails with EFAULT instead of faulting; the agent prefaults the buffers of read, write,
// pread, pwrite, fread and fwrite and does not re-arm while one is in flight, but other
// calls (recv, MPI, io_uring, RDMA registration) are not covered. SIGSEGV handlers the
// application installs are chained behind the agent's. Threads created with raw clone()
// are not known. Statically linked programs cannot be preloaded.
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>

namespace {

constexpr int kMaxRegions = 4096;
constexpr int kMaxExcluded = 8192;
constexpr size_t kMapsBufferBytes = 4 << 20;
constexpr size_t kAltStackBytes = 64 << 10;
constexpr uintptr_t kMinGranule = 64 << 10;
constexpr uint64_t kMaxGranules = 4096;

struct Range {
  uintptr_t start;
  uintptr_t end;
};

// The regions the handler may give access back to, read under a sequence lock.
struct Table {
  int n;
  Range regions[kMaxRegions];
};

Table* g_table = nullptr;
std::atomic<uint64_t> g_seq{0};
std::atomic<uintptr_t> g_granule{kMinGranule};

// Everything below is owned by the arming thread, under g_lock (thread creation takes it
// too, so that a new thread's stack is excluded before the next scan).
pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
pthread_rwlock_t g_io_lock = PTHREAD_RWLOCK_INITIALIZER;
Range g_excluded[kMaxExcluded];
int g_num_excluded = 0;
char* g_maps_buffer = nullptr;
Range* g_candidates = nullptr;  // scratch, kMaxRegions
uint64_t g_interval_us = 10000;
uint64_t g_fixed_granule = 0;
uint64_t g_min_region = 1 << 20;
std::atomic<bool> g_stop{false};
std::atomic<bool> g_active{false};

struct sigaction g_app_segv;  // the application's SIGSEGV disposition, chained
bool g_app_segv_set = false;
bool g_handler_installed = false;
// libc's sigaction, resolved at load (dlsym is not async-signal-safe).
int (*g_real_sigaction)(int, const struct sigaction*, struct sigaction*) = nullptr;

uint64_t EnvU64(const char* name, uint64_t fallback) {
  const char* v = getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  const unsigned long long x = strtoull(v, &end, 10);
  return (end != v && *end == '\0') ? x : fallback;
}

void Exclude(uintptr_t start, uintptr_t end) {
  if (g_num_excluded < kMaxExcluded) g_excluded[g_num_excluded++] = Range{start, end};
}

void* MapPrivate(size_t bytes) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  Exclude(reinterpret_cast<uintptr_t>(p), reinterpret_cast<uintptr_t>(p) + bytes);
  return p;
}

// Finds the table region holding `a`; async-signal-safe.
bool LookupRegion(uintptr_t a, Range* out) {
  for (;;) {
    const uint64_t s1 = g_seq.load(std::memory_order_acquire);
    if (s1 & 1) continue;  // the arming thread is rewriting the table
    bool found = false;
    int lo = 0, hi = g_table->n - 1;
    while (lo <= hi) {
      const int mid = (lo + hi) / 2;
      const Range r = g_table->regions[mid];
      if (a < r.start) {
        hi = mid - 1;
      } else if (a >= r.end) {
        lo = mid + 1;
      } else {
        *out = r;
        found = true;
        break;
      }
    }
    std::atomic_thread_fence(std::memory_order_acquire);
    if (g_seq.load(std::memory_order_relaxed) == s1) return found;
  }
}

void OnSegv(int sig, siginfo_t* info, void* context) {
  const int saved_errno = errno;
  Range r;
  if (info != nullptr && info->si_code == SEGV_ACCERR &&
      LookupRegion(reinterpret_cast<uintptr_t>(info->si_addr), &r)) {
    const uintptr_t a = reinterpret_cast<uintptr_t>(info->si_addr);
    const uintptr_t granule = g_granule.load(std::memory_order_relaxed);
    uintptr_t start = a & ~(granule - 1);
    uintptr_t end = start + granule;
    if (start < r.start) start = r.start;
    if (end > r.end) end = r.end;
    mprotect(reinterpret_cast<void*>(start), end - start, PROT_READ | PROT_WRITE);
    errno = saved_errno;
    return;
  }
  errno = saved_errno;
  // Not ours: what the application asked for, else the default action.
  if (g_app_segv_set) {
    if (g_app_segv.sa_flags & SA_SIGINFO) {
      if (g_app_segv.sa_sigaction != nullptr) {
        g_app_segv.sa_sigaction(sig, info, context);
        return;
      }
    } else if (g_app_segv.sa_handler != SIG_DFL && g_app_segv.sa_handler != SIG_IGN) {
      g_app_segv.sa_handler(sig);
      return;
    }
  }
  // The access faults again and the process dies as it would have without the agent.
  struct sigaction dfl;
  memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  if (g_real_sigaction != nullptr) g_real_sigaction(SIGSEGV, &dfl, nullptr);
}

void SetAltStack() {
  stack_t ss;
  ss.ss_sp = MapPrivate(kAltStackBytes);
  if (ss.ss_sp == nullptr) return;
  ss.ss_size = kAltStackBytes;
  ss.ss_flags = 0;
  sigaltstack(&ss, nullptr);
}

void ExcludeOwnStack() {
  pthread_attr_t attr;
  if (pthread_getattr_np(pthread_self(), &attr) != 0) return;
  void* addr = nullptr;
  size_t size = 0, guard = 0;
  pthread_attr_getstack(&attr, &addr, &size);
  pthread_attr_getguardsize(&attr, &guard);
  pthread_attr_destroy(&attr);
  const uintptr_t lo = reinterpret_cast<uintptr_t>(addr);
  Exclude(lo > guard ? lo - guard : 0, lo + size);
}

uintptr_t ParseHex(const char*& p) {
  uintptr_t v = 0;
  for (;; ++p) {
    const char c = *p;
    if (c >= '0' && c <= '9')
      v = v * 16 + static_cast<uintptr_t>(c - '0');
    else if (c >= 'a' && c <= 'f')
      v = v * 16 + static_cast<uintptr_t>(c - 'a' + 10);
    else
      return v;
  }
}

bool InTable(uintptr_t start, uintptr_t end) {
  for (int i = 0; i < g_table->n; ++i) {
    if (start >= g_table->regions[i].start && end <= g_table->regions[i].end) return true;
  }
  return false;
}

// Reads /proc/self/maps and collects the mappings to revoke, merged where adjacent.
int CollectCandidates() {
  const int fd =
      static_cast<int>(syscall(SYS_openat, AT_FDCWD, "/proc/self/maps", O_RDONLY | O_CLOEXEC));
  if (fd < 0) return 0;
  size_t used = 0;
  // Raw system calls: the interposed read() would wait for the I/O lock this thread holds.
  while (used < kMapsBufferBytes - 1) {
    const long n = syscall(SYS_read, fd, g_maps_buffer + used, kMapsBufferBytes - 1 - used);
    if (n <= 0) break;
    used += static_cast<size_t>(n);
  }
  syscall(SYS_close, fd);
  g_maps_buffer[used] = '\0';
  int n = 0;
  const char* p = g_maps_buffer;
  while (*p != '\0') {
    const uintptr_t start = ParseHex(p);
    ++p;  // '-'
    const uintptr_t end = ParseHex(p);
    ++p;  // ' '
    const char perms[4] = {p[0], p[1], p[2], p[3]};
    p += 5;
    ParseHex(p);  // offset
    ++p;
    while (*p != ' ' && *p != '\0') ++p;  // dev
    ++p;
    uint64_t inode = 0;
    while (*p >= '0' && *p <= '9') inode = inode * 10 + static_cast<uint64_t>(*p++ - '0');
    while (*p == ' ') ++p;
    const bool named = *p != '\n' && *p != '\0';
    while (*p != '\n' && *p != '\0') ++p;
    if (*p == '\n') ++p;
    if (inode != 0 || named || perms[3] != 'p') continue;
    const bool readwrite = perms[0] == 'r' && perms[1] == 'w' && perms[2] == '-';
    const bool revoked = perms[0] == '-' && perms[1] == '-' && perms[2] == '-';
    if (!readwrite && !(revoked && InTable(start, end))) continue;
    // The mapping minus the excluded ranges (the kernel merges a thread stack with an
    // adjacent array into one mapping when their flags agree).
    Range pieces[64];
    int np = 1;
    pieces[0] = Range{start, end};
    for (int x = 0; x < g_num_excluded; ++x) {
      const Range ex = g_excluded[x];
      for (int k = 0; k < np; ++k) {
        const Range pc = pieces[k];
        if (ex.end <= pc.start || pc.end <= ex.start) continue;
        const bool left = pc.start < ex.start, right = ex.end < pc.end;
        if (left && right && np < 64) {
          pieces[k] = Range{pc.start, ex.start};
          pieces[np++] = Range{ex.end, pc.end};
        } else if (left) {
          pieces[k] = Range{pc.start, ex.start};
        } else if (right) {
          pieces[k] = Range{ex.end, pc.end};
        } else {
          pieces[k--] = pieces[--np];  // wholly excluded
        }
      }
    }
    // Exclusions may cut pieces out of order; insert them sorted, merging neighbours.
    for (int k = 0; k < np; ++k) {
      for (int j = k + 1; j < np; ++j) {
        if (pieces[j].start < pieces[k].start) {
          const Range t = pieces[k];
          pieces[k] = pieces[j];
          pieces[j] = t;
        }
      }
      if (n > 0 && g_candidates[n - 1].end == pieces[k].start) {
        g_candidates[n - 1].end = pieces[k].end;  // fragments of one region
      } else if (n < kMaxRegions) {
        g_candidates[n++] = pieces[k];
      }
    }
  }
  // Drop the small ones (after merging the fragments of revoked regions).
  int kept = 0;
  for (int i = 0; i < n; ++i) {
    if (g_candidates[i].end - g_candidates[i].start >= g_min_region)
      g_candidates[kept++] = g_candidates[i];
  }
  return kept;
}

void ScanAndArm() {
  const int n = CollectCandidates();
  bool same = n == g_table->n;
  for (int i = 0; same && i < n; ++i) {
    same = g_candidates[i].start == g_table->regions[i].start &&
           g_candidates[i].end == g_table->regions[i].end;
  }
  if (!same) {
    uint64_t total = 0;
    for (int i = 0; i < n; ++i) total += g_candidates[i].end - g_candidates[i].start;
    uintptr_t granule = g_fixed_granule != 0 ? g_fixed_granule : kMinGranule;
    if (g_fixed_granule == 0) {
      while (total / granule > kMaxGranules) granule <<= 1;
    }
    g_seq.fetch_add(1, std::memory_order_acq_rel);  // odd: rewriting
    for (int i = 0; i < n; ++i) g_table->regions[i] = g_candidates[i];
    g_table->n = n;
    g_granule.store(granule, std::memory_order_relaxed);
    g_seq.fetch_add(1, std::memory_order_release);  // even: stable
  }
  for (int i = 0; i < g_table->n; ++i) {
    const Range r = g_table->regions[i];
    mprotect(reinterpret_cast<void*>(r.start), r.end - r.start, PROT_NONE);
  }
}

// Posted by the arming thread once it has started; the constructor waits for it.
sem_t g_arm_started;

void* ArmLoop(void*) {
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, nullptr);
  pthread_mutex_lock(&g_lock);
  ExcludeOwnStack();  // pthread_getattr_np mallocs: this thread's arena is made here
  pthread_mutex_unlock(&g_lock);
  sem_post(&g_arm_started);
  while (!g_stop.load()) {
    usleep(static_cast<useconds_t>(g_interval_us));
    if (g_stop.load()) break;
    // A system call with a buffer in flight (read, write, ...) holds the I/O lock: the
    // round is skipped rather than make that buffer fault inside the kernel.
    if (pthread_rwlock_trywrlock(&g_io_lock) != 0) continue;
    pthread_mutex_lock(&g_lock);
    ScanAndArm();
    pthread_mutex_unlock(&g_lock);
    pthread_rwlock_unlock(&g_io_lock);
  }
  return nullptr;
}

using PthreadCreateFn = int (*)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*);

PthreadCreateFn RealPthreadCreate() {
  static PthreadCreateFn fn = reinterpret_cast<PthreadCreateFn>(dlsym(RTLD_NEXT, "pthread_create"));
  return fn;
}

struct Boot {
  void* (*fn)(void*);
  void* arg;
  sem_t ready;
};

void* Trampoline(void* p) {
  Boot* boot = static_cast<Boot*>(p);
  void* (*fn)(void*) = boot->fn;
  void* arg = boot->arg;
  // The creator holds g_lock until `ready` is posted: the exclusion list is ours to write.
  ExcludeOwnStack();
  SetAltStack();
  sem_post(&boot->ready);
  return fn(arg);
}

void AfterForkInChild() {
  pthread_mutex_init(&g_lock, nullptr);
  pthread_rwlock_init(&g_io_lock, nullptr);
  g_active = false;  // no arming thread in the child: granules come back as touched
}

__attribute__((constructor)) void AgentInit() {
  g_interval_us = EnvU64("TIERGYM_SWSAMPLE_INTERVAL_US", 10000);
  g_fixed_granule = EnvU64("TIERGYM_SWSAMPLE_GRANULE_BYTES", 0);
  g_min_region = EnvU64("TIERGYM_SWSAMPLE_MIN_REGION_BYTES", 1 << 20);
  if (g_interval_us == 0) return;  // disabled
  const long page = sysconf(_SC_PAGESIZE);
  if (g_fixed_granule != 0 && (g_fixed_granule % static_cast<uint64_t>(page) != 0 ||
                               (g_fixed_granule & (g_fixed_granule - 1)) != 0)) {
    g_fixed_granule = 0;
  }
  pthread_mutex_lock(&g_lock);
  g_table = static_cast<Table*>(MapPrivate(sizeof(Table)));
  g_maps_buffer = static_cast<char*>(MapPrivate(kMapsBufferBytes));
  g_candidates = static_cast<Range*>(MapPrivate(sizeof(Range) * kMaxRegions));
  ExcludeOwnStack();
  pthread_mutex_unlock(&g_lock);
  if (g_table == nullptr || g_maps_buffer == nullptr || g_candidates == nullptr) return;
  g_table->n = 0;
  SetAltStack();
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = OnSegv;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  g_real_sigaction = reinterpret_cast<int (*)(int, const struct sigaction*, struct sigaction*)>(
      dlsym(RTLD_NEXT, "sigaction"));
  if (g_real_sigaction == nullptr || g_real_sigaction(SIGSEGV, &sa, nullptr) != 0) return;
  g_handler_installed = true;
  pthread_atfork(nullptr, nullptr, AfterForkInChild);
  PthreadCreateFn create = RealPthreadCreate();
  if (create == nullptr) return;
  // The arming thread's start-up allocates (its malloc arena, 64 MiB of address space);
  // waiting for it here, before main, keeps the application's mappings at the same
  // addresses from run to run instead of depending on when that thread first runs.
  sem_init(&g_arm_started, 0, 0);
  pthread_t tid;
  const int rc = create(&tid, nullptr, ArmLoop, nullptr);
  if (rc == 0) {
    pthread_detach(tid);
    while (sem_wait(&g_arm_started) != 0 && errno == EINTR) {
    }
    g_active = true;
  }
  if (EnvU64("TIERGYM_SWSAMPLE_DEBUG", 0) != 0) {
    fprintf(stderr, "libtiergym_swsample: interval %llu us, granule %llu, min region %llu: %s\n",
            static_cast<unsigned long long>(g_interval_us),
            static_cast<unsigned long long>(g_fixed_granule),
            static_cast<unsigned long long>(g_min_region), rc == 0 ? "arming" : strerror(rc));
  }
}

__attribute__((destructor)) void AgentFini() { g_stop = true; }

// Touches one byte per page so that revoked granules come back before the kernel uses
// the buffer (a kernel access to a revoked page fails with EFAULT instead of faulting).
void Prefault(const void* buf, size_t bytes) {
  if (buf == nullptr || bytes == 0 || !g_active.load(std::memory_order_relaxed)) return;
  const volatile char* p = static_cast<const volatile char*>(buf);
  const size_t page = 4096;
  for (size_t off = 0; off < bytes; off += page) (void)p[off];
  (void)p[bytes - 1];
}

class IoGuard {
 public:
  IoGuard(const void* buf, size_t bytes) {
    pthread_rwlock_rdlock(&g_io_lock);
    Prefault(buf, bytes);
  }
  ~IoGuard() { pthread_rwlock_unlock(&g_io_lock); }
};

template <typename Fn>
Fn Next(const char* name) {
  return reinterpret_cast<Fn>(dlsym(RTLD_NEXT, name));
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) int pthread_create(pthread_t* thread,
                                                          const pthread_attr_t* attr,
                                                          void* (*fn)(void*), void* arg) {
  PthreadCreateFn real = RealPthreadCreate();
  if (real == nullptr) return EAGAIN;
  if (!g_active.load()) return real(thread, attr, fn, arg);
  Boot* boot = static_cast<Boot*>(malloc(sizeof(Boot)));
  if (boot == nullptr) return EAGAIN;
  boot->fn = fn;
  boot->arg = arg;
  sem_init(&boot->ready, 0, 0);
  pthread_mutex_lock(&g_lock);
  const int rc = real(thread, attr, Trampoline, boot);
  if (rc == 0) {
    while (sem_wait(&boot->ready) != 0 && errno == EINTR) {
    }
  }
  pthread_mutex_unlock(&g_lock);
  sem_destroy(&boot->ready);
  free(boot);
  return rc;
}

__attribute__((visibility("default"))) int sigaction(int sig, const struct sigaction* act,
                                                     struct sigaction* old) {
  static auto real = Next<int (*)(int, const struct sigaction*, struct sigaction*)>("sigaction");
  if (sig != SIGSEGV || !g_handler_installed) return real(sig, act, old);
  // Keep the agent's handler installed; remember the application's and chain to it.
  if (old != nullptr) {
    if (g_app_segv_set) {
      *old = g_app_segv;
    } else {
      memset(old, 0, sizeof *old);
      old->sa_handler = SIG_DFL;
    }
  }
  if (act != nullptr) {
    g_app_segv = *act;
    g_app_segv_set = true;
  }
  return 0;
}

__attribute__((visibility("default"))) sighandler_t signal(int sig, sighandler_t handler) {
  static auto real = Next<sighandler_t (*)(int, sighandler_t)>("signal");
  if (sig != SIGSEGV || !g_handler_installed) return real(sig, handler);
  const sighandler_t previous =
      g_app_segv_set && !(g_app_segv.sa_flags & SA_SIGINFO) ? g_app_segv.sa_handler : SIG_DFL;
  memset(&g_app_segv, 0, sizeof g_app_segv);
  g_app_segv.sa_handler = handler;
  g_app_segv_set = true;
  return previous;
}

__attribute__((visibility("default"))) ssize_t read(int fd, void* buf, size_t count) {
  static auto real = Next<ssize_t (*)(int, void*, size_t)>("read");
  IoGuard guard(buf, count);
  return real(fd, buf, count);
}

__attribute__((visibility("default"))) ssize_t write(int fd, const void* buf, size_t count) {
  static auto real = Next<ssize_t (*)(int, const void*, size_t)>("write");
  IoGuard guard(buf, count);
  return real(fd, buf, count);
}

__attribute__((visibility("default"))) ssize_t pread(int fd, void* buf, size_t count,
                                                     off_t offset) {
  static auto real = Next<ssize_t (*)(int, void*, size_t, off_t)>("pread");
  IoGuard guard(buf, count);
  return real(fd, buf, count, offset);
}

__attribute__((visibility("default"))) ssize_t pwrite(int fd, const void* buf, size_t count,
                                                      off_t offset) {
  static auto real = Next<ssize_t (*)(int, const void*, size_t, off_t)>("pwrite");
  IoGuard guard(buf, count);
  return real(fd, buf, count, offset);
}

__attribute__((visibility("default"))) size_t fread(void* ptr, size_t size, size_t n,
                                                    FILE* stream) {
  static auto real = Next<size_t (*)(void*, size_t, size_t, FILE*)>("fread");
  IoGuard guard(ptr, size * n);
  return real(ptr, size, n, stream);
}

__attribute__((visibility("default"))) size_t fwrite(const void* ptr, size_t size, size_t n,
                                                     FILE* stream) {
  static auto real = Next<size_t (*)(const void*, size_t, size_t, FILE*)>("fwrite");
  IoGuard guard(ptr, size * n);
  return real(ptr, size, n, stream);
}

}  // extern "C"

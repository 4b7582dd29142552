#include "env/server/shm_batch.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <climits>
#include <csignal>
#include <cstring>
#include <utility>

#include "env/server/random_id.h"
#include "traces/base/strings.h"

namespace tiergym::env {

namespace {

// The segments' mappings, for the SIGBUS handler: a client (a process of the server's
// user) may shrink a segment's file at any moment, and a check of its size before a read
// (Intact) cannot stop the read that follows it from faulting. The handler maps zero pages
// over the whole segment a fault falls in (libwayland-server does the same for its clients'
// shared-memory pools): the faulting access then reads zeros or writes into memory no one
// shares, and the segment's next Intact() check frees it. A SIGBUS outside every segment
// is what it always was: the handler restores the default action and the access faults
// again. Lock-free and fixed in size, as a handler must read it.
constexpr int kGuardSlots = 1024;
std::atomic<char*> guard_base[kGuardSlots];
std::atomic<uint64_t> guard_bytes[kGuardSlots];

void OnSigbus(int /*sig*/, siginfo_t* info, void* /*context*/) {
  const auto addr = reinterpret_cast<uintptr_t>(info->si_addr);
  for (int i = 0; i < kGuardSlots; ++i) {
    char* base = guard_base[i].load(std::memory_order_acquire);
    const uint64_t bytes = guard_bytes[i].load(std::memory_order_acquire);
    const auto from = reinterpret_cast<uintptr_t>(base);
    if (base != nullptr && addr >= from && addr - from < bytes &&
        mmap(base, bytes, PROT_READ | PROT_WRITE, MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) !=
            MAP_FAILED) {
      return;
    }
  }
  signal(SIGBUS, SIG_DFL);  // not a segment's: the access faults again, as it always did
}

// Registers [base, base + bytes) with the handler (installed on first use); the slot, or -1
// when every slot is taken (the segment is then unguarded, as before).
int Guard(void* base, uint64_t bytes) {
  static const bool installed = [] {
    struct sigaction sa = {};
    sa.sa_sigaction = OnSigbus;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    return sigaction(SIGBUS, &sa, nullptr) == 0;
  }();
  if (!installed) return -1;
  for (int i = 0; i < kGuardSlots; ++i) {
    char* free_slot = nullptr;
    if (guard_bytes[i].load(std::memory_order_acquire) == 0 &&
        guard_base[i].compare_exchange_strong(free_slot, static_cast<char*>(base))) {
      guard_bytes[i].store(bytes, std::memory_order_release);
      return i;
    }
  }
  return -1;
}

void Unguard(int slot) {
  if (slot < 0) return;
  guard_base[slot].store(nullptr, std::memory_order_release);
  guard_bytes[slot].store(0, std::memory_order_release);
}

constexpr char kPrefix[] = "tiergym-";
// Every array starts on a cache line; the header is 8 bytes of magic, then the batch number
// (the `seq` array) and its words (protocol::kShmHeader).
constexpr uint64_t kAlign = protocol::kShmAlign;
constexpr const char (&kMagic)[8] = protocol::kShmMagic;

uint64_t RoundUp(uint64_t n, uint64_t to) { return (n + to - 1) / to * to; }

// The column a protocol reply's action_mask takes (protocol.cc PackInfoColumns).
size_t EncodedColumns(const StepInfo& info) {
  const size_t columns =
      info.action_mask_columns > 0 ? info.action_mask_columns : info.tier_used_bytes.size();
  return columns > 1 && info.action_mask.size() % columns == 0 ? columns : 0;
}

}  // namespace

ShmBatchShape ShapeOf(const EnvSpec& spec, size_t rows) {
  ShmBatchShape s;
  s.rows = rows;
  s.obs = 1;
  for (int64_t d : spec.observation.shape) s.obs *= static_cast<size_t>(std::max<int64_t>(d, 0));
  const InfoShape info = InfoShapeOf(spec);
  s.tiers = info.tiers;
  s.regions = info.regions;
  s.mask = info.mask;
  s.mask_columns = info.mask_columns;
  s.action = 1;  // a Discrete action is one integer
  if (spec.action.kind == Space::kMultiDiscrete) {
    for (int64_t d : spec.action.shape) s.action *= static_cast<size_t>(std::max<int64_t>(d, 0));
  }
  return s;
}

ShmBatch::ShmBatch(std::string name, int fd, void* base, uint64_t bytes, const ShmBatchShape& shape)
    : name_(std::move(name)), fd_(fd), base_(base), bytes_(bytes), shape_(shape) {}

ShmBatch::~ShmBatch() {
  Unguard(guard_slot_);
  if (base_ != nullptr) munmap(base_, bytes_);
  if (fd_ >= 0) close(fd_);
  Unlink();
}

void ShmBatch::Unlink() {
  if (!linked_) return;
  shm_unlink(name_.c_str());
  linked_ = false;
}

bool ShmBatch::Intact() const {
  struct stat st = {};
  return fstat(fd_, &st) == 0 && static_cast<uint64_t>(st.st_size) >= bytes_;
}

uint64_t ShmBatch::Add(std::string name, std::string dtype, size_t itemsize,
                       std::vector<uint64_t> shape) {
  uint64_t count = 1;
  for (uint64_t d : shape) count *= d;
  const uint64_t offset = RoundUp(end_, kAlign);
  end_ = offset + count * itemsize;
  layout_.push_back(
      protocol::ShmArray{std::move(name), std::move(dtype), std::move(shape), offset});
  return offset;
}

void ShmBatch::LayArrays(const protocol::ShmArrayDecl* arrays, size_t count) {
  for (size_t i = 0; i < count; ++i) {
    const protocol::ShmArrayDecl& a = arrays[i];
    std::vector<uint64_t> shape;
    for (int d = 0; d < a.rank; ++d) {
      switch (a.dims[d]) {
        case protocol::ShmDim::kNumber:
          shape.push_back(a.numbers[d]);
          break;
        case protocol::ShmDim::kRows:
          shape.push_back(shape_.rows);
          break;
        case protocol::ShmDim::kObs:
          shape.push_back(shape_.obs);
          break;
        case protocol::ShmDim::kAction:
          shape.push_back(shape_.action);
          break;
      }
    }
    if (a.offset != 0) {  // a word of the header, at its fixed offset
      layout_.push_back(
          protocol::ShmArray{std::string(a.name), std::string(a.dtype), shape, a.offset});
    } else {
      Add(std::string(a.name), std::string(a.dtype), a.itemsize, std::move(shape));
    }
  }
}

void ShmBatch::LayInfo(std::string_view prefix, InfoColumns& columns) {
  const uint64_t n = shape_.rows;
  ForEachInfoColumn([&](const char* name, auto member, const char* dtype, InfoWidth width, int) {
    using T = std::remove_pointer_t<std::remove_reference_t<decltype(columns.*member)>>;
    std::vector<uint64_t> shape = {n};
    if (width == InfoWidth::kMask && shape_.mask_columns > 0) {
      shape.push_back(shape_.mask / shape_.mask_columns);
      shape.push_back(shape_.mask_columns);
    } else if (width != InfoWidth::kOne) {
      shape.push_back(ColumnWidth(width, shape_.info()));
    }
    const uint64_t offset = Add(StrCat(prefix, name), dtype, sizeof(T), std::move(shape));
    columns.*member = base_ == nullptr ? nullptr : At<T>(offset);
  });
}

void ShmBatch::Lay() {
  layout_.clear();
  using protocol::kShmFinal;
  using protocol::kShmHeader;
  using protocol::kShmRequests;
  using protocol::kShmResults;
  LayArrays(kShmHeader, std::size(kShmHeader));
  end_ = kAlign;
  LayArrays(kShmResults, std::size(kShmResults));
  LayInfo(protocol::kShmInfoPrefix, info_);
  LayArrays(kShmFinal, std::size(kShmFinal));
  LayInfo(protocol::kShmFinalInfoPrefix, final_info_);
  // The request area (its number alone on its cache line: the client writes it last).
  if (requests_) LayArrays(kShmRequests, std::size(kShmRequests));
  // The arrays this class writes or reads, by their declared names.
  const std::pair<std::string_view, uint64_t ShmBatch::*> named[] = {
      {"seq", &ShmBatch::seq_},
      {"has_final", &ShmBatch::has_final_},
      {"summary", &ShmBatch::summary_},
      {"obs", &ShmBatch::obs_},
      {"reward", &ShmBatch::reward_},
      {"terminated", &ShmBatch::terminated_},
      {"truncated", &ShmBatch::truncated_},
      {"reset", &ShmBatch::reset_},
      {"final_obs", &ShmBatch::final_obs_},
      {"request", &ShmBatch::request_},
      {"request_autoreset", &ShmBatch::request_autoreset_},
      {"request_reset", &ShmBatch::request_reset_},
      {"request_actions", &ShmBatch::request_actions_},
      {"error_code", &ShmBatch::error_code_},
      {"error_field", &ShmBatch::error_field_},
      {"error_message", &ShmBatch::error_message_},
  };
  for (const protocol::ShmArray& a : layout_) {
    for (const auto& [name, member] : named) {
      if (a.name == name) this->*member = a.offset;
    }
  }
  for (const protocol::ShmArrayDecl& a : kShmRequests) {
    if (a.name == "error_code") error_code_bytes_ = a.numbers[0];
    if (a.name == "error_field") error_field_bytes_ = a.numbers[0];
    if (a.name == "error_message") error_message_bytes_ = a.numbers[0];
  }
}

uint64_t ShmBatch::BytesFor(const ShmBatchShape& shape, bool requests) {
  ShmBatch layout("", -1, nullptr, 0, shape);
  layout.linked_ = false;
  layout.requests_ = requests;
  layout.Lay();
  return RoundUp(std::max<uint64_t>(layout.end_, 1), static_cast<uint64_t>(getpagesize()));
}

absl::StatusOr<std::unique_ptr<ShmBatch>> ShmBatch::Create(const ShmBatchShape& shape,
                                                           bool requests) {
  const uint64_t bytes = BytesFor(shape, requests);
  // Leave others most of /dev/shm: a segment that would take it below an eighth free is
  // refused (the server's own budget, --max-shm-mib, bounds what all clients hold).
  struct statvfs vfs = {};
  if (statvfs("/dev/shm", &vfs) == 0) {
    const uint64_t unit = vfs.f_frsize != 0 ? vfs.f_frsize : vfs.f_bsize;
    const uint64_t free_bytes = static_cast<uint64_t>(vfs.f_bavail) * unit;
    const uint64_t total = static_cast<uint64_t>(vfs.f_blocks) * unit;
    if (free_bytes < bytes || free_bytes - bytes < total / 8) {
      return absl::ResourceExhaustedError(
          StrCat("a shared-memory segment of ", bytes, " bytes does not fit in /dev/shm (",
                 free_bytes, " of ", total,
                 " bytes free; an eighth is kept free); use results in the reply (no shm)"));
    }
  }
  const std::string name = StrCat("/", kPrefix, getpid(), "-", RandomHex128());
  const int fd = shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    return absl::UnavailableError(
        StrCat("shm_open: ", std::strerror(errno), "; use results in the reply (no shm)"));
  }
  auto fail = [&](absl::StatusCode code, std::string_view what, int err) {
    close(fd);
    shm_unlink(name.c_str());
    return absl::Status(code, StrCat("a shared-memory segment of ", bytes, " bytes: ", what, ": ",
                                     std::strerror(err), "; use results in the reply (no shm)"));
  };
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    return fail(absl::StatusCode::kResourceExhausted, "ftruncate", errno);
  }
  // Every page now: a full /dev/shm fails here, not as a SIGBUS when a row is written.
  if (const int err = posix_fallocate(fd, 0, static_cast<off_t>(bytes)); err != 0) {
    return fail(absl::StatusCode::kResourceExhausted, "posix_fallocate", err);
  }
  void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) return fail(absl::StatusCode::kResourceExhausted, "mmap", errno);
  auto batch = std::unique_ptr<ShmBatch>(new ShmBatch(name, fd, base, bytes, shape));
  batch->guard_slot_ = Guard(base, bytes);
  batch->requests_ = requests;
  batch->Lay();
  std::memcpy(base, kMagic, sizeof kMagic);
  return batch;
}

void ShmBatch::Publish(uint64_t seq, bool has_final, uint8_t summary) {
  std::atomic_ref<uint8_t>(*At<uint8_t>(has_final_))
      .store(has_final ? 1 : 0, std::memory_order_relaxed);
  std::atomic_ref<uint8_t>(*At<uint8_t>(summary_)).store(summary, std::memory_order_relaxed);
  std::atomic_ref<uint64_t>(*At<uint64_t>(seq_)).store(seq, std::memory_order_release);
}

void ShmBatch::Wake() {
  // The low 32 bits of the little-endian seq word: the futex clients wait on.
  syscall(SYS_futex, At<uint32_t>(seq_), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

uint32_t ShmBatch::RequestWord() const {
  return std::atomic_ref<uint32_t>(*At<uint32_t>(request_)).load(std::memory_order_acquire);
}

void ShmBatch::WaitForRequest(uint32_t seen, int timeout_ms) const {
  const timespec timeout = {timeout_ms / 1000, (timeout_ms % 1000) * 1000000L};
  // A shared futex (the client's process wakes it). On a page the client cut off (a
  // shrunk file), the kernel answers EFAULT instead of faulting.
  syscall(SYS_futex, At<uint32_t>(request_), FUTEX_WAIT, seen, &timeout, nullptr, 0);
}

void ShmBatch::WakeRequestWaiter() const {
  syscall(SYS_futex, At<uint32_t>(request_), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

void ShmBatch::ReadRequest(ShmRequest& r) const {
  r.number = std::atomic_ref<uint64_t>(*At<uint64_t>(request_)).load(std::memory_order_acquire);
  r.autoreset = *At<const uint8_t>(request_autoreset_);
  const auto* reset = At<const uint8_t>(request_reset_);
  r.reset.assign(reset, reset + shape_.rows);
  const auto* actions = At<const int64_t>(request_actions_);
  r.actions.resize(shape_.rows);
  for (size_t i = 0; i < shape_.rows; ++i) {
    r.actions[i].values.assign(actions + i * shape_.action, actions + (i + 1) * shape_.action);
  }
}

void ShmBatch::SetError(std::string_view code, std::string_view field, std::string_view message) {
  auto put = [&](uint64_t offset, size_t size, std::string_view text) {
    char* out = At<char>(offset);
    const size_t n = std::min(text.size(), size - 1);  // a NUL stays at the end
    std::memcpy(out, text.data(), n);
    std::memset(out + n, 0, size - n);
  };
  put(error_code_, error_code_bytes_, code);
  put(error_field_, error_field_bytes_, field);
  put(error_message_, error_message_bytes_, message);
}

void ShmBatch::ClearError() { std::memset(At<char>(error_code_), 0, error_code_bytes_); }

absl::Status ShmBatch::WriteInfo(const InfoColumns& columns, size_t row, const StepInfo& si,
                                 const EnvSpec& spec) {
  if (si.tier_used_bytes.size() != shape_.tiers || si.action_mask.size() != shape_.mask ||
      EncodedColumns(si) != shape_.mask_columns) {
    return absl::InvalidArgumentError(
        StrCat("row ", row, ": an info of another shape than the segment's (", shape_.tiers,
               " tiers, a mask of ", shape_.mask, " values)"));
  }
  // A region is refused at most once per step; more than `regions` would be a bug.
  WriteInfoRow(si, row, shape_.info(), spec.profiles, columns);
  return absl::OkStatus();
}

absl::Status ShmBatch::WriteRow(size_t row, const StepResult& result, bool was_reset,
                                const EnvSpec& spec) {
  if (row >= shape_.rows || result.observation.size() != shape_.obs) {
    return absl::InvalidArgumentError(
        StrCat("row ", row, ": a result of another shape than the segment's (", shape_.rows,
               " rows of ", shape_.obs, " observation values)"));
  }
  std::copy(result.observation.begin(), result.observation.end(),
            At<float>(obs_) + row * shape_.obs);
  At<double>(reward_)[row] = result.reward;
  At<uint8_t>(terminated_)[row] = result.terminated ? 1 : 0;
  At<uint8_t>(truncated_)[row] = result.truncated ? 1 : 0;
  At<uint8_t>(reset_)[row] = was_reset ? 1 : 0;
  return WriteInfo(info_, row, result.info, spec);
}

absl::Status ShmBatch::WriteFinal(size_t row, const StepResult& result, const EnvSpec& spec) {
  if (row >= shape_.rows || result.observation.size() != shape_.obs) {
    return absl::InvalidArgumentError(
        StrCat("row ", row, ": a final result of another shape than the segment's"));
  }
  std::copy(result.observation.begin(), result.observation.end(),
            At<float>(final_obs_) + row * shape_.obs);
  return WriteInfo(final_info_, row, result.info, spec);
}

void ShmBatch::CopyRowToFinal(size_t row) {
  std::memcpy(At<float>(final_obs_) + row * shape_.obs, At<const float>(obs_) + row * shape_.obs,
              shape_.obs * sizeof(float));
  CopyInfoRow(info_, final_info_, row, shape_.info());
}

size_t RemoveStaleShmSegments() {
  DIR* dir = opendir("/dev/shm");
  if (dir == nullptr) return 0;
  size_t removed = 0;
  const uid_t me = geteuid();
  while (const dirent* e = readdir(dir)) {
    const std::string_view name = e->d_name;
    if (name.rfind(kPrefix, 0) != 0) continue;
    const std::string_view rest = name.substr(sizeof kPrefix - 1);
    int pid = 0;
    const auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), pid);
    if (ec != std::errc() || end == rest.data() || *end != '-' || pid <= 0) continue;
    if (kill(pid, 0) == 0 || errno != ESRCH) continue;  // alive (or not ours to judge)
    struct stat st = {};
    const std::string path = StrCat("/dev/shm/", name);
    if (stat(path.c_str(), &st) != 0 || st.st_uid != me) continue;
    if (shm_unlink(StrCat("/", name).c_str()) == 0) ++removed;
  }
  closedir(dir);
  return removed;
}

}  // namespace tiergym::env

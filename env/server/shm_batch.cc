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

constexpr char kPrefix[] = "tiergym-";
constexpr uint64_t kAlign = 64;  // every array starts on a cache line
// The header: 8 bytes of magic, then the batch number (the `seq` array).
constexpr char kMagic[8] = {'T', 'G', 'S', 'H', 'M', 0, 0, 1};
// The error arrays' sizes (bytes, NUL-padded).
constexpr size_t kErrorCodeBytes = 32, kErrorFieldBytes = 128, kErrorMessageBytes = 1024;

uint64_t RoundUp(uint64_t n, uint64_t to) { return (n + to - 1) / to * to; }

// The column a protocol reply's action_mask takes (protocol.cc PackInfoColumns).
size_t EncodedColumns(const StepInfo& info) {
  const size_t columns =
      info.action_mask_columns > 0 ? info.action_mask_columns : info.tier_used_bytes.size();
  return columns > 1 && info.action_mask.size() % columns == 0 ? columns : 0;
}

}  // namespace

struct ShmBatch::Info {
  uint64_t profile = 0, step = 0, interval_ns = 0, default_interval_ns = 0, migration_ns = 0,
           migrated_bytes = 0, elapsed_ns = 0, default_elapsed_ns = 0, default_total_ns = 0,
           tier_used_bytes = 0, refused_count = 0, refused_regions = 0, action_mask = 0;
};

ShmBatchShape ShapeOf(const EnvSpec& spec, size_t rows) {
  ShmBatchShape s;
  s.rows = rows;
  s.obs = 1;
  for (int64_t d : spec.observation.shape) s.obs *= static_cast<size_t>(std::max<int64_t>(d, 0));
  s.tiers = spec.tiers.size();
  s.regions = static_cast<size_t>(std::max(spec.num_regions, 0));
  const auto n = static_cast<size_t>(std::max<int64_t>(spec.action.n, 0));
  if (spec.action.kind == Space::kMultiDiscrete) {
    s.mask = s.regions * n;
    s.mask_columns = n > 1 ? n : 0;
  } else {
    s.mask = n;
    s.mask_columns = 0;
  }
  s.action = 1;  // a Discrete action is one integer
  if (spec.action.kind == Space::kMultiDiscrete) {
    for (int64_t d : spec.action.shape) s.action *= static_cast<size_t>(std::max<int64_t>(d, 0));
  }
  return s;
}

ShmBatch::ShmBatch(std::string name, int fd, void* base, uint64_t bytes, const ShmBatchShape& shape)
    : name_(std::move(name)),
      fd_(fd),
      base_(base),
      bytes_(bytes),
      shape_(shape),
      info_(std::make_unique<Info>()),
      final_info_(std::make_unique<Info>()) {}

ShmBatch::~ShmBatch() {
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

void ShmBatch::LayInfo(const std::string& prefix, Info& info) {
  const uint64_t n = shape_.rows;
  info.profile = Add(prefix + "profile", "int32", 4, {n});
  info.step = Add(prefix + "step", "uint64", 8, {n});
  info.interval_ns = Add(prefix + "interval_ns", "float64", 8, {n});
  info.default_interval_ns = Add(prefix + "default_interval_ns", "float64", 8, {n});
  info.migration_ns = Add(prefix + "migration_ns", "float64", 8, {n});
  info.migrated_bytes = Add(prefix + "migrated_bytes", "uint64", 8, {n});
  info.elapsed_ns = Add(prefix + "elapsed_ns", "float64", 8, {n});
  info.default_elapsed_ns = Add(prefix + "default_elapsed_ns", "float64", 8, {n});
  info.default_total_ns = Add(prefix + "default_total_ns", "float64", 8, {n});
  info.tier_used_bytes = Add(prefix + "tier_used_bytes", "uint64", 8, {n, shape_.tiers});
  info.refused_count = Add(prefix + "refused_count", "int32", 4, {n});
  info.refused_regions = Add(prefix + "refused_regions", "int32", 4, {n, shape_.regions});
  if (shape_.mask_columns > 0) {
    info.action_mask = Add(prefix + "action_mask", "uint8", 1,
                           {n, shape_.mask / shape_.mask_columns, shape_.mask_columns});
  } else {
    info.action_mask = Add(prefix + "action_mask", "uint8", 1, {n, shape_.mask});
  }
}

void ShmBatch::Lay() {
  layout_.clear();
  const uint64_t n = shape_.rows;
  seq_ = sizeof kMagic;  // the header's second word
  layout_.push_back(protocol::ShmArray{"seq", "uint64", {1}, seq_});
  has_final_ = seq_ + sizeof(uint64_t);  // the third
  layout_.push_back(protocol::ShmArray{"has_final", "uint8", {1}, has_final_});
  summary_ = has_final_ + 1;  // the byte after it
  layout_.push_back(protocol::ShmArray{"summary", "uint8", {1}, summary_});
  end_ = kAlign;
  obs_ = Add("obs", "float32", 4, {n, shape_.obs});
  reward_ = Add("reward", "float64", 8, {n});
  terminated_ = Add("terminated", "bool", 1, {n});
  truncated_ = Add("truncated", "bool", 1, {n});
  reset_ = Add("reset", "bool", 1, {n});
  LayInfo("info.", *info_);
  final_obs_ = Add("final_obs", "float32", 4, {n, shape_.obs});
  LayInfo("final_info.", *final_info_);
  if (!requests_) return;
  // The request area: the number alone on its cache line (the client writes it last).
  request_ = Add("request", "uint64", 8, {1});
  request_autoreset_ = Add("request_autoreset", "uint8", 1, {1});
  request_reset_ = Add("request_reset", "uint8", 1, {n});
  request_actions_ = Add("request_actions", "int64", 8, {n, shape_.action});
  error_code_ = Add("error_code", "uint8", 1, {kErrorCodeBytes});
  error_field_ = Add("error_field", "uint8", 1, {kErrorFieldBytes});
  error_message_ = Add("error_message", "uint8", 1, {kErrorMessageBytes});
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
  put(error_code_, kErrorCodeBytes, code);
  put(error_field_, kErrorFieldBytes, field);
  put(error_message_, kErrorMessageBytes, message);
}

void ShmBatch::ClearError() { std::memset(At<char>(error_code_), 0, kErrorCodeBytes); }

absl::Status ShmBatch::WriteInfo(const Info& info, size_t row, const StepInfo& si,
                                 const EnvSpec& spec) {
  if (si.tier_used_bytes.size() != shape_.tiers || si.action_mask.size() != shape_.mask ||
      EncodedColumns(si) != shape_.mask_columns) {
    return absl::InvalidArgumentError(
        StrCat("row ", row, ": an info of another shape than the segment's (", shape_.tiers,
               " tiers, a mask of ", shape_.mask, " values)"));
  }
  const auto profile = std::find(spec.profiles.begin(), spec.profiles.end(), si.profile);
  At<int32_t>(info.profile)[row] =
      profile == spec.profiles.end() ? -1 : static_cast<int32_t>(profile - spec.profiles.begin());
  At<uint64_t>(info.step)[row] = si.step;
  At<double>(info.interval_ns)[row] = si.interval_ns;
  At<double>(info.default_interval_ns)[row] = si.default_interval_ns;
  At<double>(info.migration_ns)[row] = si.migration_ns;
  At<uint64_t>(info.migrated_bytes)[row] = si.migrated_bytes;
  At<double>(info.elapsed_ns)[row] = si.elapsed_ns;
  At<double>(info.default_elapsed_ns)[row] = si.default_elapsed_ns;
  At<double>(info.default_total_ns)[row] = si.default_total_ns;
  std::copy(si.tier_used_bytes.begin(), si.tier_used_bytes.end(),
            At<uint64_t>(info.tier_used_bytes) + row * shape_.tiers);
  // A region is refused at most once per step; more than `regions` would be a bug.
  const size_t refused = std::min(si.refused_regions.size(), shape_.regions);
  At<int32_t>(info.refused_count)[row] = static_cast<int32_t>(refused);
  int32_t* regions = At<int32_t>(info.refused_regions) + row * shape_.regions;
  for (size_t i = 0; i < refused; ++i) regions[i] = si.refused_regions[i];
  std::copy(si.action_mask.begin(), si.action_mask.end(),
            At<uint8_t>(info.action_mask) + row * shape_.mask);
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
  return WriteInfo(*info_, row, result.info, spec);
}

absl::Status ShmBatch::WriteFinal(size_t row, const StepResult& result, const EnvSpec& spec) {
  if (row >= shape_.rows || result.observation.size() != shape_.obs) {
    return absl::InvalidArgumentError(
        StrCat("row ", row, ": a final result of another shape than the segment's"));
  }
  std::copy(result.observation.begin(), result.observation.end(),
            At<float>(final_obs_) + row * shape_.obs);
  return WriteInfo(*final_info_, row, result.info, spec);
}

void ShmBatch::CopyInfo(const Info& from, const Info& to, size_t row) {
  auto copy = [&](uint64_t from_offset, uint64_t to_offset, size_t itemsize, size_t width,
                  size_t count) {
    std::memcpy(At<char>(to_offset) + row * width * itemsize,
                At<const char>(from_offset) + row * width * itemsize, count * itemsize);
  };
  copy(from.profile, to.profile, 4, 1, 1);
  copy(from.step, to.step, 8, 1, 1);
  copy(from.interval_ns, to.interval_ns, 8, 1, 1);
  copy(from.default_interval_ns, to.default_interval_ns, 8, 1, 1);
  copy(from.migration_ns, to.migration_ns, 8, 1, 1);
  copy(from.migrated_bytes, to.migrated_bytes, 8, 1, 1);
  copy(from.elapsed_ns, to.elapsed_ns, 8, 1, 1);
  copy(from.default_elapsed_ns, to.default_elapsed_ns, 8, 1, 1);
  copy(from.default_total_ns, to.default_total_ns, 8, 1, 1);
  copy(from.tier_used_bytes, to.tier_used_bytes, 8, shape_.tiers, shape_.tiers);
  copy(from.refused_count, to.refused_count, 4, 1, 1);
  // The refused regions WriteInfo wrote (the rest of the row is unspecified, as there).
  const auto refused = static_cast<size_t>(std::clamp<int32_t>(
      At<const int32_t>(from.refused_count)[row], 0, static_cast<int32_t>(shape_.regions)));
  copy(from.refused_regions, to.refused_regions, 4, shape_.regions, refused);
  copy(from.action_mask, to.action_mask, 1, shape_.mask, shape_.mask);
}

void ShmBatch::CopyRowToFinal(size_t row) {
  std::memcpy(At<float>(final_obs_) + row * shape_.obs, At<const float>(obs_) + row * shape_.obs,
              shape_.obs * sizeof(float));
  CopyInfo(*info_, *final_info_, row);
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

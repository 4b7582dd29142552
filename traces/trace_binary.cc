#include "traces/trace_binary.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_format.h"
#include "traces/base/crc32c.h"
#include "traces/base/file.h"
#include "traces/base/status_macros.h"
#include "traces/base/strings.h"
#include "traces/binary_format.h"

namespace tiergym {
namespace {

namespace bf = binary_format;

// What the format says about each column it knows.
struct ColumnSpec {
  bf::ColumnId id;
  const char* name;
  uint32_t element_size;
  uint32_t flag;  // 0 for the required columns
};

constexpr ColumnSpec kColumnSpecs[] = {
    {bf::kColumnTimeNs, "time_ns", 8, 0},
    {bf::kColumnTid, "tid", 4, 0},
    {bf::kColumnPhase, "phase", 4, 0},
    {bf::kColumnInstructions, "instructions", 8, 0},
    {bf::kColumnAddress, "address", 8, 0},
    {bf::kColumnOp, "op", 1, bf::kFlagOp},
    {bf::kColumnWeight, "weight", 4, bf::kFlagWeight},
    {bf::kColumnCpu, "cpu", 4, bf::kFlagCpu},
};
constexpr size_t kNumKnownColumns = sizeof(kColumnSpecs) / sizeof(kColumnSpecs[0]);

const ColumnSpec* FindSpec(uint32_t id) {
  for (const ColumnSpec& spec : kColumnSpecs) {
    if (spec.id == id) return &spec;
  }
  return nullptr;
}

std::string Hex32(uint32_t v) { return absl::StrFormat("0x%08x", v); }

absl::Status DataLoss(const std::string& path, std::string_view detail) {
  return absl::DataLossError(StrCat(path, ": ", detail));
}

// --- Metadata -------------------------------------------------------------------------

// The known fields of TraceMetadata from its entries, by the rules the CSV reader applies
// to header lines: a known key may appear once; pebs_reset is a positive integer and
// page_size a 32-bit integer (ValidateTrace checks that it is a power of two).
absl::StatusOr<TraceMetadata> MetadataFromEntries(
    std::string_view source, std::vector<std::pair<std::string, std::string>> entries) {
  TraceMetadata m;
  bool seen[5] = {};
  constexpr const char* kKnownKeys[5] = {"app", "device", "event", "pebs_reset", "page_size"};
  for (size_t i = 0; i < entries.size(); ++i) {
    const auto& [key, value] = entries[i];
    auto bad = [&](std::string_view detail) {
      return absl::InvalidArgumentError(
          StrCat(source, ": metadata entry ", i, ": bad-header: ", detail));
    };
    int known = -1;
    for (int k = 0; k < 5; ++k) {
      if (key == kKnownKeys[k]) known = k;
    }
    if (known < 0) continue;
    if (seen[known]) return bad(StrCat("header key '", key, "' appears twice"));
    seen[known] = true;
    if (key == "app") {
      m.app = value;
    } else if (key == "device") {
      m.device = value;
    } else if (key == "event") {
      m.event = value;
    } else if (key == "pebs_reset") {
      m.pebs_reset = ParseDecimal<uint64_t>(value);
      if (!m.pebs_reset || *m.pebs_reset == 0) {
        return bad(StrCat("pebs_reset '", value, "' is not a positive integer"));
      }
    } else {
      std::optional<uint32_t> page_size = ParseDecimal<uint32_t>(value);
      if (!page_size) return bad(StrCat("page_size '", value, "' is not a 32-bit integer"));
      m.page_size = *page_size;
    }
  }
  m.entries = std::move(entries);
  return m;
}

void AppendLengthPrefixed(std::string* out, const std::string& s) {
  char len[4];
  bf::Store32(len, static_cast<uint32_t>(s.size()));
  out->append(len, 4);
  out->append(s);
}

// --- Writing --------------------------------------------------------------------------

struct ColumnBytes {
  const ColumnSpec* spec;
  const void* data;
  uint64_t size_bytes;
};

std::vector<ColumnBytes> ColumnsOf(const Trace& t) {
  std::vector<ColumnBytes> cols = {
      {&kColumnSpecs[0], t.time_ns().data(), t.time_ns().size_bytes()},
      {&kColumnSpecs[1], t.tid().data(), t.tid().size_bytes()},
      {&kColumnSpecs[2], t.phase().data(), t.phase().size_bytes()},
      {&kColumnSpecs[3], t.instructions().data(), t.instructions().size_bytes()},
      {&kColumnSpecs[4], t.address().data(), t.address().size_bytes()},
  };
  const OptionalColumns& opt = t.optional_columns();
  if (opt.op) cols.push_back({&kColumnSpecs[5], t.op().data(), t.op().size_bytes()});
  if (opt.weight) {
    cols.push_back({&kColumnSpecs[6], t.weight().data(), t.weight().size_bytes()});
  }
  if (opt.cpu) cols.push_back({&kColumnSpecs[7], t.cpu().data(), t.cpu().size_bytes()});
  return cols;
}

absl::Status WriteAll(int fd, const void* data, size_t n, const std::string& path) {
  const auto* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(errno, StrCat("cannot write ", path));
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return absl::OkStatus();
}

// Closes and removes a temporary file unless released.
class TempFile {
 public:
  // `remove`: unlink the file on failure (false for a device written in place).
  TempFile(int fd, std::string path, bool remove)
      : fd_(fd), path_(std::move(path)), remove_(remove) {}
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  ~TempFile() {
    if (fd_ >= 0) ::close(fd_);
    if (remove_) ::unlink(path_.c_str());
  }
  // Closes the file, keeping it on disk until Release() or destruction.
  absl::Status Close() {
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) return ErrnoStatus(errno, StrCat("cannot write ", path_));
    return absl::OkStatus();
  }
  // The file was renamed: nothing to remove any more.
  void Release() { remove_ = false; }

 private:
  int fd_;
  std::string path_;
  bool remove_;
};

// --- Reading --------------------------------------------------------------------------

// A read-only mapping of a whole file, unmapped when the last Trace using it goes away.
class Mapping {
 public:
  Mapping(void* base, size_t size) : base_(base), size_(size) {}
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  ~Mapping() { ::munmap(base_, size_); }
  [[nodiscard]] const uint8_t* data() const { return static_cast<const uint8_t*>(base_); }
  [[nodiscard]] size_t size() const { return size_; }

 private:
  void* base_;
  size_t size_;
};

// True when [offset, offset + length) lies within a file of `file_size` bytes.
bool InFile(uint64_t offset, uint64_t length, uint64_t file_size) {
  return offset <= file_size && length <= file_size - offset;
}

// Which part of a (possibly truncated) file `offset` falls in, as far as its header and
// directory tell (both may be cut off or corrupt: this only names things, for messages).
std::string DescribeOffset(const uint8_t* file, uint64_t file_size, uint64_t offset) {
  const uint64_t directory_offset = bf::Load64(file + bf::kOffDirectoryOffset);
  const uint32_t num_columns = bf::Load32(file + bf::kOffNumColumns);
  for (uint32_t i = 0; i < num_columns; ++i) {
    const uint64_t e = directory_offset + uint64_t{i} * bf::kDirectoryEntrySize;
    if (!InFile(e, bf::kDirectoryEntrySize, file_size)) return "the column directory";
    const ColumnSpec* spec = FindSpec(bf::Load32(file + e + bf::kOffEntryColumnId));
    const uint64_t begin = bf::Load64(file + e + bf::kOffEntryOffset);
    const uint64_t size = bf::Load64(file + e + bf::kOffEntrySize);
    if (offset >= begin && offset - begin < size) {
      return spec != nullptr ? StrCat("column ", spec->name) : std::string("a column");
    }
  }
  const uint64_t metadata_offset = bf::Load64(file + bf::kOffMetadataOffset);
  const uint64_t marks_offset = bf::Load64(file + bf::kOffMarksOffset);
  if (offset >= marks_offset) return "the marks table or the padding after it";
  if (offset >= metadata_offset) return "the metadata block";
  return "the column directory";
}

struct ColumnLocation {
  uint64_t offset = 0;
  uint64_t size_bytes = 0;
  uint32_t crc = 0;
  bool present = false;
};

}  // namespace

absl::Status WriteTraceBinary(const Trace& trace, const std::string& path) {
  const TraceMetadata& metadata = trace.metadata();
  TG_ASSIGN_OR_RETURN(TraceMetadata derived, MetadataFromEntries(path, metadata.entries));
  if (!(derived == metadata)) {
    return absl::InvalidArgumentError(
        StrCat(path, ": cannot write trace ", trace.source(),
               ": its metadata fields disagree with its header entries, which are all the "
               "format stores (build the metadata with TraceMetadata::Make)"));
  }

  const std::vector<ColumnBytes> columns = ColumnsOf(trace);
  const uint64_t num_marks = trace.marks().size();

  // Metadata block.
  std::string meta;
  char u32[4];
  bf::Store32(u32, static_cast<uint32_t>(metadata.entries.size()));
  meta.append(u32, 4);
  for (const auto& [key, value] : metadata.entries) {
    AppendLengthPrefixed(&meta, key);
    AppendLengthPrefixed(&meta, value);
  }

  // Layout.
  const uint64_t directory_offset = bf::kHeaderSize;
  const uint64_t directory_size = columns.size() * bf::kDirectoryEntrySize;
  const uint64_t metadata_offset = directory_offset + directory_size;
  const uint64_t marks_offset = metadata_offset + meta.size();
  const uint64_t marks_size = (num_marks + 1) * bf::kMarkRecordSize;
  std::vector<uint64_t> column_offsets;
  uint64_t end = marks_offset + marks_size;
  for (const ColumnBytes& c : columns) {
    column_offsets.push_back(bf::AlignColumn(end));
    end = column_offsets.back() + c.size_bytes;
  }
  const uint64_t file_size = end;

  // Everything before the first column, in one buffer: header, directory, metadata, marks.
  std::string prefix(marks_offset + marks_size, '\0');
  char* h = prefix.data();
  std::memcpy(h + bf::kOffMagic, bf::kMagic, bf::kMagicSize);
  bf::Store32(h + bf::kOffVersion, bf::kVersion);
  bf::Store32(h + bf::kOffHeaderSize, bf::kHeaderSize);
  const OptionalColumns& opt = trace.optional_columns();
  bf::Store32(h + bf::kOffFlags, (opt.op ? bf::kFlagOp : 0) | (opt.weight ? bf::kFlagWeight : 0) |
                                     (opt.cpu ? bf::kFlagCpu : 0));
  bf::Store32(h + bf::kOffNumColumns, static_cast<uint32_t>(columns.size()));
  bf::Store64(h + bf::kOffNumSamples, trace.num_samples());
  bf::Store64(h + bf::kOffNumMarks, num_marks);
  bf::Store64(h + bf::kOffFileSize, file_size);
  bf::Store64(h + bf::kOffDirectoryOffset, directory_offset);
  bf::Store64(h + bf::kOffMetadataOffset, metadata_offset);
  bf::Store64(h + bf::kOffMetadataSize, meta.size());
  bf::Store64(h + bf::kOffMarksOffset, marks_offset);
  bf::Store64(h + bf::kOffMarksSize, marks_size);
  for (size_t i = 0; i < columns.size(); ++i) {
    char* e = h + directory_offset + i * bf::kDirectoryEntrySize;
    bf::Store32(e + bf::kOffEntryColumnId, columns[i].spec->id);
    bf::Store32(e + bf::kOffEntryElementSize, columns[i].spec->element_size);
    bf::Store64(e + bf::kOffEntryOffset, column_offsets[i]);
    bf::Store64(e + bf::kOffEntrySize, columns[i].size_bytes);
    bf::Store32(e + bf::kOffEntryCrc, Crc32c(columns[i].data, columns[i].size_bytes));
  }
  meta.copy(h + metadata_offset, meta.size());  // key/value bytes, no terminator
  for (uint64_t i = 0; i <= num_marks; ++i) {
    const PhaseEvent& ev = i < num_marks ? trace.marks()[i] : trace.end();
    char* r = h + marks_offset + i * bf::kMarkRecordSize;
    bf::Store64(r + bf::kOffMarkTimeNs, ev.time_ns);
    bf::Store32(r + bf::kOffMarkTid, ev.tid);
    bf::Store32(r + bf::kOffMarkPhase, ev.phase);
    bf::Store64(r + bf::kOffMarkInstructions, ev.instructions);
  }
  // The header checksum field is still zero here, as its definition requires.
  bf::Store32(h + bf::kOffHeaderCrc, Crc32c(prefix.data(), prefix.size()));

  // A device or a link (/dev/stdout, a pipe) is written in place, never replaced by a file.
  const bool in_place = WritesInPlace(path);
  std::string tmp = in_place ? path : StrCat(path, ".tmp.", static_cast<int64_t>(::getpid()));
  int fd = in_place ? ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)
                    : ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoStatus(errno, StrCat("cannot create ", tmp));
  TempFile file(fd, tmp, /*remove=*/!in_place);
  TG_RETURN_IF_ERROR(WriteAll(fd, prefix.data(), prefix.size(), tmp));
  static constexpr char kZeros[bf::kColumnAlignment] = {};
  uint64_t written = prefix.size();
  for (size_t i = 0; i < columns.size(); ++i) {
    TG_RETURN_IF_ERROR(WriteAll(fd, kZeros, column_offsets[i] - written, tmp));
    TG_RETURN_IF_ERROR(WriteAll(fd, columns[i].data, columns[i].size_bytes, tmp));
    written = column_offsets[i] + columns[i].size_bytes;
  }
  TG_RETURN_IF_ERROR(file.Close());
  if (!in_place && ::rename(tmp.c_str(), path.c_str()) != 0) {
    return ErrnoStatus(errno, StrCat("cannot rename ", tmp, " to ", path));
  }
  file.Release();
  return absl::OkStatus();
}

bool LooksLikeTraceBinary(std::string_view first_bytes) {
  return first_bytes.size() >= bf::kMagicSize &&
         std::memcmp(first_bytes.data(), bf::kMagic, bf::kMagicSize) == 0;
}

absl::StatusOr<Trace> ReadTraceBinary(const std::string& path, const BinaryReadOptions& options) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, StrCat("cannot open ", path));
  absl::Cleanup close_fd = [fd] { ::close(fd); };
  struct stat st;
  if (::fstat(fd, &st) != 0) return ErrnoStatus(errno, StrCat("cannot stat ", path));
  if (S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(StrCat(path, " is a directory, expected a file"));
  }
  const auto file_size = static_cast<uint64_t>(st.st_size);

  // The fixed header first, so that a file of another kind is refused before it is mapped.
  char header[bf::kHeaderSize] = {};
  size_t header_read = 0;
  while (header_read < bf::kHeaderSize) {
    ssize_t r = ::pread(fd, header + header_read, bf::kHeaderSize - header_read,
                        static_cast<off_t>(header_read));
    if (r < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(errno, StrCat("cannot read ", path));
    }
    if (r == 0) break;
    header_read += static_cast<size_t>(r);
  }
  if (!LooksLikeTraceBinary(std::string_view(header, header_read))) {
    return DataLoss(path, "not a tiergym binary trace (the file does not start with TGTRACE)");
  }
  if (header_read < bf::kHeaderSize) {
    return DataLoss(path, StrCat("truncated: ", header_read, " bytes, shorter than the ",
                                 bf::kHeaderSize, "-byte header"));
  }
  const uint32_t version = bf::Load32(header + bf::kOffVersion);
  if (version > bf::kVersion) {
    return absl::UnimplementedError(
        StrCat(path, ": binary trace format version ", version,
               " is newer than the version this reader knows (", bf::kVersion,
               "); read it with a newer tiergym, or convert it to CSV there"));
  }
  if (version == 0) {
    return DataLoss(path, "format version 0 does not exist");
  }
  const uint64_t recorded_size = bf::Load64(header + bf::kOffFileSize);
  const bool size_matches = recorded_size == file_size;

  void* base = ::mmap(nullptr, file_size, PROT_READ,
                      MAP_PRIVATE | (options.populate && size_matches ? MAP_POPULATE : 0), fd, 0);
  const int mmap_errno = errno;
  std::move(close_fd).Invoke();  // the mapping, if any, outlives the descriptor
  if (base == MAP_FAILED) return ErrnoStatus(mmap_errno, StrCat("cannot map ", path));
  auto mapping = std::make_shared<const Mapping>(base, file_size);
  const uint8_t* file = mapping->data();
  if (!size_matches) {
    if (recorded_size < file_size) {
      return DataLoss(path, StrCat("the header records ", recorded_size, " bytes but the file has ",
                                   file_size, " (bytes appended after the end)"));
    }
    return DataLoss(
        path, StrCat("truncated: the header records ", recorded_size, " bytes but the file has ",
                     file_size, "; it ends inside ", DescribeOffset(file, file_size, file_size)));
  }

  // Regions of the header, checked against the file before anything in them is read.
  const uint32_t header_size = bf::Load32(header + bf::kOffHeaderSize);
  const uint32_t flags = bf::Load32(header + bf::kOffFlags);
  const uint32_t num_columns = bf::Load32(header + bf::kOffNumColumns);
  const uint64_t num_samples = bf::Load64(header + bf::kOffNumSamples);
  const uint64_t num_marks = bf::Load64(header + bf::kOffNumMarks);
  const uint64_t directory_offset = bf::Load64(header + bf::kOffDirectoryOffset);
  const uint64_t directory_size = uint64_t{num_columns} * bf::kDirectoryEntrySize;
  const uint64_t metadata_offset = bf::Load64(header + bf::kOffMetadataOffset);
  const uint64_t metadata_size = bf::Load64(header + bf::kOffMetadataSize);
  const uint64_t marks_offset = bf::Load64(header + bf::kOffMarksOffset);
  const uint64_t marks_size = bf::Load64(header + bf::kOffMarksSize);
  if (header_size < bf::kHeaderSize || header_size > file_size) {
    return DataLoss(path, StrCat("header: header size ", header_size, " is outside [",
                                 bf::kHeaderSize, ", file size ", file_size, "]"));
  }
  if (!InFile(directory_offset, directory_size, file_size)) {
    return DataLoss(path,
                    StrCat("header: the column directory (", num_columns, " entries at offset ",
                           directory_offset, ") runs past the end of the file"));
  }
  if (!InFile(metadata_offset, metadata_size, file_size)) {
    return DataLoss(path, StrCat("header: the metadata block (", metadata_size, " bytes at offset ",
                                 metadata_offset, ") runs past the end of the file"));
  }
  if (num_marks >= file_size / bf::kMarkRecordSize ||
      marks_size != (num_marks + 1) * bf::kMarkRecordSize ||
      !InFile(marks_offset, marks_size, file_size)) {
    return DataLoss(
        path, StrCat("header: the marks table (", num_marks, " marks and the end, ", marks_size,
                     " bytes at offset ", marks_offset, ") does not fit the file"));
  }

  // Header checksum: the header with its checksum field as zero, then the directory, the
  // metadata and the marks.
  {
    std::string zeroed(reinterpret_cast<const char*>(file), header_size);
    std::memset(zeroed.data() + bf::kOffHeaderCrc, 0, 4);
    uint32_t crc = Crc32c(zeroed.data(), zeroed.size());
    crc = Crc32c(file + directory_offset, directory_size, crc);
    crc = Crc32c(file + metadata_offset, metadata_size, crc);
    crc = Crc32c(file + marks_offset, marks_size, crc);
    const uint32_t stored = bf::Load32(header + bf::kOffHeaderCrc);
    if (crc != stored) {
      return DataLoss(
          path, StrCat("header: checksum mismatch (stored ", Hex32(stored), ", computed ",
                       Hex32(crc), "): the header, directory, metadata or marks are corrupt"));
    }
  }
  if ((flags & ~bf::kKnownFlags) != 0) {
    return DataLoss(path, StrCat("header: unknown flag bits ", Hex32(flags & ~bf::kKnownFlags)));
  }
  if (num_samples > file_size) {
    return DataLoss(
        path, StrCat("header: ", num_samples, " samples cannot fit in ", file_size, " bytes"));
  }

  // Column directory.
  ColumnLocation found[kNumKnownColumns];
  for (uint32_t i = 0; i < num_columns; ++i) {
    const uint8_t* e = file + directory_offset + uint64_t{i} * bf::kDirectoryEntrySize;
    const uint32_t id = bf::Load32(e + bf::kOffEntryColumnId);
    const uint32_t element_size = bf::Load32(e + bf::kOffEntryElementSize);
    const uint64_t offset = bf::Load64(e + bf::kOffEntryOffset);
    const uint64_t size_bytes = bf::Load64(e + bf::kOffEntrySize);
    const ColumnSpec* spec = FindSpec(id);
    const std::string name =
        spec != nullptr ? StrCat("column ", spec->name) : StrCat("column with id ", id);
    if (!InFile(offset, size_bytes, file_size)) {
      return DataLoss(path, StrCat(name, ": ", size_bytes, " bytes at offset ", offset,
                                   " run past the end of the file (", file_size, " bytes)"));
    }
    // Columns of ids this version does not know are skipped (see FORMAT.md, versioning).
    if (spec == nullptr) continue;
    ColumnLocation& loc = found[spec - kColumnSpecs];
    if (loc.present) return DataLoss(path, StrCat(name, ": appears twice in the directory"));
    if (element_size != spec->element_size) {
      return DataLoss(
          path, StrCat(name, ": element size ", element_size, ", expected ", spec->element_size));
    }
    if (offset % bf::kColumnAlignment != 0) {
      return DataLoss(
          path, StrCat(name, ": offset ", offset, " is not a multiple of ", bf::kColumnAlignment));
    }
    if (size_bytes != num_samples * element_size) {
      return DataLoss(path, StrCat(name, ": ", size_bytes, " bytes for ", num_samples,
                                   " samples of ", element_size, " bytes"));
    }
    loc.offset = offset;
    loc.size_bytes = size_bytes;
    loc.crc = bf::Load32(e + bf::kOffEntryCrc);
    loc.present = true;
  }
  for (size_t k = 0; k < kNumKnownColumns; ++k) {
    const ColumnSpec& spec = kColumnSpecs[k];
    const bool expected = spec.flag == 0 || (flags & spec.flag) != 0;
    if (found[k].present != expected) {
      return DataLoss(path, StrCat("column ", spec.name,
                                   expected ? ": missing from the directory"
                                            : ": in the directory but not in the header flags"));
    }
    if (found[k].present && options.verify_checksums) {
      const uint32_t crc = Crc32c(file + found[k].offset, found[k].size_bytes);
      if (crc != found[k].crc) {
        return DataLoss(path, StrCat("column ", spec.name, ": checksum mismatch (stored ",
                                     Hex32(found[k].crc), ", computed ", Hex32(crc), ")"));
      }
    }
  }

  // Metadata entries.
  std::vector<std::pair<std::string, std::string>> entries;
  {
    const uint8_t* p = file + metadata_offset;
    uint64_t left = metadata_size;
    auto take_u32 = [&](uint32_t* v) {
      if (left < 4) return false;
      *v = bf::Load32(p);
      p += 4;
      left -= 4;
      return true;
    };
    auto take_string = [&](std::string* s) {
      uint32_t len;
      if (!take_u32(&len) || len > left) return false;
      s->assign(reinterpret_cast<const char*>(p), len);
      p += len;
      left -= len;
      return true;
    };
    uint32_t num_entries = 0;
    if (!take_u32(&num_entries)) {
      return DataLoss(path, "metadata: the block is shorter than its entry count");
    }
    for (uint32_t i = 0; i < num_entries; ++i) {
      std::string key, value;
      if (!take_string(&key) || !take_string(&value)) {
        return DataLoss(path, StrCat("metadata: entry ", i, " of ", num_entries,
                                     " runs past the end of the block"));
      }
      entries.emplace_back(std::move(key), std::move(value));
    }
    if (left != 0) {
      return DataLoss(path, StrCat("metadata: ", left, " bytes after the last entry"));
    }
  }
  TG_ASSIGN_OR_RETURN(TraceMetadata metadata, MetadataFromEntries(path, std::move(entries)));

  // Marks and end.
  std::vector<PhaseEvent> marks(num_marks);
  PhaseEvent end;
  for (uint64_t i = 0; i <= num_marks; ++i) {
    const uint8_t* r = file + marks_offset + i * bf::kMarkRecordSize;
    PhaseEvent& ev = i < num_marks ? marks[i] : end;
    ev.time_ns = bf::Load64(r + bf::kOffMarkTimeNs);
    ev.tid = bf::Load32(r + bf::kOffMarkTid);
    ev.phase = bf::Load32(r + bf::kOffMarkPhase);
    ev.instructions = bf::Load64(r + bf::kOffMarkInstructions);
  }

  // Columns: spans into the mapping (offsets are 64-byte aligned and the mapping is
  // page-aligned, so every span is aligned for its type).
  auto span_of = [&](size_t k, auto* type_tag) {
    using T = std::remove_pointer_t<decltype(type_tag)>;
    const ColumnLocation& loc = found[k];
    return std::span<const T>(reinterpret_cast<const T*>(file + loc.offset),
                              loc.present ? num_samples : 0);
  };
  TraceColumns columns;
  columns.time_ns = span_of(0, static_cast<uint64_t*>(nullptr));
  columns.tid = span_of(1, static_cast<uint32_t*>(nullptr));
  columns.phase = span_of(2, static_cast<uint32_t*>(nullptr));
  columns.instructions = span_of(3, static_cast<uint64_t*>(nullptr));
  columns.address = span_of(4, static_cast<uint64_t*>(nullptr));
  columns.op = span_of(5, static_cast<uint8_t*>(nullptr));
  columns.weight = span_of(6, static_cast<uint32_t*>(nullptr));
  columns.cpu = span_of(7, static_cast<uint32_t*>(nullptr));
  columns.storage = std::move(mapping);
  OptionalColumns optional;
  optional.op = (flags & bf::kFlagOp) != 0;
  optional.weight = (flags & bf::kFlagWeight) != 0;
  optional.cpu = (flags & bf::kFlagCpu) != 0;
  return Trace::Create(path, std::move(metadata), optional, std::move(columns), std::move(marks),
                       end);
}

}  // namespace tiergym

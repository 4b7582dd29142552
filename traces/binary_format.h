// Constants of the tiergym binary trace format, version 1, shared by its reader and its
// writer (traces/trace_binary.cc). traces/FORMAT.md describes every byte; this header is
// its machine-readable half. All integers are little-endian.
//
//   [header 128 B][column directory][metadata][marks] pad [column] pad [column] ...
//
// Thread-safe: constants and pure functions only.
#ifndef TIERGYM_TRACES_BINARY_FORMAT_H_
#define TIERGYM_TRACES_BINARY_FORMAT_H_

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace tiergym::binary_format {

static_assert(std::endian::native == std::endian::little,
              "the binary trace format is little-endian and mapped as is");

inline constexpr char kMagic[8] = {'T', 'G', 'T', 'R', 'A', 'C', 'E', '\0'};
inline constexpr size_t kMagicSize = 8;
inline constexpr uint32_t kVersion = 1;
inline constexpr char kFileExtension[] = ".tgt";

// Fixed header: field offsets.
inline constexpr size_t kHeaderSize = 128;
inline constexpr size_t kOffMagic = 0;             // 8 bytes
inline constexpr size_t kOffVersion = 8;           // u32
inline constexpr size_t kOffHeaderSize = 12;       // u32
inline constexpr size_t kOffFlags = 16;            // u32, kFlag*
inline constexpr size_t kOffNumColumns = 20;       // u32
inline constexpr size_t kOffNumSamples = 24;       // u64
inline constexpr size_t kOffNumMarks = 32;         // u64, marks without the end event
inline constexpr size_t kOffFileSize = 40;         // u64
inline constexpr size_t kOffDirectoryOffset = 48;  // u64
inline constexpr size_t kOffMetadataOffset = 56;   // u64
inline constexpr size_t kOffMetadataSize = 64;     // u64
inline constexpr size_t kOffMarksOffset = 72;      // u64
inline constexpr size_t kOffMarksSize = 80;        // u64
inline constexpr size_t kOffHeaderCrc = 88;        // u32
// Bytes [92, 128) are reserved and written as zero.

// Header flags: which optional columns the trace has (OptionalColumns).
inline constexpr uint32_t kFlagOp = 1u << 0;
inline constexpr uint32_t kFlagWeight = 1u << 1;
inline constexpr uint32_t kFlagCpu = 1u << 2;
inline constexpr uint32_t kKnownFlags = kFlagOp | kFlagWeight | kFlagCpu;

// Column directory entry: 32 bytes.
inline constexpr size_t kDirectoryEntrySize = 32;
inline constexpr size_t kOffEntryColumnId = 0;     // u32, ColumnId
inline constexpr size_t kOffEntryElementSize = 4;  // u32, bytes per value
inline constexpr size_t kOffEntryOffset = 8;       // u64, from the start of the file
inline constexpr size_t kOffEntrySize = 16;        // u64, bytes
inline constexpr size_t kOffEntryCrc = 24;         // u32, CRC-32C of the column's bytes
// Bytes [28, 32) of an entry are reserved and written as zero.

enum ColumnId : uint32_t {
  kColumnTimeNs = 1,        // u64
  kColumnTid = 2,           // u32
  kColumnPhase = 3,         // u32
  kColumnInstructions = 4,  // u64
  kColumnAddress = 5,       // u64
  kColumnOp = 6,            // u8, only with kFlagOp
  kColumnWeight = 7,        // u32, only with kFlagWeight
  kColumnCpu = 8,           // u32, only with kFlagCpu
};

// Every column starts at a multiple of this many bytes from the start of the file.
inline constexpr size_t kColumnAlignment = 64;

// One mark (and, last, the end event) in the marks table: 24 bytes.
inline constexpr size_t kMarkRecordSize = 24;
inline constexpr size_t kOffMarkTimeNs = 0;         // u64
inline constexpr size_t kOffMarkTid = 8;            // u32
inline constexpr size_t kOffMarkPhase = 12;         // u32
inline constexpr size_t kOffMarkInstructions = 16;  // u64

// Little-endian loads and stores at any alignment.
inline uint32_t Load32(const void* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline uint64_t Load64(const void* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void Store32(void* p, uint32_t v) { std::memcpy(p, &v, sizeof v); }
inline void Store64(void* p, uint64_t v) { std::memcpy(p, &v, sizeof v); }

// `offset` rounded up to the column alignment.
inline constexpr uint64_t AlignColumn(uint64_t offset) {
  return (offset + kColumnAlignment - 1) / kColumnAlignment * kColumnAlignment;
}

}  // namespace tiergym::binary_format

#endif  // TIERGYM_TRACES_BINARY_FORMAT_H_

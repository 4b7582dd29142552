// CRC-32C (Castagnoli), the checksum of the binary trace format (traces/FORMAT.md).
//
// Polynomial 0x1EDC6F41 (0x82F63B78 bit-reflected), initial value and final XOR 0xFFFFFFFF,
// input and output reflected: the CRC of iSCSI, ext4 and SSE4.2's crc32 instruction.
// Crc32c("123456789") == 0xE3069283. On x86-64 CPUs with SSE4.2 the crc32 instruction is
// used (chosen at run time); elsewhere a portable slicing-by-8 table version. Both give
// the same values. Thread-safe: pure functions over constant tables.
//
// Written here, not taken from a library: Debian 12 packages no C or C++ CRC-32C library
// (Google's crc32c is not in it; Abseil's absl/crc came with 20230125, after the 20220623
// that Debian 12 ships; libcrcutil-dev, a generic-polynomial CRC library, would be a
// dependency for one function). Once Abseil 20230125 or later is the baseline, Crc32c()
// becomes absl::ExtendCrc32c and this file goes.
#ifndef TIERGYM_TRACES_BASE_CRC32C_H_
#define TIERGYM_TRACES_BASE_CRC32C_H_

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace tiergym {

// The CRC-32C of `n` bytes at `data`. `init` is the CRC of bytes that come before them,
// so Crc32c(b, nb, Crc32c(a, na)) equals the CRC of a followed by b; 0 starts afresh.
uint32_t Crc32c(const void* data, size_t n, uint32_t init = 0);

inline uint32_t Crc32c(std::string_view bytes, uint32_t init = 0) {
  return Crc32c(bytes.data(), bytes.size(), init);
}

namespace crc32c_internal {

// The two implementations behind Crc32c(), exposed so that tests can compare them.
uint32_t Crc32cPortable(const void* data, size_t n, uint32_t init);
// True when the CPU has the SSE4.2 crc32 instruction.
bool HardwareCrc32cAvailable();
// REQUIRES: HardwareCrc32cAvailable().
uint32_t Crc32cHardware(const void* data, size_t n, uint32_t init);

}  // namespace crc32c_internal
}  // namespace tiergym

#endif  // TIERGYM_TRACES_BASE_CRC32C_H_

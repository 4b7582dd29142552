// CRC-32C written from its definition: the message, bit-reflected, is multiplied by x^32
// and reduced modulo P(x) = 0x1EDC6F41; in the reflected representation used here bit 31
// of a register holds the coefficient of x^0 and bit 0 that of x^31, so multiplying by x
// is a right shift that folds x^32 back in as 0x82F63B78.
//
// Portable path: slicing-by-8. Table[k][b] is the register after feeding byte b followed
// by k zero bytes into a zero register, so eight input bytes are consumed with eight
// lookups that do not depend on each other.
//
// Hardware path: the SSE4.2 crc32 instruction computes the same register update eight
// bytes at a time, but each instruction waits for the previous one (latency 3 cycles,
// throughput 1). Large inputs are therefore cut into three adjacent blocks of kBlockBytes
// whose CRCs run interleaved; since the update is linear, the CRC of A|B|C equals
// shift(crc(A), 2 blocks) ^ shift(crc0(B), 1 block) ^ crc0(C), where crc0 starts from a
// zero register and shift(r, n) multiplies r by x^(8n) mod P, done with 4 table lookups.
#include "traces/base/crc32c.h"

#include <array>
#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
#define TIERGYM_CRC32C_X86 1
#endif

namespace tiergym {
namespace crc32c_internal {
namespace {

constexpr uint32_t kReflectedPoly = 0x82F63B78u;
constexpr uint32_t kOne = 0x80000000u;  // the polynomial 1, reflected

// r * x mod P.
constexpr uint32_t MulX(uint32_t r) { return (r >> 1) ^ ((r & 1u) ? kReflectedPoly : 0u); }

// a * b mod P.
constexpr uint32_t MulMod(uint32_t a, uint32_t b) {
  uint32_t product = 0;
  for (int i = 0; i < 32; ++i) {  // coefficient of x^i of a is bit 31 - i
    if (a & (kOne >> i)) product ^= b;
    b = MulX(b);
  }
  return product;
}

// x^(8 * num_bytes) mod P: the factor that appending num_bytes zero bytes applies.
constexpr uint32_t ZeroBytesFactor(size_t num_bytes) {
  uint32_t r = kOne;
  for (size_t i = 0; i < 8 * num_bytes; ++i) r = MulX(r);
  return r;
}

using SliceTables = std::array<std::array<uint32_t, 256>, 8>;

constexpr SliceTables MakeSliceTables() {
  SliceTables t{};
  for (uint32_t b = 0; b < 256; ++b) {
    uint32_t r = b;
    for (int bit = 0; bit < 8; ++bit) r = MulX(r);
    t[0][b] = r;
  }
  for (int k = 1; k < 8; ++k) {
    for (uint32_t b = 0; b < 256; ++b) {
      t[k][b] = (t[k - 1][b] >> 8) ^ t[0][t[k - 1][b] & 0xffu];
    }
  }
  return t;
}

constexpr SliceTables kSlice = MakeSliceTables();

inline uint32_t LoadLe32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 |
         static_cast<uint32_t>(p[2]) << 16 | static_cast<uint32_t>(p[3]) << 24;
}

#ifdef TIERGYM_CRC32C_X86

constexpr size_t kBlockBytes = 4096;

// Table[k][b] = (b << 8k) * x^(8 * num_bytes) mod P, so that shifting a register over
// num_bytes zero bytes is four lookups.
using ShiftTables = std::array<std::array<uint32_t, 256>, 4>;

constexpr ShiftTables MakeShiftTables(size_t num_bytes) {
  ShiftTables t{};
  const uint32_t factor = ZeroBytesFactor(num_bytes);
  for (int k = 0; k < 4; ++k) {
    for (uint32_t b = 0; b < 256; ++b) t[k][b] = MulMod(b << (8 * k), factor);
  }
  return t;
}

constexpr ShiftTables kShiftOneBlock = MakeShiftTables(kBlockBytes);
constexpr ShiftTables kShiftTwoBlocks = MakeShiftTables(2 * kBlockBytes);

inline uint32_t Shift(const ShiftTables& t, uint32_t r) {
  return t[0][r & 0xffu] ^ t[1][(r >> 8) & 0xffu] ^ t[2][(r >> 16) & 0xffu] ^ t[3][r >> 24];
}

#endif  // TIERGYM_CRC32C_X86

}  // namespace

uint32_t Crc32cPortable(const void* data, size_t n, uint32_t init) {
  const auto* p = static_cast<const uint8_t*>(data);
  uint32_t r = ~init;
  for (; n >= 8; n -= 8, p += 8) {
    const uint32_t lo = LoadLe32(p) ^ r;
    const uint32_t hi = LoadLe32(p + 4);
    r = kSlice[7][lo & 0xffu] ^ kSlice[6][(lo >> 8) & 0xffu] ^ kSlice[5][(lo >> 16) & 0xffu] ^
        kSlice[4][lo >> 24] ^ kSlice[3][hi & 0xffu] ^ kSlice[2][(hi >> 8) & 0xffu] ^
        kSlice[1][(hi >> 16) & 0xffu] ^ kSlice[0][hi >> 24];
  }
  for (; n > 0; --n, ++p) r = (r >> 8) ^ kSlice[0][(r ^ *p) & 0xffu];
  return ~r;
}

#ifdef TIERGYM_CRC32C_X86

bool HardwareCrc32cAvailable() {
  static const bool available = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("sse4.2") != 0;
  }();
  return available;
}

__attribute__((target("sse4.2"))) uint32_t Crc32cHardware(const void* data, size_t n,
                                                          uint32_t init) {
  const auto* p = static_cast<const uint8_t*>(data);
  uint64_t r = static_cast<uint32_t>(~init);
  // Byte steps up to an 8-byte boundary, so that the 8-byte loads below are aligned.
  for (; n > 0 && (reinterpret_cast<uintptr_t>(p) & 7u) != 0; --n, ++p) {
    r = _mm_crc32_u8(static_cast<uint32_t>(r), *p);
  }
  for (; n >= 3 * kBlockBytes; n -= 3 * kBlockBytes, p += 3 * kBlockBytes) {
    uint64_t a = r, b = 0, c = 0;
    for (size_t i = 0; i < kBlockBytes; i += 8) {
      uint64_t wa, wb, wc;
      std::memcpy(&wa, p + i, 8);
      std::memcpy(&wb, p + kBlockBytes + i, 8);
      std::memcpy(&wc, p + 2 * kBlockBytes + i, 8);
      a = _mm_crc32_u64(a, wa);
      b = _mm_crc32_u64(b, wb);
      c = _mm_crc32_u64(c, wc);
    }
    r = Shift(kShiftTwoBlocks, static_cast<uint32_t>(a)) ^
        Shift(kShiftOneBlock, static_cast<uint32_t>(b)) ^ static_cast<uint32_t>(c);
  }
  for (; n >= 8; n -= 8, p += 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    r = _mm_crc32_u64(r, w);
  }
  for (; n > 0; --n, ++p) r = _mm_crc32_u8(static_cast<uint32_t>(r), *p);
  return ~static_cast<uint32_t>(r);
}

#else  // !TIERGYM_CRC32C_X86

bool HardwareCrc32cAvailable() { return false; }

uint32_t Crc32cHardware(const void* data, size_t n, uint32_t init) {
  return Crc32cPortable(data, n, init);
}

#endif  // TIERGYM_CRC32C_X86

}  // namespace crc32c_internal

uint32_t Crc32c(const void* data, size_t n, uint32_t init) {
  if (crc32c_internal::HardwareCrc32cAvailable()) {
    return crc32c_internal::Crc32cHardware(data, n, init);
  }
  return crc32c_internal::Crc32cPortable(data, n, init);
}

}  // namespace tiergym

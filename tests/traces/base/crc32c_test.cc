#include "traces/base/crc32c.h"

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace tiergym {
namespace {

using crc32c_internal::Crc32cHardware;
using crc32c_internal::Crc32cPortable;
using crc32c_internal::HardwareCrc32cAvailable;

// CRC-32C one bit at a time, straight from the definition, as a third opinion.
uint32_t BitwiseCrc32c(const std::string& bytes) {
  uint32_t r = 0xffffffffu;
  for (unsigned char byte : bytes) {
    r ^= byte;
    for (int bit = 0; bit < 8; ++bit) r = (r >> 1) ^ ((r & 1u) ? 0x82F63B78u : 0u);
  }
  return ~r;
}

std::string RandomBytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng() & 0xff);
  return s;
}

// Known answers: the CRC catalogue's check value and the iSCSI vectors of RFC 3720 B.4.
struct KnownVector {
  std::string name;
  std::string bytes;
  uint32_t crc;
};

std::vector<KnownVector> KnownVectors() {
  std::string ascending, descending;
  for (int i = 0; i < 32; ++i) {
    ascending.push_back(static_cast<char>(i));
    descending.push_back(static_cast<char>(31 - i));
  }
  return {
      {"check", "123456789", 0xE3069283u},
      {"empty", "", 0x00000000u},
      {"32 zeros", std::string(32, '\0'), 0x8A9136AAu},
      {"32 ones", std::string(32, '\xff'), 0x62A8AB43u},
      {"ascending", ascending, 0x46DD794Eu},
      {"descending", descending, 0x113FDB5Cu},
  };
}

TEST(Crc32cTest, MatchesKnownVectors) {
  for (const KnownVector& v : KnownVectors()) {
    EXPECT_EQ(Crc32c(v.bytes), v.crc) << v.name;
    EXPECT_EQ(BitwiseCrc32c(v.bytes), v.crc) << v.name;
  }
}

TEST(Crc32cTest, PortablePathMatchesKnownVectors) {
  for (const KnownVector& v : KnownVectors()) {
    EXPECT_EQ(Crc32cPortable(v.bytes.data(), v.bytes.size(), 0), v.crc) << v.name;
  }
}

TEST(Crc32cTest, HardwarePathMatchesKnownVectors) {
  if (!HardwareCrc32cAvailable()) GTEST_SKIP() << "this CPU has no SSE4.2 crc32 instruction";
  for (const KnownVector& v : KnownVectors()) {
    EXPECT_EQ(Crc32cHardware(v.bytes.data(), v.bytes.size(), 0), v.crc) << v.name;
  }
}

// Lengths and start offsets that exercise every code path: the unaligned head, the
// 3-block interleaved loop (3 * 4096 bytes), the 8-byte loop and the byte tail.
TEST(Crc32cTest, AllPathsAgreeOnEveryLengthAndAlignment) {
  const std::string data = RandomBytes(3 * 3 * 4096 + 64, 42);
  const std::vector<size_t> lengths = {0,
                                       1,
                                       7,
                                       8,
                                       9,
                                       63,
                                       64,
                                       65,
                                       4095,
                                       4096,
                                       3 * 4096 - 1,
                                       3 * 4096,
                                       3 * 4096 + 1,
                                       3 * 4096 + 13,
                                       6 * 4096 + 8,
                                       9 * 4096 + 17};
  for (size_t offset = 0; offset < 8; ++offset) {
    for (size_t n : lengths) {
      ASSERT_LE(offset + n, data.size());
      const std::string slice = data.substr(offset, n);
      const uint32_t expected = BitwiseCrc32c(slice);
      EXPECT_EQ(Crc32cPortable(data.data() + offset, n, 0), expected)
          << "offset " << offset << " length " << n;
      EXPECT_EQ(Crc32c(data.data() + offset, n), expected)
          << "offset " << offset << " length " << n;
      if (HardwareCrc32cAvailable()) {
        EXPECT_EQ(Crc32cHardware(data.data() + offset, n, 0), expected)
            << "offset " << offset << " length " << n;
      }
    }
  }
}

TEST(Crc32cTest, ExtendingWithInitEqualsCrcOfConcatenation) {
  const std::string data = RandomBytes(50000, 7);
  const uint32_t whole = Crc32c(data);
  for (size_t cut :
       {size_t{0}, size_t{1}, size_t{5000}, size_t{12289}, size_t{49999}, size_t{50000}}) {
    const std::string a = data.substr(0, cut), b = data.substr(cut);
    EXPECT_EQ(Crc32c(b, Crc32c(a)), whole) << "cut at " << cut;
    EXPECT_EQ(Crc32cPortable(b.data(), b.size(), Crc32cPortable(a.data(), a.size(), 0)), whole)
        << "cut at " << cut;
  }
}

TEST(Crc32cTest, DetectsASingleFlippedBit) {
  std::string data = RandomBytes(100000, 3);
  const uint32_t before = Crc32c(data);
  data[76543] ^= 0x10;
  EXPECT_NE(Crc32c(data), before);
}

}  // namespace
}  // namespace tiergym

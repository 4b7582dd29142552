// Deterministic random numbers for the synthetic generator.
//
// Every random stream is a std::mt19937_64 (its sequence is fixed by the C++ standard)
// seeded from (seed, application name, stream name) through the SplitMix64 finaliser and
// FNV-1a string hashes, see StreamSeed(). Draws are converted to numbers with the bit
// manipulations below, never with std::*_distribution, whose output is
// implementation-defined. Same inputs give the same numbers on every platform.
// Stateless functions; a generator object belongs to one thread.
#ifndef TIERGYM_TRACES_SYNTH_RNG_H_
#define TIERGYM_TRACES_SYNTH_RNG_H_

#include <cstdint>
#include <random>
#include <string_view>

namespace tiergym::synth {

// The SplitMix64 output function (Steele et al.), a bijective 64-bit mixer.
inline uint64_t Mix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// 64-bit FNV-1a of the bytes of `s`.
inline uint64_t Fnv1a64(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

// The seed of stream `stream` (e.g. "samples/profile/hbm") of application `app`:
// Mix64(Mix64(Mix64(seed) ^ Fnv1a64(app)) ^ Fnv1a64(stream)).
inline uint64_t StreamSeed(uint64_t seed, std::string_view app, std::string_view stream) {
  return Mix64(Mix64(Mix64(seed) ^ Fnv1a64(app)) ^ Fnv1a64(stream));
}

// Uniform in [0, 1) with 53 random bits.
inline double UniformDouble(std::mt19937_64& g) {
  return static_cast<double>(g() >> 11) * 0x1.0p-53;
}

// Uniform in [0, n) (Lemire's multiply-shift, without the rejection step: the bias is
// below n / 2^64). REQUIRES: n > 0.
inline uint64_t UniformIndex(std::mt19937_64& g, uint64_t n) {
  return static_cast<uint64_t>((static_cast<unsigned __int128>(g()) * n) >> 64);
}

// Approximately standard normal: the sum of four uniforms (Irwin-Hall), centred and
// scaled to unit variance; bounded to +-3.46, which suits run-to-run noise.
inline double StandardNoise(std::mt19937_64& g) {
  double s = 0;
  for (int i = 0; i < 4; ++i) s += UniformDouble(g);
  return (s - 2.0) * 1.7320508075688772;  // sqrt(3)
}

}  // namespace tiergym::synth

#endif  // TIERGYM_TRACES_SYNTH_RNG_H_

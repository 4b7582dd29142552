// DumpBytes: builds McKernel PEBS dumps byte by byte for the tests, in the order and with
// the words the patched kernel writes (kernel_patches/0002, dump_pebs_file() and
// harvest_pebs_buffer()), from the constants of the shared ABI header.
#ifndef TIERGYM_TESTS_PROFILER_MCKERNEL_DUMP_BYTES_H_
#define TIERGYM_TESTS_PROFILER_MCKERNEL_DUMP_BYTES_H_

#include <cstdint>
#include <initializer_list>
#include <string>

#include "kernel_patches/abi/tiergym_mckernel.h"

namespace tiergym::mckernel {

// Builds a dump byte by byte in the order the patched kernel writes it (patch 0002,
// dump_pebs_file() and harvest_pebs_buffer()): the mmap records, a watermark, the munmap
// records, a watermark, then the PEBS stream. Words are little-endian.
class DumpBytes {
 public:
  // cbuf_write_one() of one word.
  DumpBytes& Word(uint64_t w) {
    for (int i = 0; i < TIERGYM_DUMP_WORD_BYTES; ++i) {
      bytes_.push_back(static_cast<char>(w >> (8 * i)));
    }
    return *this;
  }
  // do_mmap() of TIERGYM_DUMP_MMAP_MIN_BYTES or more; do_munmap().
  DumpBytes& Vma(uint64_t tsc, uint64_t start, uint64_t length) {
    return Word(tsc).Word(start).Word(length);
  }
  // The watermark dump_pebs_file() writes after each of the two VMA sections.
  DumpBytes& EndSection() { return Word(TIERGYM_DUMP_WATERMARK); }
  // harvest_pebs_buffer(): [watermark, TSC, instructions, count, addresses...].
  DumpBytes& Batch(uint64_t tsc, uint64_t instructions, std::initializer_list<uint64_t> addrs) {
    Word(TIERGYM_DUMP_WATERMARK).Word(tsc).Word(instructions).Word(addrs.size());
    for (uint64_t a : addrs) Word(a);
    return *this;
  }
  // The word harvest_pebs_buffer() writes after the batch of a phasemark() call.
  DumpBytes& Phasemark() { return Word(TIERGYM_DUMP_PHASEMARK); }
  // Cuts the last `n` bytes (a dump cut short).
  DumpBytes& Cut(size_t n) {
    bytes_.resize(bytes_.size() - n);
    return *this;
  }

  size_t size() const { return bytes_.size(); }
  const std::string& bytes() const { return bytes_; }

 private:
  std::string bytes_;
};

// A dump with no VMA records: both section watermarks, then the stream.
inline DumpBytes Stream() {
  DumpBytes d;
  d.EndSection().EndSection();
  return d;
}

}  // namespace tiergym::mckernel

#endif  // TIERGYM_TESTS_PROFILER_MCKERNEL_DUMP_BYTES_H_

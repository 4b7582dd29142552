// libFuzzer target: the binary trace reader (traces/trace_binary.h), which maps a file:
// the input is written to an anonymous memory file and read through /proc/self/fd.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>

#include "traces/trace_binary.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const int fd = memfd_create("tiergym-fuzz.tgt", 0);
  if (fd < 0) std::abort();
  if (ftruncate(fd, 0) != 0) std::abort();
  for (size_t done = 0; done < size;) {
    const ssize_t n = pwrite(fd, data + done, size - done, static_cast<off_t>(done));
    if (n <= 0) std::abort();
    done += static_cast<size_t>(n);
  }
  (void)tiergym::LooksLikeTraceBinary(
      std::string_view(reinterpret_cast<const char*>(data), size < 64 ? size : 64));
  (void)tiergym::ReadTraceBinary("/proc/self/fd/" + std::to_string(fd));
  return 0;
}

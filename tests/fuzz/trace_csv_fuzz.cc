// libFuzzer target: the trace CSV reader (traces/trace_csv.h) on arbitrary text.
#include <cstdint>
#include <string_view>

#include "traces/trace_csv.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)tiergym::ParseTraceCsv(std::string_view(reinterpret_cast<const char*>(data), size),
                               "fuzz.csv");
  return 0;
}

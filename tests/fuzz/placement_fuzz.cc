// libFuzzer target: the placement reader (traces/placement.h) on arbitrary JSON text.
#include <cstdint>
#include <string_view>

#include "traces/placement.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)tiergym::ParsePlacement(std::string_view(reinterpret_cast<const char*>(data), size),
                                "fuzz.json");
  return 0;
}

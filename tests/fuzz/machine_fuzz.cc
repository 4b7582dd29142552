// libFuzzer target: the machine description reader (traces/machine.h) on arbitrary JSON.
#include <cstdint>
#include <string_view>

#include "traces/machine.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::StatusOr<tiergym::Machine> m = tiergym::ParseMachine(
      std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.json");
  if (m.ok()) (void)tiergym::MachineToJson(*m);
  return 0;
}

#include "traces/base/exit_status.h"

#include <iostream>

namespace tiergym {

int Fail(const absl::Status& status, int code, std::string_view prefix) {
  std::cerr << prefix << ": " << status.message() << "\n";
  return code;
}

int UsageFail(const absl::Status& status) {
  std::cerr << status.message() << "\n";
  return kExitUsage;
}

}  // namespace tiergym

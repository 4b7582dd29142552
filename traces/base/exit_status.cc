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

int RunCommand(std::string_view program, std::string_view version, const std::string& usage,
               const std::vector<Command>& commands, int argc, char** argv) {
  if (argc < 2) {
    std::cerr << usage;
    return kExitUsage;
  }
  const std::string command = argv[1];
  if (command == "--help" || command == "-h" || command == "help") {
    std::cout << usage;
    return kExitOk;
  }
  if (command == "--version") {
    std::cout << program << " " << version << "\n";
    return kExitOk;
  }
  for (const auto& [name, run] : commands) {
    if (name == command) return run(std::vector<std::string>(argv + 2, argv + argc));
  }
  std::cerr << program << ": unknown command '" << command << "'\n\n" << usage;
  return kExitUsage;
}

}  // namespace tiergym

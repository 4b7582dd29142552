// The standalone `tiergym-import-mckernel` command (see import_cli.h).
#include <string>
#include <vector>

#include "profiler/cli/import_cli.h"

int main(int argc, char** argv) {
  return tiergym::mckernel::RunImportMckernelCommand(
      std::vector<std::string>(argv + 1, argv + argc));
}

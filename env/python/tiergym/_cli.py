"""The `tiergym` console command of the package: runs the C++ `tiergym` installed inside it
(tiergym/_bin/tiergym, or $TIERGYM_BIN / $TIERGYM_BIN_DIR) with the same arguments, so that
`tiergym serve`, `tiergym trace ...`, `tiergym --help` and `tiergym --version` work from the
environment's bin/ directory."""

import os
import sys

from .connection import find_binary
from .errors import BinaryNotFound


def main(argv=None):
    args = sys.argv[1:] if argv is None else list(argv)
    try:
        # Never PATH: in a virtual environment `tiergym` on PATH is this very command.
        binary = find_binary(use_path=False)
    except BinaryNotFound as e:
        print(f"tiergym: {e}", file=sys.stderr)
        return 127
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(binary, [binary, *args])  # replaces this process: signals and exit status are the binary's


if __name__ == "__main__":
    sys.exit(main())

"""What the Python test modules share: the repository's path, the tiergym binary the
installed package runs, and the marker that skips a test, with the reason, when there is
no binary. The tests run with the package installed (`pip install -e ".[test]"`, which
./scripts/test.sh does); pytest puts agents_examples/ and this folder on sys.path
(pyproject.toml, [tool.pytest.ini_options]).

    from tiergym_testing import REPO, BINARY, SKIP_REASON, needs_binary
"""

import os
import pathlib

import pytest

import tiergym

REPO = pathlib.Path(__file__).resolve().parents[2]

try:
    BINARY = tiergym.find_binary()
    SKIP_REASON = ""
except tiergym.BinaryNotFound as e:  # pragma: no cover
    BINARY = None
    SKIP_REASON = str(e)

needs_binary = pytest.mark.skipif(BINARY is None, reason=SKIP_REASON)


def processes_with_env(marker):
    """Pids of the processes whose environment holds `marker` (an environment variable
    given to a subprocess is inherited by everything it starts: Ray's daemons and workers,
    private tiergym servers), to find those left behind."""
    key = marker.encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                if key in f.read():
                    found.append(int(entry))
        except OSError:
            continue
    return found


def command_line(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return "(gone)"

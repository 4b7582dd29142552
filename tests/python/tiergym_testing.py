"""What the Python test modules share: the repository's path, the tiergym binary the
installed package runs, and the marker that skips a test, with the reason, when there is
no binary. The tests run with the package installed (`pip install -e ".[test]"`, which
./scripts/test.sh does); pytest puts agents_examples/ and this folder on sys.path
(pyproject.toml, [tool.pytest.ini_options]).

    from tiergym_testing import REPO, BINARY, SKIP_REASON, needs_binary, server_fixture
    server = server_fixture("--threads", "2")   # the module's `server` fixture
    profile = small_profile(tmp_path)            # a server on it starts in a fraction of a second
"""

import os
import pathlib
import subprocess

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


def server_fixture(*args):
    """A module-scoped fixture: one `tiergym serve` with `args` (tiergym.Server) for the
    module's tests, closed after them; the tests are skipped when there is no binary."""

    @pytest.fixture(scope="module")
    def server():
        if BINARY is None:
            pytest.skip(SKIP_REASON)
        s = tiergym.Server(args=list(args))
        yield s
        s.close()

    return server


def small_profile(directory, app="minife", samples=20000):
    """A small synthetic profile of `app` on knl (binary traces, 20,000 samples) written into
    `directory`; returns its profile directory. A server serving it (--profiles) starts in a
    fraction of a second, where the bundled profiles take seconds: for tests that start
    servers again and again."""
    subprocess.run([BINARY, "trace", "synth", "--app", app, "--samples", str(samples),
                    "--no-runs", "--format", "bin", "--quiet", "--out", str(directory)],
                   check=True, capture_output=True)
    return pathlib.Path(directory) / app / "profile"


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


def arguments(pid):
    """The process's argv ([] once it is gone)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
    except OSError:
        return []


def command_line(pid):
    """The process's argv as one line ("(gone)" once it is gone)."""
    return " ".join(arguments(pid)) or "(gone)"

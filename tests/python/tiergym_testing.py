"""What the Python test modules share: the repository's paths on sys.path (the client in
env/python, the agents in agents_examples), the tiergym binary, and the marker that skips a
test, with the reason, when that binary is not built.

    from tiergym_testing import REPO, BINARY, SKIP_REASON, needs_binary
"""

import pathlib
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
for path in (REPO / "agents_examples", REPO / "env" / "python"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

import tiergym  # noqa: E402

try:
    BINARY = tiergym.find_binary()
    SKIP_REASON = ""
except tiergym.BinaryNotFound as e:  # pragma: no cover
    BINARY = None
    SKIP_REASON = str(e)

needs_binary = pytest.mark.skipif(BINARY is None, reason=SKIP_REASON)

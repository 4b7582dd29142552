"""The capacity test's small run (tests/soak/capacity.py --quick): 8 then 28 learner
connections of 4 sessions each against a server limited to 32 connections and 128
sessions, a reference client's episodes bit-identical throughout; past the limits, the
connections over 32 are closed at accept, the session over 128 and a configuration over
the memory budget are RESOURCE_EXHAUSTED, and the server lives on. (Latencies are printed,
not held to a bound: the suite's machine is busy with the other tests.)"""

import subprocess
import sys

from tiergym_testing import BINARY, REPO, needs_binary

pytestmark = needs_binary


def test_the_quick_capacity_run_meets_every_level_and_refuses_cleanly_past_them():
    out = subprocess.run([sys.executable, str(REPO / "tests" / "soak" / "capacity.py"),
                          "--binary", BINARY, "--quick"], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "every level met, refusals past the limits clean" in out.stdout
    assert "closed at accept" in out.stdout and "RESOURCE_EXHAUSTED" in out.stdout

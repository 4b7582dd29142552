"""tiergym with RLlib on Ray (installed from PyPI by the test command): PPO on a local Ray
cluster (ray.init(num_cpus=2)) whose two env runners each reach a tiergym server (a
private one each, and one shared server given by address), a few iterations of tiny
batches, then everything shut down: no Ray daemon, worker or tiergym server is left (every
process the run started carries a marker in its environment, which is how leftovers are
found). The run is agents_examples/rllib_env.py as a user runs it."""

import re
import subprocess
import sys
import time
import uuid

import pytest

import tiergym
from tiergym_testing import REPO, command_line, needs_binary, processes_with_env

pytestmark = needs_binary
SCRIPT = str(REPO / "agents_examples" / "rllib_env.py")
TINY = ["--iterations", "2", "--batch", "64", "--num-regions", "8", "--steps", "8",
        "--num-env-runners", "2", "--num-cpus", "2"]


def run_and_check_nothing_is_left(*args):
    marker = f"TIERGYM_TEST_MARKER={uuid.uuid4().hex}"
    name, value = marker.split("=")
    env = dict(__import__("os").environ, **{name: value}, RAY_DEDUP_LOGS="0")
    out = subprocess.run([sys.executable, SCRIPT, *TINY, *args], capture_output=True,
                         text=True, timeout=600, env=env)
    deadline = time.monotonic() + 30  # Ray's daemons and private servers wind down
    while processes_with_env(marker) and time.monotonic() < deadline:
        time.sleep(0.5)
    left = processes_with_env(marker)
    assert not left, [command_line(p) for p in left]
    return out


def iterations(stderr):
    return re.findall(r"iteration (\d+): ([0-9.]+) env steps, episode return mean (\S+),", stderr)


def test_ppo_with_a_private_server_per_env_runner():
    out = run_and_check_nothing_is_left()
    assert out.returncode == 0, out.stderr[-3000:]
    done = iterations(out.stderr)
    assert [i for i, _, _ in done] == ["0", "1"], out.stderr[-3000:]
    assert float(done[-1][1]) >= 128  # both iterations sampled their batches
    m = re.search(r"episode return mean (-?[0-9.]+)$", out.stdout.strip())
    assert m and -1 < float(m.group(1)) < 1, out.stdout  # a fractional speedup


def test_ppo_with_env_runners_sharing_one_server():
    server = tiergym.Server(args=["--threads", "2", "--quiet"])
    try:
        out = run_and_check_nothing_is_left("--addresses", server.endpoint)
        assert out.returncode == 0, out.stderr[-3000:]
        assert len(iterations(out.stderr)) == 2
        # The runners' sessions were made on this server (and closed when Ray stopped).
        connection = tiergym.Connection(server.endpoint)
        try:
            stats = connection.call("stats")
        finally:
            connection.close()
        assert stats["sessions_made"] >= 2 and stats["sessions"] == 0, stats
    finally:
        server.close()


def test_the_script_without_ray_says_how_to_install_it():
    code = ("import sys, runpy; sys.modules['ray'] = None; "
            f"sys.argv = ['rllib_env.py']; runpy.run_path({SCRIPT!r}, run_name='__main__')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 1 and "tiergym[rllib]" in out.stderr

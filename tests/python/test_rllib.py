"""tiergym with RLlib on Ray (installed from PyPI by the test command): PPO on a local Ray
cluster (ray.init(num_cpus=2)) whose two env runners each reach a tiergym server (a
private one each, and one shared server given by address), a few iterations of tiny
batches, then everything shut down: no Ray daemon, worker or tiergym server is left (every
process the run started carries a marker in its environment, which is how leftovers are
found). The run is agents_examples/rllib_env.py as a user runs it. With the shared server,
the runners are told to reconnect and the server is killed (SIGKILL) after the first
iteration and started again at its address: training goes on, and the episodes cut are
counted."""

import os
import re
import signal
import subprocess
import sys
import threading
import time
import uuid

import pytest

import tiergym
from tiergym_testing import REPO, command_line, needs_binary, processes_with_env

pytestmark = needs_binary
SCRIPT = str(REPO / "agents_examples" / "rllib_env.py")
TINY = ["--iterations", "2", "--batch", "64", "--num-regions", "8", "--steps", "8",
        "--num-env-runners", "2", "--num-cpus", "2"]


def run_and_check_nothing_is_left(*args, on_line=None):
    """Runs the script; on_line(line) sees each line of its stderr as it comes."""
    marker = f"TIERGYM_TEST_MARKER={uuid.uuid4().hex}"
    name, value = marker.split("=")
    env = dict(os.environ, **{name: value}, RAY_DEDUP_LOGS="0")
    p = subprocess.Popen([sys.executable, SCRIPT, *TINY, *args], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=env)
    err = []

    def read_stderr():
        for line in p.stderr:
            err.append(line)
            if on_line is not None:
                on_line(line)
    reader = threading.Thread(target=read_stderr, daemon=True)
    reader.start()
    try:
        stdout = p.stdout.read()
        p.wait(timeout=600)
    finally:
        if p.poll() is None:
            p.kill()
    reader.join(timeout=30)
    out = subprocess.CompletedProcess(p.args, p.returncode, stdout, "".join(err))
    deadline = time.monotonic() + 30  # Ray's daemons and private servers wind down
    while processes_with_env(marker) and time.monotonic() < deadline:
        time.sleep(0.5)
    left = processes_with_env(marker)
    assert not left, [command_line(p) for p in left]
    return out


def iterations(stderr):
    return re.findall(r"iteration (\d+): ([0-9.]+) env steps, episode return mean (\S+),", stderr)


def interrupted(stderr):
    """The episodes cut so far, as the last iteration's line reports them."""
    counts = re.findall(r"(\d+) episodes interrupted", stderr)
    return int(counts[-1]) if counts else None


def test_ppo_with_a_private_server_per_env_runner():
    out = run_and_check_nothing_is_left()
    assert out.returncode == 0, out.stderr[-3000:]
    done = iterations(out.stderr)
    assert [i for i, _, _ in done] == ["0", "1"], out.stderr[-3000:]
    assert float(done[-1][1]) >= 128  # both iterations sampled their batches
    m = re.search(r"episode return mean (-?[0-9.]+)$", out.stdout.strip())
    assert m and -1 < float(m.group(1)) < 1, out.stdout  # a fractional speedup


def test_ppo_with_env_runners_sharing_one_server_through_its_sigkill():
    server = tiergym.Server(args=["--threads", "2", "--quiet"])
    killed = []

    def kill_after_the_first_iteration(line):
        if line.startswith("iteration 0:") and not killed:
            killed.append(server.process.pid)
            os.kill(server.process.pid, signal.SIGKILL)
            server.process.wait(timeout=30)
            server.ensure_running()  # a new server at the same address

    try:
        # Episodes of 10 steps in fragments of 32: each runner is in an episode when the
        # server is killed between two iterations.
        out = run_and_check_nothing_is_left("--addresses", server.endpoint, "--reconnect",
                                            "--iterations", "3", "--steps", "10",
                                            on_line=kill_after_the_first_iteration)
        assert out.returncode == 0, out.stderr[-3000:]
        assert killed and server.restarts == 1
        assert [i for i, _, _ in iterations(out.stderr)] == ["0", "1", "2"], out.stderr[-3000:]
        # Both runners' episodes were cut (one environment each), and counted.
        assert interrupted(out.stderr) == 2, out.stderr[-3000:]
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

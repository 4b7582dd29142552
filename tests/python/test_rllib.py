"""tiergym with RLlib on Ray (installed from PyPI by the test command), all in one local Ray
session (ray.init(num_cpus=2), shared by the module's tests: starting Ray is most of what
a short training costs):

- single agent (agents_examples/rllib_env.py, its main() as a user runs the script, with
  the session already up): PPO whose two remote env runners each reach a tiergym server (a
  private one each, and one shared server given by address), a few iterations of tiny
  batches; with the shared server, the runners are told to reconnect and the server is
  killed (SIGKILL) after the first iteration and started again at its address: training
  goes on, and the episodes cut are counted;
- multi-agent (agents_examples/rllib_cosched.py): the co-scheduled tenants
  (tiergym.cosched's PettingZoo ParallelEnv) trained with RLlib's multi-agent API, a
  policy per tenant and one shared policy, a few iterations each.

Nothing is left behind: after each algorithm stops, no tiergym server it started runs;
after Ray shuts down at the end of the module, no Ray daemon or worker either (every
process the session started carries a marker in its environment, which is how leftovers
are found)."""

import os
import re
import signal
import subprocess
import sys
import time
import uuid

import numpy as np
import pytest

import tiergym
from tiergym_testing import REPO, arguments, command_line, needs_binary, processes_with_env

pytestmark = needs_binary
SCRIPT = str(REPO / "agents_examples" / "rllib_env.py")
TINY = ["--iterations", "2", "--batch", "64", "--num-regions", "8", "--steps", "8",
        "--num-env-runners", "2", "--num-cpus", "2"]
MARKER = "TIERGYM_TEST_MARKER"


def wait_until_gone(pids_of, seconds=30):
    deadline = time.monotonic() + seconds
    while pids_of() and time.monotonic() < deadline:
        time.sleep(0.5)
    return pids_of()


@pytest.fixture(scope="module")
def ray_session():
    """One local Ray cluster for the module; afterwards nothing it started is left."""
    ray = pytest.importorskip("ray")
    value = uuid.uuid4().hex
    marked = f"{MARKER}={value}"
    saved = {k: os.environ.get(k) for k in (MARKER, "RAY_DEDUP_LOGS", "PYTHONPATH")}
    # The env creators are the example modules' functions, which Ray's workers import by
    # name (a script's own functions travel by value): its folder on their path.
    path = os.pathsep.join(p for p in (str(REPO / "agents_examples"), saved["PYTHONPATH"]) if p)
    os.environ.update({MARKER: value, "RAY_DEDUP_LOGS": "0", "PYTHONPATH": path})
    try:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
        try:
            yield marked
        finally:
            ray.shutdown()
        left = wait_until_gone(lambda: processes_with_env(marked))
        assert not left, [command_line(p) for p in left]
    finally:
        for key, old in saved.items():
            if old is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = old


def is_server(pid):
    """Whether the process runs `tiergym serve` (the binary, or the package's launcher under
    Python): a program named tiergym followed by the word serve, not any command line that
    holds both (Ray's gcs_server under a clone named tiergym does)."""
    args = arguments(pid)
    return any(os.path.basename(a) == "tiergym" and b == "serve" for a, b in zip(args, args[1:]))


def servers_left(marker):
    return [p for p in processes_with_env(marker) if is_server(p)]


def owners(servers):
    """Each server's owner (--parent-pid), whether that owner still runs, and its command: a
    private server stops by itself within seconds of its owner, so a server left with its
    owner gone is the server's fault, one with its owner alive Ray's."""
    out = []
    for pid in servers:
        args = arguments(pid)
        owner = int(args[args.index("--parent-pid") + 1]) if "--parent-pid" in args else 0
        out.append((pid, owner, owner > 0 and os.path.exists(f"/proc/{owner}"),
                    " ".join(args)[:300]))
    return out


def run_main(module, args, capsys):
    """module.main(args) in this process (the Ray session up); (status, stdout, stderr)."""
    status = module.main(args)
    out = capsys.readouterr()
    return status, out.out, out.err


def iterations(stderr):
    return re.findall(r"iteration (\d+): ([0-9.]+) env steps, episode return mean (\S+),", stderr)


def test_a_server_is_told_apart_from_rays_daemons_under_a_clone_named_tiergym(tmp_path):
    # Under a clone named tiergym, Ray's gcs_server holds both words in its command line;
    # counted as a server, it failed the test below while the session ran.
    clone = tmp_path / "tiergym"
    clone.mkdir()
    scripts = {}
    for name in ("tiergym", "gcs_server"):
        scripts[name] = clone / name
        scripts[name].write_text("#!/bin/sh\nsleep 30\n")  # the shell keeps its argv
        scripts[name].chmod(0o755)
    started = [subprocess.Popen([str(scripts["tiergym"]), "serve", "--parent-pid", "1"],
                                start_new_session=True),
               subprocess.Popen([str(scripts["gcs_server"]), f"--log_dir={clone}/logs"],
                                start_new_session=True)]
    try:
        # Until each child has exec'd its script (before, its argv is this process's).
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not all(
                str(scripts[name]) in arguments(p.pid)
                for p, name in zip(started, ("tiergym", "gcs_server"))):
            time.sleep(0.05)
        assert is_server(started[0].pid)
        assert not is_server(started[1].pid)
        assert owners([started[0].pid])[0][:3] == (started[0].pid, 1, True)
    finally:
        for p in started:
            os.killpg(p.pid, signal.SIGKILL)  # the shell and its sleep
            p.wait()


# --- Single agent: PPO over env runners that reach tiergym servers ------------------------------

def test_ppo_with_a_private_server_per_env_runner(ray_session, capsys):
    import rllib_env
    status, out, err = run_main(rllib_env, TINY, capsys)
    assert status == 0, err[-3000:]
    done = iterations(err)
    assert [i for i, _, _ in done] == ["0", "1"], err[-3000:]
    assert float(done[-1][1]) >= 128  # both iterations sampled their batches
    m = re.search(r"episode return mean (-?[0-9.]+)$", out.strip())
    assert m and -1 < float(m.group(1)) < 1, out  # a fractional speedup
    # The env runners' private servers went with the algorithm.
    left = wait_until_gone(lambda: servers_left(ray_session))
    assert not left, f"servers left running (pid, owner, owner alive, command): {owners(left)}"


def interrupted(lines):
    """The episodes cut so far, as the last iteration's line reports them."""
    counts = re.findall(r"(\d+) episodes interrupted", "\n".join(lines))
    return int(counts[-1]) if counts else None


def test_ppo_with_env_runners_sharing_one_server_through_its_sigkill(ray_session):
    import rllib_env
    server = tiergym.Server(args=["--threads", "2", "--quiet"])
    killed, lines = [], []

    def kill_after_the_first_iteration(line):
        lines.append(line)
        if line.startswith("iteration 0:") and not killed:
            killed.append(server.process.pid)
            os.kill(server.process.pid, signal.SIGKILL)
            server.process.wait(timeout=30)
            server.ensure_running()  # a new server at the same address

    try:
        # Episodes of 10 steps in fragments of 32: each runner is in an episode when the
        # server is killed between two iterations.
        env_config = {"tiergym": {"num_regions": 8, "steps": 10},
                      "addresses": server.endpoint, "reconnect": True}
        rllib_env.train(env_config, 3, num_env_runners=2, batch=64,
                        log=kill_after_the_first_iteration)
        assert killed and server.restarts == 1
        assert [i for i, _, _ in iterations("\n".join(lines))] == ["0", "1", "2"], lines
        # Both runners' episodes were cut (one environment each), and counted.
        assert interrupted(lines) == 2, lines
        # The runners' sessions were made on this server (and closed when the algorithm
        # stopped).
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


# --- Multi-agent: the co-scheduled tenants -------------------------------------------------------

COSCHED = {"scenario": "knl-2", "steps": 8, "num_regions": 8}


def test_the_cosched_tenants_train_a_policy_each_with_rllibs_multi_agent_api(ray_session):
    import rllib_cosched
    pytest.importorskip("pettingzoo")
    tenants = rllib_cosched.tenants(COSCHED)
    assert tenants == ["minife", "lulesh"]
    lines = []
    returns, before, after = rllib_cosched.train(COSCHED, 2, batch=32, log=lines.append)
    assert len(returns) == 2 and len(lines) == 2, lines
    # Episodes of 8 steps ended in both iterations (32 steps each), with a return per
    # tenant: each agent's own time saved, a fraction.
    for per_agent in returns:
        assert sorted(per_agent) == sorted(tenants), per_agent
        assert all(-1 < v < 1 for v in per_agent.values()), per_agent
    assert set(after) == set(before) == set(tenants)  # one RLModule per tenant
    for module in tenants:  # each learned from its own agent's experience
        assert rllib_cosched.weight_change(before[module], after[module]) > 0, module


def test_the_cosched_script_trains_one_policy_shared_by_the_tenants(ray_session, capsys):
    import rllib_cosched
    pytest.importorskip("pettingzoo")
    status, out, err = run_main(rllib_cosched, ["--iterations", "2", "--batch", "32",
                                                "--steps", "8", "--num-regions", "8",
                                                "--shared"], capsys)
    assert status == 0, err[-3000:]
    assert err.count("iteration ") == 2, err[-3000:]
    assert re.search(r"2 iterations of PPO on knl-2 with one shared policy; mean return per "
                     r"agent: lulesh [-+][0-9.]+, minife [-+][0-9.]+$", out.split("\n")[0]), out
    moved = re.search(r"each policy's weights \(L2\): shared ([0-9.e+-]+)$", out.strip())
    assert moved and float(moved.group(1)) > 0, out  # the one module both tenants trained

"""Parallel rollouts (agents_examples/rollouts.py, mpi_rollouts.py): two worker processes
report their env-steps and the ratio to one worker, with a server each and with a shared
one; the MPI launcher under `mpirun -n 2` gathers both ranks on rank 0. Short phases
(0.3 s) on tiny episodes; nothing here checks a speed (timings vary with the machine's
load): only that steps were made, counted and reported. Skipped (with the reason) without
the tiergym binary, and the MPI test without mpirun or mpi4py."""

import importlib.util
import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]

import rollouts
import tiergym

try:
    tiergym.find_binary()
    SKIP_REASON = ""
except tiergym.BinaryNotFound as e:  # pragma: no cover
    SKIP_REASON = str(e)

needs_binary = pytest.mark.skipif(bool(SKIP_REASON), reason=SKIP_REASON)
TINY = ["--seconds", "0.3", "--envs", "2", "--num-regions", "8", "--steps", "10"]


def run_script(name, *args, timeout=300):
    return subprocess.run([sys.executable, str(REPO / "agents_examples" / name), *args],
                          capture_output=True, text=True, timeout=timeout)


def parse(stdout, workers):
    single = re.search(r"^1 worker: (\d+) env-steps in ([0-9.]+) s = (\d+) env-steps/s",
                       stdout, re.M)
    parallel = re.search(rf"^{workers} workers: (\d+) env-steps in ([0-9.]+) s = (\d+) "
                         r"env-steps/s \(per worker: ([0-9, ]+)\)", stdout, re.M)
    ratio = re.search(rf"^ratio {workers} workers / 1 worker: ([0-9.]+)", stdout, re.M)
    assert single and parallel and ratio, stdout
    return single, parallel, float(ratio.group(1))


def test_aggregate_sums_steps_over_the_whole_span():
    results = [{"env_steps": 100, "start": 10.0, "end": 11.0},
               {"env_steps": 300, "start": 10.5, "end": 12.0}]
    agg = rollouts.aggregate(results)
    assert agg["workers"] == 2 and agg["env_steps"] == 400
    assert agg["seconds"] == pytest.approx(2.0) and agg["steps_per_s"] == pytest.approx(200.0)
    assert agg["per_worker"] == pytest.approx([100.0, 200.0])


@needs_binary
@pytest.mark.parametrize("mode", [[], ["--shared-server"]], ids=["server-each", "shared-server"])
def test_two_workers_report_steps_and_a_ratio(mode):
    out = run_script("rollouts.py", "--workers", "2", *mode, *TINY)
    assert out.returncode == 0, out.stderr
    single, parallel, ratio = parse(out.stdout, 2)
    assert int(single.group(1)) > 0 and int(parallel.group(1)) > 0
    per_worker = [int(x) for x in parallel.group(4).split(",")]
    assert len(per_worker) == 2 and all(r > 0 for r in per_worker)
    # Each worker steps 2 sub-environments per message: the counts are whole batches.
    assert int(single.group(1)) % 2 == 0 and int(parallel.group(1)) % 2 == 0
    expected = int(parallel.group(3)) / int(single.group(3))
    assert ratio == pytest.approx(expected, rel=0.02, abs=0.01)
    assert ("shared server" in out.stdout) == bool(mode)
    assert "1 worker x 2 envs" in out.stderr  # progress on stderr


@needs_binary
def test_a_failing_worker_fails_the_launcher_with_its_error():
    out = run_script("rollouts.py", "--workers", "2", *TINY, "--machine", "no-such-machine")
    assert out.returncode != 0
    assert "rollout worker failed" in out.stderr and "machine" in out.stderr


def test_bad_arguments_are_usage_errors():
    out = run_script("rollouts.py", "--workers", "0")
    assert out.returncode == 2 and "--workers" in out.stderr


def mpi_skip_reason():
    if shutil.which("mpirun") is None:
        return "mpirun not found (Debian's openmpi-bin: ./scripts/install_deps.sh)"
    if importlib.util.find_spec("mpi4py") is None:
        return "mpi4py not found (pip install mpi4py; a test extra of tiergym)"
    return SKIP_REASON


@pytest.mark.skipif(bool(mpi_skip_reason()), reason=mpi_skip_reason())
def test_mpi_launcher_gathers_two_ranks_on_rank_0():
    env = dict(os.environ)
    # Root in a container: Open MPI refuses root without these, and a 2-core machine
    # needs oversubscription allowed; shared-memory single-copy needs ptrace, often denied.
    env.update({"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
                "OMPI_MCA_rmaps_base_oversubscribe": "1",
                "OMPI_MCA_btl_vader_single_copy_mechanism": "none"})
    out = subprocess.run(["mpirun", "-n", "2", sys.executable,
                          str(REPO / "agents_examples" / "mpi_rollouts.py"), *TINY],
                         capture_output=True, text=True, timeout=300, env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    ranks = re.findall(r"^rank (\d) \(.*\): (\d+) env-steps in [0-9.]+ s = (\d+) env-steps/s",
                       out.stdout, re.M)
    assert sorted(r[0] for r in ranks) == ["0", "1"], out.stdout
    assert all(int(r[1]) > 0 and int(r[2]) > 0 for r in ranks)
    total = re.search(r"^total: (\d+) env-steps, (\d+) env-steps/s", out.stdout, re.M)
    assert total and int(total.group(1)) == sum(int(r[1]) for r in ranks)
    assert re.search(r"^rank 0 alone: \d+ env-steps/s; ratio 2 ranks / 1: [0-9.]+", out.stdout,
                     re.M)
    # Only rank 0 prints: one summary, not two.
    assert out.stdout.count("mpi_rollouts:") == 1

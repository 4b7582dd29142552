"""agents_examples/evaluate.py end to end: the table and the plot on a synthetic application,
--real-runs against `tiergym trace synth`'s measured runs (the errors must be those of
`tiergym validate`), placements exported for run-placed, and bad input refused with a
message and exit status 2 (usage) or 1 (input), never a traceback. Also the strict reader of
runs.csv, rule by rule."""

import json
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

from tiergym_testing import BINARY, REPO, SKIP_REASON, needs_binary

import evaluate  # agents_examples/ (pytest's pythonpath)
import policies  # noqa: E402

SCRIPT = REPO / "agents_examples" / "evaluate.py"
SMALL = ["--num-regions", "32", "--steps", "4"]


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    """`hotset` with its measured runs, on a KNL whose MCDRAM holds 1 GiB."""
    if BINARY is None:
        pytest.skip(SKIP_REASON)
    out = tmp_path_factory.mktemp("evaluate")
    knl = json.loads(subprocess.run([BINARY, "trace", "synth", "--print-model", "knl"],
                                    check=True, capture_output=True, text=True).stdout)
    knl["name"] = "knl-1g"
    knl["tiers"][1]["capacity_bytes"] = 1 << 30
    machine = out / "knl-1g.json"
    machine.write_text(json.dumps(knl))
    subprocess.run([BINARY, "trace", "synth", "--app", "hotset", "--machine", str(machine),
                    "--format", "bin", "--out", str(out), "--quiet"], check=True,
                   capture_output=True, timeout=300)
    return out / "hotset", machine


def run(*args, cwd=None):
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True,
                          text=True, timeout=600, cwd=cwd)


def no_traceback(out):
    assert "Traceback" not in out.stderr, out.stderr


@needs_binary
def test_prints_the_table_and_writes_the_plot(app, tmp_path):
    appdir, machine = app
    plot, result = tmp_path / "eval.png", tmp_path / "eval.json"
    out = run("--profiles", appdir / "profile", "--machine", machine, *SMALL,
              "--plot", plot, "--json", result)
    assert out.returncode == 0, out.stderr
    doc = json.loads(result.read_text())
    assert [r["policy"] for r in doc["results"]] == list(policies.POLICIES)
    for r in doc["results"]:
        row = re.search(rf"^hotset\s+{r['policy']}\s+([0-9.]+)\s+([0-9.]+)\s+([-+0-9.]+)\s+"
                        r"([0-9.]+)x\s+([0-9.]+)\s+(\d+)$", out.stdout, re.M)
        assert row, (r["policy"], out.stdout)
        assert float(row.group(1)) == pytest.approx(r["runtime_ns"] / 1e9, abs=1e-3)
        assert float(row.group(3)) == pytest.approx(r["speedup"], abs=1e-4)
        assert float(row.group(4)) == pytest.approx(r["default_runtime_ns"] / r["runtime_ns"],
                                                    abs=1e-3)
        assert int(row.group(6)) == r["refused"]
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    n = len(policies.POLICIES)
    assert f"[{n}/{n}] hotset" in out.stderr  # progress
    no_traceback(out)


@needs_binary
def test_real_runs_compares_the_estimates_with_the_measured_runs(app, tmp_path):
    appdir, machine = app
    work = tmp_path / "hotset"
    shutil.copytree(appdir, work)
    out = run("--profiles", work / "profile", "--machine", machine, *SMALL, "--no-plot",
              "--policies", "oracle,hemem", "--real-runs", work, "--json", tmp_path / "r.json")
    assert out.returncode == 0, out.stderr
    # The same errors as the C++ validator, run by run (paper model, same window).
    validate = json.loads(subprocess.run(
        [BINARY, "validate", "--profile", str(work / "profile"), "--runs",
         str(work / "runs" / "runs.csv"), "--json"], check=True, capture_output=True,
        text=True).stdout)
    assert validate["runs"], "synth wrote no measured run that fits the fast tier"
    for r in validate["runs"]:
        row = re.search(rf"^{re.escape(r['name'])}\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)$",
                        out.stdout, re.M)
        assert row, (r["name"], out.stdout)
        assert float(row.group(1)) == pytest.approx(r["measured_ns"] / 1e9, abs=1e-3)
        assert float(row.group(2)) == pytest.approx(r["estimated_ns"] / 1e9, abs=1e-3)
        assert float(row.group(3)) == pytest.approx(r["error_pct"], abs=0.01)
    summary = re.search(r"^(\d+) runs: mean error ([0-9.]+) %, max error ([0-9.]+) %$",
                        out.stdout, re.M)
    assert summary, out.stdout
    assert int(summary.group(1)) == len(validate["runs"])
    assert float(summary.group(2)) == pytest.approx(validate["mean_error_pct"], abs=0.01)
    assert float(summary.group(3)) == pytest.approx(validate["max_error_pct"], abs=0.01)
    placements = work / "runs" / "placements"
    for name in ("oracle", "hemem"):
        exported = placements / f"policy-{name}.json"
        assert exported.is_file(), out.stdout
        # A placement the C++ tools read, estimated as evaluate.py printed it.
        est = subprocess.run([BINARY, "estimate", "--profile", str(work / "profile"),
                              "--placement", str(exported), "--machine", str(machine)],
                             capture_output=True, text=True)
        assert est.returncode == 0, est.stderr
        assert re.search(rf"^{name}\s+[0-9.]+\s+[0-9.]+\s+\d+%\s+policy-{name}.json",
                         out.stdout, re.M), out.stdout
    no_traceback(out)


@needs_binary
def test_real_runs_schedules_with_one_step_per_phase(app, tmp_path):
    appdir, machine = app
    work = tmp_path / "hotset"
    shutil.copytree(appdir, work)
    args = ["--profiles", work / "profile", "--machine", machine, "--num-regions", "32",
            "--steps", "0", "--no-plot", "--policies", "hemem", "--real-runs", work]
    first = run(*args, "--json", tmp_path / "first.json")
    assert first.returncode == 0, first.stderr
    doc = json.loads((tmp_path / "first.json").read_text())
    if not doc["real_runs"]["exported"]:
        pytest.skip("the server does not describe its regions' address ranges yet")
    schedule = work / "runs" / "placements" / "policy-hemem.schedule.json"
    steps = json.loads(schedule.read_text())["steps"]
    assert steps and all(s["from_phase"] > 0 for s in steps)
    assert [s["from_phase"] for s in steps] == sorted({s["from_phase"] for s in steps})
    for s in steps:
        assert (schedule.parent / s["placement"]).is_file()
    # A measured run of that schedule (as run-placed names it) is estimated by the episode.
    episode_ns = doc["real_runs"]["episodes"]["hemem"]
    measured = int(episode_ns * 1.1)
    with open(work / "runs" / "runs.csv", "a") as f:
        # As run-placed names it (placement stem + schedule stem), taken once already.
        f.write(f"policy-hemem.phase0+policy-hemem.schedule-2,placements/policy-hemem.phase0.json,"
                f"{measured}\n")
    second = run(*args)
    assert second.returncode == 0, second.stderr
    row = re.search(r"^policy-hemem\.phase0\+policy-hemem\.schedule-2\s+([0-9.]+)\s+([0-9.]+)\s+"
                    r"([0-9.]+)$",
                    second.stdout, re.M)
    assert row, second.stdout
    assert float(row.group(3)) == pytest.approx(100 * 0.1 / 1.1, abs=0.01)


@needs_binary
def test_exported_placements_run_under_run_placed_and_come_back_compared(app, tmp_path):
    """The loop of the README: export, `tiergym-prof run-placed` (the static placement and
    the schedule, on a stand-in command: this VM has one NUMA node, so nothing moves),
    then evaluate.py matches both measured runs to what it estimated."""
    # The profiler is not part of the Python package: it comes from the C++ build tree
    # (./scripts/build.sh, which ./scripts/test.sh runs).
    bin_dir = REPO / "build" / "bin"
    prof, phasemark = bin_dir / "tiergym-prof", bin_dir.parent / "lib" / "libphasemark.so"
    if not prof.is_file() or not phasemark.is_file():
        pytest.skip(f"{prof} or {phasemark} is not built")
    if not pathlib.Path("/sys/bus/event_source/devices/uprobe").exists() or \
            subprocess.run(["id", "-u"], capture_output=True, text=True).stdout.strip() != "0":
        pytest.skip("run-placed schedules need the uprobe PMU and root")
    appdir, machine = app
    work = tmp_path / "hotset"
    shutil.copytree(appdir, work)
    args = ["--profiles", work / "profile", "--machine", machine, "--num-regions", "32",
            "--steps", "0", "--no-plot", "--policies", "memtis", "--real-runs", work]
    first = run(*args, "--json", tmp_path / "first.json")
    assert first.returncode == 0, first.stderr
    placements = work / "runs" / "placements"
    runs_csv = work / "runs" / "runs.csv"
    for extra in ([], ["--schedule", placements / "policy-memtis.schedule.json"]):
        placement = placements / ("policy-memtis.phase0.json" if extra else "policy-memtis.json")
        measured = subprocess.run([prof, "run-placed", "--machine", machine, "--placement",
                                   placement, *extra, "--phasemark-lib", phasemark, "--runs",
                                   runs_csv, "--", "true"], capture_output=True, text=True,
                                  timeout=120)
        assert measured.returncode == 0, measured.stderr
    second = run(*args, "--json", tmp_path / "second.json")
    assert second.returncode == 0, second.stderr
    doc = json.loads((tmp_path / "second.json").read_text())
    rows = {r["name"]: r for r in doc["real_runs"]["runs"]}
    schedule_run = rows["policy-memtis.phase0+policy-memtis.schedule"]
    assert schedule_run["estimated_ns"] == pytest.approx(doc["real_runs"]["episodes"]["memtis"])
    static = re.search(r"^memtis\s+[0-9.]+\s+([0-9.]+)\s", second.stdout, re.M)
    assert rows["policy-memtis"]["estimated_ns"] / 1e9 == pytest.approx(float(static.group(1)),
                                                                        abs=1e-3)
    assert re.search(r"^policy-memtis\s+[0-9.]+\s+[0-9.]+\s+[0-9.]+$", second.stdout, re.M)


@needs_binary
def test_a_smaller_fast_tier_and_a_trained_agent(app, tmp_path):
    appdir, machine = app
    common = ("--profiles", appdir / "profile", "--machine", machine, *SMALL, "--no-plot")

    def oracle_saves(*extra):
        result = tmp_path / "r.json"
        out = run(*common, "--policies", "default,oracle", "--json", result, *extra)
        assert out.returncode == 0, out.stderr
        return json.loads(result.read_text())["results"][1]["speedup"]

    # --tier-capacity-mib reaches the server: with 32 regions the oracle's choice (60 MB of
    # small hot regions) no longer fits 32 MiB of the fast tier.
    assert oracle_saves("--tier-capacity-mib", "hbm:32") < oracle_saves()
    # A trained agent by MODULE@PATH, labelled by its module.
    weights = tmp_path / "q.npz"
    trained = subprocess.run([sys.executable, str(REPO / "agents_examples" / "q_learning.py"),
                              "--save", weights, "--episodes", "2", "--steps", "6",
                              "--num-regions", "8", "--eval-seeds", "1", "--quiet"],
                             capture_output=True, text=True, timeout=600)
    assert trained.returncode == 0, trained.stderr
    out = run(*common, "--policies", f"default,q_learning@{weights}")
    assert out.returncode == 0, out.stderr
    assert re.search(r"^hotset\s+q_learning\s+[0-9.]+", out.stdout, re.M), out.stdout
    out = run(*common, "--policies", f"q_learning@{tmp_path / 'absent.npz'}")
    assert out.returncode == 2 and "train one with" in out.stderr, out.stderr
    no_traceback(out)


@needs_binary
def test_bad_input_is_refused_with_a_message(app, tmp_path):
    appdir, machine = app
    out = run("--policies", "hemem,nope", "--no-plot")
    assert out.returncode == 2 and "unknown policy 'nope'" in out.stderr, out.stderr
    no_traceback(out)
    out = run("--real-runs", tmp_path / "absent", "--no-plot")
    assert out.returncode == 2 and "absent is not a directory" in out.stderr, out.stderr
    no_traceback(out)
    out = run("--profiles", tmp_path / "absent", "--no-plot")
    assert out.returncode == 2 and "not a directory" in out.stderr, out.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    out = run("--real-runs", empty, "--no-plot")
    assert out.returncode == 2 and "--real-runs-profile" in out.stderr, out.stderr
    no_traceback(out)
    # A malformed runs.csv: refused before anything runs, naming the file, line and rule.
    work = tmp_path / "hotset"
    shutil.copytree(appdir, work)
    runs_csv = work / "runs" / "runs.csv"
    runs_csv.write_text(runs_csv.read_text() + "broken,placements/hbm10.json,12x\n")
    out = run("--profiles", work / "profile", "--machine", machine, *SMALL, "--no-plot",
              "--real-runs", work)
    assert out.returncode == 1, out.stderr
    assert re.search(r"runs\.csv:\d+: non-numeric: runtime_ns '12x'", out.stderr), out.stderr
    assert out.stdout == ""
    no_traceback(out)
    # A placement the estimator refuses (a tier the machine lacks).
    runs_csv.write_text("name,placement,runtime_ns\nbad,placements/bad.json,100\n")
    (work / "runs" / "placements" / "bad.json").write_text('{"default": "nvm"}\n')
    out = run("--profiles", work / "profile", "--machine", machine, *SMALL, "--no-plot",
              "--policies", "default", "--real-runs", work)
    assert out.returncode == 1, out.stderr
    assert re.search(r"runs\.csv:2: run bad .*bad\.json.*nvm", out.stderr), out.stderr
    no_traceback(out)


# --- The runs.csv reader, rule by rule ----------------------------------------------------


def runs_file(tmp_path, text, placements=("a.json",)):
    for p in placements:
        (tmp_path / p).write_text('{"default": "ddr"}\n')
    path = tmp_path / "runs.csv"
    path.write_bytes(text.encode())
    return str(path)


@pytest.mark.parametrize("text, rule", [
    ("", "empty"),
    ("\n\n", "empty"),
    ("name,name,placement,runtime_ns\n", ":1: duplicate-column"),
    ("name,placement\n", ":1: missing-column"),
    ("name,placement,runtime_ns\na,a.json\n", ":2: field-count"),
    ("name,placement,runtime_ns\n,a.json,5\n", ":2: empty-name"),
    ("name,placement,runtime_ns\na,a.json,5\na,a.json,6\n", ":3: duplicate-name"),
    ("name,placement,runtime_ns\na,,5\n", ":2: empty-placement"),
    ("name,placement,runtime_ns\na,a.json,-5\n", ":2: non-numeric"),
    ("name,placement,runtime_ns\na,a.json,1e9\n", ":2: non-numeric"),
    ("name,placement,runtime_ns\na,a.json,18446744073709551616\n", ":2: non-numeric"),
    ("name,placement,runtime_ns\na,a.json,0\n", ":2: zero-runtime"),
    ("name,placement,runtime_ns\na,missing.json,5\n", ":2: missing-placement"),
    ("name,placement,runtime_ns\na,a.json,5", ":2: truncated-last-line"),
])
def test_runs_csv_rules(tmp_path, text, rule):
    path = runs_file(tmp_path, text)
    with pytest.raises(evaluate.InputError) as e:
        evaluate.read_measured_runs(path)
    assert str(e.value).startswith(path) and rule in str(e.value), str(e.value)


def test_runs_csv_accepts_crlf_blank_lines_other_columns_and_any_order(tmp_path):
    path = runs_file(tmp_path, "runtime_ns,extra,placement,name\r\n\r\n7,x,a.json,first\r\n"
                               "\n9,y,a.json,second\n")
    runs = evaluate.read_measured_runs(path)
    assert [(r[0], r[2], r[3]) for r in runs] == [("first", 7, 3), ("second", 9, 5)]
    assert runs[0][1] == str(tmp_path / "a.json")
    assert evaluate.read_measured_runs(runs_file(tmp_path, "name,placement,runtime_ns\n")) == []


def test_placement_json_merges_neighbours_and_leaves_the_default_out():
    ranges = [(0x3000, 0x4000), (0x1000, 0x2000), (0x2000, 0x3000), (0x5000, 0x5000)]
    doc = json.loads(evaluate.placement_json([1, 1, 0, 1], ranges, ["ddr", "hbm"]))
    assert doc == {"default": "ddr", "ranges": [
        {"start": "0x1000", "end": "0x2000", "tier": "hbm"},
        {"start": "0x3000", "end": "0x4000", "tier": "hbm"}]}
    doc = json.loads(evaluate.placement_json([1, 1, 1, 0], ranges, ["ddr", "hbm"]))
    assert doc["ranges"] == [{"start": "0x1000", "end": "0x4000", "tier": "hbm"}]


def test_schedule_runs_are_matched_to_their_policy_as_run_placed_names_them():
    assert evaluate.schedule_run_policy("policy-hemem.phase0+policy-hemem.schedule") == "hemem"
    assert evaluate.schedule_run_policy("policy-memtis.phase0+policy-memtis.schedule-3") == "memtis"
    assert evaluate.schedule_run_policy("hbm30+solve") is None


def test_most_used_weighs_placements_by_time():
    import numpy as np
    a, b = np.array([0, 1]), np.array([1, 1])
    action, share = evaluate.most_used([(a, 1.0), (b, 2.0), (a, 0.5), (b, 2.5)])
    assert list(action) == [1, 1] and share == pytest.approx(4.5 / 6.0)


@needs_binary
def test_a_real_programs_split_is_projected_onto_the_machine_given(tmp_path):
    """real-v1's recordings project onto any machine: --machine is used with them (other
    splits keep their own machine)."""
    result = tmp_path / "real.json"
    out = run("--split", "real-v1:1", "--machine", "disagg", "--policies", "default,oracle",
              "--num-regions", "16", "--steps", "4", "--no-plot", "--json", result, "--quiet")
    assert out.returncode == 0, out.stderr
    assert json.loads(result.read_text())["config"]["machine"] == "disagg"
    assert "Evaluation: machine disagg (ddr" in out.stdout and "remote" in out.stdout
    no_traceback(out)

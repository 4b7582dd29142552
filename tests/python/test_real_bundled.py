"""The bundled real programs (traces/real/README.md, issue 28): real, unmodified programs
from Debian's packages, shipped as compressed recordings, served as the real-v1 split of
tiergym.datasets and as `profiles="real"`: each is projected onto every bundled machine
on first use, loads, and an agent steps through it (Gymnasium's check_env, an episode)."""
import json
import lzma
import pathlib
import subprocess

import numpy as np
import pytest

from tiergym_testing import BINARY, REPO, needs_binary
from tiergym import datasets

PROGRAMS = ["lammps-melt", "lammps-crack", "hpcc"]
# Each machine's tiers (traces/SYNTH.md: the bundled machines).
TIERS = {"knl": ["ddr", "hbm"], "disagg": ["ddr", "hbm", "remote"], "xeonmax": ["ddr", "hbm"]}


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    datasets._resolved.clear()
    yield tmp_path
    datasets._resolved.clear()


def test_the_recordings_are_bundled_small_and_whole():
    real = datasets.get("real-v1")
    assert real.available and real.kind == "real" and real.machine == "knl"
    assert real.app_names() == PROGRAMS
    assert datasets.parse_entry("real") == (real, None)
    assert datasets.parse_entry("real:2") == (real, 2)
    where = datasets.real_dir()
    assert where == REPO / "traces" / "real" or where.parent.name == "data"
    total = 0
    for name in PROGRAMS:
        packed = where / f"{name}.tgt.xz"
        total += packed.stat().st_size
        with lzma.open(packed) as f:
            assert f.read(8) == b"TGTRACE\0", packed  # a binary trace (traces/FORMAT.md)
    assert total < 6 << 20  # "a few MB in all"


def test_a_damaged_recording_is_named_and_nothing_is_left(cache, tmp_path, monkeypatch):
    shipped = tmp_path / "shipped"
    shipped.mkdir()
    for name in PROGRAMS:
        (shipped / f"{name}.tgt.xz").write_bytes((datasets.real_dir() / f"{name}.tgt.xz")
                                                 .read_bytes()[:5000])  # cut short
    monkeypatch.setattr(datasets, "real_dir", lambda: shipped)
    with pytest.raises(RuntimeError, match="lammps-melt.tgt.xz: not a whole xz file"):
        datasets.get("real-v1").profiles()
    assert not list((cache / "tiergym" / "datasets-v1" / "real-recordings").iterdir())


def header(trace, tmp_path):
    """The header keys of a binary trace (converted to CSV v1)."""
    csv = tmp_path / "header.csv"
    subprocess.run([BINARY, "trace", "convert", trace, str(csv)], check=True,
                   capture_output=True)
    with open(csv) as f:
        lines = [line.rstrip("\n") for line in f if line.startswith("#")]
    return dict(line[2:].split("=", 1) for line in lines if "=" in line)


@needs_binary
def test_each_program_is_projected_onto_every_bundled_machine(cache, tmp_path):
    info = {}
    for machine, tiers in TIERS.items():
        dirs = datasets.get("real-v1").profiles(machine=machine)
        assert [pathlib.Path(d).parent.name for d in dirs] == PROGRAMS  # served by name
        for d in dirs:
            assert sorted(p.name for p in pathlib.Path(d).iterdir()) == sorted(
                f"{t}.tgt" for t in tiers)
            h = header(str(pathlib.Path(d) / f"{tiers[0]}.tgt"), tmp_path)
            assert h["projection_model"] == datasets.PROJECTION_MODEL
            assert h["projection_machine"] == machine and h["backend"] == "timer"
        info[machine] = dirs
    # Found in the cache the second time; the split's own machine is knl.
    datasets._resolved.clear()
    assert datasets.get("real-v1").profiles() == info["knl"]
    assert datasets.resolve_config({"profiles": "real", "machine": "xeonmax"}) == {
        "profiles": info["xeonmax"], "machine": "xeonmax"}
    # Each program: footprint above the default task's 512 MiB fast tier, several phases.
    for d in info["knl"]:
        summary = subprocess.run([BINARY, "trace", "info", "--json", d], check=True,
                                 capture_output=True, text=True).stdout
        doc = json.loads(summary)
        assert doc["phases"] >= 20, d
        spans = sum(int(r["end"], 16) - int(r["start"], 16) for r in doc["runs"][0]["ranges"])
        assert spans > 512 << 20, (d, spans >> 20)


@needs_binary
@pytest.mark.parametrize("machine", ["knl", "xeonmax"])
def test_an_agent_steps_through_the_real_programs(cache, machine):
    gymnasium = pytest.importorskip("gymnasium")
    from gymnasium.utils.env_checker import check_env  # noqa: PLC0415

    env = gymnasium.make("tiergym/TierPlacement-v1", profiles="real", machine=machine)
    try:
        check_env(env.unwrapped, skip_render_check=True)
        for name in PROGRAMS:
            obs, info = env.reset(seed=0, options={"profile": name})
            assert info["profile"] == name and env.observation_space.contains(obs)
            done, steps = False, 0
            while not done:
                obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
                assert np.isfinite(reward)
                done, steps = terminated or truncated, steps + 1
            assert steps >= 1 and info["elapsed_ns"] > 0
    finally:
        env.close()

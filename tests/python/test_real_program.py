"""A real, unmodified program from Debian as an environment, end to end: LAMMPS (a small
Lennard-Jones melt, phasemarked at its pair-force computation) recorded and projected
onto a machine by `tiergym-prof profile`, then `gymnasium.make` on the result, Gymnasium's
`check_env` and an episode (issue 28). Needs Debian's lammps (scripts/install_deps.sh),
the profiler from the C++ build tree (./scripts/test.sh builds it), the uprobe PMU and
root (phasemarks)."""
import os
import pathlib
import shutil
import subprocess

import pytest

from tiergym_testing import REPO, needs_binary

PROF = REPO / "build" / "bin" / "tiergym-prof"
LIBLAMMPS = pathlib.Path("/lib/x86_64-linux-gnu/liblammps.so.0")
MELT = """units lj
atom_style atomic
lattice fcc 0.8442
region box block 0 10 0 10 0 10
create_box 1 box
create_atoms 1 box
mass 1 1.0
velocity all create 3.0 87287 loop geom
pair_style lj/cut 2.5
pair_coeff 1 1 1.0 1.0 2.5
neighbor 0.3 bin
neigh_modify every 20 delay 0 check no
fix 1 all nve
thermo 50
run 40
"""


def _skip_reason():
    if shutil.which("lmp") is None or not LIBLAMMPS.exists():
        return "Debian's lammps is not installed (scripts/install_deps.sh installs it)"
    if not PROF.is_file():
        return f"{PROF} is not built (./scripts/build.sh)"
    if not pathlib.Path("/sys/bus/event_source/devices/uprobe").exists() or os.geteuid() != 0:
        return "phasemarks in an unmodified program need the uprobe PMU and root"
    return None


@needs_binary
def test_lammps_recorded_projected_and_served_as_an_environment(tmp_path):
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    gymnasium = pytest.importorskip("gymnasium")
    from gymnasium.utils.env_checker import check_env

    (tmp_path / "in.melt").write_text(MELT)
    out = tmp_path / "prof"
    r = subprocess.run(
        [PROF, "profile", "--machine", "xeonmax", "--out", out, "--phasemark-at",
         f"{LIBLAMMPS}:_ZN9LAMMPS_NS9PairLJCut7computeEii", "--",
         "lmp", "-in", "in.melt", "-log", "none", "-screen", "none"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "recording succeeded" in r.stderr
    profile = out / "profile"
    assert f"--profiles {profile}" in r.stdout
    assert sorted(p.name for p in profile.iterdir()) == ["ddr.csv", "hbm.csv"]
    # One phase per force computation: setup's and the 40 steps'.
    assert "phasemarks 41 " in r.stderr, r.stderr

    env = gymnasium.make("tiergym/TierPlacement-v1", machine="xeonmax", profiles=[str(profile)])
    try:
        check_env(env.unwrapped, skip_render_check=True)
        obs, info = env.reset(seed=0)
        assert env.observation_space.contains(obs)
        steps, done = 0, False
        while not done:
            obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
            steps += 1
            done = terminated or truncated
        assert steps > 1
        assert info["profile"] == "lmp"
        assert info["elapsed_ns"] > 0
    finally:
        env.close()

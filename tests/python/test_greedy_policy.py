"""The example policy (agents_examples/greedy_policy.py): its choice on a synthetic
observation, and the script's episode on the bundled profiles (the README's example)."""

import pathlib
import re
import subprocess
import sys
import types

import numpy as np
import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "agents_examples"))
sys.path.insert(0, str(REPO / "env" / "python"))

import greedy_policy  # noqa: E402
import tiergym  # noqa: E402


def fake_env(regions):
    return types.SimpleNamespace(
        num_regions=regions, tiers=["ddr", "hbm"],
        tier_spec={"obs_region_features": 4, "obs_global_offset": regions * 4})


def observation(history, size_share, fill):
    regions = np.zeros((len(history), 4), dtype=np.float32)
    regions[:, 2] = history
    regions[:, 3] = size_share
    return np.concatenate([regions.ravel(), np.asarray(fill, dtype=np.float32), [0.5, 0.5]])


def test_hottest_regions_go_fast_within_the_learnt_capacity():
    policy = greedy_policy.GreedyPolicy(fake_env(4), fast_tier=1)
    sizes = [0.25, 0.25, 0.25, 0.25]
    history = [0.1, 0.4, 0.3, 0.2]
    # Nothing on the fast tier yet: its capacity is unknown, every accessed region is asked for.
    info = {"tier_used_bytes": np.array([4000, 0], dtype=np.uint64)}
    assert list(policy(observation(history, sizes, [0.04, 0.0]), info)) == [1, 1, 1, 1]
    # 1000 bytes on the fast tier fill half of it: capacity 2000 bytes, two regions fit.
    info = {"tier_used_bytes": np.array([3000, 1000], dtype=np.uint64)}
    assert list(policy(observation(history, sizes, [0.03, 0.5]), info)) == [0, 1, 1, 0]
    # Regions never accessed stay on the default tier.
    assert list(policy(observation([0, 0, 0.5, 0], sizes, [0.03, 0.5]), info)) == [0, 0, 1, 0]


def test_the_example_runs_an_episode_and_prints_the_speedup():
    try:
        tiergym.find_binary()
    except tiergym.BinaryNotFound as e:
        pytest.skip(str(e))
    out = subprocess.run([sys.executable, str(REPO / "agents_examples" / "greedy_policy.py"),
                          "--steps", "10", "--profile", "minife"],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    m = re.search(r"fractional speedup \(episode return\): (-?[0-9.]+)", out.stdout)
    assert m, out.stdout
    assert float(m.group(1)) > 0  # minife gains from HBM; the greedy policy finds it

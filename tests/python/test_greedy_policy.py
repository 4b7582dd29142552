"""The example policy (agents_examples/greedy_policy.py): its choice on a synthetic
observation, and the script's episode on the bundled profiles (the README's example)."""

import os
import pathlib
import re
import subprocess
import sys
import types

import numpy as np
import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]

import greedy_policy
import tiergym


def fake_env(region_bytes, fast_capacity):
    k = len(region_bytes)
    ends = np.cumsum(region_bytes)
    bounds = np.stack([ends - region_bytes, ends], axis=1).astype(np.uint64)[None]
    return types.SimpleNamespace(
        num_regions=k, tiers=["ddr", "hbm"],
        tier_spec={"obs_region_features": 4, "obs_global_offset": k * 4, "profiles": ["fake"],
                   "region_bounds": bounds, "tier_capacity_bytes": [1 << 40, fast_capacity],
                   "tier_bandwidth_gbps": [90.0, 400.0], "tier_migration_gbps": [10.0, 10.0]})


def observation(history, size_share, fill):
    regions = np.zeros((len(history), 4), dtype=np.float32)
    regions[:, 2] = history
    regions[:, 3] = size_share
    return np.concatenate([regions.ravel(), np.asarray(fill, dtype=np.float32), [0.5, 0.5]])


def test_hottest_regions_go_fast_within_the_capacity():
    policy = greedy_policy.GreedyPolicy()
    sizes = [0.25, 0.25, 0.25, 0.25]
    info = {"profile": "fake", "tier_used_bytes": np.array([4000, 0], dtype=np.uint64)}
    obs = observation([0.1, 0.4, 0.3, 0.2], sizes, [0.0, 0.0])
    # 2000 bytes of hbm hold the two hottest 1000-byte regions.
    policy.reset(fake_env([1000] * 4, 2000), obs, info)
    assert list(policy.act(obs, info)) == [0, 1, 1, 0]
    # A larger region that does not fit is skipped for a smaller, colder one that does.
    policy.reset(fake_env([1000, 1500, 1000, 500], 2000), obs, info)
    assert list(policy.act(obs, info)) == [0, 1, 0, 1]
    # Regions never accessed stay on the default tier.
    obs = observation([0, 0, 0.5, 0], sizes, [0.0, 0.0])
    assert list(policy.act(obs, info)) == [0, 0, 1, 0]


def test_the_example_runs_an_episode_and_prints_the_speedup(tmp_path):
    try:
        tiergym.find_binary()
    except tiergym.BinaryNotFound as e:
        pytest.skip(str(e))
    # The environment's python (not /usr/bin/python3), from another directory, without
    # PYTHONPATH: the installed package and the script's own folder are all it needs.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run([sys.executable, str(REPO / "agents_examples" / "greedy_policy.py"),
                          "--steps", "10", "--profile", "minife"],
                         capture_output=True, text=True, timeout=600, cwd=tmp_path, env=env)
    assert out.returncode == 0, out.stderr
    m = re.search(r"fractional speedup \(episode return\): (-?[0-9.]+)", out.stdout)
    assert m, out.stdout
    assert float(m.group(1)) > 0  # minife gains from HBM; the greedy policy finds it
    assert "64 regions, 10 steps" in out.stdout  # info["step"]: the intervals done

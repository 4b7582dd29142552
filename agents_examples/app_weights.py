"""app_weights.py: the offline oracle's time saved for every application of a training pool,
computed in process, and the per-application reward weights fast_ppo.py's --reward-norm
oracle trains with.

Why: the benchmark scores a set of programs by the mean over its applications of the time
saved over the oracle's (agents_examples/README.md, "Generalization"), but PPO on raw rewards
maximizes the time saved summed over the applications it draws, in which an application
whose best placement saves 40 % weighs twenty times one whose best saves 2 %. Weighting each
application's rewards by the pool's mean oracle saving over its own makes every
application's best episode worth the same, as the score counts it.

The oracle is policies.py's (OraclePolicy: each region's benefit measured by an episode with
that region alone on the fast tier from the start, then a knapsack by benefit per byte),
with its probe episodes stepped in one tiergym.InProcessVectorEnv instead of a server's
VectorEnv per application: the same episodes (the in-process environment is the server's),
a 256-application pool in seconds instead of minutes. tests/python/test_app_weights.py
compares it with policies.py's oracle.
"""

import hashlib
import json
import os

import numpy as np

import policies
import tiergym


def _run(envs, profiles, placements):
    """The returns of static placements ([N, K] tiers), one episode each (seed 0) of
    profiles[i], stepped in `envs` (an InProcessVectorEnv without autoreset; loading a pool
    into one is what takes time, so every batch reuses it, the last one padded): [N]."""
    n = envs.num_envs
    out = np.zeros(len(profiles))
    for first in range(0, len(profiles), n):
        count = min(n, len(profiles) - first)
        rows = np.r_[np.arange(first, first + count), np.full(n - count, first)]
        envs.reset(seed=[0] * n, options={"profile": [str(p) for p in np.asarray(profiles)[rows]]})
        actions = np.ascontiguousarray(placements[rows], dtype=np.int64)
        total = np.zeros(n)
        done = np.zeros(n, dtype=bool)
        while not done.all():  # one configuration: every episode ends at the same step
            _, reward, terminated, truncated, _ = envs.step(actions)
            total += np.where(done, 0.0, reward)
            done |= terminated | truncated
        out[first:first + count] = total[:count]
    return out


def oracle_returns(config, chunk=512):
    """{profile: the oracle's return} for every profile `config` serves (its `profiles` key,
    a tiergym.datasets entry resolved), on the task of `config` in placement mode."""
    config = dict(config, action_mode="placement", observation="raw")
    envs = tiergym.InProcessVectorEnv(chunk, threads=1, autoreset_mode=tiergym.DISABLED, **config)
    try:
        spec = envs.tier_spec
        return _oracle(envs, spec, int(envs.num_regions), list(spec["profiles"]))
    finally:
        envs.close()


def _oracle(envs, spec, k, profiles):
    """OraclePolicy's probes and knapsack for every profile, stepped in envs."""
    bounds = np.asarray(spec["region_bounds"], dtype=np.float64)       # [P, K, 2]
    size = bounds[..., 1] - bounds[..., 0]                               # [P, K]
    capacity = np.asarray(spec["tier_capacity_bytes"], dtype=np.float64)
    fast = policies.fast_tier(np.asarray(spec["tier_bandwidth_gbps"], dtype=np.float64))
    # Probes: region r of profile p alone on the fast tier (row p * K + r).
    probes = np.zeros((len(profiles) * k, k), dtype=np.int64)
    probes[np.arange(len(probes)), np.tile(np.arange(k), len(profiles))] = fast
    benefit = _run(envs, np.repeat(profiles, k), probes).reshape(len(profiles), k)
    placements = np.stack([policies.knapsack(benefit[p], size[p], capacity[fast], fast)
                           for p in range(len(profiles))])
    returns = _run(envs, np.asarray(profiles), placements)
    return {name: float(r) for name, r in zip(profiles, returns)}


def cached_oracle_returns(config, progress=None):
    """oracle_returns(config), kept in tiergym's cache directory (a JSON file named by a hash
    of the configuration and tiergym's version; the splits of tiergym.datasets are
    versioned by name), since a pool of hundreds of applications takes a minute or more."""
    key = json.dumps(sorted((str(k), str(v)) for k, v in config.items()) + [tiergym.__version__])
    path = tiergym.datasets.cache_dir() / "oracle" / (
        hashlib.sha256(key.encode()).hexdigest()[:24] + ".json")
    if path.exists():
        saved = json.loads(path.read_text())
        if saved.get("config") == key:
            return saved["returns"]
    if progress is not None:
        progress(f"oracle returns of the training pool (once; cached in {path})...")
    returns = oracle_returns(config)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"config": key, "returns": returns}))
    os.replace(tmp, path)
    return returns


def reward_weights(oracle, floor=0.1):
    """{profile: weight}: the pool's mean oracle return over the profile's own, the latter
    at least `floor` x the mean (an application no placement helps would otherwise get an
    unbounded weight on noise). The weights' scale keeps the pool's mean return unchanged."""
    if not 0 < floor <= 1:
        raise ValueError(f"reward weights: floor must be in (0, 1], got {floor}")
    values = np.asarray(list(oracle.values()), dtype=np.float64)
    mean = float(np.mean(np.maximum(values, 0.0)))
    if not mean > 0:
        raise ValueError("reward weights: no application of the pool gains from the oracle's "
                         "placement (mean oracle return <= 0)")
    return {name: mean / max(float(r), floor * mean) for name, r in oracle.items()}

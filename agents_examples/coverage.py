"""coverage.py: do the held-out programs' behaviours lie inside the training distribution?

    python agents_examples/coverage.py                                   # pool of 256 vs programs
    python agents_examples/coverage.py --pool procedural-train-v1:1024 --json cov.json

For every application of a training pool and of the held-out splits, a few statistics of
what an agent observes (the relative observation of one episode with everything left on
the default tier, seed 0; env/README.md, "Observations that transfer"), and where each
held-out application falls among the pool (its percentile: the share of the pool's
applications below it; 0 or 100 means outside the pool's range on that statistic):

- `hot_density`: how much denser than the average byte the regions are that a knapsack by
  density puts in the fast tier (the densest regions, by accesses per byte over the run,
  until the fast tier is full): their share of the accesses over their share of the bytes.
  A flat heat (nekbone) is close to 1.
- `top_density`: the densest region's accesses per byte against the average byte.
- `footprint`: the application's bytes over the fast tier's capacity.
- `hot_change`: how much the densest set moves during the run: 1 - the bytes the densest
  sets of the first and second halves (filled as hot_density's) share, over the fast tier's
  capacity.
- `traffic`: the application's memory traffic against the default tier's bandwidth
  (mean over the run of the global `traffic[default tier]` feature, `sq` undone).
- `oracle`: the time the oracle saves (policies.py's oracle, app_weights.oracle_returns):
  not observed by an agent, what is at stake.

Read shares are not in the observation (the machines' curves take them into account in
the time charged), so they are not compared here; traces/SYNTH.md section 11 gives the
distribution's read_pct U(55, 100) per kernel.
"""

import argparse
import sys
import types

import numpy as np

import app_weights
import bc_regions
import fast_ppo
import policies
import tiergym
import tiergym.wrappers

STATS = ("hot_density", "top_density", "footprint", "hot_change", "traffic", "oracle")


def _fill_densest(density, size, capacity):
    """A bool mask of the densest regions (those accessed at all) whose bytes fit
    `capacity`, densest first, skipping those that do not fit: the oracle's knapsack with
    the accesses as the benefit."""
    return policies.knapsack(density * size, size, capacity, 1) == 1


def episode_stats(config):
    """{profile: {stat: value}} for every profile `config` serves (one episode each, seed
    0, everything kept on the default tier), on the task of `config` with the relative
    observation, keep mode."""
    config = bc_regions.resolved(dict(config, observation="relative", action_mode="keep"))
    n = len(config["profiles"])
    envs = tiergym.InProcessVectorEnv(n, threads=1, autoreset_mode=tiergym.DISABLED, **config)
    try:
        spec = envs.tier_spec
        profiles = list(spec["profiles"])
        k, f = int(envs.num_regions), int(spec["obs_region_features"])
        names, global_names = tiergym.wrappers.feature_names(spec)
        bandwidth = np.asarray(spec["tier_bandwidth_gbps"], dtype=np.float64)
        fast, default = policies.fast_tier(bandwidth), 0
        traffic_col = int(spec["obs_global_offset"]) + global_names.index(
            f"traffic[{spec['tiers'][default]}]")
        obs, _ = envs.reset(seed=[0] * n, options={"profile": profiles})
        shares, traffic = [], []
        done = False
        while not done:
            obs, _, terminated, truncated, _ = envs.step(np.zeros((n, k), dtype=np.int64))
            regions = obs[:, :k * f].reshape(n, k, f)
            shares.append(regions[:, :, names.index("last_share")].copy())
            t = obs[:, traffic_col].astype(np.float64)
            traffic.append(t / np.maximum(1.0 - t, 1e-9))      # sq undone
            done = bool((terminated | truncated).all())
        shares = np.asarray(shares, dtype=np.float64)            # [T, n, K]
        bounds = np.asarray(spec["region_bounds"], dtype=np.float64)
        capacity = float(np.asarray(spec["tier_capacity_bytes"], dtype=np.float64)[fast])
        out = {}
        for i, p in enumerate(profiles):
            size = bounds[i, :, 1] - bounds[i, :, 0]
            out[p] = _stats(shares[:, i], size, capacity)
            out[p]["traffic"] = float(np.mean([x[i] for x in traffic]))
        return out
    finally:
        envs.close()


def _stats(shares, size, capacity):
    """The statistics of one application from its per-step access shares [T, K] and its
    regions' bytes [K]."""
    size_share = size / size.sum()

    def density(rows):
        s = rows.sum(axis=0)
        return (s / max(s.sum(), 1e-300)) / size_share

    d = density(shares)
    hot = _fill_densest(d, size, capacity)
    share = shares.sum(axis=0) / max(shares.sum(), 1e-300)
    half = len(shares) // 2
    first = _fill_densest(density(shares[:half]), size, capacity)
    second = _fill_densest(density(shares[half:]), size, capacity)
    return {"hot_density": float(share[hot].sum() / max(size_share[hot].sum(), 1e-300)),
            "top_density": float(d.max()),
            "footprint": float(size.sum() / capacity),
            "hot_change": float(1.0 - size[first & second].sum() / capacity)}


def percentile(pool_values, x):
    """The share of the pool's values below x, in % (ties count half)."""
    v = np.asarray(pool_values, dtype=np.float64)
    return float(100.0 * ((v < x).sum() + 0.5 * (v == x).sum()) / len(v))


def measure(task, pool, held_out, progress=print):
    """{"pool": {app: stats}, "held_out": {split: {app: stats}}}."""
    def one(entry):
        config = dict(task, profiles=entry)
        stats = episode_stats(config)
        oracle = app_weights.oracle_returns(bc_regions.resolved(config))
        for app, r in oracle.items():
            stats[app]["oracle"] = float(r)
        return stats

    progress(f"coverage: {pool}...")
    out = {"pool": one(pool), "held_out": {}}
    for entry in held_out:
        progress(f"coverage: {entry}...")
        out["held_out"][entry] = one(entry)
    return out


def print_table(result, out=None):
    out = sys.stdout if out is None else out
    pool = result["pool"]
    print(f"{'statistic':<12}{'pool p5':>9}{'p50':>9}{'p95':>9}  held-out value (percentile in "
          "the pool)", file=out)
    for stat in STATS:
        values = [s[stat] for s in pool.values()]
        cells = []
        for split in result["held_out"].values():
            for app, s in split.items():
                cells.append(f"{app} {s[stat]:.3g} ({percentile(values, s[stat]):.0f})")
        p5, p50, p95 = np.percentile(values, [5, 50, 95])
        print(f"{stat:<12}{p5:>9.3g}{p50:>9.3g}{p95:>9.3g}  " + ", ".join(cells), file=out)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pool", default="procedural-train-v1:256",
                        help="the training pool (a split of tiergym.datasets)")
    parser.add_argument("--held-out", default="bundled-v1,real-v1",
                        help="comma-separated splits to place among the pool")
    parser.add_argument("--config", default="",
                        help="task keys KEY=VALUE,... over the default task's")
    parser.add_argument("--json", help="write every application's statistics here")
    args = parser.parse_args(argv)
    try:
        task = fast_ppo.task_config(types.SimpleNamespace(config=args.config))
    except ValueError as e:
        parser.error(str(e))
    result = measure(task, args.pool, [s for s in args.held_out.split(",") if s],
                     progress=lambda line: print(line, file=sys.stderr))
    print_table(result)
    if args.json:
        fast_ppo.write_json(args.json, result)  # written whole or not at all
    return 0


if __name__ == "__main__":
    sys.exit(main())

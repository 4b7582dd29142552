#!/usr/bin/env python3
"""What a new application per episode costs, measured in one run against a fixed one.

  fixed     tiergym.InProcessVectorEnv serving one procedural application: every episode
            on it (the baseline)
  pool      the same, serving a pool of N procedural applications built ahead: each reset
            draws one (a new application per episode, among N)
  fresh     every episode on an application never seen before: its profile generated
            (`tiergym trace synth --app procedural:SEED`, through tiergym.datasets, into a
            temporary cache), loaded into a new environment, and one episode run

Every path runs the default task's keys with the relative observation (512 MiB of HBM, 16
regions, 100 decisions, keep actions), random keep actions, E environments stepped
together (one for `fresh`), for --seconds each, in rounds (median and range of the ratios
over the rounds). The pool's one-time cost (generating and loading N applications) is
reported apart, and as episodes of `fixed` it is worth.

    .venv/bin/python tests/bench/procedural_benchmark.py [--pool 64] [--envs 16]
        [--seconds 3] [--rounds 3] [--fresh-episodes 5]
"""

import argparse
import os
import statistics
import sys
import tempfile
import time

import numpy as np

import tiergym
from tiergym import datasets

TASK = dict(tiergym.DEFAULT_TASK, observation="relative")


def episodes_per_s(envs, seconds, rng):
    """Episodes finished per second of stepping `envs` with random keep actions."""
    envs.reset(seed=int(rng.integers(1 << 30)))
    k, choices = envs.single_action_space.shape[0], int(envs.single_action_space.nvec[0])
    done = steps = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        # Mostly keep: a random agent in keep mode moves a region now and then.
        actions = np.where(rng.random((envs.num_envs, k)) < 0.9, 0,
                           rng.integers(1, choices, size=(envs.num_envs, k)))
        _, _, term, trunc, _ = envs.step(actions)
        done += int(np.sum(term | trunc))
        steps += envs.num_envs
    elapsed = time.perf_counter() - t0
    return done / elapsed, steps / elapsed


def fresh_episodes_per_s(count, first_seed, rng):
    """Episodes per second when each is on an application made for it."""
    with tempfile.TemporaryDirectory() as tmp:
        old = os.environ.get("XDG_CACHE_HOME")
        os.environ["XDG_CACHE_HOME"] = tmp
        try:
            gen = load = run = 0.0
            for i in range(count):
                t0 = time.perf_counter()
                profile = datasets.ensure_profile(f"procedural:{first_seed + i}", "knl",
                                                  datasets.PROCEDURAL_SAMPLES)
                t1 = time.perf_counter()
                envs = tiergym.InProcessVectorEnv(1, profiles=[profile], **TASK)
                t2 = time.perf_counter()
                envs.reset(seed=i)
                while True:
                    _, _, term, trunc, _ = envs.step(np.zeros((1, 16), dtype=np.int64))
                    if term[0] or trunc[0]:
                        break
                envs.close()
                t3 = time.perf_counter()
                gen, load, run = gen + t1 - t0, load + t2 - t1, run + t3 - t2
        finally:
            if old is None:
                del os.environ["XDG_CACHE_HOME"]
            else:
                os.environ["XDG_CACHE_HOME"] = old
    total = gen + load + run
    return count / total, gen / count, load / count, run / count


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pool", type=int, default=64, help="applications in the pool")
    parser.add_argument("--envs", type=int, default=16, help="environments stepped together")
    parser.add_argument("--seconds", type=float, default=3.0, help="per path and round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--fresh-episodes", type=int, default=5,
                        help="episodes of the fresh path per round")
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    print(f"load average at start: {os.getloadavg()[0]:.1f} ({os.cpu_count()} cores)")

    t0 = time.perf_counter()
    pool_dirs = datasets.get("procedural-train-v1").profiles(args.pool)
    t1 = time.perf_counter()
    pool = tiergym.InProcessVectorEnv(args.envs, profiles=pool_dirs, **TASK)
    t2 = time.perf_counter()
    fixed = tiergym.InProcessVectorEnv(args.envs, profiles=pool_dirs[:1], **TASK)
    print(f"pool of {args.pool} applications: generated (or found in the cache) in "
          f"{t1 - t0:.1f} s, loaded in {t2 - t1:.1f} s")

    rows = []
    for r in range(args.rounds):
        f_eps, f_steps = episodes_per_s(fixed, args.seconds, rng)
        p_eps, p_steps = episodes_per_s(pool, args.seconds, rng)
        n_eps, gen, load, run = fresh_episodes_per_s(args.fresh_episodes,
                                                     2_000_000_000 + r * 1000, rng)
        rows.append((f_eps, p_eps, n_eps, f_steps, p_steps, gen, load, run))
        print(f"round {r}: fixed {f_eps:.0f} episodes/s ({f_steps:.0f} steps/s), "
              f"pool {p_eps:.0f} ({p_steps:.0f} steps/s), fresh {n_eps:.2f} "
              f"(per application: generate {gen:.2f} s, load {load:.2f} s, episode "
              f"{run:.3f} s)")
    pool.close()
    fixed.close()

    def summary(values):
        return f"{statistics.median(values):.3f} ({min(values):.3f}-{max(values):.3f})"

    print(f"\nratios over {args.rounds} rounds, median (range):")
    print(f"  pool / fixed episodes per s:  {summary([r[1] / r[0] for r in rows])}")
    print(f"  fresh / fixed episodes per s: {summary([r[2] / r[0] for r in rows])}")
    f_eps = statistics.median(r[0] for r in rows)
    print(f"  the pool's build ({t2 - t0:.1f} s) is worth {(t2 - t0) * f_eps:.0f} episodes of "
          f"the fixed application")
    print(f"load average at end: {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

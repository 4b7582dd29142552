#!/usr/bin/python3
"""A greedy placement policy on the tiergym environment: after every interval, put the regions
with the highest decayed access share on the fast tier, hottest first, as long as they fit in
its capacity; everything else on the default tier. Runs one episode and prints its fractional
speedup (the episode's return) against the all-on-the-default-tier run.

    /usr/bin/python3 agents_examples/greedy_policy.py                  # a private server
    /usr/bin/python3 agents_examples/greedy_policy.py --profile lulesh --steps 50
    /usr/bin/python3 agents_examples/greedy_policy.py --address tcp://127.0.0.1:5555

Only what the observation holds is used (env/environment.h): per region its tier, last share,
decayed share ("history") and size share; per tier its fill. The fast tier's capacity is
learnt from the observation (capacity = bytes on the tier / its fill) once something is on it;
until then the environment's capacity check (refused moves, in `info`) is the guard.
"""

import argparse
import pathlib
import sys

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "env" / "python"))
import tiergym  # noqa: E402


class GreedyPolicy:
    """Hottest regions (by decayed access share) on `fast_tier`, within its capacity."""

    def __init__(self, env, fast_tier=1, min_share=0.0):
        self.num_regions = env.num_regions
        self.tiers = len(env.tiers)
        self.features = int(env.tier_spec["obs_region_features"])
        self.global_offset = int(env.tier_spec["obs_global_offset"])
        self.fast = fast_tier
        self.min_share = min_share
        self.capacity_bytes = None  # of the fast tier, once known

    def __call__(self, obs, info):
        regions = obs[: self.global_offset].reshape(self.num_regions, self.features)
        history, last, size_share = regions[:, 2], regions[:, 1], regions[:, 3]
        used = info["tier_used_bytes"].astype(np.float64)
        total_bytes = used.sum()
        fill = obs[self.global_offset + self.fast]
        if used[self.fast] > 0 and 0 < fill < 1:
            self.capacity_bytes = used[self.fast] / fill
        budget = self.capacity_bytes if self.capacity_bytes is not None else np.inf
        action = np.zeros(self.num_regions, dtype=np.int64)
        taken = 0.0
        # Hottest first; the last interval's share breaks ties between equal histories.
        for r in np.lexsort((-last, -history)):
            if history[r] <= self.min_share:
                break
            region_bytes = size_share[r] * total_bytes
            if taken + region_bytes > budget:
                continue  # does not fit: a smaller, colder region may
            action[r] = self.fast
            taken += region_bytes
        return action


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--address", help="a running server (default: start a private one)")
    parser.add_argument("--profile", default="lulesh", help="application profile (default lulesh)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--steps", type=int, default=50, help="decision intervals (default 50)")
    parser.add_argument("--num-regions", type=int, default=64)
    args = parser.parse_args()

    with tiergym.make(tiergym.ENV_ID, address=args.address, steps=args.steps,
                      num_regions=args.num_regions) as env:
        fast = len(env.tiers) - 1 if "hbm" not in env.tiers else env.tiers.index("hbm")
        policy = GreedyPolicy(env, fast_tier=fast)
        obs, info = env.reset(seed=args.seed, options={"profile": args.profile})
        total, migrated, refused = 0.0, 0, 0
        while True:
            obs, reward, terminated, truncated, info = env.step(policy(obs, info))
            total += reward
            migrated += info["migrated_bytes"]
            refused += len(info["refused_regions"])
            if terminated or truncated:
                break
        all_fast = env.estimate(info["profile"], '{"default": "%s"}' % env.tiers[fast])
        print(f"greedy policy on {info['profile']} ({env.tiers[0]} + {env.tiers[fast]}, "
              f"{env.num_regions} regions, {info['step'] + 1} steps, seed {args.seed}):")
        print(f"  fractional speedup (episode return): {total:.4f}")
        print(f"  runtime {info['elapsed_ns'] / 1e9:.3f} s vs {info['default_total_ns'] / 1e9:.3f} s "
              f"all on {env.tiers[0]}; migrated {migrated / 2**30:.2f} GiB"
              f"{f', {refused} moves refused for capacity' if refused else ''}")
        print(f"  for reference, everything on {env.tiers[fast]} from the start (no migration): "
              f"speedup {all_fast['speedup']:.4f}")


if __name__ == "__main__":
    main()

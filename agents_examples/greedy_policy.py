#!/usr/bin/env python3
"""A greedy placement policy on the tiergym environment: after every interval, put the regions
with the highest decayed access share on the fast tier, hottest first, as long as they fit in
its capacity; everything else on the default tier. Runs one episode and prints its fractional
speedup (the episode's return) against the all-on-the-default-tier run.

    python agents_examples/greedy_policy.py                  # a private server
    python agents_examples/greedy_policy.py --profile lulesh --steps 50
    python agents_examples/greedy_policy.py --address tcp://127.0.0.1:5555

Only the past is used: the observation's decayed access share per region ("history", the
last interval's share breaking ties), and the environment's static description (the fast
tier's capacity and the regions' sizes, env.tier_spec). The policy class is
policies.GreedyPolicy ("greedy" in evaluate.py's table).
"""

import argparse

import tiergym
from policies import GreedyPolicy  # the class lives in policies.py


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
        policy = GreedyPolicy()
        obs, info = env.reset(seed=args.seed, options={"profile": args.profile})
        policy.reset(env, obs, info)
        fast = policy.layout.fast
        total, migrated, refused = 0.0, 0, 0
        while True:
            obs, reward, terminated, truncated, info = env.step(policy.act(obs, info))
            total += reward
            migrated += info["migrated_bytes"]
            refused += len(info["refused_regions"])
            if terminated or truncated:
                break
        all_fast = env.estimate(info["profile"], '{"default": "%s"}' % env.tiers[fast])
        print(f"greedy policy on {info['profile']} ({env.tiers[0]} + {env.tiers[fast]}, "
              f"{env.num_regions} regions, {info['step']} steps, seed {args.seed}):")
        print(f"  fractional speedup (episode return): {total:.4f}")
        print(f"  runtime {info['elapsed_ns'] / 1e9:.3f} s vs {info['default_total_ns'] / 1e9:.3f} s "
              f"all on {env.tiers[0]}; migrated {migrated / 2**30:.2f} GiB"
              f"{f', {refused} moves refused for capacity' if refused else ''}")
        print(f"  for reference, everything on {env.tiers[fast]} from the start (no migration): "
              f"speedup {all_fast['speedup']:.4f}")


if __name__ == "__main__":
    main()

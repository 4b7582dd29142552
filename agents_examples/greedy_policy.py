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
from policies import GreedyPolicy, run_episode  # the class lives in policies.py


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
        r = run_episode(env, policy, seed=args.seed, profile=args.profile)
        fast, refused = policy.layout.fast, r["refused"]
        all_fast = env.estimate(r["profile"], {"default": env.tiers[fast]})
        print(f"greedy policy on {r['profile']} ({env.tiers[0]} + {env.tiers[fast]}, "
              f"{env.num_regions} regions, {r['steps']} steps, seed {args.seed}):")
        print(f"  fractional speedup (episode return): {r['speedup']:.4f}")
        print(f"  runtime {r['runtime_ns'] / 1e9:.3f} s vs {r['default_runtime_ns'] / 1e9:.3f} s "
              f"all on {env.tiers[0]}; migrated {r['migrated_bytes'] / 2**30:.2f} GiB"
              f"{f', {refused} moves refused for capacity' if refused else ''}")
        print(f"  for reference, everything on {env.tiers[fast]} from the start (no migration): "
              f"speedup {all_fast['speedup']:.4f}")


if __name__ == "__main__":
    main()

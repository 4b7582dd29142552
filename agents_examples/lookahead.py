"""Lookahead search with forked episodes: at every decision, fork the episode once per
candidate action, play each candidate and then keep its placement for a few decisions,
and take the candidate whose forked future saved the most time.

    python agents_examples/lookahead.py                        # the default task, 4 apps
    python agents_examples/lookahead.py --horizon 20 --apps lulesh --steps 100

The environment is the default task (`tiergym/TierPlacement-v1`: 512 MiB of HBM, 16
regions, the keep action mode) in this process (tiergym.make_vec(..., inprocess=True)).
InProcessVectorEnv.fork([0] * K) makes K independent copies of the episode at its state,
as one vector environment, so the K candidates' futures are stepped together, in C++. A
fork continues bit for bit as the original would under the same actions: the reward the
real episode gets for the chosen action is the one its fork got (the script counts any
difference; there is none).

Candidates (each a keep-mode action: 0 keeps a region, 1 + t moves it to tier t): keep
everything; and for a share s of the fast tier's capacity (0, 1/4, 1/2, 3/4, 1), put the
regions of highest decayed access density (the observation's) on the fast tier while they
fit in s of it, every other region on the default tier. Each candidate's future: its
action, then `--horizon - 1` decisions keeping the placement (the environment charges the
moves' time). The search sees the future of the run through its forks, as the oracle sees
the whole run: it is a planner with a perfect model, not a deployable policy, and the
comparison that matters is with the oracle (the best static placement) and the
heuristics. Progress on stderr; the table on stdout.
"""

import argparse
import sys
import time

import numpy as np

import learning_common
import tiergym

SHARES = (0.0, 0.25, 0.5, 0.75, 1.0)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--apps", default="minife,lulesh,nekbone,lammps")
    p.add_argument("--horizon", type=int, default=10, help="decisions looked ahead (default 10)")
    p.add_argument("--steps", type=int, default=100, help="decisions per episode (default 100)")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    if args.horizon < 1 or args.steps < 1:
        p.error("--horizon and --steps must be positive")
    return args


class Candidates:
    """The keep-mode actions a decision chooses from (see the module's documentation)."""

    def __init__(self, env):
        spec = env.tier_spec
        self.k = int(env.num_regions)
        self.features = int(spec["obs_region_features"])
        self.tiers = len(env.tiers)
        self.capacity = np.asarray(spec["tier_capacity_bytes"], dtype=np.float64)
        self.fast = int(np.argmax(spec["tier_bandwidth_gbps"]))
        self.bounds = np.asarray(spec["region_bounds"], dtype=np.float64)  # [profile, k, 2]
        self.profiles = list(env.profiles)

    def actions(self, obs, profile):
        regions = np.asarray(obs[:self.k * self.features]).reshape(self.k, self.features)
        tier = np.rint(regions[:, 0] * (self.tiers - 1)).astype(np.int64)
        size = np.diff(self.bounds[self.profiles.index(profile)], axis=1)[:, 0]
        density = regions[:, 2] / np.maximum(regions[:, 3], 1e-12)  # decayed share / size share
        order = np.argsort(-density, kind="stable")
        out = [np.zeros(self.k, dtype=np.int64)]  # keep everything
        for share in SHARES:
            want = np.zeros(self.k, dtype=np.int64)
            room = share * self.capacity[self.fast]
            for r in order:
                if density[r] > 0 and size[r] <= room:
                    want[r] = self.fast
                    room -= size[r]
            out.append(np.where(want == tier, 0, 1 + want).astype(np.int64))
        return np.stack(out)


def run(app, args, log):
    """(return, steps, forks stepped, mismatches) of one lookahead episode on `app`."""
    env = tiergym.make_vec(tiergym.DEFAULT_TASK_ID, 1, inprocess=True, copy=True,
                           autoreset_mode="disabled", steps=args.steps)
    try:
        candidates = Candidates(env)
        obs, info = env.reset(seed=args.seed, options={"profile": app})
        total, forks, mismatches, step = 0.0, 0, 0, 0
        while True:
            actions = candidates.actions(obs[0], app)
            futures = env.fork([0] * len(actions))
            try:
                value = np.zeros(len(actions))
                first = None
                for h in range(args.horizon):  # (the futures end together: same length)
                    step_actions = actions if h == 0 else np.zeros_like(actions)
                    _, rewards, terminated, truncated, _ = futures.step(step_actions)
                    if h == 0:
                        first = rewards.copy()
                    value += rewards
                    if (terminated | truncated).any():
                        break
                forks += len(actions)
            finally:
                futures.close()
            best = int(np.argmax(value))
            obs, reward, terminated, truncated, info = env.step(actions[best][None])
            mismatches += int(reward[0] != first[best])  # the fork's first step is the real one
            total += float(reward[0])
            step += 1
            if terminated[0] or truncated[0]:
                break
        log(f"{app}: return {total:+.4f} in {step} decisions, {forks} forks")
        return total, step, forks, mismatches
    finally:
        env.close()


def main(argv=None):
    args = parse_args(argv)
    apps = [a for a in args.apps.split(",") if a]

    def log(*parts):
        print(*parts, file=sys.stderr, flush=True)

    started = time.monotonic()
    returns, mismatches, forks = {}, 0, 0
    for app in apps:
        ret, _, n, bad = run(app, args, log)
        returns[app], mismatches, forks = ret, mismatches + bad, forks + n
    elapsed = time.monotonic() - started
    import learning_benchmark
    server = tiergym.Server()
    try:
        task = dict(tiergym.DEFAULT_TASK, steps=args.steps)
        reference = learning_benchmark.heuristic_returns(server, apps, task, names=("hemem",),
                                                         seed=args.seed)
    finally:
        server.close()
    learning_common.print_fractions([("all", apps)], returns, reference["oracle"],
                                    label="lookahead")
    hemem = np.mean([reference["hemem"][a] / reference["oracle"][a] for a in apps])
    print(f"HeMem-like for comparison: {hemem:.3f} of the oracle's time saved")
    print(f"lookahead {args.horizon}: {forks} forked episodes in {elapsed:.1f} s; the real "
          f"episode's reward differed from its fork's {mismatches} times")
    return 0


if __name__ == "__main__":
    sys.exit(main())

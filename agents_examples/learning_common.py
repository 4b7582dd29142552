"""What the learning agents (q_learning.py, ppo_torch.py) share: the train / held-out
protocol on the bundled applications, a machine whose fast tier is small enough that
placement matters, the reading of the observation, capacities, a random baseline, and the
episode and evaluation loops.

Why a smaller fast tier: every bundled application (1-3 GB footprint) fits in knl's 16 GiB
of HBM, so "everything on hbm" is optimal and there is nothing to learn. `--fast-mib 512`
(the default of the agents) asks the server for 512 MiB of HBM instead (configuration key
tier_capacity_mib), a fifth to a half of the footprints: the agent must pick the regions
worth the fast tier, and when to move them.

Policies follow the interface of agents_examples/policies.py (name, reset(env, obs, info),
act(obs, info) -> int64 tier per region) in placement action mode, and derive from its
Policy (reset() records the Layout, then calls start()). They use the observation,
`info` and the environment's static description only (env.tier_spec: capacities, migration
throughputs), never the future of the run.

Not thread-safe: one policy object per episode at a time.
"""

import argparse
import contextlib
import sys

import numpy as np

import policies
import tiergym

BUNDLED_APPS = ("minife", "lulesh", "nekbone", "lammps")
DEFAULT_TRAIN = ("minife", "lulesh")
DEFAULT_HELD_OUT = ("nekbone", "lammps")
# Size shares arrive as float32 (relative error below 1e-7): a region is granted only when
# it fits with this margin (in footprints, about 3 KB of a 3 GB footprint), so that float
# rounding never asks for a move the environment refuses.
FIT_MARGIN = 1e-6


def log(*parts):
    """Progress goes to stderr, results to stdout."""
    print(*parts, file=sys.stderr, flush=True)


# --- The machine -------------------------------------------------------------------------

def capacity_bytes(env):
    """Capacity of each tier in bytes (float array), from the environment's spec."""
    return np.asarray(env.tier_spec["tier_capacity_bytes"], dtype=np.float64)


def migration_gbps(env):
    """Page-migration throughput into each tier, GB/s (float array), from the environment's
    spec (the configuration's migration_gbps override applied by the server)."""
    return np.asarray(env.tier_spec["tier_migration_gbps"], dtype=np.float64)


# --- The observation ---------------------------------------------------------------------

class ObsView:
    """The observation split into its parts (env/environment.h, EnvSpec), for one
    observation [D] or a batch [N, D] (then every part has a leading N):
    regions [..., K, 4] = (tier / (tiers - 1), last share, history, size share) and those
    four as tier (int), last, history, size [..., K]; fill [..., tiers]; progress and speed
    (last interval's time / default, halved, clipped to 1) [...]."""

    def __init__(self, env, obs):
        k = int(env.num_regions)
        f = int(env.tier_spec["obs_region_features"])
        g = int(env.tier_spec["obs_global_offset"])
        t = len(env.tiers)
        obs = np.asarray(obs, dtype=np.float64)
        self.regions = obs[..., :g].reshape(obs.shape[:-1] + (k, f))
        self.tier = np.rint(self.regions[..., 0] * max(t - 1, 1)).astype(np.int64)
        self.last = self.regions[..., 1]
        self.history = self.regions[..., 2]
        self.size = self.regions[..., 3]
        self.fill = obs[..., g:g + t]
        self.progress = obs[..., g + t]
        self.speed = obs[..., g + t + 1]


def fit_capacity(request, score, size, capacity_share):
    """A placement within capacity from a request: request [K] (a tier per region), score
    [K] (higher: more deserving), size [K] and capacity_share [tiers] in footprints.
    Requested regions are granted in decreasing score while they fit their tier; the others
    go to the default tier (tier 0, assumed roomy). What is granted fits even before the
    same action's departures, so the environment refuses nothing."""
    request = np.asarray(request)
    action = np.zeros(len(request), dtype=np.int64)
    room = np.array(capacity_share, dtype=np.float64)
    for r in np.argsort(-np.asarray(score), kind="stable"):
        t = request[r]
        if t != 0 and size[r] <= room[t] - FIT_MARGIN:
            action[r] = t
            room[t] -= size[r]
    return action


# --- Policies and episodes ---------------------------------------------------------------

class RandomPolicy(policies.Policy):
    """A uniformly random tier per region at every step (seeded, not reseeded at reset:
    policies.py's `random` is, and keeps to the mask): the floor to beat."""

    name = "random"

    def __init__(self, seed=0):
        super().__init__(seed)
        self.rng = np.random.default_rng(seed)

    def start(self, env, obs, info):
        self.tiers = len(env.tiers)
        self.k = env.num_regions

    def act(self, obs, info):
        return self.rng.integers(0, self.tiers, self.k).astype(np.int64)


DefaultPolicy = policies.DefaultPolicy  # everything on the default tier: return 0


def evaluate(env, policies_, profiles, seeds):
    """{policy name: {profile: mean return over seeds}} (the return is the fractional
    speedup over the default tier); episodes run by policies.run_episode."""
    table = {}
    for policy in policies_:
        table[policy.name] = {}
        for p in profiles:
            table[policy.name][p] = float(np.mean(
                [policies.run_episode(env, policy, seed=s, profile=p)["speedup"] for s in seeds]))
    return table


def evaluate_against_baselines(env, policy, train, held_out, seed, eval_seeds, out=None):
    """The agents' closing evaluation: `policy`, RandomPolicy(seed) and DefaultPolicy on the
    training and held-out applications (`eval_seeds` episodes each, seeds from 10000 + seed),
    the table, then one line per held-out application saying whether `policy` beat random.
    Returns the table."""
    seeds = [10_000 + seed + i for i in range(eval_seeds)]
    table = evaluate(env, [policy, RandomPolicy(seed), DefaultPolicy()],
                     list(dict.fromkeys(list(train) + list(held_out))), seeds)
    print_table(table, train, held_out, out=out)
    name = policy.name
    for a in held_out:
        better = table[name][a] > table["random"][a]
        print(f"held out {a}: {name} {table[name][a]:+.4f} vs random "
              f"{table['random'][a]:+.4f} ({'better' if better else 'NOT better'})", file=out)
    return table


def settings(args, machine, **trained):
    """What a saved policy records: the agent's own training options (`trained`), then the
    shared ones (seed, regions, steps, machine, fast tier size)."""
    return {**trained, "seed": args.seed, "num_regions": args.num_regions, "steps": args.steps,
            "machine": machine, "fast_mib": args.fast_mib}


def print_table(table, train, held_out, out=None):
    """The evaluation table: speedup over the default tier per application, one column per
    policy, held-out applications marked."""
    names = list(table)
    apps = list(train) + [a for a in held_out if a not in train]
    print("speedup over the default tier (fractional: 1 - runtime / all-on-default runtime)",
          file=out)
    print(f"{'app':<18}" + "".join(f"{n:>12}" for n in names), file=out)
    for a in apps:
        label = f"{a} ({'held out' if a in held_out else 'train'})"
        print(f"{label:<18}" + "".join(f"{table[n][a]:>12.4f}" for n in names), file=out)


def print_fractions(groups, returns, oracle, label="return", out=None):
    """A learned policy's return per application beside the oracle's and the fraction of
    the oracle's time saved, with each group's mean fraction: groups [(name, [app])],
    returns and oracle {app: return}."""
    print(f"{'application':<14} {label:>10} {'oracle':>8} {'fraction':>9}", file=out)
    for name, apps in groups:
        for app in apps:
            print(f"{app:<14} {returns[app]:+10.4f} {oracle[app]:+8.4f} "
                  f"{returns[app] / oracle[app]:9.3f}", file=out)
        mean = np.mean([returns[a] / oracle[a] for a in apps])
        print(f"{name + ' mean':<14} {'':>10} {'':>8} {mean:9.3f}", file=out)


def agent_parser(doc, progress):
    """An agent's argument parser: its description (the first paragraph of `doc`), an
    epilog saying where the progress (`progress`: what a line shows) and the table go, and
    the options both agents share (add_protocol_args); the agent adds its own."""
    parser = argparse.ArgumentParser(
        description=doc.split("\n\n")[0],
        epilog=f"Progress ({progress}) goes to stderr; the evaluation table to stdout. The "
               "return of an episode is its fractional speedup over the "
               "all-on-the-default-tier run.")
    add_protocol_args(parser)
    return parser


def apps_and_progress(args):
    """(training applications, held-out applications, say): say(text) logs progress to
    stderr, or nothing with --quiet."""
    say = (lambda *a: None) if args.quiet else log
    return split_apps(args.train), split_apps(args.held_out), say


def add_protocol_args(parser):
    """The options both agents share."""
    parser.add_argument("--address", help="a running tiergym server (default: a private one)")
    parser.add_argument("--train", default=",".join(DEFAULT_TRAIN),
                        help="applications to train on (default %(default)s)")
    parser.add_argument("--held-out", default=",".join(DEFAULT_HELD_OUT),
                        help="applications to evaluate on, never trained on (default %(default)s)")
    parser.add_argument("--machine", default="knl", help="machine preset or JSON (default knl)")
    parser.add_argument("--fast-mib", type=int, default=512,
                        help="cut the machine's hbm tier to this many MiB so that the "
                             "applications do not fit it; 0 keeps the machine as it is "
                             "(default 512)")
    parser.add_argument("--num-regions", type=int, default=32, help="regions (default 32)")
    parser.add_argument("--steps", type=int, default=40, help="decisions per episode (default 40)")
    parser.add_argument("--seed", type=int, default=0, help="seed of everything (default 0)")
    parser.add_argument("--eval-seeds", type=int, default=2,
                        help="episodes per application in the evaluation (default 2)")
    parser.add_argument("--save", help="write the trained weights here (.npz)")
    parser.add_argument("--load", help="load weights instead of training (.npz)")
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")


def split_apps(text):
    apps = [a for a in (s.strip() for s in text.split(",")) if a]
    if not apps:
        raise argparse.ArgumentTypeError("empty application list")
    return apps


def env_config(args):
    """Configuration keys for tiergym.make from the shared options."""
    config = {"num_regions": args.num_regions, "steps": args.steps, "machine": args.machine}
    if args.fast_mib > 0:
        config["tier_capacity_mib"] = f"hbm:{args.fast_mib}"
    return config


@contextlib.contextmanager
def served(args):
    """The address to use: args.address, or a private server's, closed on leaving."""
    if args.address:
        yield args.address
        return
    with contextlib.closing(tiergym.Server(args=["--threads", "1", "--quiet"])) as server:
        yield server

r"""fast_ppo.py: masked MultiDiscrete PPO at the environment's speed, in one file.

    python agents_examples/fast_ppo.py                           # 2M steps of the default task
    python agents_examples/fast_ppo.py --policy regions          # per-region shared weights
    python agents_examples/fast_ppo.py --overlap-update          # the update beside the next rollout
    python agents_examples/fast_ppo.py --total-steps 500000 --json run.json --save ppo.pt
    python agents_examples/fast_ppo.py --ray-workers 2           # environments on Ray workers
    python agents_examples/fast_ppo.py --select-best             # end with the best checkpoint
    python agents_examples/fast_ppo.py --ensemble-top 3          # ... or the mean of the 3 best
    python agents_examples/fast_ppo.py --policy regions --config observation=relative \
        --train procedural-train-v1:256 --held-out bundled-v1     # splits of tiergym.datasets

The default task (tiergym/TierPlacement-v1: knl with 512 MiB of HBM, 16 regions, 100
decisions, keep action mode, normalized observations), trained on minife and lulesh and
evaluated, deterministically, on those and on nekbone and lammps (which it never sees), as
agents_examples/learning_benchmark.py does; the score is the fraction of the offline
oracle's time saved.

What makes it fast (CleanRL's single-file PPO, with the batching of EnvPool and PufferLib):

- Hundreds of environments per forward pass: the in-process vector environment
  (tiergym.InProcessVectorEnv: no server, stepping in C++ with the GIL released) steps
  `num_envs` environments, and the policy sees them in two halves.
- Stepping overlapped with inference: while one half steps (`send`, on the environment's
  worker thread), the policy picks the other half's actions; `recv` then waits only for
  what inference did not hide. Each half is always the same environments, so a seed gives
  the same run whatever the threads' timing.
- Preallocated rollout buffers: observations, masks, actions, log-probabilities, values,
  rewards and episode ends live in tensors allocated once; the environment's outputs are
  copied into them once; each epoch of the update copies them, shuffled, into a second
  set once (one index_select per field), and its minibatches are slices of that.
- Action masks applied: the environment's joint mask ([regions, 1 + tiers] in keep mode)
  removes the moves that would not fit before sampling and in the update.
- Two policies: `mlp` (a flat MLP over the whole observation) and `regions` (one small
  network shared by every region, permutation-equivariant: a region's logits from its own
  features and the mean of all regions' embeddings, as the Deep Sets / placement papers'
  architectures; the same weights for any number of regions); `regions-target`, the same
  network whose head names the tier each region should be on (mapped onto keep/move).
- The update overlapped with the next rollout (`--overlap-update`; the training-speed
  benchmark's fast path): update k runs on a thread of its own, on rollout k's buffers,
  while rollout k + 1 is collected into a second set with the weights of update k - 1 (a
  policy lag of one update, as in asynchronous PPO: the ratio and its clipping are taken
  against the logged log-probabilities of the policy that acted). The schedule is fixed,
  so a seed still gives the same run. Off by default: the learning benchmark's figures of
  this agent were made with the update in line.
- torch's threads set deliberately: one for inference while the environment's thread
  steps (the two cores are both busy), `update_threads` for the update (with
  `overlap_update` the update shares the cores with the rollout: keep 1).

The arguments are the dataclass Args below (every field a --flag). Metrics go to stderr as
they come (one line per evaluation) and, with --json, to a file rewritten after each one.
Exit status 0, 1 on a failure, 2 on a usage error.
"""

import argparse
import concurrent.futures
import copy
import dataclasses
import inspect
import json
import os
import re
import sys
import time

import numpy as np
import torch
import torch.nn as nn

import tiergym


@dataclasses.dataclass
class Args:
    seed: int = 0
    total_steps: int = 2_000_000       # environment steps to train for
    num_envs: int = 1024               # environments stepped together (two halves)
    num_steps: int = 16                # steps per environment per rollout: batch 16 x 1024
    policy: str = "mlp"                # "mlp" (flat), "regions" (shared per-region weights) or
                                       # "regions-target" (its head names each region's tier)
    hidden: int = 64                   # width of the hidden layers
    learning_rate: float = 3e-3
    anneal_lr: bool = True             # linear decay of the learning rate to 0 over total_steps
    gamma: float = 1.0                 # the return is the undiscounted time saved
    gae_lambda: float = 0.95
    update_epochs: int = 2
    num_minibatches: int = 4
    clip_coef: float = 0.2
    ent_coef: float = 0.01
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5
    target_kl: float = 0.0             # >0: end an update's epochs once its approx. KL passes this
    clip_per_region: bool = False      # clip each region's probability ratio, not the joint one
    explore_regions: float = 0.0       # >0: a region samples its choice with this probability
                                       # per step, else takes its most likely one (implies
                                       # clip_per_region; only sampled choices are learnt from)
    ema_decay: float = 0.0             # >0: evaluate and save a Polyak average of the weights
    select_best: bool = False          # end with the evaluated checkpoint best on the train apps
    ensemble_top: int = 0              # >0: end with the mean probabilities of the K best such
    reward_scale: float = 100.0        # rewards x steps: an episode's return ~ its time saved x 100
    reward_norm: str = "none"          # "oracle": an app's rewards x pool mean / its oracle saving
    reward_norm_floor: float = 0.1     # that oracle saving taken as at least this x the pool mean
    mask: str = "region"               # "region" (each move fits alone), "joint" (the env's), "none"
    train: str = "minife,lulesh"       # applications trained on
    held_out: str = "nekbone,lammps"   # applications evaluated on only
    config: str = ""                   # task overrides, KEY=VALUE,KEY=VALUE (e.g. num_regions=32)
    eval_every: int = 65_536           # environment steps between evaluations (excluded from time)
    target: float = 0.0                # stop once the training score reaches this fraction (0: never)
    env_threads: int = 2               # threads stepping the environments (the caller's included)
    torch_threads: int = 1             # torch threads for inference (rollouts)
    update_threads: int = 1            # torch threads for the update (2 on an idle machine)
    overlap: bool = True               # step one half while inferring the other (send/recv)
    overlap_update: bool = False       # update on the last rollout while the next is collected
    ray_workers: int = 0               # >0: environments on this many Ray workers instead
    ray_address: str = ""              # a running Ray cluster ("auto"); default a local one
    json: str = ""                     # write the metrics here (rewritten after each evaluation)
    save: str = ""                     # save the trained policy here (torch state dict)
    init_from: str = ""                # start from this saved policy (--save's, bc_regions.py's)
    quiet: bool = False


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter,
                    argparse.RawDescriptionHelpFormatter):
    """The description as written, each option's default after its text."""


def field_help(cls):
    """{field: its trailing comment in the dataclass cls's source, continuation comment lines
    joined}: the options' --help texts."""
    out, last = {}, None
    for line in inspect.getsource(cls).splitlines():
        m = re.match(r"\s+(\w+): [\w\[\]]+ = [^#]*(?:# (.*))?$", line)
        if m:
            last = m.group(1)
            out[last] = m.group(2) or ""
        elif last and line.strip().startswith("#"):
            out[last] += " " + line.strip()[1:].strip()
    return out


def parse_dataclass(cls, check, description, argv=None):
    """The command line as an instance of the dataclass cls (a flag per field, its comment
    its help), checked by check (a ValueError is a usage error naming the flag)."""
    parser = argparse.ArgumentParser(description=description, formatter_class=HelpFormatter)
    texts = field_help(cls)
    for f in dataclasses.fields(cls):
        flag = "--" + f.name.replace("_", "-")
        if isinstance(f.default, bool):
            parser.add_argument(flag, action=argparse.BooleanOptionalAction, default=f.default,
                                help=texts.get(f.name) or " ")
        else:
            parser.add_argument(flag, type=type(f.default), default=f.default,
                                help=texts.get(f.name) or " ")
    args = cls(**vars(parser.parse_args(argv)))
    try:
        check(args)
    except ValueError as e:
        parser.error(str(e))
    return args


def parse_args(argv=None):
    return parse_dataclass(Args, check_args, __doc__.split("\n\n")[0], argv)


def check_args(args):
    if args.policy not in POLICIES:
        raise ValueError(f"--policy: {args.policy!r} is not one of {', '.join(POLICIES)}")
    if args.mask not in MASKS:
        raise ValueError(f"--mask: {args.mask!r} is not one of {', '.join(MASKS)}")
    if args.reward_norm not in REWARD_NORMS:
        raise ValueError(f"--reward-norm: {args.reward_norm!r} is not one of "
                         f"{', '.join(REWARD_NORMS)}")
    if args.reward_norm != "none" and args.ray_workers:
        raise ValueError("--reward-norm with --ray-workers: not supported (the workers do not "
                         "return the ended episodes' profiles)")
    if not 0 <= args.ema_decay < 1:
        raise ValueError(f"--ema-decay must be in [0, 1) (0: off), got {args.ema_decay}")
    if not 0 <= args.explore_regions <= 1:
        raise ValueError("--explore-regions must be in [0, 1] (0: off), got "
                         f"{args.explore_regions}")
    if args.target_kl < 0:
        raise ValueError(f"--target-kl must be >= 0 (0: off), got {args.target_kl}")
    if args.ensemble_top < 0:
        raise ValueError(f"--ensemble-top must be >= 0 (0: off), got {args.ensemble_top}")
    if args.ensemble_top and args.select_best:
        raise ValueError("--ensemble-top with --select-best: choose one (--ensemble-top 1 is "
                         "--select-best)")
    if not 0 < args.reward_norm_floor <= 1:
        raise ValueError(f"--reward-norm-floor must be in (0, 1], got {args.reward_norm_floor}")
    if args.num_envs < 2 or args.num_envs % 2:
        raise ValueError(f"--num-envs must be even and at least 2 (two halves), got {args.num_envs}")
    if args.ray_workers < 0 or args.num_envs % max(args.ray_workers, 1):
        raise ValueError("--ray-workers must be >= 0 and divide --num-envs")
    batch = args.num_envs * args.num_steps
    if args.num_minibatches < 1 or batch % args.num_minibatches:
        raise ValueError(f"--num-minibatches must divide the batch ({batch})")
    for name in ("total_steps", "num_steps", "hidden", "update_epochs", "eval_every",
                 "env_threads", "torch_threads", "update_threads"):
        if getattr(args, name) < 1:
            raise ValueError(f"--{name.replace('_', '-')} must be at least 1")
    task_config(args)


def task_config(args):
    """The default task's configuration keys, with --config's overrides."""
    config = dict(tiergym.DEFAULT_TASK)
    for item in filter(None, args.config.split(",")):
        key, eq, value = item.partition("=")
        if not eq or not key:
            raise ValueError(f"--config: {item!r} is not KEY=VALUE")
        config[key] = value
    return config


def apps(text):
    """The comma-separated entries of --train or --held-out: profile names, or splits of
    tiergym.datasets ("procedural-train-v1:256")."""
    return [a for a in (s.strip() for s in text.split(",")) if a]


def app_names(text):
    """The applications --train or --held-out names: a split's entry stands for its
    applications' names."""
    out = []
    for entry in apps(text):
        split = tiergym.datasets.parse_entry(entry)
        out.extend(split[0].app_names(split[1]) if split is not None else [entry])
    return out


def serving_config(args):
    """The task's keys with `profiles` serving --train and --held-out (a split's entry
    stands for its profiles), for the evaluation's sessions."""
    return dict(task_config(args), profiles=",".join(apps(args.train) + apps(args.held_out)))


# --- The environments, made in one place ------------------------------------------------

def make_envs(args):
    """The training environments: num_envs in this process (two halves stepped in turn
    with send/recv), or on Ray workers (RayVectorEnv below, the same interface)."""
    config = dict(task_config(args), profiles=",".join(apps(args.train)))
    if args.ray_workers:
        return RayVectorEnv(args, config)
    return tiergym.InProcessVectorEnv(args.num_envs, threads=args.env_threads,
                                      batch_size=args.num_envs // 2 if args.overlap else args.num_envs,
                                      autoreset_mode=tiergym.SAME_STEP, **config)


class Layout:
    """Where things are in the flat observation (the environment's spec): K regions of F
    features each, then the global features (each tier's fill, progress, speed)."""

    def __init__(self, spec, num_regions, single_action_space):
        self.regions = int(num_regions)
        self.features = int(spec["obs_region_features"])
        self.global_offset = int(spec["obs_global_offset"])
        self.choices = int(single_action_space.nvec[0])  # keep, or move to one of the tiers

    def split(self, obs):
        """obs [B, D] -> region features [B, K, F], global features [B, G]."""
        g = self.global_offset
        return obs[:, :g].reshape(-1, self.regions, self.features), obs[:, g:]


MASKS = ("region", "joint", "none")
REWARD_NORMS = ("none", "oracle")


def reward_weights(args, tier_spec):
    """Each training profile's reward weight, in the order of tier_spec["profiles"] ([P]);
    None with --reward-norm none (rewards unweighted); with "oracle", the pool's mean
    oracle time saved over the profile's own (app_weights.py: every application's best
    episode then weighs the same, as the benchmark's mean over applications counts it)."""
    if args.reward_norm == "none":
        return None
    profiles = list(tier_spec["profiles"])
    import app_weights
    config = dict(task_config(args), profiles=",".join(apps(args.train)))
    weights = app_weights.reward_weights(app_weights.cached_oracle_returns(config, progress=log),
                                         args.reward_norm_floor)
    return np.array([weights[p] for p in profiles])


class Masks:
    """The action masks the policy samples within, [B, K, 1 + tiers] bool (keep, then each
    tier), from an info dict of the environment:

    - "joint": the environment's own mask (info["action_mask"]). It is joint: a tier's free
      space is granted to the regions in region order, so that every action within it fits
      at once; a region is allowed only if it fits beside every earlier region that could
      move too. That rules out placements that leave an early region out for a later one,
      which the oracle's knapsack needs (a masked policy stopped at 0.919 of the oracle on
      the training applications, every seed).
    - "region" (default): each move that fits the tier's free space alone (the region's
      bytes from the spec's region_bounds, the tier's use from info["tier_used_bytes"]);
      moves that do not fit together are refused by the environment (in region order) and
      those regions stay where they are, as for an agent without masks.
    - "none": every choice."""

    def __init__(self, mode, tier_spec):
        self.mode = mode
        bounds = np.asarray(tier_spec["region_bounds"], dtype=np.float64)   # [P, K, 2]
        self.region_bytes = bounds[..., 1] - bounds[..., 0]                # [P, K]
        self.capacity = np.asarray(tier_spec["tier_capacity_bytes"], dtype=np.float64)
        self.profile_index = {name: i for i, name in enumerate(tier_spec["profiles"])}

    def profiles(self, info, rows=None):
        """The rows' profiles (info["profile"], all rows or those of the bool array rows)
        as indices into the spec's profiles."""
        names = info["profile"] if rows is None else info["profile"][rows]
        return np.fromiter((self.profile_index[p] for p in names), dtype=np.int64,
                           count=len(names))

    def follow(self, env_profiles, info, ended):
        """Each environment's profile index, env_profiles [num_envs], brought up to date
        with a recv's rows (info["env_id"]; ended: the rows whose episode ended, where the
        same-step autoreset may have drawn another profile); returns the rows' indices."""
        ids = info["env_id"]
        if ended.any():
            env_profiles[ids[ended]] = self.profiles(info, ended)
        return env_profiles[ids]

    def __call__(self, info, profiles=None):
        """The mask [B, K, 1 + T] (a view of a choices-first [B, 1 + T, K] array, which
        mask_offsets reads contiguously). profiles: the rows' profile indices
        (self.profiles(info)) if the caller keeps them (an environment's profile changes
        only when it resets). Computed tier by tier over rows of K regions: numpy's
        broadcasts over a last dimension of 2 tiers, and the names looked up every step,
        took 2.5x longer (the mask and its offsets for 512 rows: 205 us of CPU against 81,
        measured)."""
        joint = np.asarray(info["action_mask"], dtype=bool)                # [B, K, 1 + T]
        if self.mode == "joint":
            return joint
        if self.mode == "none":
            return np.ones_like(joint)
        if profiles is None:
            profiles = self.profiles(info)
        free = self.capacity - np.asarray(info["tier_used_bytes"], dtype=np.float64)  # [B, T]
        sizes = self.region_bytes[profiles]                                 # [B, K]
        mask = np.ascontiguousarray(joint.transpose(0, 2, 1))              # [B, 1 + T, K]
        for t in range(free.shape[1]):  # the joint mask's moves (and staying) fit alone too
            mask[:, 1 + t] |= sizes <= free[:, t, None]
        return mask.transpose(0, 2, 1)


def reward_profiles(info, profile_index):
    """The profile index of each row's reward ([B]): the episode's that ended at this step
    where one did (same-step autoreset: info["profile"] is then the next episode's and
    info["final_info"]["profile"] the ended one's)."""
    names = np.asarray(info["profile"], dtype=object)
    if "final_info" in info:
        ended = np.asarray(info["_final_info"], dtype=bool)
        names = np.where(ended, np.asarray(info["final_info"]["profile"], dtype=object), names)
    return np.fromiter((profile_index[p] for p in names), dtype=np.int64, count=len(names))


# --- The policies ------------------------------------------------------------------------

def layer(n_in, n_out, std=np.sqrt(2)):
    linear = nn.Linear(n_in, n_out)
    nn.init.orthogonal_(linear.weight, std)
    nn.init.zeros_(linear.bias)
    return linear


class FlatPolicy(nn.Module):
    """An MLP over the whole observation, one trunk for the actor's and the critic's heads
    (half the cost of two networks, which both rollouts and updates pay): logits [B, K, C]
    and a value [B]."""

    def __init__(self, layout, obs_size, hidden):
        super().__init__()
        self.layout = layout
        self.trunk = nn.Sequential(layer(obs_size, hidden), nn.Tanh(), layer(hidden, hidden),
                                   nn.Tanh())
        self.actor = layer(hidden, layout.regions * layout.choices, std=0.01)
        self.critic = layer(hidden, 1, std=1.0)

    def forward(self, obs):
        h = self.trunk(obs)
        # The actor's outputs are laid out choice by choice ([B, C, K] in memory), so that
        # the log-softmax over the choices (choices_first below) reads contiguous rows.
        logits = self.actor(h).view(-1, self.layout.choices, self.layout.regions)
        return logits.transpose(1, 2), self.critic(h).squeeze(-1)


class RegionPolicy(nn.Module):
    """Per-region shared weights (permutation-equivariant, Deep Sets): every region is
    encoded by the same network from its own features and the global ones; an equivariant
    layer mixes each region's embedding with the mean over regions; a shared head gives its
    logits. The value comes from the mean embedding and the globals. Reordering the regions
    reorders the logits the same way; the weights serve any number of regions."""

    def __init__(self, layout, obs_size, hidden):
        super().__init__()
        self.layout = layout
        n_global = obs_size - layout.global_offset
        self.encoder = nn.Sequential(layer(layout.features + n_global, hidden), nn.Tanh())
        self.own = layer(hidden, hidden)
        self.pooled = layer(hidden, hidden)
        self.head = layer(hidden, layout.choices, std=0.01)
        self.critic = nn.Sequential(layer(hidden + n_global, hidden), nn.Tanh(),
                                    layer(hidden, 1, std=1.0))

    def forward(self, obs):
        regions, globals_ = self.layout.split(obs)
        k = self.layout.regions
        x = torch.cat([regions, globals_.unsqueeze(1).expand(-1, k, -1)], dim=-1)
        e = self.encoder(x)                                        # [B, K, H]
        pooled = e.mean(dim=1)                                     # [B, H]
        h = torch.tanh(self.own(e) + self.pooled(pooled).unsqueeze(1))
        logits = self.head(h)                                      # [B, K, C]
        return logits, self.critic(torch.cat([h.mean(dim=1), globals_], dim=-1)).squeeze(-1)


class TargetRegionPolicy(RegionPolicy):
    """RegionPolicy whose head says which tier each region should be on, not what to do
    with it: one logit per tier, mapped onto the keep-mode action (keep = the logit of the
    region's current tier, move to tier t = t's logit, a move to the current tier masked).
    With keep/move logits a policy that wants a region in the fast tier may move it at a
    low rate per step (any step will do), and whether its most likely choice moves the
    region is then a toss-up: the deterministic policy it is evaluated as flips. Here a
    region wanted on a tier with probability p is moved away from it with probability
    1 - p at every step, so the learned distribution has to sharpen, and its argmax is the
    placement it samples. (Measured: steady, but at a poor placement; agents_examples/
    README.md, "Why the deterministic policy flips".) The current tier is read from the
    region's first feature (tier / (tiers - 1) in the normalized and relative
    observations)."""

    def __init__(self, layout, obs_size, hidden):
        super().__init__(layout, obs_size, hidden)
        self.tiers = layout.choices - 1
        self.head = layer(hidden, self.tiers, std=0.01)

    def forward(self, obs):
        wanted, value = super().forward(obs)                        # [B, K, T]
        current = (self.layout.split(obs)[0][..., 0] * (self.tiers - 1)).round().long()
        current = current.clamp(0, self.tiers - 1).unsqueeze(-1)    # [B, K, 1]
        keep = wanted.gather(-1, current)
        moves = wanted.scatter(-1, current, MASKED)
        return torch.cat([keep, moves], dim=-1), value


POLICIES = {"mlp": FlatPolicy, "regions": RegionPolicy, "regions-target": TargetRegionPolicy}


def choices_first(x):
    """[B, K, C] -> [B, C, K] (a view). The choices (3 here) are the softmax's dimension;
    torch's log-softmax over a last dimension that short runs row by row, several times
    slower than over dimension 1 of [B, C, K], whose rows of K regions are contiguous."""
    return x.transpose(1, 2)


MASKED = -1e9  # a masked-out choice's logit offset: probability 0, never sampled


def mask_offsets(mask):
    """An action mask [B, K, C] (bool, as Masks gives it) -> additive offsets [B, C, K]
    (choices first): 0 where a choice is allowed, MASKED where it is not. Adding them masks
    the logits; an add's gradient is the identity, where masked_fill's is another pass."""
    return np.where(mask.transpose(0, 2, 1), np.float32(0.0), np.float32(MASKED))


def masked_logits(logits, offsets):
    """The policy's logits [B, K, C] masked by offsets [B, C, K]: [B, C, K], choices first
    (log_softmax(dim=1) of them are the log-probabilities)."""
    return choices_first(logits) + offsets


def entropy_of(z, logp):
    """Per-sample entropy, summed over the regions, from masked logits z and their
    log-probabilities logp ([B, C, K]). The probabilities come from softmax rather than
    logp.exp(): exp takes a slow path below -87 (the masked choices' -1e9), softmax's kernel
    does not. (With the additive masks, the masking, log-softmax and entropy of a 4,096-sample
    minibatch, forward and backward, take 2.0 ms of CPU where masked_fill and a clamped exp
    took 4.5, measured.)"""
    return -(z.softmax(dim=1) * logp).sum((1, 2))


def gumbel_noise(rng, shape):
    """Noise for the Gumbel-max trick, -log(-log(u)), drawn by numpy's generator (several
    times faster than torch's CPU generator) for a whole rollout at once: argmax(logp +
    noise) over the choices samples each region's choice from its distribution."""
    u = torch.from_numpy(rng.random(shape, dtype=np.float32))
    return u.clamp_(min=1e-12).log_().neg_().log_().neg_()


def argmax_choices(x):
    """The index of the largest choice, x [B, C, K] -> [B, K] (int64), by a few
    elementwise ops over the C rows of K values: torch 2.13's argmax over a dimension that
    is not the last takes 10x longer than max(dim=1).indices, which takes twice as long as
    this for 3 choices (measured on [512, 3, 16]: 93, 54 us). Ties (only between masked
    choices, never chosen) go to the first."""
    rows = x.unbind(1)
    if len(rows) == 1:
        return torch.zeros(rows[0].shape, dtype=torch.int64)
    a = (rows[1] > rows[0]).to(torch.int64)
    best = rows[0]
    for j in range(2, len(rows)):
        best = torch.maximum(best, rows[j - 1])
        a = torch.where(rows[j] > best, j, a)
    return a


def choose(logp, noise, explored=None):
    """Each region's choice [B, K] from log-probabilities logp [B, C, K]: sampled by
    Gumbel-max with noise of the same shape, or, where explored [B, K] is given and 0, the
    most likely choice (explore_regions)."""
    a = argmax_choices(logp + noise)
    if explored is not None:
        a = torch.where(explored > 0, a, argmax_choices(logp))
    return a


def greedy_actions(policy, obs, mask):
    """The deterministic policy: the most likely allowed choice per region (for an
    Ensemble, by the mean of its members' masked probabilities)."""
    with torch.inference_mode():
        obs, allowed = torch.as_tensor(obs), torch.as_tensor(mask, dtype=torch.bool)
        if isinstance(policy, Ensemble):
            return torch.argmax(policy.probabilities(obs, allowed), dim=-1).numpy()
        logits, _ = policy(obs)
        return torch.argmax(logits.masked_fill(~allowed, -1e9), dim=-1).numpy()


def clipped_surrogate(adv, ratio, clip):
    """PPO's clipped policy loss: the mean over the batch of max(-A r, -A clip(r)), for a
    joint ratio r [B], or summed over the regions for per-region ratios [B, K]
    (clip_per_region: each region's choice clipped on its own, as multi-agent PPO clips
    each agent's; the joint ratio of K regions is a product of K of them, so clipping it
    holds every region's step to about clip / K)."""
    if ratio.dim() == 2:
        adv = adv.unsqueeze(1)
    loss = torch.max(-adv * ratio, -adv * ratio.clamp(1 - clip, 1 + clip))
    return (loss.sum(1) if loss.dim() == 2 else loss).mean()


def approx_kl_of(ratio, logratio):
    """KL(acting policy || updated one) on a minibatch: the estimator E[(r - 1) - log r]
    (Schulman's "Approximating KL divergence", as CleanRL's and SB3's approx_kl), over the
    joint action (all regions). Computed per minibatch only with --target-kl (a sync on
    the update's path), else once for the update's stats."""
    with torch.no_grad():
        return ((ratio - 1) - logratio).mean().item()


class Ensemble(nn.Module):
    """Checkpoints averaged in their outputs rather than their weights (--ensemble-top):
    each region's probabilities are the mean over the members of their softmax over the
    allowed choices, and greedy_actions acts by the argmax of that mean. The average of
    weights (--ema-decay) scored below the learner; a mean of probabilities is a policy
    between its members' whatever their weights. forward gives the log of the mean of the
    unmasked probabilities (and the members' mean value), for callers without a mask."""

    def __init__(self, members):
        super().__init__()
        if not members:
            raise ValueError("an Ensemble needs at least one member")
        self.members = nn.ModuleList(members)

    def probabilities(self, obs, allowed):
        """The mean of the members' masked softmax probabilities, [B, K, C] (allowed: a
        bool mask [B, K, C]; at least one choice allowed per region)."""
        return torch.stack([logits.masked_fill(~allowed, MASKED).softmax(dim=-1)
                            for logits, _ in (m(obs) for m in self.members)]).mean(dim=0)

    def forward(self, obs):
        outs = [m(obs) for m in self.members]
        probs = torch.stack([logits.softmax(dim=-1) for logits, _ in outs]).mean(dim=0)
        return probs.log(), torch.stack([v for _, v in outs]).mean(dim=0)


# --- Evaluation --------------------------------------------------------------------------

class Evaluator:
    """One deterministic episode per application (seed 0, as policies.run_episode runs the
    heuristics), all applications side by side in one in-process vector environment.
    The same episodes as evaluate.py's and learning_benchmark.py's, bit for bit: the
    in-process environment is the server's."""

    def __init__(self, args, apps_):
        self.apps = list(apps_)
        self.envs = tiergym.InProcessVectorEnv(len(self.apps), threads=1,
                                               autoreset_mode=tiergym.DISABLED,
                                               **serving_config(args))
        self.masks = Masks(args.mask, self.envs.tier_spec)

    def __call__(self, policy):
        obs, info = self.envs.reset(seed=[0] * len(self.apps), options={"profile": self.apps})
        total = np.zeros(len(self.apps))
        while True:  # one configuration: every episode ends at the same step
            obs, reward, terminated, truncated, info = self.envs.step(
                greedy_actions(policy, obs, self.masks(info)))
            total += reward
            if (terminated | truncated).all():
                return {app: float(r) for app, r in zip(self.apps, total)}

    def close(self):
        self.envs.close()


def fraction_of_oracle(returns, oracle, apps_):
    """The mean over the applications of return / oracle's return; where procedural
    applications are among them (some gain nothing from any placement: a ratio there is
    noise), the time saved summed over the oracle's sum, as learning_benchmark.py scores
    its procedural sets."""
    if any(a.startswith("procedural-") for a in apps_):
        total = sum(oracle[a] for a in apps_)
        return float(sum(returns[a] for a in apps_) / total) if total > 0 else float("nan")
    return float(np.mean([returns[a] / oracle[a] for a in apps_]))


def reference_returns(args, names=("hemem",)):
    """{policy: {app: return}} of the oracle and the heuristics of policies.py on the same
    machine (placement mode), over a private server: the scale of the score."""
    import policies
    config = dict(serving_config(args), action_mode="placement", observation="raw")
    env = tiergym.TierEnv(**config)
    try:
        return {name: {a: float(policies.run_episode(env, policies.make_policy(name, seed=0),
                                                     seed=0, profile=a)["speedup"])
                       for a in app_names(args.train) + app_names(args.held_out)}
                for name in ("oracle",) + tuple(names)}
    finally:
        env.close()


# --- Environment workers on Ray ----------------------------------------------------------

class RayVectorEnv:
    """The in-process vector environment's send/recv over Ray workers: worker w holds an
    InProcessVectorEnv of num_envs / workers environments in its own process (on any node
    of the cluster). Halves are split over the workers (with one worker both halves live
    in it, stepped in turn), so the policy infers one half while the other steps."""

    def __init__(self, args, config):
        import ray
        self.ray = ray
        self.started_ray = not ray.is_initialized()
        if self.started_ray:
            ray.init(address=args.ray_address or None, include_dashboard=False,
                     log_to_driver=False, **({} if args.ray_address else {"num_cpus": max(2, args.ray_workers)}))
        n, w = args.num_envs, args.ray_workers
        self.num_envs, self.batch_size = n, n // 2
        self.workers = [_ray_worker().remote(n // w, config) for _ in range(w)]
        first = [ray.get(wk.describe.remote()) for wk in self.workers][0]
        self.single_observation_space, self.single_action_space = first["spaces"]
        self.tier_spec, self.num_regions = first["tier_spec"], first["num_regions"]
        self.per_worker = n // w
        self.pending = []

    def reset(self, seed=0):
        outs = self.ray.get([wk.reset.remote(seed + k * self.per_worker)
                             for k, wk in enumerate(self.workers)])
        return np.concatenate([o[0] for o in outs]), self._infos([o[1] for o in outs])

    @staticmethod
    def _infos(parts):
        return {key: np.concatenate([p[key] for p in parts]) for key in parts[0]}

    def send(self, actions, env_ids):
        env_ids = np.asarray(env_ids)
        owner = env_ids // self.per_worker
        refs = []
        for k in np.unique(owner):
            rows = np.flatnonzero(owner == k)
            local = (env_ids[rows] - k * self.per_worker).astype(np.int32)
            refs.append((int(k), self.workers[k].step.remote(local, actions[rows])))
        self.pending.append(refs)

    def recv(self):
        refs = self.pending.pop(0)
        parts = self.ray.get([r for _, r in refs])
        for (k, _), p in zip(refs, parts):
            p[4]["env_id"] = p[4]["env_id"] + k * self.per_worker
        cat = [np.concatenate([p[i] for p in parts]) for i in range(4)]
        return cat[0], cat[1], cat[2], cat[3], self._infos([p[4] for p in parts])

    def close(self):
        for wk in self.workers:
            self.ray.kill(wk)
        self.workers = []
        if self.started_ray:
            self.ray.shutdown()


def _ray_worker():
    import ray

    @ray.remote(num_cpus=1)
    class Worker:
        """One process's in-process vector environment (same-step autoreset)."""

        def __init__(self, n, config):
            self.envs = tiergym.InProcessVectorEnv(n, threads=1, autoreset_mode=tiergym.SAME_STEP,
                                                   **config)

        def describe(self):
            return {"spaces": (self.envs.single_observation_space, self.envs.single_action_space),
                    "tier_spec": self.envs.tier_spec, "num_regions": self.envs.num_regions}

        @staticmethod
        def _info(info):
            return {key: np.array(info[key], copy=True)
                    for key in ("action_mask", "profile", "tier_used_bytes")}

        def reset(self, seed):
            obs, info = self.envs.reset(seed=seed)
            return obs.copy(), self._info(info)

        def step(self, local_ids, actions):
            """Steps the environments local_ids (this worker's part of a half)."""
            self.envs.batch_size = len(local_ids)
            self.envs.send(actions, local_ids)
            o, r, te, tr, info = self.envs.recv()
            out = self._info(info)
            out["env_id"] = info["env_id"].astype(np.int64)
            return o.copy(), r.copy(), te.copy(), tr.copy(), out

    return Worker


# --- Training ----------------------------------------------------------------------------

def log(*parts):
    print(*parts, file=sys.stderr, flush=True)


class Rollout:
    """One rollout's buffers, allocated once: step t of environment i is row [t, i]. Masks
    are stored as additive offsets, choices first ([C, K] per sample: mask_offsets). With
    overlap_update there are two, used in turn: the update reads one while the next rollout
    writes the other."""

    def __init__(self, t_len, n, obs_size, c, k, per_region=False, explore=False):
        self.obs = torch.zeros((t_len + 1, n, obs_size))
        self.masks = torch.zeros((t_len + 1, n, c, k))
        self.dones = torch.zeros((t_len + 1, n))        # obs[t] starts a new episode
        self.actions = torch.zeros((t_len, n, k), dtype=torch.int64)
        # The chosen actions' log-probabilities: joint [T, N], or per region [T, N, K]
        # (clip_per_region).
        self.logprobs = torch.zeros((t_len, n, k) if per_region else (t_len, n))
        # explore_regions: 1 where the region's choice was sampled, 0 where it was the
        # most likely one.
        self.explored = torch.zeros((t_len, n, k)) if explore else None
        self.rewards = torch.zeros((t_len, n))
        self.values = torch.zeros((t_len + 1, n))
        self.obs_np, self.masks_np = self.obs.numpy(), self.masks.numpy()
        self.dones_np, self.rewards_np = self.dones.numpy(), self.rewards.numpy()

    def start_from(self, other):
        """The last observations of other start this rollout."""
        self.obs[0], self.masks[0], self.dones[0] = other.obs[-1], other.masks[-1], other.dones[-1]


class WeightAverage:
    """An exponential moving average (Polyak) of a policy's weights over updates, the policy
    evaluated and saved with --ema-decay: after update k it holds

        sum_{j=1..k} decay^(k-j) theta_j / sum_{j=1..k} decay^(k-j)

    (theta_j: the learner's weights after update j; the initial weights are not in it, so
    the first evaluations are not pulled back towards them: Adam's bias correction). The
    learner still acts in the rollouts; the average is only read. Where a decision sits on
    the policy's learned threshold and the last update's draw moves it across, the average
    of the last ~1 / (1 - decay) updates was meant to move less; on the procedural pool it
    scored below the learner instead (agents_examples/README.md, "Generalization")."""

    def __init__(self, policy, decay):
        self.decay, self.updates = float(decay), 0
        self.policy = copy.deepcopy(policy).requires_grad_(False)

    def update(self, learner):
        """Folds the learner's current weights in."""
        self.updates += 1
        # the weight of the newest term: (1 - d) / (1 - d^k); 1 at the first update
        w = (1 - self.decay) / (1 - self.decay ** self.updates)
        with torch.no_grad():
            for mine, theirs in zip(self.policy.parameters(), learner.parameters()):
                mine.lerp_(theirs, w)


def train(args, oracle=None, on_eval=None, evaluator=None, score=None):
    """Trains a policy; returns (policy, metrics): the policy evaluated (with ema_decay the
    average of the learner's weights, whose own returns each evaluation point also holds,
    learner_returns). oracle ({app: return}) turns returns into
    fractions of the oracle's time saved; on_eval(point) is called after each evaluation.
    evaluator (policy -> {app: return}, or {set: {app: return}} without an oracle) replaces
    the default one (--train and --held-out side by side); the caller closes it.
    With select_best the policy returned (and saved) is the checkpoint of the evaluation
    with the highest score(point) (default: its fraction of the oracle on the training
    applications, point["train"]), and a last point repeats its returns at the budget's
    steps, with selected_steps saying which evaluation it was. With ensemble_top K > 1 it
    is the Ensemble of the K checkpoints of highest score (ties: the earlier), evaluated
    once more for a last point at the budget's steps, whose ensemble_steps say which
    evaluations they were; ensemble_top 1 is select_best."""
    check_args(args)
    score_of = score
    if score_of is None and oracle is not None:
        score_of = lambda point: point["train"]  # noqa: E731
    keep = args.ensemble_top or (1 if args.select_best else 0)  # checkpoints kept by score
    if keep and score_of is None:
        raise ValueError(f"--{'ensemble-top' if args.ensemble_top else 'select-best'} needs "
                         "the training applications' oracle (or a score)")
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.torch_threads)
    generator = torch.Generator().manual_seed(args.seed)   # minibatch order
    rng = np.random.default_rng(args.seed)                   # sampling noise
    train_apps, held_out = app_names(args.train), app_names(args.held_out)

    envs = make_envs(args)
    own_evaluator = evaluator is None
    if own_evaluator:
        evaluator = Evaluator(args, train_apps + held_out)
    n, t_len, half = args.num_envs, args.num_steps, args.num_envs // 2
    layout = Layout(envs.tier_spec, envs.num_regions, envs.single_action_space)
    make_masks = Masks(args.mask, envs.tier_spec)
    weight_of = reward_weights(args, envs.tier_spec)
    profile_index = {name: i for i, name in enumerate(envs.tier_spec["profiles"])}
    obs_size = envs.single_observation_space.shape[0]
    k, c = layout.regions, layout.choices
    policy = POLICIES[args.policy](layout, obs_size, args.hidden)
    if args.init_from:  # a warm start (bc_regions.py): the same policy class and widths
        policy.load_state_dict(torch.load(args.init_from, weights_only=False)["state_dict"])
    # The policy that acts: the learner itself, or (overlap_update) a copy holding the
    # weights of the update before the one running.
    actor = copy.deepcopy(policy) if args.overlap_update else policy
    # The policy evaluated and saved: the learner, or (ema_decay) the average of its weights.
    average = WeightAverage(policy, args.ema_decay) if args.ema_decay > 0 else None
    evaluated = policy if average is None else average.policy
    # select_best / ensemble_top: [score, point, weights] of the `keep` best evaluations so
    # far, best first (of equal scores, the earlier first).
    best = []
    kl_stops = [0]  # target_kl: the updates stopped early so far
    # fused: Adam's step in one kernel over every parameter rather than a few ops per
    # parameter (the same arithmetic; 0.35 ms instead of 0.65 per minibatch, measured).
    optimizer = torch.optim.Adam(policy.parameters(), lr=args.learning_rate, eps=1e-5, fused=True)

    per_region = args.clip_per_region or args.explore_regions > 0
    buffers = [Rollout(t_len, n, obs_size, c, k, per_region, args.explore_regions > 0)
               for _ in range(2 if args.overlap_update else 1)]
    noise = torch.zeros((t_len, n, c, k))      # the rollout's sampling noise
    # The update's minibatches: each epoch, the batch's rows in a random order, copied
    # once into these (one index_select per field per epoch; minibatches are then views).
    batch = t_len * n
    shuffled = dict(obs=torch.zeros((batch, obs_size)), masks=torch.zeros((batch, c, k)),
                    actions=torch.zeros((batch, k), dtype=torch.int64),
                    logprobs=torch.zeros((batch, k) if per_region else batch),
                    advantages=torch.zeros(batch), returns=torch.zeros(batch))
    if args.explore_regions > 0:
        shuffled["explored"] = torch.zeros((batch, k))

    env_profiles = np.zeros(n, dtype=np.int64)  # each environment's profile (Masks.profiles)
    halves = [np.arange(h * half, (h + 1) * half, dtype=np.int32) for h in (0, 1)]
    # Wall seconds by part; *_cpu: the process's CPU seconds (every thread's, the environment's
    # included), which a loaded machine inflates less than the wall time. With
    # overlap_update, "update" is the wait for the update after the rollout (what the
    # rollout did not hide) and "update_busy" the update's own wall time, on its thread.
    timers = dict(inference=0.0, env=0.0, update=0.0, rollout=0.0, evaluation=0.0,
                  rollout_cpu=0.0, update_cpu=0.0, update_busy=0.0)
    metrics = dict(args=dataclasses.asdict(args), curve=[], timers=timers, steps=0,
                   train_s=0.0, cpu_s=0.0, reached_s=None, reached_steps=None)

    def act(buf, t, rows):
        """Actions for rows (a slice) at step t, recorded in the buffers."""
        t0 = time.perf_counter()
        with torch.inference_mode():
            logits, value = actor(buf.obs[t, rows])
            logp = masked_logits(logits, buf.masks[t, rows]).log_softmax(dim=1)  # [B, C, K]
            a = choose(logp, noise[t, rows],
                       None if buf.explored is None else buf.explored[t, rows])
            buf.actions[t, rows] = a
            chosen = logp.gather(1, a.unsqueeze(1))                   # [B, 1, K]
            buf.logprobs[t, rows] = chosen[:, 0] if per_region else chosen.sum((1, 2))
            buf.values[t, rows] = value
        timers["inference"] += time.perf_counter() - t0
        return a.numpy()

    def record(buf, t, out):
        """A recv's rows (environments in any order, infos["env_id"]) into step t + 1."""
        o, r, terminated, truncated, info = out
        ids = info["env_id"]
        ended = terminated | truncated
        profiles = make_masks.follow(env_profiles, info, ended)
        buf.obs_np[t + 1, ids] = o
        buf.masks_np[t + 1, ids] = mask_offsets(make_masks(info, profiles))
        buf.rewards_np[t, ids] = r * args.reward_scale
        if weight_of is not None:
            buf.rewards_np[t, ids] *= weight_of[reward_profiles(info, profile_index)]
        buf.dones_np[t + 1, ids] = ended

    def env_call(fn, *a):
        t0 = time.perf_counter()
        out = fn(*a)
        timers["env"] += time.perf_counter() - t0
        return out

    def rollout(buf):
        t0 = time.perf_counter()
        noise.copy_(gumbel_noise(rng, noise.shape))
        if buf.explored is not None:
            buf.explored.copy_(torch.from_numpy(
                (rng.random(buf.explored.shape) < args.explore_regions).astype(np.float32)))
        timers["inference"] += time.perf_counter() - t0
        if not args.overlap:  # plain stepping: all environments, one call per step
            for t in range(t_len):
                a = act(buf, t, slice(0, n))
                env_call(envs.send, a, None)
                record(buf, t, env_call(envs.recv))
            return
        rows = [slice(0, half), slice(half, n)]
        env_call(envs.send, act(buf, 0, rows[0]), halves[0])
        for t in range(t_len):
            a1 = act(buf, t, rows[1])                # while half 0 steps
            record(buf, t, env_call(envs.recv))      # half 0, step t
            env_call(envs.send, a1, halves[1])
            if t + 1 < t_len:
                a0 = act(buf, t + 1, rows[0])        # while half 1 steps
            record(buf, t, env_call(envs.recv))      # half 1, step t
            if t + 1 < t_len:
                env_call(envs.send, a0, halves[0])

    def update(buf):
        t0, cpu0 = time.perf_counter(), time.thread_time()
        with torch.no_grad():
            values = buf.values
            values[t_len] = policy(buf.obs[t_len])[1]
            advantages = torch.zeros((t_len, n))
            last = torch.zeros(n)
            for t in reversed(range(t_len)):
                nonterminal = 1.0 - buf.dones[t + 1]
                delta = buf.rewards[t] + args.gamma * values[t + 1] * nonterminal - values[t]
                last = delta + args.gamma * args.gae_lambda * nonterminal * last
                advantages[t] = last
            returns = advantages + values[:t_len]
        fields = dict(obs=buf.obs[:t_len].reshape(batch, obs_size),
                      masks=buf.masks[:t_len].reshape(batch, c, k),
                      actions=buf.actions.reshape(batch, k),
                      logprobs=buf.logprobs.reshape(batch, *buf.logprobs.shape[2:]),
                      advantages=advantages.reshape(batch), returns=returns.reshape(batch))
        if buf.explored is not None:
            fields["explored"] = buf.explored.reshape(batch, k)
        size = batch // args.num_minibatches
        steps_taken, stopped = 0, False
        for _ in range(args.update_epochs):
            if stopped:
                break
            order = torch.randperm(batch, generator=generator)
            for name, x in fields.items():
                torch.index_select(x, 0, order, out=shuffled[name])
            for start in range(0, batch, size):
                mb = {name: x[start:start + size] for name, x in shuffled.items()}
                logits, new_value = policy(mb["obs"])
                z = masked_logits(logits, mb["masks"])                       # [B, C, K]
                logp = z.log_softmax(dim=1)
                chosen = logp.gather(1, mb["actions"].unsqueeze(1))          # [B, 1, K]
                entropy = entropy_of(z, logp)
                if per_region:  # each region's ratio [B, K]; the joint one for the KL
                    region_logratio = chosen[:, 0] - mb["logprobs"]
                    if "explored" in mb:  # a choice not sampled is not learnt from
                        region_logratio = region_logratio * mb["explored"]
                    region_ratio = region_logratio.exp()
                    logratio = region_logratio.sum(1)
                else:
                    logratio = chosen.sum((1, 2)) - mb["logprobs"]
                ratio = logratio.exp()
                if args.target_kl > 0 and approx_kl_of(ratio, logratio) > args.target_kl:
                    # The policy has moved far enough from the one that acted: the rest of
                    # this update's minibatches and epochs are skipped (SB3's target_kl:
                    # checked before the step, so this minibatch is not taken either).
                    stopped = True
                    kl_stops[0] += 1
                    break
                adv = mb["advantages"]
                adv = (adv - adv.mean()) / (adv.std() + 1e-8)
                pg_loss = clipped_surrogate(adv, region_ratio if per_region else ratio,
                                            args.clip_coef)
                v_loss = 0.5 * (new_value - mb["returns"]).square().mean()
                loss = pg_loss - args.ent_coef * entropy.mean() + args.vf_coef * v_loss
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                nn.utils.clip_grad_norm_(policy.parameters(), args.max_grad_norm)
                optimizer.step()
                steps_taken += 1
        with torch.no_grad():  # of the last minibatch seen (the losses: of the last taken)
            stats = dict(entropy=entropy.mean().item(), approx_kl=approx_kl_of(ratio, logratio),
                         clipfrac=((ratio - 1).abs() > args.clip_coef).float().mean().item(),
                         minibatches=steps_taken, kl_stops=kl_stops[0])
            if steps_taken:
                stats.update(pg_loss=pg_loss.item(), v_loss=v_loss.item())
        timers["update_busy"] += time.perf_counter() - t0
        timers["update_cpu"] += time.thread_time() - cpu0
        return stats

    def score_point(point, returns):
        """point's fractions of the oracle (train, held_out), where there is an oracle."""
        if oracle is not None:
            point["train"] = fraction_of_oracle(returns, oracle, train_apps)
            if held_out:
                point["held_out"] = fraction_of_oracle(returns, oracle, held_out)

    def evaluate(steps, train_s, stats):
        t0 = time.perf_counter()
        returns = evaluator(evaluated)
        point = dict(steps=steps, train_s=train_s, returns=returns, **stats)
        if average is not None and steps > 0:  # the learner too, for comparison
            point["learner_returns"] = evaluator(policy)
        timers["evaluation"] += time.perf_counter() - t0
        score_point(point, returns)
        metrics["curve"].append(point)
        if on_eval is not None:
            on_eval(point)
        if not args.quiet:
            score = (f"train {point['train']:+.3f}, held out {point.get('held_out', np.nan):+.3f}"
                     " of the oracle" if oracle is not None else
                     "returns " + " ".join(f"{a} {r:+.4f}" for a, r in returns.items()))
            log(f"fast_ppo seed {args.seed}: {steps} steps, {train_s:.1f} s, "
                f"{steps / max(train_s, 1e-9):,.0f} steps/s; {score}")
        # A score that is not a number (a train set whose oracle saves nothing) ranks last:
        # NaN compares false both ways, and a sort on it leaves the order undefined.
        rank = score_of(point) if keep and steps > 0 else -np.inf
        rank = -np.inf if np.isnan(rank) else rank
        if keep and steps > 0 and (len(best) < keep or rank > best[-1][0]):
            best.append([rank, point, copy.deepcopy(evaluated.state_dict())])
            best.sort(key=lambda entry: -entry[0])  # stable: the earlier first among equals
            del best[keep:]
        if args.json:
            write_json(args.json, metrics)
        return point

    def checkpoint(state):
        policy_ = copy.deepcopy(evaluated)
        policy_.load_state_dict(state)
        return policy_

    def select():
        """The best checkpoint (select_best, ensemble_top 1) or the Ensemble of the best
        (ensemble_top > 1) as the policy delivered, and the last point."""
        if not best:
            return evaluated
        if len(best) > 1:
            delivered = Ensemble([checkpoint(state) for _, _, state in best])
            t0 = time.perf_counter()
            returns = evaluator(delivered)
            timers["evaluation"] += time.perf_counter() - t0
            key, chosen = "ensemble_steps", [p["steps"] for _, p, _ in best]
            last = dict(steps=steps, train_s=train_s, returns=returns, **{key: chosen})
            score_point(last, returns)
            note = (f"the ensemble of the checkpoints of {', '.join(map(str, chosen))} steps "
                    f"(scores {', '.join(f'{b[0]:+.3f}' for b in best)} on the training "
                    f"applications) scores {score_of(last):+.3f}")
        else:
            _, point, state = best[0]
            delivered = checkpoint(state)
            key, chosen = "selected_steps", point["steps"]
            last = dict(point, steps=steps, train_s=train_s, **{key: chosen})
            note = (f"selected the checkpoint of {chosen} steps (score {best[0][0]:+.3f} on "
                    "the training applications)")
        metrics["curve"].append(last)
        metrics[key] = chosen
        if on_eval is not None:
            on_eval(last)
        if not args.quiet:
            log(f"fast_ppo seed {args.seed}: {note}")
        return delivered

    # The update on its own thread (overlap_update), or in line.
    updater = concurrent.futures.ThreadPoolExecutor(1) if args.overlap_update else None
    try:
        o, info = envs.reset(seed=args.seed)
        first = buffers[0]
        env_profiles[:] = make_masks.profiles(info)
        first.obs_np[0], first.masks_np[0] = o, mask_offsets(make_masks(info, env_profiles))
        steps, next_eval, train_s = 0, args.eval_every, 0.0
        evaluate(0, 0.0, {})
        updates = -(-args.total_steps // (n * t_len))
        pending = None  # the update running on its thread
        for update_index in range(updates + (1 if updater else 0)):
            started, cpu_started = time.perf_counter(), time.process_time()
            buf = buffers[update_index % len(buffers)]
            if update_index > 0 and len(buffers) > 1:
                buf.start_from(buffers[(update_index - 1) % 2])
            if update_index < updates:
                torch.set_num_threads(args.torch_threads)
                rollout(buf)
                steps += n * t_len
            t_rollout = time.perf_counter()
            timers["rollout"] += t_rollout - started
            cpu_rollout = time.process_time()
            timers["rollout_cpu"] += cpu_rollout - cpu_started
            if updater is None:
                if args.anneal_lr:
                    optimizer.param_groups[0]["lr"] = args.learning_rate * (1 - update_index / updates)
                torch.set_num_threads(args.update_threads)
                stats = update(buf)
                if average is not None:
                    average.update(policy)
                buf.start_from(buf)
                done = update_index  # the update just made
            else:  # wait for the update that ran beside this rollout
                done = update_index - 1
                stats = pending.result() if pending is not None else None
                pending = None
                if average is not None and stats is not None:
                    average.update(policy)
                # The next rollout acts with the weights this update made.
                actor.load_state_dict(policy.state_dict())
            timers["update"] += time.perf_counter() - t_rollout
            train_s += time.perf_counter() - started
            metrics["cpu_s"] += time.process_time() - cpu_started
            metrics.update(steps=steps, train_s=train_s)
            # No update runs during an evaluation: it reads the learner's weights, and its
            # time is excluded.
            if stats is not None and (steps >= next_eval or done == updates - 1):
                next_eval = (steps // args.eval_every + 1) * args.eval_every
                point = evaluate(steps, train_s, stats)
                reached = oracle is not None and args.target > 0 and point["train"] >= args.target
                if reached and metrics["reached_s"] is None:
                    metrics.update(reached_s=train_s, reached_steps=steps)
                if reached:
                    break
            if updater is not None and update_index < updates:
                if args.anneal_lr:
                    optimizer.param_groups[0]["lr"] = args.learning_rate * (1 - update_index / updates)
                pending = updater.submit(update, buf)
        metrics["steps_per_s"] = steps / max(train_s, 1e-9)
        delivered = select()
        if args.json:
            write_json(args.json, metrics)
        if args.save:
            # state_dict: the policy delivered (the average with ema_decay, the best
            # checkpoint with select_best, the best member with ensemble_top, all of whose
            # members are under ensemble_state_dicts, best first: load_policy rebuilds the
            # Ensemble); the learner's last weights then under learner_state_dict.
            members = list(delivered.members) if isinstance(delivered, Ensemble) else []
            saved = {"args": dataclasses.asdict(args), "actor_layout": "choices_first",
                     "state_dict": (members[0] if members else delivered).state_dict()}
            if members:
                saved["ensemble_state_dicts"] = [m.state_dict() for m in members]
            if delivered is not policy:
                saved["learner_state_dict"] = policy.state_dict()
            torch.save(saved, args.save)
        return delivered, metrics
    finally:
        if updater is not None:
            updater.shutdown(wait=True)
        envs.close()
        if own_evaluator:
            evaluator.close()


def write_json(path, metrics):
    with open(path + ".tmp", "w") as f:
        json.dump(metrics, f, indent=1)
    os.replace(path + ".tmp", path)


def load_policy(path):
    """A saved policy (--save) as (policy, args)."""
    saved = torch.load(path, weights_only=False)
    args = Args(**saved["args"])
    envs = tiergym.InProcessVectorEnv(1, **task_config(args))
    try:
        layout = Layout(envs.tier_spec, envs.num_regions, envs.single_action_space)
        policy = POLICIES[args.policy](layout, envs.single_observation_space.shape[0], args.hidden)
    finally:
        envs.close()
    state = dict(saved["state_dict"])
    if args.policy == "mlp" and saved.get("actor_layout") != "choices_first":
        # Saved before the flat policy's actor outputs were laid out choice by choice: its
        # rows are region by region ([K, C]); put them in the order [C, K].
        k, c = layout.regions, layout.choices
        for name in ("actor.weight", "actor.bias"):
            x = state[name]
            state[name] = x.reshape(k, c, -1).transpose(0, 1).reshape(x.shape)
    policy.load_state_dict(state)
    if "ensemble_state_dicts" in saved:  # --ensemble-top: every member, best first
        members = []
        for member_state in saved["ensemble_state_dicts"]:
            members.append(copy.deepcopy(policy))
            members[-1].load_state_dict(member_state)
        return Ensemble(members), args
    return policy, args


def main(argv=None):
    args = parse_args(argv)
    log(f"fast_ppo: {json.dumps(task_config(args))}, train {args.train}, held out "
        f"{args.held_out}, {args.num_envs} environments x {args.num_steps} steps per update, "
        f"policy {args.policy}")
    refs = reference_returns(args)
    oracle = refs.pop("oracle")
    hemem = fraction_of_oracle(refs["hemem"], oracle, app_names(args.train))
    log(f"oracle returns {oracle}; hemem {hemem:.3f} of the oracle on the training applications")
    try:
        policy, metrics = train(args, oracle=oracle)
    except KeyboardInterrupt:
        log("fast_ppo: interrupted (the --json file holds the evaluations so far)")
        return 130
    t = metrics["timers"]
    print(f"fast_ppo: {metrics['steps']} steps in {metrics['train_s']:.1f} s of training "
          f"({metrics['steps_per_s']:,.0f} env steps/s; evaluations {t['evaluation']:.1f} s apart); "
          f"rollouts {t['rollout']:.1f} s (inference {t['inference']:.1f} s, waiting for the "
          f"environment {t['env']:.1f} s), updates {t['update_busy']:.1f} s"
          + (f" ({t['update']:.1f} s of them waited for; the rest ran beside the rollouts)"
             if args.overlap_update else ""))
    last = metrics["curve"][-1]
    held_out = app_names(args.held_out)
    print(f"last evaluation: train {last['train']:.3f}"
          + (f", held out {last['held_out']:.3f}" if held_out else "")
          + f" of the oracle (hemem: train {hemem:.3f}"
          + (f", held out {fraction_of_oracle(refs['hemem'], oracle, held_out):.3f}"
             if held_out else "") + ")")
    return 0


if __name__ == "__main__":
    sys.exit(main())

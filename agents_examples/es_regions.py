"""The per-region policies searched without gradients: the deterministic policy, trained
as it is scored.

fast_ppo.py's per-region PPO learns a stochastic policy and is scored by its most likely
choice per region; in keep mode that argmax flips between updates while the sampled policy
climbs (agents_examples/README.md, "Why the deterministic policy flips"). This learner
never samples an action: it draws a population of weight vectors for a policy with weights
shared by every region, scores each by the episodes of its deterministic policy (the one
that is evaluated), and moves the search by their fitness:

- `--method cem` (default): the cross-entropy method with a diagonal Gaussian, its mean and
  spread refitted to the best quarter of the population, with extra spread that decays to
  0 over the budget (Szita and Lorincz, "Learning Tetris Using the Noisy Cross-Entropy
  Method");
- `--method es`: evolution strategies, the weights moved along the perturbations'
  rank-weighted sum by Adam (Salimans, Ho, Chen, Sidor and Sutskever, "Evolution
  Strategies as a Scalable Alternative to Reinforcement Learning": antithetic pairs,
  centred ranks, weight decay).

Policies (`--policy`): `linear-target` (default: one linear map from a region's features
and the globals to the tier it should be on, acted on as fast_ppo's target head), the same
from the region's features alone (`region-linear-target`), `score-fill` (a learned
hotness from a region's access statistics, placed by HeMem's rule: ScoreFillPolicy), the
same reading each region's load too (`score-fill-load`, on observation=relative-load:
ScoreFillLoadPolicy), or fast_ppo's networks (`regions`, `regions-target`; their actor's
weights only). With `--standardize` a score-fill policy divides each feature by its spread
over the training applications, so that the search's spread means as much for each.

Each generation draws `apps_per_generation` applications of the training split; every
member of the population plays one episode (seed 0) on each of the same applications
(common random numbers: members are ranked on the same programs), all of them side by side
in one in-process vector environment, the members' policies evaluated at once (torch.func:
one batched call over the stacked weights). A member's fitness is the sum over its
applications of the episode's return (the time saved) weighted by the pool's mean oracle
saving over the application's own (app_weights.py: every application counts as the
benchmark's mean over applications counts it), or with `--fitness time-saved` the returns
summed (as the benchmark scores a procedural set: the time saved over the oracle's).
Environment steps: population x apps_per_generation x the episode's length per generation,
all counted in total_steps; no generation starts that would pass it. What it reaches:
agents_examples/README.md, "Searched, not sampled".

    python agents_examples/es_regions.py --train procedural-train-v1:256 \\
        --held-out bundled-v1 --total-steps 2000000 --select-best
"""

import dataclasses
import sys
import time

import numpy as np
import torch
from torch.func import functional_call, vmap

import tiergym

import fast_ppo


@dataclasses.dataclass
class Args:
    seed: int = 0                       # the search's random draws (applications, weights)
    total_steps: int = 2_000_000        # environment steps to train for, evaluations excluded
    population: int = 32                # perturbations per generation (antithetic pairs: even)
    apps_per_generation: int = 8        # training applications every member plays
    method: str = "cem"                 # "cem" (cross-entropy) or "es" (gradient estimate)
    elite_fraction: float = 0.25        # cem: the share of the population refitted to
    sigma: float = 1.0                  # the perturbations' standard deviation (cem: the
                                        # extra spread at the start, decaying to 0)
    learning_rate: float = 0.03         # es: Adam's step on the weights
    weight_decay: float = 0.005         # es: L2 pull on the weights, per generation
    anneal_lr: bool = False             # es: the learning rate decayed linearly to 0
    hidden: int = 32                    # "regions*": width of the network's hidden layers
    policy: str = "linear-target"       # "linear-target", "region-linear-target" (no
                                        # globals), "score-fill", "score-fill-load",
                                        # fast_ppo's "regions", "regions-target"
    fitness: str = "oracle-weighted"    # a member's fitness: "oracle-weighted" (each app's
                                        # return over its oracle's) or "time-saved" (the
                                        # returns summed, as the benchmark scores a
                                        # procedural set: the time saved over the oracle's)
    reward_norm_floor: float = 0.1      # an app's oracle saving taken as >= this x pool mean
    standardize: bool = False           # score-fill*: each feature divided by its spread
                                        # over the training applications (keep-all episodes)
    keep_margin: float = 0.0            # score-fill*: a fast-tier region stays hot while it
                                        # scores above -keep_margin x the weights' norm
    rank_margin: float = 0.0            # score-fill*: the rank features count only the
                                        # regions denser by more than a factor 1 + this
                                        # (0: the observation's ranks)
    mask: str = "region"                # fast_ppo's action masks: region, joint, none
    train: str = "procedural-train-v1:256"  # applications searched on (names, a split's entry)
    held_out: str = ""                  # applications evaluated on only (the command line)
    config: str = "observation=relative"  # task overrides, KEY=VALUE,KEY=VALUE
    eval_every: int = 262_144           # environment steps between evaluations
    select_best: bool = False           # end with the evaluated weights best on the first 32
                                        # training applications
    env_threads: int = 2                # threads stepping the environments
    save: str = ""                      # save the policy delivered here (torch state dict)
    quiet: bool = False                 # no progress on stderr


def parse_args(argv=None):
    return fast_ppo.parse_dataclass(Args, check_args, __doc__.split("\n\n")[0], argv)


def check_args(args):
    if args.population < 2 or args.population % 2:
        raise ValueError("--population must be even and at least 2 (antithetic pairs)")
    for name in ("apps_per_generation", "hidden", "total_steps", "eval_every"):
        if getattr(args, name) < 1:
            raise ValueError(f"--{name.replace('_', '-')} must be at least 1")
    if not args.sigma > 0 or not args.learning_rate > 0 or args.weight_decay < 0:
        raise ValueError("--sigma and --learning-rate must be > 0, --weight-decay >= 0")
    if args.mask not in fast_ppo.MASKS:
        raise ValueError(f"--mask must be one of {', '.join(fast_ppo.MASKS)}")
    if args.method not in METHODS:
        raise ValueError(f"--method must be one of {', '.join(METHODS)}, not {args.method!r}")
    if args.fitness not in FITNESS:
        raise ValueError(f"--fitness must be one of {', '.join(FITNESS)}, not {args.fitness!r}")
    if args.policy not in POLICIES:
        raise ValueError(f"--policy must be one of {', '.join(POLICIES)}, not {args.policy!r}")
    if args.standardize and not args.policy.startswith("score-fill"):
        raise ValueError("--standardize: only the score-fill policies standardize their "
                         "features")
    if args.keep_margin < 0 or (args.keep_margin and not args.policy.startswith("score-fill")):
        raise ValueError("--keep-margin must be >= 0, and only the score-fill policies keep "
                         "regions by a margin")
    if args.rank_margin < 0 or (args.rank_margin and not args.policy.startswith("score-fill")):
        raise ValueError("--rank-margin must be >= 0, and only the score-fill policies rank "
                         "regions by a margin")
    if not 0 < args.elite_fraction <= 1:
        raise ValueError("--elite-fraction must be in (0, 1]")


def ppo_args(args):
    """fast_ppo's Args for the task's configuration and the profiles' lookup."""
    return fast_ppo.Args(seed=args.seed, train=args.train, held_out=args.held_out,
                         config=args.config, policy="regions", hidden=args.hidden,
                         mask=args.mask, quiet=args.quiet)


ACTOR = ("encoder", "own", "pooled", "head")  # the critic is never used here


class LinearTargetPolicy(torch.nn.Module):
    """The tier each region should be on, by one linear map shared by every region from
    its features and the globals (T logits), acted on as fast_ppo.TargetRegionPolicy does:
    keep = the logit of the region's own tier, a move to it masked. Starts at zero (every
    region stays where it is)."""

    def __init__(self, layout, obs_size, hidden=0, with_globals=True):
        super().__init__()
        self.layout, self.with_globals = layout, with_globals
        self.tiers = layout.choices - 1
        n_global = obs_size - layout.global_offset if with_globals else 0
        self.head = torch.nn.Linear(layout.features + n_global, self.tiers)
        torch.nn.init.zeros_(self.head.weight)
        torch.nn.init.zeros_(self.head.bias)

    def forward(self, obs):
        regions, globals_ = self.layout.split(obs)
        x = regions
        if self.with_globals:
            x = torch.cat([regions, globals_.unsqueeze(1).expand(-1, self.layout.regions, -1)],
                          dim=-1)
        wanted = self.head(x)                                         # [B, K, T]
        current = (regions[..., 0] * (self.tiers - 1)).round().long()
        current = current.clamp(0, self.tiers - 1).unsqueeze(-1)      # [B, K, 1]
        keep = wanted.gather(-1, current)
        moves = wanted.scatter(-1, current, fast_ppo.MASKED)
        return torch.cat([keep, moves], dim=-1), torch.zeros(obs.shape[0])


class RegionLinearTargetPolicy(LinearTargetPolicy):
    """LinearTargetPolicy from each region's own features alone (no global feature: the
    machine's and the run's, whose range on programs the training distribution may not
    cover)."""

    def __init__(self, layout, obs_size, hidden=0):
        super().__init__(layout, obs_size, hidden, with_globals=False)


def fill_fast_tier(score, on_fast, sizes, free, keep=None):
    """HeMem's placement rule, with `score` for its hotness: regions scoring above 0 are
    hot. Hot regions on the slow tier are promoted, hottest first; one that does not fit
    makes room by demoting fast-tier regions that are not hot, coldest first; a hot region
    never displaces another. score, on_fast (bool), sizes [B, K]; free [B]: the fast tier's
    free room, in the sizes' unit; keep [B] or [B, K] (optional, >= 0): a fast-tier region
    stays hot while it scores above -keep (hysteresis: regions whose scores cross back and
    forth near 0 are not swapped for one another). Returns [B, K]: 0 keep, 1 demote, 2
    promote (only the demotions that made room)."""
    b, k = score.shape
    rows = np.arange(b)
    hot = score > 0
    if keep is not None:
        keep = np.broadcast_to(np.asarray(keep, dtype=np.float64).reshape(b, -1), (b, k))
        hot |= on_fast & (score > -keep)
    room = free.astype(np.float64)
    sizes = sizes.astype(np.float64)
    slack = 1e-6 * (sizes.sum(axis=1) + room)   # float32 observations: no spurious misfit
    hottest = np.argsort(-score, axis=1, kind="stable")
    coldest = np.argsort(score, axis=1, kind="stable")
    demotable = on_fast & ~hot
    out = np.zeros((b, k), dtype=np.int64)
    cursor = np.zeros(b, dtype=np.int64)             # the next of `coldest` to consider
    for j in range(k):
        r = hottest[:, j]
        want = hot[rows, r] & ~on_fast[rows, r]
        need = sizes[rows, r]
        while True:
            short = want & (room + slack < need) & (cursor < k)
            if not short.any():
                break
            c = coldest[rows, np.minimum(cursor, k - 1)]
            drop = short & demotable[rows, c]
            out[rows[drop], c[drop]] = 1
            demotable[rows[drop], c[drop]] = False
            room += np.where(drop, sizes[rows, c], 0.0)
            cursor += short
        fits = want & (room + slack >= need)
        out[rows[fits], r[fits]] = 2
        room -= np.where(fits, need, 0.0)
    return out


class ScoreFillPolicy(torch.nn.Module):
    """A learned hotness in HeMem's placement rule: one linear map shared by every region,
    from its access statistics to a score; regions scoring above 0 are hot and placed by
    fill_fast_tier (HeMem-like's promotion and demotion, policies.py, with the score for
    its cooled count). The statistics: the region's last, decayed and since-the-start
    densities, its trend, and where filling the fast tier densest first (by decayed
    density, by density since the start) would put it; not its size, its place or the
    machine (HeMem's hotness is its sampled accesses alone). They are centred on 0.5 (the
    average byte's density, a steady trend, the edge of the fill), so that a score near 0
    is a threshold there rather than "everything is hot". A region never sampled is not
    hot, whatever its score (HeMem's count of 0 is below every threshold): nothing moves
    before the first evidence. Zero at the start: nothing is hot, nothing moves.

    Reads the relative observation of two tiers (env/README.md, "Observations that
    transfer"); the placement rule reads there the sizes (size share), the fast tier's free
    room (its share of the footprint and its fill), the placement (on[t]) and which tier is
    fast (the bandwidth globals)."""

    ACCESS = (4, 5, 7, 8)  # last_density, decayed_density, mean_density, trend
    DECAYED_DENSITY, MEAN_DENSITY, SIZE_SHARE, ON = 5, 7, 3, 10
    LOAD = 0               # 1: observation=relative-load's load is one of them
    NAME, OBSERVATION = "score-fill", "relative"
    keep_margin = 0.0      # Args.keep_margin (make_policy sets it)
    rank_margin = 0.0      # Args.rank_margin (make_policy sets it)

    def __init__(self, layout, obs_size, hidden=0):
        super().__init__()
        self.layout = layout
        self.tiers = layout.choices - 1
        if self.tiers != 2 or layout.features != 10 + 5 * self.tiers + self.LOAD:
            raise ValueError(f"the {self.NAME} policy reads observation={self.OBSERVATION} on "
                             "two tiers")
        features = len(self.ACCESS) + 2 + self.LOAD
        self.head = torch.nn.Linear(features, 1)
        torch.nn.init.zeros_(self.head.weight)
        torch.nn.init.zeros_(self.head.bias)
        # Each feature's deviation from its centre is divided by this (standardize()).
        self.register_buffer("scale", torch.ones(features))

    def fast_tier(self, globals_):
        """Each row's fast tier, [B]: the highest of the bandwidth globals."""
        t = self.tiers
        return torch.argmax(globals_[:, 2 * t + 2:3 * t + 2], dim=1)

    def features(self, obs):
        """obs [B, D] -> each region's statistics minus their centres, [B, K, F]."""
        regions, globals_ = self.layout.split(obs)
        t, on = self.tiers, self.ON
        if self.rank_margin > 0:
            ranks = self.ranks_beyond_margin(regions, globals_)
        else:
            ranks = torch.stack([regions[..., on + t:on + 2 * t],           # rank_decayed[t]
                                 regions[..., on + 2 * t:on + 3 * t]], -1)  # rank_mean[t]
            fast = self.fast_tier(globals_).view(-1, 1, 1, 1)
            index = fast.expand(-1, self.layout.regions, 1, 2)
            ranks = ranks.gather(2, index).squeeze(2)
        x = torch.cat([regions[..., list(self.ACCESS)], ranks,
                       regions[..., self.layout.features - self.LOAD:]], -1)
        return x - 0.5

    def ranks_beyond_margin(self, regions, globals_):
        """The fast tier's rank_decayed and rank_mean [B, K, 2] as the observation defines
        them (sq of the bytes of the regions at least as dense as the region, itself
        included, against the tier's capacity), but counting only the regions denser than
        it by more than a factor 1 + rank_margin: regions of nearly one density (lulesh's
        half of its footprint) rank alike instead of by which is a hair denser this
        interval. With no two densities within the margin, the observation's ranks."""
        t = self.tiers
        fast = self.fast_tier(globals_)
        holds = globals_.gather(1, (t + 2 + fast).view(-1, 1)).clamp(min=1e-6)  # capacity share
        size = regions[..., self.SIZE_SHARE]
        out = []
        for column in (self.DECAYED_DENSITY, self.MEAN_DENSITY):
            f = regions[..., column].clamp(max=0.999)
            density = f / (1 - f)                # sq's inverse (policies.unsquash)
            denser = density[:, None, :] > density[:, :, None] * (1 + self.rank_margin)
            taken = (denser.float() * size[:, None, :]).sum(-1) + size
            out.append(taken / holds / (1 + taken / holds))
        return torch.stack(out, -1)

    def standardize(self, obs):
        """Sets `scale` to each feature's spread over the sampled regions of `obs` [N, D]
        (observations of the training applications), so that the search's spread, the same
        for every weight, means as much for each feature (on the first 64 applications of
        procedural-train-v1 the spreads are 0.19 to 0.36, the load's 0.24)."""
        obs = torch.as_tensor(obs)
        x = self.features(obs)
        sampled = self.layout.split(obs)[0][..., self.MEAN_DENSITY] > 0
        spread = x[sampled].std(dim=0)
        self.scale.copy_(torch.where(spread > 1e-6, spread, torch.ones_like(spread)))

    def forward(self, obs, decoded=True):
        """(logits [B, K, 1 + T] of the placement decided, a zero value), or with
        decoded=False (score [B, K], a zero value)."""
        score = self.head(self.features(obs) / self.scale).squeeze(-1)
        value = torch.zeros(obs.shape[0])
        if not decoded:
            return score, value
        return self.decode(score, obs, self.head.weight.detach().norm()), value

    def decode(self, score, obs, weight_norm=None):
        """score [B, K], obs [B, D] -> logits [B, K, 1 + T]: 1 for the choice
        fill_fast_tier makes, 0.5 for keep (what a mask falls back to), 0 otherwise.
        weight_norm (a number or [B]): the norm of the weights that scored each row; with
        keep_margin > 0 a fast-tier region stays hot while it scores above -keep_margin x
        it (a margin in the features' own units, whatever the weights' scale)."""
        t = self.tiers
        regions, globals_ = (a.detach() for a in self.layout.split(obs))
        fast = self.fast_tier(globals_).numpy()
        regions, globals_ = regions.numpy(), globals_.numpy()
        rows = np.arange(len(fast))
        on_fast = regions[rows, :, self.ON + fast] > 0.5
        free = globals_[rows, t + 2 + fast] * (1 - globals_[rows, fast])  # holds x (1 - fill)
        sampled = regions[..., self.MEAN_DENSITY] > 0
        score = np.where(sampled, score.detach().numpy(), -1.0)
        keep = None
        if self.keep_margin > 0 and weight_norm is not None:
            # Per row, and never for a region without samples (never hot, margin or not).
            norm = np.broadcast_to(torch.as_tensor(weight_norm).detach().numpy(), (len(fast),))
            keep = np.where(sampled, self.keep_margin * norm[:, None], 0.0)
        choice = fill_fast_tier(score, on_fast, regions[..., self.SIZE_SHARE], free, keep)
        target = np.where(choice == 2, fast[:, None], 1 - fast[:, None])  # the tier moved to
        logits = np.zeros(choice.shape + (1 + t,), dtype=np.float32)
        logits[..., 0] = 0.5
        moved = choice > 0
        logits[moved, 1 + target[moved]] = 1.0
        return torch.from_numpy(logits)


class ScoreFillLoadPolicy(ScoreFillPolicy):
    """ScoreFillPolicy whose hotness also reads the region's load (observation=
    relative-load): the application's memory traffic while the region is accessed, against
    its mean. A region accessed while the application streams memory gains from a tier of
    higher bandwidth; one accessed while it computes or chases pointers gains less, or
    loses on a fast tier of higher latency."""

    LOAD = 1
    NAME, OBSERVATION = "score-fill-load", "relative-load"


POLICIES = {"linear-target": LinearTargetPolicy,
            "region-linear-target": RegionLinearTargetPolicy,
            "score-fill": ScoreFillPolicy, "score-fill-load": ScoreFillLoadPolicy,
            "regions": fast_ppo.RegionPolicy, "regions-target": fast_ppo.TargetRegionPolicy}
METHODS = ("cem", "es")
FITNESS = ("oracle-weighted", "time-saved")


class Population:
    """The policy's actor weights as one flat vector, and the members' weights as
    perturbations of it, evaluated in one batched call (torch.func.vmap over a
    functional_call of the policy with each member's weights)."""

    def __init__(self, policy):
        self.policy = policy
        self.names = [n for n, _ in policy.named_parameters() if n.split(".")[0] in ACTOR]
        params = dict(policy.named_parameters())
        self.shapes = [params[n].shape for n in self.names]
        self.sizes = [params[n].numel() for n in self.names]
        self.frozen = {n: p.detach() for n, p in params.items() if n not in self.names}  # critic

    def vector(self):
        params = dict(self.policy.named_parameters())
        return torch.cat([params[n].detach().reshape(-1) for n in self.names]).numpy().copy()

    def load(self, theta):
        params = dict(self.policy.named_parameters())
        with torch.no_grad():
            for n, chunk in zip(self.names, self.unflatten(torch.as_tensor(theta))):
                params[n].copy_(chunk)

    def unflatten(self, flat):
        """flat [..., N] -> the actor's tensors, each [..., *shape]."""
        lead = flat.shape[:-1]
        return [c.reshape(*lead, *s) for c, s in zip(flat.split(self.sizes, dim=-1),
                                                     self.shapes)]

    def logits(self, thetas, obs):
        """thetas [P, N], obs [P, M, D] -> logits [P, M, K, C]. A score-fill policy's
        scores are batched and its placement rule run on them after (it is no tensor
        function)."""
        stacked = dict(zip(self.names, self.unflatten(torch.as_tensor(thetas))))
        decode = getattr(self.policy, "decode", None)
        kwargs = {"decoded": False} if decode is not None else {}

        def one(weights, x):
            return functional_call(self.policy, ({**weights, **self.frozen},), (x,),
                                   kwargs)[0]

        out = vmap(one)(stacked, obs)
        if decode is None:
            return out
        p, m = obs.shape[:2]
        norm = stacked["head.weight"].reshape(p, -1).norm(dim=1).repeat_interleave(m)
        logits = decode(out.reshape(p * m, -1), obs.reshape(p * m, -1), norm)
        return logits.reshape(p, m, *logits.shape[1:])


def centred_ranks(x):
    """Fitnesses -> their ranks mapped onto [-0.5, 0.5] (ties broken by order)."""
    ranks = np.empty(len(x))
    ranks[np.argsort(x, kind="stable")] = np.arange(len(x))
    return ranks / (len(x) - 1) - 0.5


class Adam:
    """Adam's step (Kingma and Ba) on a numpy vector: the step to add for an ascent."""

    def __init__(self, n, lr, beta1=0.9, beta2=0.999, eps=1e-8):
        self.m, self.v, self.t = np.zeros(n), np.zeros(n), 0
        self.lr, self.beta1, self.beta2, self.eps = lr, beta1, beta2, eps

    def step(self, grad):
        self.t += 1
        self.m = self.beta1 * self.m + (1 - self.beta1) * grad
        self.v = self.beta2 * self.v + (1 - self.beta2) * grad * grad
        m_hat = self.m / (1 - self.beta1 ** self.t)
        v_hat = self.v / (1 - self.beta2 ** self.t)
        return self.lr * m_hat / (np.sqrt(v_hat) + self.eps)


class Generations:
    """The population's episodes: population x apps_per_generation environments, member i's
    on rows i*M .. i*M + M - 1, every member on the same M applications."""

    def __init__(self, args, pargs):
        config = dict(fast_ppo.task_config(pargs), profiles=",".join(fast_ppo.apps(args.train)))
        n = args.population * args.apps_per_generation
        self.envs = tiergym.InProcessVectorEnv(n, threads=args.env_threads,
                                               autoreset_mode=tiergym.DISABLED, **config)
        self.masks = fast_ppo.Masks(args.mask, self.envs.tier_spec)
        self.apps = list(self.envs.tier_spec["profiles"])  # as served (a split's: by name)
        if args.apps_per_generation > len(self.apps):
            raise ValueError(f"--apps-per-generation {args.apps_per_generation}: --train has "
                             f"{len(self.apps)} applications")
        if args.fitness == "time-saved":
            self.weights = dict.fromkeys(self.apps, 1.0)
        else:
            import app_weights
            oracle = app_weights.cached_oracle_returns(config,
                                                       progress=None if args.quiet else log)
            self.weights = app_weights.reward_weights(oracle, args.reward_norm_floor)

    def play(self, population, thetas, apps):
        """thetas [P, N]: the members' weights, of Population population; each member's
        weighted return on each application ([P, M]), and the env steps taken."""
        p, m = len(thetas), len(apps)
        obs, info = self.envs.reset(seed=[0] * (p * m), options={"profile": list(apps) * p})
        total, steps = np.zeros(p * m), 0
        thetas = torch.as_tensor(thetas, dtype=torch.float32)
        while True:
            with torch.inference_mode():
                logits = population.logits(thetas, torch.as_tensor(obs).view(p, m, -1))
                logits = logits.reshape(p * m, *logits.shape[2:])
                allowed = torch.as_tensor(self.masks(info), dtype=torch.bool)
                actions = torch.argmax(logits.masked_fill(~allowed, -1e9), dim=-1).numpy()
            obs, reward, terminated, truncated, info = self.envs.step(actions)
            total += reward
            steps += p * m
            if (terminated | truncated).all():
                break
        w = np.array([self.weights[a] for a in apps])
        return total.reshape(p, m) * w, steps

    def close(self):
        self.envs.close()


def log(*parts):
    print(time.strftime("%H:%M:%S"), *parts, file=sys.stderr, flush=True)


def make_policy(args, envs=None):
    """The policy of args.policy for the task's spec: envs' (environments of the task), else
    a one-environment probe's."""
    probe = envs
    if probe is None:
        probe = tiergym.InProcessVectorEnv(1, threads=1, autoreset_mode=tiergym.DISABLED,
                                           **dict(fast_ppo.task_config(ppo_args(args)),
                                                  profiles=fast_ppo.apps(args.train)[0]))
    try:
        spec = probe.tier_spec
        layout = fast_ppo.Layout(spec, spec["num_regions"], probe.single_action_space)
        policy = POLICIES[args.policy](layout, probe.single_observation_space.shape[0],
                                       args.hidden)
        if args.keep_margin:
            policy.keep_margin = args.keep_margin
        if args.rank_margin:
            policy.rank_margin = args.rank_margin
        return policy
    finally:
        if envs is None:
            probe.close()


class Search:
    """The search's state: the weights' mean (theta) and, for CEM, each weight's spread."""

    def __init__(self, args, theta, rng):
        self.args, self.theta, self.rng = args, theta, rng
        self.adam = Adam(theta.size, args.learning_rate)
        self.spread = np.full(theta.size, args.sigma, dtype=np.float32)
        self.n_elite = max(2, int(round(args.elite_fraction * args.population)))

    def sample(self):
        """The population's weights [P, N]: antithetic pairs around theta."""
        half = self.args.population // 2
        self.eps = self.rng.standard_normal((half, self.theta.size)).astype(np.float32)
        step = self.eps * (self.spread if self.args.method == "cem" else self.args.sigma)
        self.thetas = np.concatenate([self.theta + step, self.theta - step])
        return self.thetas

    def tell(self, fitness, progress):
        """Move theta by the members' fitnesses ([P]); progress: the share of the budget
        spent (annealing)."""
        args = self.args
        ranks = centred_ranks(fitness)
        if args.method == "cem":
            elite = self.thetas[np.argsort(-ranks, kind="stable")[:self.n_elite]]
            self.theta = elite.mean(axis=0)
            # the elite's spread, plus extra noise that decays to 0 over the budget (Szita
            # and Lorincz, "Learning Tetris Using the Noisy Cross-Entropy Method")
            self.spread = elite.std(axis=0) + args.sigma * (1 - progress)
            return
        half = args.population // 2
        if args.anneal_lr:
            self.adam.lr = args.learning_rate * (1 - progress)
        grad = ((ranks[:half] - ranks[half:]) @ self.eps) / (args.population * args.sigma)
        self.theta = self.theta + self.adam.step(grad - args.weight_decay * self.theta)


def keep_all_observations(args, pargs, apps_=64):
    """Every observation of one episode (seed 0) that keeps everything where it is, on each of
    the first `apps_` training applications: [steps x apps, D]."""
    n = min(apps_, len(fast_ppo.app_names(args.train)))  # a split's entry: its applications
    envs = tiergym.InProcessVectorEnv(n, threads=args.env_threads,
                                      autoreset_mode=tiergym.DISABLED,
                                      **dict(fast_ppo.task_config(pargs),
                                             profiles=",".join(fast_ppo.apps(args.train))))
    try:
        names = list(envs.tier_spec["profiles"])[:n]   # as served, in the split's order
        obs, _ = envs.reset(seed=[0] * n, options={"profile": names})
        keep = np.zeros((len(names),) + envs.single_action_space.shape, dtype=np.int64)
        seen = [obs]
        while True:
            obs, _, terminated, truncated, _ = envs.step(keep)
            seen.append(obs)
            if (terminated | truncated).all():
                return np.concatenate(seen)
    finally:
        envs.close()


def train(args, on_eval=None, evaluator=None, score=None):
    """The search on args' training split. Every eval_every environment steps (and at 0)
    the mean weights are evaluated: point = {steps, train_s, returns: evaluator(policy)},
    passed to on_eval. With select_best the policy returned is the evaluated one that
    score(point) ranked best, and a last point repeats its returns with selected_steps
    (as fast_ppo.py's). No generation starts that would take the steps past total_steps.
    Returns (policy, metrics)."""
    check_args(args)
    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    gens = Generations(args, ppo_args(args))
    try:
        policy = make_policy(args, gens.envs)
        if args.standardize:
            policy.standardize(keep_all_observations(args, ppo_args(args)))
    except BaseException:
        gens.close()
        raise
    population = Population(policy)
    search = Search(args, population.vector(), rng)
    steps, train_s, next_eval, per_generation = 0, 0.0, 0, 0
    metrics, best = {"curve": []}, None

    def evaluate():
        nonlocal best
        population.load(search.theta)
        point = {"steps": steps, "train_s": train_s}
        if evaluator is not None:
            point["returns"] = evaluator(policy)
        if args.select_best and score is not None:
            s = score(point)
            if best is None or (np.isfinite(s) and not s <= best[0]):
                best = (s, point, search.theta.copy())
        metrics["curve"].append(point)
        if on_eval is not None:
            on_eval(point)

    try:
        while True:
            if steps >= next_eval:
                evaluate()
                next_eval += args.eval_every
            if steps + per_generation > args.total_steps or steps >= args.total_steps:
                break
            started = time.monotonic()
            apps = rng.choice(gens.apps, size=args.apps_per_generation, replace=False)
            per_app, per_generation = gens.play(population, search.sample(), apps)
            fitness = per_app.sum(axis=1)
            search.tell(fitness, steps / args.total_steps)
            steps += per_generation
            train_s += time.monotonic() - started
            if not args.quiet:
                log(f"es_regions seed {args.seed}: {steps} steps, fitness mean "
                    f"{fitness.mean():+.3f} best {fitness.max():+.3f}")
        if steps > metrics["curve"][-1]["steps"]:
            evaluate()  # the last weights, evaluated
        metrics.update(steps=steps, train_s=train_s, steps_per_s=steps / max(train_s, 1e-9))
        if best is not None:
            population.load(best[2])
            last = dict(best[1], steps=steps, train_s=train_s,
                        selected_steps=best[1]["steps"])
            metrics["curve"].append(last)
            metrics["selected_steps"] = last["selected_steps"]
            if on_eval is not None:
                on_eval(last)
            if not args.quiet:
                log(f"es_regions seed {args.seed}: selected the weights of "
                    f"{last['selected_steps']} steps (score {best[0]:+.3f})")
        if args.save:
            torch.save({"args": dataclasses.asdict(args), "state_dict": policy.state_dict()},
                       args.save)
        return policy, metrics
    finally:
        gens.close()


def main(argv=None):
    """Train, and print the fraction of the oracle's time saved at every evaluation: on 32
    applications of the training split (those select_best chooses by) and on --held-out,
    each held-out application's beside it."""
    args = parse_args(argv)
    pargs = dataclasses.replace(ppo_args(args), train=scored_entry(args.train))
    train_apps = fast_ppo.app_names(pargs.train)
    held = fast_ppo.app_names(args.held_out)
    log("oracle returns of the scored applications...")
    oracle = fast_ppo.reference_returns(pargs, names=())["oracle"]
    evaluator = fast_ppo.Evaluator(pargs, train_apps + held)

    def on_eval(point):
        r = point["returns"]
        line = (f"es_regions seed {args.seed}: {point['steps']} steps: train "
                f"{fast_ppo.fraction_of_oracle(r, oracle, train_apps):+.3f}")
        if held:
            line += (f", held out {fast_ppo.fraction_of_oracle(r, oracle, held):+.3f} ("
                     + ", ".join(f"{a} {r[a] / oracle[a]:+.2f}" for a in held) + ")")
        if "selected_steps" in point:
            line += f" (the weights of {point['selected_steps']} steps)"
        log(line + " of the oracle's time saved")

    try:
        train(args, on_eval=on_eval, evaluator=evaluator,
              score=lambda point: fast_ppo.fraction_of_oracle(point["returns"], oracle,
                                                              train_apps))
    finally:
        evaluator.close()
    return 0


def scored_entry(train):
    """The entry of --train whose first 32 applications are scored (a split's entry: its
    first 32; names: the first 32 names)."""
    first = fast_ppo.apps(train)[0]
    split = tiergym.datasets.parse_entry(first)
    if split is not None:
        return f"{split[0].name}:{min(32, split[1] or 32)}"
    return ",".join(fast_ppo.apps(train)[:32])


if __name__ == "__main__":
    try:
        sys.exit(main())
    except ValueError as e:
        log(f"es_regions: {e}")
        sys.exit(2)

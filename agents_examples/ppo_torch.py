#!/usr/bin/env python3
"""PPO for tier placement in torch: trains on some applications and evaluates on held-out
ones. Needs torch 2 (`pip install "tiergym[torch]"`, which pins torch 2.13, the CPU wheel
the tests use); without it this script says so and exits 0.

    python agents_examples/ppo_torch.py                       # train, evaluate
    python agents_examples/ppo_torch.py --updates 40 --save ppo.pt
    python agents_examples/ppo_torch.py --load ppo.pt

The model (actor-critic, Schulman et al. 2017, "Proximal Policy Optimization Algorithms"):
the MultiDiscrete action (a tier per region) is factorised into one categorical
distribution per region, all computed by the same network, so the weights serve any number
of regions and any application. Each region is encoded from its own features (its tier,
its last and decayed access shares and its size share, shares multiplied by the number of
regions so that 1 is the average region) and the global ones (fill of each tier, progress,
last interval's speed, each tier's capacity and migration cost relative to the footprint);
the mean of the region encodings is a summary of the whole placement (a Deep Sets pooling,
Zaheer et al. 2017) that every region's head also sees, which lets it learn a threshold
relative to the others and to the capacity. The critic reads the summary and the global
features. The log-probability of an action is the sum over regions.

Training: a tiergym.VectorEnv serving only the training applications (its `profiles`
configuration key) collects `--envs` x `--horizon` steps per update (autoreset same_step),
advantages by GAE, then clipped-objective epochs over minibatches. The network's
requests are granted in decreasing logit margin while they fit the capacity (`grant`), so
the margins rank the regions rather than the environment's region order. Evaluation
samples from the policy with a fixed seed (--greedy: the most likely tier of each region).

Saved weights (--save) are a torch file with the state dict and the settings;
`load_policy(path)` gives a policy with the interface of agents_examples/policies.py
(name, reset, act).
"""

import sys
import time

import numpy as np

import learning_common as lc
import policies

try:
    import torch
    from torch import nn
    HAVE_TORCH = True
    TORCH_ERROR = ""
except ImportError as e:  # pragma: no cover - depends on the machine
    torch = nn = None
    HAVE_TORCH = False
    TORCH_ERROR = (f"torch is not installed ({e}); `pip install \"tiergym[torch]\"` "
                   "(torch 2.13) to run the PPO example")

SHARE_CLIP = 20.0  # shares x regions above this (a region 20x the average) are clipped


def reward_scale(env):
    """Rewards are multiplied by the decisions per episode (steps; 100 when it is 0)."""
    return float(int(env.config.get("steps", 100)) or 100)


class Context:
    """What the network needs beyond the observation, per episode: capacities, migration
    throughputs, the reward scale (static), and per step the footprint and default run time
    from `info`."""

    def __init__(self, env):
        self.capacity = lc.capacity_bytes(env)
        self.migration_gbps = lc.migration_gbps(env)
        self.scale = reward_scale(env)

    def extra(self, used_bytes, default_total_ns):
        """[..., 2 * tiers]: capacity in footprints (clipped to 2) and the cost of moving the
        whole footprint into each tier in scaled reward units, for one info or a batch."""
        footprint = np.maximum(np.sum(np.asarray(used_bytes, dtype=np.float64), axis=-1), 1.0)
        cap = np.minimum(self.capacity / footprint[..., None], 2.0)
        cost = (footprint[..., None] / self.migration_gbps
                / np.maximum(np.asarray(default_total_ns, dtype=np.float64), 1.0)[..., None]
                * self.scale)
        return np.concatenate([cap, cost], axis=-1)


def inputs(env, obs, extra):
    """(region features [..., K, 3 + tiers], global features [..., tiers + 2 + 2 tiers])."""
    v = lc.ObsView(env, obs)
    k, t = env.num_regions, len(env.tiers)
    onehot = np.eye(t)[v.tier]
    shares = np.minimum(np.stack([v.last, v.history, v.size], axis=-1) * k, SHARE_CLIP)
    region = np.concatenate([onehot, shares], axis=-1)
    glob = np.concatenate([v.fill, v.progress[..., None], v.speed[..., None], extra], axis=-1)
    return region.astype(np.float32), glob.astype(np.float32)


if HAVE_TORCH:
    class ActorCritic(nn.Module):
        """Per-region categorical heads over a shared encoder with mean pooling; a critic
        on the pooled summary."""

        def __init__(self, region_dim, global_dim, tiers, hidden=64):
            super().__init__()
            self.dims = (region_dim, global_dim, tiers, hidden)
            self.encode = nn.Sequential(nn.Linear(region_dim + global_dim, hidden), nn.Tanh(),
                                        nn.Linear(hidden, hidden), nn.Tanh())
            self.head = nn.Sequential(nn.Linear(2 * hidden, hidden), nn.Tanh(),
                                      nn.Linear(hidden, tiers))
            self.critic = nn.Sequential(nn.Linear(hidden + global_dim, hidden), nn.Tanh(),
                                        nn.Linear(hidden, 1))
            # Small initial logits: the first policy is close to uniform.
            nn.init.zeros_(self.head[-1].bias)
            self.head[-1].weight.data.mul_(0.01)

        def forward(self, region, glob):
            """region [B, K, R], glob [B, G] -> logits [B, K, tiers], value [B]."""
            k = region.shape[1]
            g = glob[:, None, :].expand(-1, k, -1)
            e = self.encode(torch.cat([region, g], dim=-1))
            summary = e.mean(dim=1)
            logits = self.head(torch.cat([e, summary[:, None, :].expand(-1, k, -1)], dim=-1))
            value = self.critic(torch.cat([summary, glob], dim=-1)).squeeze(-1)
            return logits, value


def grant(env, obs, info, context, request, logits):
    """The placement the environment is sent: the requested tiers, granted in decreasing
    margin (logit of the requested tier minus the default tier's) while they fit the
    capacity (learning_common.fit_capacity). The policy's action is the request; this
    deterministic step is part of the environment as the agent sees it, and it makes the
    logit margins rank the regions instead of the environment's region order deciding who
    gets the room."""
    view = lc.ObsView(env, obs)
    footprint = max(float(np.sum(info["tier_used_bytes"].astype(np.float64))), 1.0)
    margin = logits[np.arange(len(request)), request] - logits[:, 0]
    return lc.fit_capacity(request, margin, view.size, context.capacity / footprint)


class PPOPolicy(policies.Policy):
    """The trained network as a policy (shared interface). By default it samples its
    requests, as in training, from a generator seeded with seed + the number of episodes it
    has started (so a policy loaded twice acts the same); with greedy=True it requests the
    most likely tier of each region. Sampling is the default because the stochastic policy
    is what PPO optimises: the greedy one was much less stable from update to update in our
    runs (a near-tie at the first step, where nothing has been observed yet, decides which
    regions it keeps for the whole episode)."""

    name = "ppo"

    def __init__(self, net, greedy=False, seed=0):
        super().__init__(seed)
        self.net = net
        self.greedy = greedy
        self.episodes = 0
        self.generator = torch.Generator()

    def reset(self, env, obs, info):
        super().reset(env, obs, info)  # the Layout, as every policy of policies.py has it
        self.generator.manual_seed(self.seed + self.episodes)
        self.episodes += 1
        self.context = Context(env)
        if len(env.tiers) != self.net.dims[2]:
            raise ValueError(f"network for {self.net.dims[2]} tiers, environment has "
                             f"{len(env.tiers)}")

    def act(self, obs, info):
        extra = self.context.extra(info["tier_used_bytes"], info["default_total_ns"])
        region, glob = inputs(self.env, obs, extra)
        with torch.no_grad():
            logits, _ = self.net(torch.from_numpy(region[None]), torch.from_numpy(glob[None]))
        logits = logits[0]
        if self.greedy:
            request = logits.argmax(dim=-1)
        else:
            probs = torch.softmax(logits, dim=-1)
            request = torch.multinomial(probs, 1, generator=self.generator)[:, 0]
        return grant(self.env, obs, info, self.context, request.numpy(), logits.numpy())


class PPO:
    """Clipped PPO with GAE on a tiergym.VectorEnv."""

    def __init__(self, envs, seed=0, lr=3e-4, gamma=0.99, lam=0.95, clip=0.2, epochs=4,
                 minibatches=4, entropy=0.0, value_coef=0.5, hidden=64):
        torch.manual_seed(seed)
        self.envs = envs
        self.context = Context(envs)
        self.seed = seed
        self.gamma, self.lam, self.clip = gamma, lam, clip
        self.epochs, self.minibatches = epochs, minibatches
        self.entropy, self.value_coef = entropy, value_coef
        k = envs.tier_spec["num_regions"]
        zeros = np.zeros((1,) + envs.single_observation_space.shape, dtype=np.float32)
        region, glob = inputs(envs, zeros, self.context.extra(
            np.ones((1, len(envs.tiers))), np.ones(1)))
        self.net = ActorCritic(region.shape[-1], glob.shape[-1], len(envs.tiers), hidden)
        self.optimizer = torch.optim.Adam(self.net.parameters(), lr=lr)
        self.generator = torch.Generator().manual_seed(seed)
        self.k = k
        self.obs = self.infos = None
        self.episode_returns = np.zeros(envs.num_envs)

    def collect(self, horizon):
        """horizon steps of every sub-environment: tensors for the update, and the returns
        of the episodes that ended (with their applications)."""
        envs = self.envs
        if self.obs is None:
            self.obs, self.infos = envs.reset(seed=self.seed)
        regions, globs, actions, logps, values, rewards, dones = [], [], [], [], [], [], []
        finished = []
        for _ in range(horizon):
            extra = self.context.extra(self.infos["tier_used_bytes"],
                                       self.infos["default_total_ns"])
            region, glob = inputs(envs, self.obs, extra)
            rt, gt = torch.from_numpy(region), torch.from_numpy(glob)
            with torch.no_grad():
                logits, value = self.net(rt, gt)
                dist = torch.distributions.Categorical(logits=logits)
                probs = torch.softmax(logits, dim=-1).reshape(-1, logits.shape[-1])
                action = torch.multinomial(probs, 1, generator=self.generator).reshape(
                    logits.shape[:2])
                logp = dist.log_prob(action).sum(dim=-1)
            sent = np.stack([grant(envs, self.obs[i], {"tier_used_bytes": self.infos[
                "tier_used_bytes"][i]}, self.context, action[i].numpy(), logits[i].numpy())
                for i in range(envs.num_envs)])
            obs, reward, terminated, truncated, infos = envs.step(sent)
            done = terminated | truncated
            self.episode_returns += reward
            for i in np.nonzero(done)[0]:
                finished.append((infos["final_info"]["profile"][i], self.episode_returns[i]))
                self.episode_returns[i] = 0.0
            regions.append(rt), globs.append(gt), actions.append(action), logps.append(logp)
            values.append(value), rewards.append(torch.from_numpy(reward * self.context.scale))
            dones.append(torch.from_numpy(done.astype(np.float32)))
            self.obs, self.infos = obs, infos
        extra = self.context.extra(self.infos["tier_used_bytes"], self.infos["default_total_ns"])
        region, glob = inputs(envs, self.obs, extra)
        with torch.no_grad():
            _, last_value = self.net(torch.from_numpy(region), torch.from_numpy(glob))
        # GAE; an episode that ended (terminated: tiergym never truncates) bootstraps 0.
        adv = torch.zeros(horizon, envs.num_envs)
        running = torch.zeros(envs.num_envs)
        for t in reversed(range(horizon)):
            nxt = last_value if t == horizon - 1 else values[t + 1]
            live = 1.0 - dones[t]
            delta = rewards[t].float() + self.gamma * nxt * live - values[t]
            running = delta + self.gamma * self.lam * live * running
            adv[t] = running
        batch = {
            "region": torch.cat(regions), "glob": torch.cat(globs), "action": torch.cat(actions),
            "logp": torch.cat(logps), "adv": adv.reshape(-1),
            "ret": (adv + torch.stack(values)).reshape(-1),
        }
        return batch, finished

    def update(self, batch):
        """Clipped-objective epochs over shuffled minibatches; the last minibatch's losses."""
        n = batch["adv"].shape[0]
        adv = (batch["adv"] - batch["adv"].mean()) / (batch["adv"].std() + 1e-8)
        size = max(n // self.minibatches, 1)
        stats = {}
        for _ in range(self.epochs):
            perm = torch.randperm(n, generator=self.generator)
            for start in range(0, n, size):
                idx = perm[start:start + size]
                logits, value = self.net(batch["region"][idx], batch["glob"][idx])
                dist = torch.distributions.Categorical(logits=logits)
                logp = dist.log_prob(batch["action"][idx]).sum(dim=-1)
                ratio = torch.exp(logp - batch["logp"][idx])
                a = adv[idx]
                policy_loss = -torch.min(ratio * a, torch.clamp(ratio, 1 - self.clip,
                                                                1 + self.clip) * a).mean()
                value_loss = ((value - batch["ret"][idx]) ** 2).mean()
                entropy = dist.entropy().sum(dim=-1).mean() / self.k
                loss = policy_loss + self.value_coef * value_loss - self.entropy * entropy
                self.optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(self.net.parameters(), 0.5)
                self.optimizer.step()
                stats = {"policy": policy_loss.item(), "value": value_loss.item(),
                         "entropy": entropy.item()}
        return stats

    def train(self, updates, horizon, progress=None):
        """`updates` rounds of collect + update; progress(update, finished episodes, stats)."""
        history = []
        for u in range(updates):
            batch, finished = self.collect(horizon)
            stats = self.update(batch)
            history.extend(finished)
            if progress:
                progress(u, finished, stats)
        return history


def save(path, net, settings):
    torch.save({"state_dict": net.state_dict(), "dims": list(net.dims), "settings": settings},
               path)


def load_policy(path, greedy=False, seed=0):
    """A PPOPolicy from a file written by --save (policy interface); see PPOPolicy for
    `greedy` and `seed`."""
    if not HAVE_TORCH:
        raise RuntimeError(TORCH_ERROR)
    saved = torch.load(path, map_location="cpu", weights_only=True)  # tensors and plain data only
    region_dim, global_dim, tiers, hidden = saved["dims"]
    net = ActorCritic(region_dim, global_dim, tiers, hidden)
    net.load_state_dict(saved["state_dict"])
    net.eval()
    policy = PPOPolicy(net, greedy=greedy, seed=seed)
    policy.settings = saved["settings"]
    return policy


def main(argv=None):
    parser = lc.agent_parser(__doc__, "update, episodes finished with their application and return, losses")
    parser.add_argument("--updates", type=int, default=40, help="PPO updates (default 40)")
    parser.add_argument("--envs", type=int, default=4,
                        help="sub-environments of the training VectorEnv (default 4)")
    parser.add_argument("--horizon", type=int, default=40,
                        help="steps per sub-environment per update (default 40)")
    parser.add_argument("--lr", type=float, default=1e-3, help="Adam step size (default 1e-3)")
    parser.add_argument("--entropy", type=float, default=0.0,
                        help="entropy bonus per region (default 0)")
    parser.add_argument("--greedy", action="store_true",
                        help="evaluate the most likely tiers instead of sampling (seeded)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    args = parser.parse_args(argv)
    if not HAVE_TORCH:
        print(f"ppo_torch.py: {TORCH_ERROR}")
        return 0
    torch.set_num_threads(args.threads)
    train, held_out, say = lc.apps_and_progress(args)

    with lc.served(args) as address:
        config = lc.env_config(args)
        if args.load:
            policy = load_policy(args.load, greedy=args.greedy, seed=args.seed)
            say(f"loaded {args.load}: {policy.settings}")
        else:
            with lc.tiergym.VectorEnv(args.envs, address=address, autoreset_mode="same_step",
                                      profiles=",".join(train), **config) as envs:
                envs.tiers = list(envs.tier_spec["tiers"])
                envs.num_regions = int(envs.tier_spec["num_regions"])
                ppo = PPO(envs, seed=args.seed, lr=args.lr, entropy=args.entropy)
                started = time.monotonic()
                say(f"training on {','.join(train)}: {args.updates} updates of {args.envs} x "
                    f"{args.horizon} steps ({envs.num_regions} regions, {args.steps} steps per "
                    "episode)")

                def progress(u, finished, stats):
                    done = " ".join(f"{p}:{r:+.4f}" for p, r in finished) or "-"
                    say(f"update {u:4d}  episodes {done}  policy {stats['policy']:+.4f} "
                        f"value {stats['value']:.4f} entropy {stats['entropy']:.3f}")
                ppo.train(args.updates, args.horizon, progress)
                say(f"trained in {time.monotonic() - started:.1f} s")
                ppo.net.eval()
                policy = PPOPolicy(ppo.net, greedy=args.greedy, seed=args.seed)
                policy.settings = lc.settings(
                    args, str(args.machine), train=train, updates=args.updates, envs=args.envs,
                    horizon=args.horizon, lr=args.lr, entropy=args.entropy)
                if args.save:
                    save(args.save, ppo.net, policy.settings)
                    say(f"saved {args.save}")
        with lc.tiergym.make(address=address, **config) as env:
            lc.evaluate_against_baselines(env, policy, train, held_out, args.seed,
                                          args.eval_seeds)
    return 0


if __name__ == "__main__":
    sys.exit(main())

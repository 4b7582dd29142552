#!/usr/bin/env python3
"""Linear Q-learning for tier placement, numpy only: trains on some applications and
evaluates on held-out ones.

    python agents_examples/q_learning.py                      # train, evaluate
    python agents_examples/q_learning.py --episodes 60 --save q.npz
    python agents_examples/q_learning.py --load q.npz --held-out nekbone,lammps

The model. The joint action (a tier per region) is scored by a Q function that is a sum
over regions with weights shared by every region (a factored linear Q, as in coordinated
reinforcement learning, Guestrin, Lagoudakis and Parr, ICML 2002):

    Q(s, a) = theta . psi(s) + sum_r [a_r != 0] w[a_r] . g(x_r)
                             + w_move * sum_r size_r * move_cost[a_r] * [a_r != tier_r]

psi(s) holds global features (1, remaining fraction of the run, last interval's speed, fill
of each tier); g(x_r) a region's decayed access share and last share, also weighted by the
remaining fraction of the run; the last term is the migration of the regions the action
moves, move_cost being what moving the whole footprint costs in reward units (from the
machine's migration throughput, the footprint and info["default_total_ns"]). Every feature
is a share of the whole (summed over regions it stays below 1), so the same weights serve
any number of regions and any application. The greedy joint action maximises Q under the
tiers' capacities: regions go to the tier of the highest positive advantage, the best
advantage per byte first, as long as they fit (a greedy knapsack).

Training is batch Q-learning (fitted Q iteration): epsilon-greedy episodes (exploration
per region, decaying) fill a replay buffer of transitions on the realised placement (moves
the environment refused for capacity count as not made); after each episode the targets
r + gamma * max_a' Q(s', a') are recomputed and the weights refitted by ridge regression,
a few times.

Saved weights (--save, .npz) hold w, theta and the settings; `load_policy(path)` gives a
policy with the interface of agents_examples/policies.py (name, reset, act), greedy.
"""

import json
import sys
import time

import numpy as np

import learning_common as lc
import policies

GAIN_FEATURES = ("history", "last", "history*remaining", "last*remaining")


def gain_features(view):
    """g(x_r) for every region: [..., K, len(GAIN_FEATURES)], the access-based features
    whose weights (one row per tier) say what a region on that tier is worth."""
    remaining = (1.0 - view.progress)[..., None]
    return np.stack([view.history, view.last, view.history * remaining,
                     view.last * remaining], axis=-1)


def global_features(view):
    """psi(s) [..., G]: the value of the state whatever the placement."""
    ones = np.ones_like(view.progress)
    return np.concatenate([np.stack([ones, 1.0 - view.progress, view.speed], axis=-1),
                           view.fill], axis=-1)


def reward_scale(env):
    """Rewards are multiplied by the number of decisions per episode (the `steps` key; 100
    when it is 0, one step per phase) so that Q values are about as large as the speedup."""
    return float(int(env.config.get("steps", 100)) or 100)


class QModel:
    """The weights and the greedy joint action.

    Q(s, a) = theta . psi(s) + sum_r [a_r != 0] w[a_r] . g(x_r)
                             + w_move * sum_r size_r * move_cost[a_r] * [a_r != tier_r]
    w: [tiers, len(GAIN_FEATURES)] (row 0, the default tier, stays 0); theta: [G].
    move_cost[t] is what moving the whole footprint into tier t costs, in the units of the
    scaled reward (migration time / default run time * reward scale): known from the
    machine and `info`, so w_move (learnt) should come out near -1.
    Every method takes one view or a batch of them (leading N)."""

    def __init__(self, num_tiers, num_global, w=None, w_move=0.0, theta=None):
        self.num_tiers = num_tiers
        self.w = np.zeros((num_tiers, len(GAIN_FEATURES))) if w is None else np.array(w, float)
        self.w_move = float(w_move)
        self.theta = np.zeros(num_global) if theta is None else np.array(theta, float)

    def num_params(self):
        return (self.num_tiers - 1) * len(GAIN_FEATURES) + 1 + len(self.theta)

    def params(self):
        return np.concatenate([self.w[1:].ravel(), [self.w_move], self.theta])

    def set_params(self, p):
        n = (self.num_tiers - 1) * len(GAIN_FEATURES)
        self.w[1:] = np.reshape(p[:n], (self.num_tiers - 1, len(GAIN_FEATURES)))
        self.w_move = float(p[n])
        self.theta = np.array(p[n + 1:], dtype=np.float64)

    def features(self, view, action, move_cost):
        """x(s, a) [..., num_params]: Q(s, a) = x(s, a) . params()."""
        g = gain_features(view)
        per_tier = [(g * (action == t)[..., None]).sum(axis=-2) for t in range(1, self.num_tiers)]
        cost = np.take_along_axis(np.asarray(move_cost), action, -1)
        moved = (view.size * cost * (action != view.tier)).sum(axis=-1)
        return np.concatenate(per_tier + [moved[..., None], global_features(view)], axis=-1)

    def q(self, view, action, move_cost):
        return self.features(view, action, move_cost) @ self.params()

    def advantages(self, view, move_cost):
        """A[..., r, t]: Q of region r on tier t minus Q of region r on the default tier."""
        tiers = np.arange(self.num_tiers)
        a = np.zeros(view.tier.shape + (self.num_tiers,))
        a[..., 1:] = gain_features(view) @ self.w[1:].T
        moves = (tiers != view.tier[..., None]).astype(np.float64)
        cost = moves * np.asarray(move_cost)[..., None, :]
        a += self.w_move * view.size[..., None] * (cost - cost[..., :1])
        return a

    def greedy(self, view, capacity_share, move_cost):
        """The joint action maximising Q within capacity, and its Q: a greedy knapsack that
        takes the (region, tier) pairs of positive advantage, the best advantage per unit of
        size first, placing a region when it is not placed yet and fits the tier's room.
        capacity_share [..., tiers]: each tier's capacity in footprints."""
        adv = self.advantages(view, move_cost)
        batch = view.tier.shape[:-1]
        k, nt = view.tier.shape[-1], self.num_tiers
        size = view.size
        flat_adv = adv[..., 1:].reshape(batch + (k * (nt - 1),))
        flat_size = np.repeat(size, nt - 1, axis=-1)
        score = np.where(flat_adv > 0, flat_adv / np.maximum(flat_size, 1e-9), -np.inf)
        order = np.argsort(-score, axis=-1, kind="stable")
        room = np.array(np.broadcast_to(capacity_share, batch + (nt,)), dtype=np.float64)
        action = np.zeros(batch + (k,), dtype=np.int64)
        placed = np.zeros(batch + (k,), dtype=bool)
        def take(values, index):  # values[..., index[...]] row by row
            return np.take_along_axis(values, index[..., None], -1)[..., 0]

        def put(values, index, new):
            np.put_along_axis(values, index[..., None], new[..., None], -1)

        for j in range(order.shape[-1]):  # the j-th best pair of every row at once
            pick = order[..., j]
            positive = take(score, pick) > -np.inf
            if not positive.any():
                break  # every row's remaining pairs have no positive advantage
            r, t = pick // (nt - 1), pick % (nt - 1) + 1
            s_r, room_t, done = take(size, r), take(room, t), take(placed, r)
            ok = positive & ~done & (s_r <= room_t - lc.FIT_MARGIN)
            put(action, r, np.where(ok, t, take(action, r)))
            put(placed, r, ok | done)
            put(room, t, room_t - np.where(ok, s_r, 0.0))
        return action, self.q(view, action, move_cost)


class QLearningPolicy(policies.Policy):
    """The greedy policy of a QModel, with the shared policy interface. With epsilon > 0,
    each region's tier is replaced by a random one with that probability (exploration)."""

    name = "q_learning"

    def __init__(self, model, epsilon=0.0, seed=0):
        super().__init__(seed)
        self.model = model
        self.epsilon = epsilon
        self.rng = np.random.default_rng(seed)

    def reset(self, env, obs, info):
        super().reset(env, obs, info)  # the Layout, as every policy of policies.py has it
        self.capacity = lc.capacity_bytes(env)
        self.migration_gbps = lc.migration_gbps(env)
        self.scale = reward_scale(env)
        if len(self.capacity) != self.model.num_tiers:
            raise ValueError(f"weights for {self.model.num_tiers} tiers, environment has "
                             f"{len(self.capacity)}")

    def capacity_share(self, info):
        """Each tier's capacity in units of the footprint (size shares are of the footprint)."""
        footprint = float(np.sum(info["tier_used_bytes"].astype(np.float64)))
        return self.capacity / max(footprint, 1.0)

    def move_cost(self, info):
        """Cost of moving the whole footprint into each tier, in scaled reward units: the
        migration time (bytes / GB/s = ns) over the default run's time, times the scale."""
        footprint = float(np.sum(info["tier_used_bytes"].astype(np.float64)))
        return footprint / self.migration_gbps / max(info["default_total_ns"], 1.0) * self.scale

    def act(self, obs, info):
        view = lc.ObsView(self.env, obs)
        action, _ = self.model.greedy(view, self.capacity_share(info), self.move_cost(info))
        if self.epsilon > 0:
            flip = self.rng.random(len(action)) < self.epsilon
            action[flip] = self.rng.integers(0, self.model.num_tiers, int(flip.sum()))
        return action


class QLearner:
    """Batch Q-learning of a QModel (fitted Q iteration, Ernst, Geurts and Wehenkel, JMLR
    2005, with a linear model): after every episode the Q-learning targets
    r + gamma * max_a' Q(s', a') of the transitions in the replay buffer are recomputed
    with the current weights and the weights refitted by ridge regression, `iterations`
    times. Least squares rather than per-step gradient steps: the features differ in scale
    by two orders of magnitude (the global ones are about 1, a region's shares about
    1 / regions), and plain semi-gradient Q-learning drifted from run to run."""

    def __init__(self, num_tiers, num_global, gamma=0.95, epsilon=(0.3, 0.02), ridge=1e-3,
                 buffer_size=4000, iterations=10, seed=0):
        self.model = QModel(num_tiers, num_global)
        self.gamma = gamma
        self.epsilon = epsilon  # (first episode, last episode), decayed linearly
        self.ridge = ridge
        self.buffer_size = buffer_size
        self.iterations = iterations
        self.seed = seed
        self.obs, self.actions, self.rewards, self.next_obs = [], [], [], []
        self.terminal, self.capacity, self.move_cost = [], [], []

    def collect_episode(self, env, profile, seed, epsilon):
        """One episode with exploration; its transitions go to the buffer. Its return."""
        policy = QLearningPolicy(self.model, epsilon=epsilon, seed=seed)
        obs, info = env.reset(seed=seed, options={"profile": profile})
        policy.reset(env, obs, info)
        scale = reward_scale(env)
        total = 0.0
        while True:
            next_obs, reward, terminated, truncated, info = env.step(policy.act(obs, info))
            total += reward
            self.obs.append(obs)
            # The realised placement: moves refused for capacity did not happen.
            self.actions.append(lc.ObsView(env, next_obs).tier)
            self.rewards.append(reward * scale)
            self.next_obs.append(next_obs)
            self.terminal.append(terminated)  # truncation (unused by tiergym) bootstraps
            self.capacity.append(policy.capacity_share(info))
            self.move_cost.append(policy.move_cost(info))
            obs = next_obs
            if terminated or truncated:
                for buf in (self.obs, self.actions, self.rewards, self.next_obs,
                            self.terminal, self.capacity, self.move_cost):
                    del buf[:-self.buffer_size]
                return total

    def fit(self, env):
        """Fitted Q iterations on the buffer: targets with the current weights, then ridge."""
        view = lc.ObsView(env, np.array(self.obs))
        nxt = lc.ObsView(env, np.array(self.next_obs))
        move_cost = np.array(self.move_cost)
        x = self.model.features(view, np.array(self.actions), move_cost)
        r = np.array(self.rewards)
        live = ~np.array(self.terminal)
        capacity = np.array(self.capacity)
        a = x.T @ x
        a[np.diag_indices_from(a)] += self.ridge * max(np.trace(a) / len(a), 1e-12)
        for _ in range(self.iterations):
            y = r + self.gamma * live * self.model.greedy(nxt, capacity, move_cost)[1]
            self.model.set_params(np.linalg.solve(a, x.T @ y))

    def train(self, env, profiles, episodes, progress=None):
        """Episodes cycle through `profiles`; seeds seed, seed+1, ...; exploration decays."""
        returns = []
        for e in range(episodes):
            frac = e / max(episodes - 1, 1)
            eps = self.epsilon[0] + (self.epsilon[1] - self.epsilon[0]) * frac
            profile = profiles[e % len(profiles)]
            ret = self.collect_episode(env, profile, self.seed + e, eps)
            self.fit(env)
            returns.append(ret)
            if progress:
                progress(e, profile, eps, ret)
        return returns


def save(path, model, settings):
    np.savez(path, w=model.w, w_move=np.float64(model.w_move), theta=model.theta,
             settings=json.dumps(settings), gain_features=np.array(GAIN_FEATURES))


def load_policy(path):
    """A greedy QLearningPolicy from weights saved by --save (policy interface)."""
    with np.load(path, allow_pickle=False) as z:
        features = [str(f) for f in z["gain_features"]]
        if features != list(GAIN_FEATURES):
            raise ValueError(f"{path}: weights for features {features}, this agent has "
                             f"{list(GAIN_FEATURES)}")
        w, theta = z["w"], z["theta"]
        policy = QLearningPolicy(QModel(w.shape[0], theta.shape[0], w, float(z["w_move"]), theta))
        policy.settings = json.loads(str(z["settings"]))
    return policy


def main(argv=None):
    parser = lc.agent_parser(__doc__, "episode, application, exploration, return")
    parser.add_argument("--episodes", type=int, default=30, help="training episodes (default 30)")
    parser.add_argument("--gamma", type=float, default=0.95, help="discount (default 0.95)")
    parser.add_argument("--iterations", type=int, default=10,
                        help="fitted Q iterations after each episode (default 10)")
    args = parser.parse_args(argv)
    train, held_out, say = lc.apps_and_progress(args)

    with lc.served(args) as address:
        config = lc.env_config(args)
        with lc.tiergym.make(address=address, **config) as env:
            global_size = len(global_features(lc.ObsView(env, np.zeros(
                env.observation_space.shape, dtype=np.float32))))
            if args.load:
                policy = load_policy(args.load)
                say(f"loaded {args.load}: {policy.settings}")
            else:
                learner = QLearner(len(env.tiers), global_size, gamma=args.gamma,
                                   iterations=args.iterations, seed=args.seed)
                started = time.monotonic()
                say(f"training on {','.join(train)} for {args.episodes} episodes "
                    f"({env.num_regions} regions, {args.steps} steps, machine "
                    f"{config['machine']}, tier capacities {config.get('tier_capacity_mib', 'as is')})")
                learner.train(env, train, args.episodes, progress=lambda e, p, eps, r: say(
                    f"episode {e:4d}  {p:<8}  epsilon {eps:.3f}  return {r:+.4f}"))
                say(f"trained in {time.monotonic() - started:.1f} s")
                policy = QLearningPolicy(learner.model)
                policy.settings = lc.settings(
                    args, config["machine"], train=train, episodes=args.episodes,
                    gamma=args.gamma, iterations=args.iterations)
                if args.save:
                    save(args.save, learner.model, policy.settings)
                    say(f"saved {args.save}")
            lc.evaluate_against_baselines(env, policy, train, held_out, args.seed,
                                          args.eval_seeds)
    return 0


if __name__ == "__main__":
    sys.exit(main())

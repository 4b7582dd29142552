"""The learning benchmark: agents trained on some applications, scored on others.

    python agents_examples/learning_benchmark.py                     # generalization: every agent, 3 seeds (hours)
    python agents_examples/learning_benchmark.py --agents ppo-regions --seeds 0 --json r0.json --no-plot
    python agents_examples/learning_benchmark.py --merge r0.json r1.json r2.json --plot g.png
    python agents_examples/learning_benchmark.py --protocol two-apps --agents sb3-ppo --steps 200000

Two protocols, on tiergym's default task's keys (knl with 512 MiB of HBM, a fifth to a
half of each bundled application's footprint; 16 regions; 100 decisions; the `keep` action
mode, per region: keep it, or move it to a tier):

- **generalization** (default): the task with the relative observation (per-region
  features relative to the application and the tiers; env/README.md, "Observations that
  transfer"); agents train on procedural applications (--train-split, default the first
  256 of tiergym.datasets' procedural-train-v1) and are evaluated on the sets of --sets:
  32 of the applications trained on (train), the 64 of procedural-test-v1 (test: the same
  distribution, seeds never seen), the bundled programs minife, lulesh, nekbone, lammps
  (programs: written after real codes, never trained on), the same programs on xeonmax
  (machine: a machine never trained on) and real programs when they are bundled.
- **two-apps**: the normalized observation (tiergym/TierPlacement-v1 as registered); agents
  train on minife and lulesh (--train) and are evaluated on those and on nekbone and
  lammps (--held-out): the protocol of the first results, kept so that the change shows.

Each agent trains for its budget (--steps; 200,000 for the libraries' agents, 2,000,000
for the reference agent) and is evaluated every --eval-every steps, deterministically (seed
0). The score is the **fraction of the oracle's time saved**: an episode's return is its
time saved (1 - runtime / all-on-ddr runtime, migrations included), against the oracle's
(policies.py: the best static placement, which sees the whole run); on a set of programs
the mean over its applications of return / oracle's return, on a procedural set the time
saved summed over its applications over the oracle's sum (some procedural applications
gain nothing from any placement; a ratio there is noise); on real programs, where the
oracle may save nothing (knl: real-v1 stays on DDR), the time saved in % of the all-slow
runtime, the oracle's printed beside it (set_score). The heuristics of policies.py run
on the same machines, in the placement action mode (the same dynamics and returns), and
are horizontal lines. The JSON (rewritten after every evaluation) holds every curve, the
heuristics, wall times and env steps per second; the plot the mean curve over seeds, one
panel per set (or train and held out).

Agents (AGENTS below): the reference agent (agents_examples/fast_ppo.py: PPO with weights
shared across regions, `ppo-regions`, or a flat MLP, `ppo-flat`; agents_examples/
es_regions.py: a per-region policy searched by the cross-entropy method, `cem-linear`,
or a learned hotness in HeMem's placement rule, `cem-fill`, and the same reading each
region's load on its own observation, `cem-fill-load`, and that with ranks that count
only the regions denser by a margin, `cem-fill-rank`),
each library's defaults and one tuned configuration each, documented where they are
defined. SB3 PPO and A2C take the keep-mode action (MultiDiscrete), SB3 DQN the move mode
(Discrete: one region per step), RLlib PPO the keep mode (two-apps protocol only).
Progress on stderr; exit status 0, 1 on a failure, 2 on a usage error (an unknown agent or
split, a library that is not installed).
"""

import argparse
import importlib.util
import json
import os
import sys
import tempfile
import time

import numpy as np

import learning_common
import policies
import tiergym

# The default task's configuration keys (tiergym/TierPlacement-v1's registration).
TASK = dict(tiergym.DEFAULT_TASK)
HEURISTICS = ("random", "greedy", "hemem", "memtis", "damos", "autonuma")
# The generalization protocol's heuristics: those and the ones that read the relative
# observation's traffic and latencies.
GENERAL_HEURISTICS = HEURISTICS + ("tpp", "colloid", "arms")

# Tuned configurations: each a few measured changes to the library's defaults, for
# wall-clock speed on small CPUs first (bigger batches, fewer optimiser steps per sample)
# and for the task's horizon (100 decisions, the return undiscounted).
AGENTS = {
    # Stable-Baselines3 2.x defaults: PPO("MlpPolicy", env), one environment.
    "sb3-ppo": dict(library="sb3", algo="PPO", kwargs={}),
    # Four environments batched in one server (tiergym.sb3.TierVecEnv), 2048 steps per
    # update as by default, minibatches of 256, gamma 1 (an episode's return is the time
    # saved, undiscounted), a little entropy bonus.
    "sb3-ppo-tuned": dict(library="sb3", algo="PPO", n_envs=4,
                          kwargs=dict(n_steps=512, batch_size=256, gamma=1.0, ent_coef=0.001)),
    "sb3-a2c": dict(library="sb3", algo="A2C", kwargs={}),
    # A2C: longer rollouts from four environments, gamma 1, a little entropy bonus.
    "sb3-a2c-tuned": dict(library="sb3", algo="A2C", n_envs=4,
                          kwargs=dict(n_steps=25, gamma=1.0, ent_coef=0.001)),
    # DQN in the move mode (one region per step): its defaults.
    "sb3-dqn": dict(library="sb3", algo="DQN", kwargs={}, config={"action_mode": "move"}),
    # DQN: learning after 10 episodes (moves on both applications; the default 100 steps
    # is one episode), exploration over 5 % of the budget (10,000 of 200k steps) instead of
    # 10 %, the target network refreshed every 20 episodes instead of 100, gamma 1.
    "sb3-dqn-tuned": dict(library="sb3", algo="DQN", config={"action_mode": "move"},
                          kwargs=dict(learning_starts=1000, exploration_fraction=0.05,
                                      target_update_interval=2000, gamma=1.0)),
    # RLlib (new API stack) PPO defaults, sampling in the driver (no env runner processes).
    "rllib-ppo": dict(library="rllib", kwargs={}),
    # RLlib PPO: SB3 PPO's defaults (2048 steps, minibatches 64, 10 epochs, lr 3e-4, 64x64):
    # the settings with which SB3's PPO learns this task, at about two thirds of the time
    # per step of RLlib's defaults (4000-step batches, 30 epochs of 128, lr 5e-5, 256x256).
    "rllib-ppo-tuned": dict(library="rllib", kwargs=dict(
        train_batch_size_per_learner=2048, minibatch_size=64, num_epochs=10, lr=3e-4,
        fcnet_hiddens=[64, 64])),
    # The reference agent (agents_examples/fast_ppo.py, masked PPO on the in-process vector
    # environment): weights shared across regions (permutation-equivariant), and the flat
    # MLP for comparison. Their configuration: agents_examples/README.md, "Generalization".
    "ppo-regions": dict(library="reference", kwargs=dict(policy="regions")),
    "ppo-flat": dict(library="reference", kwargs=dict(policy="mlp")),
    # ppo-regions with a third of fast_ppo's default learning rate (1e-3 instead of 3e-3,
    # annealed to 0 the same way): chosen by a seed's train and test sets (README,
    # "Generalization"), the held-out programs left out of the choice.
    "ppo-regions-lr1e-3": dict(library="reference", kwargs=dict(policy="regions",
                                                                learning_rate=1e-3)),
    # ppo-regions with each training application's rewards weighted by the pool's mean
    # oracle saving over its own (fast_ppo.py --reward-norm oracle, app_weights.py); it
    # learns to move nothing (README, "Generalization": kept to reproduce that).
    "ppo-regions-norm": dict(library="reference", kwargs=dict(policy="regions",
                                                              reward_norm="oracle")),
    # ppo-regions-lr1e-3 evaluated (and saved) as the exponential moving average of its
    # weights over updates (fast_ppo.py --ema-decay 0.9: the last ~10 updates, 160k steps,
    # weigh most), the learner acting as before: its deterministic decisions on flat heat
    # flipped from one evaluation to the next (README, "Generalization"). Tried on a seed's
    # train and test sets and not kept: the average scored below the learner at 3 of 4
    # evaluations, the last included (the learner's own returns are in each point,
    # learner_returns).
    "ppo-regions-ema": dict(library="reference", kwargs=dict(policy="regions",
                                                             learning_rate=1e-3,
                                                             ema_decay=0.9)),
    # ppo-regions-lr1e-3 with half the clip range (0.1: each update moves the policy's
    # probabilities at most half as far), evaluated as the average of its weights over
    # updates with decay 0.8 (the learner's own returns beside it, learner_returns). Tried
    # on a seed's train and test sets; not kept (README, "Generalization").
    "ppo-regions-clip0.1": dict(library="reference", kwargs=dict(policy="regions",
                                                                 learning_rate=1e-3,
                                                                 clip_coef=0.1,
                                                                 ema_decay=0.8)),
    # ppo-regions-lr1e-3 ending with the checkpoint of its evaluations (every 131,072 steps:
    # --eval-every) that scored best on the set train (32 of the applications trained on),
    # rather than its last one: the runs rise and fall (one seed 0.74, 0.19, 0.76 on train
    # at successive evaluations). Chosen on train and test only (README, "Generalization").
    "ppo-regions-best": dict(library="reference", kwargs=dict(policy="regions",
                                                              learning_rate=1e-3,
                                                              select_best=True)),
    # ppo-regions-best delivering, instead of its best checkpoint, the mean of the masked
    # softmax probabilities of the 3 evaluated checkpoints that scored best on the set
    # train, acting by its argmax (fast_ppo.py --ensemble-top 3): averaging the outputs
    # rather than the weights (ppo-regions-ema). README, "Generalization".
    "ppo-regions-ens3": dict(library="reference", kwargs=dict(policy="regions",
                                                              learning_rate=1e-3,
                                                              ensemble_top=3)),
    # ppo-regions-lr1e-3 started from a clone of HeMem-like's placement (bc_regions.py's
    # defaults: each region's label the tier HeMem-like keeps it on at that step, states
    # visited with 10 % of random choices, the labels that change a region's tier half of
    # the loss; the value fitted to those episodes' returns), then PPO. README,
    # "Generalization"; its pretraining's env steps are logged, not in the curve.
    "ppo-regions-bc": dict(library="reference", pretrain=dict(teacher="hemem"),
                           kwargs=dict(policy="regions", learning_rate=1e-3)),
    # ppo-regions-best with each update's epochs ended once the approximate KL between the
    # policy that acted and the updated one passes 0.0075 (fast_ppo.py --target-kl, as
    # SB3's and CleanRL's target_kl): the runs rise and fall between evaluations. The
    # target chosen among 0.02, 0.01, 0.005 and 0.0075 on seed 0's train and test sets only
    # (README, "Generalization"; 0.02 stopped no update: the plain run bit for bit).
    "ppo-regions-kl": dict(library="reference", kwargs=dict(policy="regions",
                                                            learning_rate=1e-3,
                                                            select_best=True,
                                                            target_kl=0.0075)),
    # Four ways tried against the deterministic policy's rise and fall (README,
    # "Generalization", "Why the deterministic policy flips"), each ppo-regions-lr1e-3 with
    # one change, judged on train and test only and not kept: no entropy bonus; each
    # region's probability ratio clipped on its own (fast_ppo.py --clip-per-region); a head
    # that names the tier a region should be on (--policy regions-target); and each region
    # sampling its choice at 1 step in 8, taking its most likely one otherwise
    # (--explore-regions 0.125).
    "ppo-regions-ent0": dict(library="reference", kwargs=dict(policy="regions",
                                                              learning_rate=1e-3, ent_coef=0.0)),
    "ppo-regions-pr": dict(library="reference", kwargs=dict(policy="regions",
                                                            learning_rate=1e-3,
                                                            clip_per_region=True)),
    "ppo-regions-target": dict(library="reference", kwargs=dict(policy="regions-target",
                                                                learning_rate=1e-3)),
    "ppo-regions-explore": dict(library="reference", kwargs=dict(policy="regions",
                                                                 learning_rate=1e-3,
                                                                 explore_regions=0.125)),
    # ppo-regions-best with returns discounted by 0.9 a step instead of summed (gamma 1):
    # a move made later is worth less, against the keep-mode policy's low probability of
    # moving a region now rather than later. Chosen on train and test among 0.9 and 0.95
    # (README, "Why the deterministic policy flips").
    "ppo-regions-g90": dict(library="reference", kwargs=dict(policy="regions",
                                                             learning_rate=1e-3,
                                                             select_best=True, gamma=0.9)),
    # The per-region policy searched by the cross-entropy method instead of learnt by PPO
    # (agents_examples/es_regions.py): one linear map shared by every region names the tier
    # it should be on, and the search scores its deterministic policy, the one evaluated
    # (so nothing flips between sampled and scored). 32 weight vectors a generation, each
    # played on the same 8 training applications; the best quarter refitted; the
    # evaluation on `train` that scored best delivered (as ppo-regions-best). README,
    # "Searched, not sampled".
    "cem-linear": dict(library="reference", trainer="es_regions",
                       kwargs=dict(policy="linear-target", method="cem", sigma=1.0,
                                   apps_per_generation=8, select_best=True)),
    # cem-linear from each region's own features alone (no global feature).
    "cem-region-linear": dict(library="reference", trainer="es_regions",
                              kwargs=dict(policy="region-linear-target", method="cem",
                                          sigma=1.0, apps_per_generation=8,
                                          select_best=True)),
    # A learned hotness in HeMem's placement rule (es_regions.ScoreFillPolicy): one linear
    # map shared by every region from its access statistics to a score; regions above 0
    # are promoted hottest first, making room by demoting the coldest that are not hot.
    # 7 weights, searched as cem-linear's, each member's fitness the time it saves summed
    # over its applications (as the benchmark scores a procedural set), not each
    # application's saving over its oracle's: README, "A learned hotness".
    "cem-fill": dict(library="reference", trainer="es_regions",
                     kwargs=dict(policy="score-fill", method="cem", sigma=1.0,
                                 apps_per_generation=8, fitness="time-saved",
                                 select_best=True)),
    # cem-fill whose hotness also reads each region's load (observation=relative-load: the
    # application's memory traffic while the region is accessed), every feature divided by
    # its spread over the training applications: README, "The load of a region".
    "cem-fill-load": dict(library="reference", trainer="es_regions",
                          task=dict(observation="relative-load"),
                          kwargs=dict(policy="score-fill-load", method="cem", sigma=1.0,
                                      apps_per_generation=8, fitness="time-saved",
                                      standardize=True, select_best=True)),
    # cem-fill-load whose rank features count only the regions denser by more than 20 %
    # (es_regions.py --rank-margin 0.2): README, "Ranks beyond a margin".
    "cem-fill-rank": dict(library="reference", trainer="es_regions",
                          task=dict(observation="relative-load"),
                          kwargs=dict(policy="score-fill-load", method="cem", sigma=1.0,
                                      apps_per_generation=8, fitness="time-saved",
                                      standardize=True, select_best=True, rank_margin=0.2)),
}
# The generalization protocol's agents by default.
GENERAL_AGENTS = ("ppo-regions", "ppo-flat", "sb3-ppo")


def log(*parts):
    print(*parts, file=sys.stderr, flush=True)


class Progress:
    """One line per run on stderr: a bar on a terminal (redrawn), else a line per update."""

    def __init__(self, label, total):
        self.label, self.total, self.tty = label, total, sys.stderr.isatty()

    def update(self, done, note=""):
        width = 24
        filled = int(width * min(done, self.total) / max(self.total, 1))
        line = (f"{self.label} [{'#' * filled}{'.' * (width - filled)}] "
                f"{done}/{self.total} steps {note}")
        if self.tty:
            print("\r" + line, end="", file=sys.stderr, flush=True)
        else:
            log(line)

    def close(self):
        if self.tty:
            print(file=sys.stderr, flush=True)


# --- Evaluation -----------------------------------------------------------------------------

class PredictPolicy(policies.Policy):
    """A trained model behind the policy interface of policies.py (name, reset(env, obs,
    info), act(obs, info)), as the heuristics and the project's own learning agents are:
    predict(obs) -> action in the environment's action mode (keep mode here)."""

    def __init__(self, name, predict):
        super().__init__()
        self.name, self.predict = name, predict

    def act(self, obs, info):
        return self.predict(obs)


def evaluate_predict(env, predict, apps, seed=0):
    """{app: return} of one deterministic episode per application; predict(obs) -> action."""
    policy = PredictPolicy("agent", predict)
    return {app: float(policies.run_episode(env, policy, seed=seed, profile=app)["speedup"])
            for app in apps}


def fraction_of_oracle(returns, oracle, apps):
    """Mean over `apps` of return / oracle's return."""
    return float(np.mean([returns[a] / oracle[a] for a in apps]))


def heuristic_returns(server, apps, config, names=HEURISTICS, seed=0):
    """{policy: {app: return}} of the oracle and the heuristics, on the task's machine in
    the placement action mode (what policies.py drives)."""
    placement = dict(config, action_mode="placement", observation="raw")
    env = tiergym.TierEnv(address=server, **placement)
    try:
        table = {}
        for name in ("oracle",) + tuple(names):
            policy = policies.make_policy(name, seed=seed)
            table[name] = {a: policies.run_episode(env, policy, seed=seed, profile=a)["speedup"]
                           for a in apps}
            log(f"  {name:<9} " + "  ".join(f"{a} {table[name][a]:+.4f}" for a in apps))
        return table
    finally:
        env.close()


# --- Stable-Baselines3 ----------------------------------------------------------------------

def vectorize_multicategorical():
    """SB3's MultiCategoricalDistribution builds one torch Categorical per region and
    loops over them for every sample, log-probability and entropy; when every region has
    the same number of choices (keep mode: 1 + tiers), one Categorical over a [batch,
    regions, choices] tensor computes the same quantities in a few tensor operations.
    Speed only: the distribution, its log-probabilities and entropies are the same (a
    test compares them); the random draws come from one call instead of one per region,
    so a seed's trajectory differs from unpatched SB3's. Returns True if patched."""
    import torch
    from torch.distributions import Categorical
    from stable_baselines3.common import distributions

    cls = distributions.MultiCategoricalDistribution
    if getattr(cls, "_tiergym_vectorized", False):
        return True
    originals = {name: getattr(cls, name) for name in
                 ("proba_distribution", "log_prob", "entropy", "sample", "mode")}

    def proba_distribution(self, action_logits):
        dims = list(self.action_dims)
        if len(set(dims)) != 1:
            return originals["proba_distribution"](self, action_logits)
        self.distribution = Categorical(
            logits=action_logits.reshape(action_logits.shape[0], len(dims), dims[0]))
        return self

    def joint(name, fn):
        def method(self, *args):
            if isinstance(self.distribution, Categorical):
                return fn(self.distribution, *args)
            return originals[name](self, *args)
        return method

    cls.proba_distribution = proba_distribution
    cls.log_prob = joint("log_prob", lambda d, actions: d.log_prob(actions).sum(dim=1))
    cls.entropy = joint("entropy", lambda d: d.entropy().sum(dim=1))
    cls.sample = joint("sample", lambda d: d.sample())
    cls.mode = joint("mode", lambda d: torch.argmax(d.logits, dim=-1))
    cls._tiergym_vectorized = True
    return True


def train_sb3(agent, server, config, train, apps, seed, steps, eval_every, progress, curve):
    """An SB3 agent on the applications of `train`, evaluated on `apps`."""
    env_config = dict(config, **agent.get("config", {}))
    evaluator = AppsEvaluator(tiergym.TierEnv(address=server, **env_config), apps)
    return run_sb3(agent, server, env_config, {"profiles": ",".join(train)}, evaluator, seed,
                   steps, eval_every, progress, curve)


class AppsEvaluator:
    """Deterministic episodes (seed 0) of a predict(obs) -> action function on each of
    `apps`, on one session: {app: return}."""

    def __init__(self, env, apps):
        self.env, self.apps = env, apps

    def __call__(self, predict):
        return evaluate_predict(self.env, predict, self.apps)

    def close(self):
        self.env.close()


def run_sb3(agent, server, env_config, train_config, evaluator, seed, steps, eval_every,
            progress, curve):
    """An SB3 agent (AGENTS' entry) trained on `server` with env_config and train_config
    (its profiles), evaluator(predict) after every eval_every steps; closes the evaluator.
    -> (curve, train_s, wall_s)."""
    import stable_baselines3
    from tiergym.sb3 import TierVecEnv
    venv = None
    try:
        algo = getattr(stable_baselines3, agent["algo"])
        n_envs = int(agent.get("n_envs", 1))
        if n_envs == 1:  # what a user of the defaults writes: the Gymnasium env itself
            venv = tiergym.TierEnv(address=server, **dict(env_config, **train_config))
        else:
            venv = TierVecEnv(n_envs, address=server, **dict(env_config, **train_config))
            venv.seed(seed)
        model = algo("MlpPolicy", venv, seed=seed, verbose=0, **agent["kwargs"])
        if n_envs == 1:
            model.get_env().seed(seed)
        started = time.monotonic()

        def evaluate():
            returns = evaluator(lambda o: model.predict(o, deterministic=True)[0])
            curve.append({"steps": int(model.num_timesteps), "returns": returns})
            return returns

        train_s = learn_with_evaluations(model, steps, eval_every, evaluate, progress)
        return curve, train_s, time.monotonic() - started
    finally:
        if venv is not None:
            venv.close()
        evaluator.close()


def learn_with_evaluations(model, steps, eval_every, evaluate, progress=None):
    """One model.learn(steps) call, as a user of the library writes it, with evaluate()
    before training, at the first rollout start at or after each multiple of eval_every
    (after the update the rollouts before it fed) and at the end; progress(steps, returns,
    train_s) after each evaluation but the first. One call matters: SB3 computes its
    schedules (DQN's exploration, decayed over exploration_fraction of the budget; any
    learning-rate schedule) over the total_timesteps of a learn call, so learn() in chunks
    of eval_every would decay DQN's exploration over a tenth of each chunk instead of a
    tenth of the budget. Returns the seconds spent training (evaluations excluded)."""
    from stable_baselines3.common.callbacks import BaseCallback

    evaluation_s = [0.0]

    def timed_evaluation():
        t0 = time.monotonic()
        returns = evaluate()
        evaluation_s[0] += time.monotonic() - t0
        return returns

    class EvaluateEvery(BaseCallback):
        def __init__(self):
            super().__init__()
            self.next_eval = eval_every

        def _on_rollout_start(self):
            done = self.model.num_timesteps
            if done >= self.next_eval:
                returns = timed_evaluation()
                if progress is not None:
                    progress(done, returns, train_s())
                self.next_eval = (done // eval_every + 1) * eval_every

        def _on_step(self):
            return True

    timed_evaluation()
    started = time.monotonic()
    evaluation_s[0] = 0.0

    def train_s():
        return time.monotonic() - started - evaluation_s[0]

    model.learn(steps, callback=EvaluateEvery())
    returns = timed_evaluation()
    if progress is not None:
        progress(model.num_timesteps, returns, train_s())
    return train_s()


# --- RLlib ------------------------------------------------------------------------------------

# Where an RLlib iteration's time goes (seconds: per iteration for the first two, mean per
# call for the others), logged after each iteration: these names end the flattened keys.
RLLIB_TIMERS = ("env_runner_sampling_timer", "learner_update_timer", "env_step_timer",
                "env_to_module_connector", "rlmodule_inference_timer",
                "module_to_env_connector", "learner_connector")


def rllib_timers(result, prefix=""):
    """{flattened key: seconds} of the RLLIB_TIMERS in an RLlib result."""
    found = {}
    for key, value in result.items():
        name = f"{prefix}/{key}" if prefix else str(key)
        if isinstance(value, dict):
            found.update(rllib_timers(value, name))
        elif isinstance(value, (int, float)) and any(
                part in RLLIB_TIMERS for part in name.split("/")[-2:]):
            found[name] = float(value)
    return found


def train_rllib(agent, server, config, train, apps, seed, steps, eval_every, progress, curve):
    import ray
    import torch
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.core.columns import Columns
    from ray.tune.registry import register_env

    import rllib_env
    env_config = {"addresses": [server.endpoint],
                  "tiergym": dict(config, profiles=",".join(train))}
    register_env("tiergym", rllib_env.env_creator)
    kwargs = dict(agent["kwargs"])
    hiddens = kwargs.pop("fcnet_hiddens", None)
    ppo = (PPOConfig().environment("tiergym", env_config=env_config).framework("torch")
           .env_runners(num_env_runners=0).debugging(seed=seed))
    if kwargs:
        ppo = ppo.training(**kwargs)
    if hiddens:
        ppo = ppo.rl_module(model_config={"fcnet_hiddens": hiddens})
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
    eval_env = tiergym.TierEnv(address=server, **config)
    nvec = eval_env.action_space.nvec
    algo = None
    started, train_s, sampled = time.monotonic(), 0.0, 0
    try:
        algo = ppo.build_algo()
        module = algo.get_module()

        def predict(obs):
            with torch.no_grad():
                out = module.forward_inference({Columns.OBS: torch.as_tensor(obs[None])})
            logits = out[Columns.ACTION_DIST_INPUTS][0].numpy()
            parts = np.split(logits, np.cumsum(nvec)[:-1])
            return np.array([int(np.argmax(p)) for p in parts], dtype=np.int64)

        def evaluate():
            curve.append({"steps": sampled, "returns": evaluate_predict(eval_env, predict, apps)})
            return curve[-1]["returns"]

        evaluate()
        next_eval = eval_every
        while sampled < steps:
            t0 = time.monotonic()
            result = algo.train()
            train_s += time.monotonic() - t0
            sampled = int(result["env_runners"]["num_env_steps_sampled_lifetime"])
            log(f"  rllib iteration: {sampled} env steps, {time.monotonic() - t0:.1f} s; " +
                ", ".join(f"{k} {v:.4g}" for k, v in sorted(rllib_timers(result).items())))
            if sampled >= next_eval or sampled >= steps:
                module = algo.get_module()
                progress(sampled, evaluate(), train_s)
                next_eval = (sampled // eval_every + 1) * eval_every
    finally:
        if algo is not None:
            algo.stop()
        ray.shutdown()
        eval_env.close()
    return curve, train_s, time.monotonic() - started


# --- The generalization protocol ---------------------------------------------------------------
#
# Train on procedural applications (tiergym.datasets' procedural-train-v1), evaluate on
# named sets of applications: some of those trained on, procedural ones never seen, the
# bundled programs (written by hand, not drawn from the distribution), the same programs on
# a machine never trained on, and real programs when they are bundled.

# The task of the protocol: the default task's keys, with the relative observation
# (per-region features relative to the application and the tiers: env/README.md,
# "Observations that transfer").
GENERAL_TASK = dict(tiergym.DEFAULT_TASK, observation="relative")
TRAIN_SPLIT = "procedural-train-v1:256"
# label=SPLIT[:N] items: the evaluation sets.
EVAL_SETS = ("train=procedural-train-v1:32,test=procedural-test-v1,programs=bundled-v1,"
             "machine=machine-xeonmax-v2,real=real-v1")
SET_TITLES = {"train": "procedural, trained on", "test": "procedural, never seen",
              "programs": "bundled programs (held out)", "machine": "unseen machine",
              "real": "real programs (held out)"}


class EvalSet:
    """A named set of applications to evaluate on: `label`, the split (tiergym.datasets)
    and how many of its applications, their names, the configuration keys that serve them
    (profiles, machine), and how its score is taken (`pooled`: procedural sets, see
    set_score)."""

    def __init__(self, label, dataset, n):
        self.label, self.dataset, self.n = label, dataset, n
        self.apps = dataset.app_names(n)
        self.pooled = dataset.kind == "procedural"
        # Real programs: scored by the time saved in % of the all-slow runtime (set_score).
        self.saved = dataset.kind == "real"

    def config(self):
        return self.dataset.config(self.n, progress=log)

    def describe(self):
        return {"split": self.dataset.name, "n": self.n, "apps": self.apps,
                "machine": self.dataset.machine, "pooled": self.pooled, "score": score_name(self)}


def parse_sets(text):
    """[EvalSet] of LABEL=SPLIT[:N] items; unavailable splits are left out with a note.
    ValueError says what is wrong."""
    sets = []
    for item in filter(None, (i.strip() for i in text.split(","))):
        label, eq, entry = item.partition("=")
        if not eq or not label or not entry:
            raise ValueError(f"{item!r} is not LABEL=SPLIT[:N]")
        found = tiergym.datasets.parse_entry(entry)
        if found is None:
            raise ValueError(f"{item!r}: no split {entry.partition(':')[0]!r} (known: "
                             f"{', '.join(tiergym.datasets.names())})")
        dataset, n = found
        if not dataset.available:
            log(f"note: set {label} ({dataset.name}) left out: {dataset.unavailable_reason}")
            continue
        if any(s.label == label for s in sets):
            raise ValueError(f"set {label!r} given twice")
        sets.append(EvalSet(label, dataset, n))
    if not sets:
        raise ValueError("no evaluation set")
    return sets


def set_score(returns, oracle, evalset):
    """A set's score (returns, oracle: {app: return}; a return is the time saved, 1 -
    runtime / all-slow runtime). Programs (a few applications, every one worth placing): the
    fraction of the oracle's time saved, the mean over the applications of return / oracle's
    return, as the two-application protocol takes it. Procedural sets (many applications,
    some of which no placement speeds up: the oracle saves ~0 there and a ratio would be
    noise): the time saved summed over the set, over the oracle's sum. Real programs
    (`saved`): the oracle may save nothing at all (on knl it leaves LAMMPS and HPC
    Challenge on DDR: no region gains enough to pay its move), so a fraction of it is
    undefined; the score is the time saved in % of the all-slow runtime, the mean over the
    applications of 100 x return: the oracle's is >= 0, a policy that loses time scores
    below 0."""
    r = np.array([returns[a] for a in evalset.apps], dtype=np.float64)
    if getattr(evalset, "saved", False):
        return float(100.0 * np.mean(r))
    o = np.array([oracle[a] for a in evalset.apps], dtype=np.float64)
    if evalset.pooled:
        # nan when no placement of the set's applications saves time (a tiny set).
        return float(r.sum() / o.sum()) if o.sum() > 0 else float("nan")
    return float(np.mean(r / o))


def score_name(evalset):
    """What set_score gives for a set, as the tables and plots say it."""
    return ("% of the all-slow runtime saved" if getattr(evalset, "saved", False)
            else "fraction of the oracle's time saved")


class SetServers:
    """One private server per machine of the sets (the sets' profiles are named in each
    session's configuration), with a memory budget for a pool of procedural profiles. A
    server loads at start what it serves by default: the bundled programs when a set names
    them on that machine, else only one of the profiles given (`first`: {machine: profile
    directory}), which is quicker."""

    def __init__(self, sets, first=None):
        self.servers = {}
        self.by_name = {s.dataset.machine for s in sets if s.dataset.served_by_name}
        self.first = dict(first or {})

    def get(self, machine, first=None):
        if machine not in self.servers:
            args = ["--threads", "1", "--quiet", "--idle-timeout", "0", "--machine", machine,
                    "--max-asset-mib", "16384"]
            start = first or self.first.get(machine)
            if machine not in self.by_name and start:
                args += ["--profiles", start]
            self.servers[machine] = tiergym.Server(args=args)
        return self.servers[machine]

    def close(self):
        for s in self.servers.values():
            s.close()
        self.servers = {}


def set_heuristic_returns(servers, sets, task, names, seed=0):
    """{label: {policy: {app: return}}} of the oracle and the heuristics on every set, in
    the placement action mode (what policies.py drives), the task's observation."""
    table = {}
    for evalset in sets:
        config = dict(task, action_mode="placement", **evalset.config())
        env = tiergym.TierEnv(address=servers.get(evalset.dataset.machine,
                                                  config["profiles"][0]), **config)
        try:
            table[evalset.label] = {}
            for name in ("oracle",) + tuple(names):
                policy = policies.make_policy(name, seed=seed)
                table[evalset.label][name] = {
                    a: float(policies.run_episode(env, policy, seed=seed, profile=a)["speedup"])
                    for a in evalset.apps}
            oracle = table[evalset.label]["oracle"]
            log(f"  {evalset.label:<9} ({len(evalset.apps)} applications) " + "  ".join(
                f"{n} {set_score(table[evalset.label][n], oracle, evalset):+.3f}"
                for n in names))
        finally:
            env.close()
    return table


class SetEvaluator:
    """Deterministic episodes (seed 0) of a predict(obs) -> action function on every
    application of every set: {label: {app: return}}, over TierEnv sessions."""

    def __init__(self, servers, sets, task):
        self.sets = sets
        self.envs = {s.label: tiergym.TierEnv(address=servers.get(s.dataset.machine),
                                              **dict(task, **s.config())) for s in sets}

    def __call__(self, predict):
        return {s.label: evaluate_predict(self.envs[s.label], predict, s.apps)
                for s in self.sets}

    def close(self):
        for env in self.envs.values():
            env.close()


def train_sb3_general(agent, servers, task, train_config, sets, seed, steps, eval_every,
                      progress, curve):
    """An SB3 agent on the training split, evaluated on every set."""
    env_config = dict(task, **agent.get("config", {}))
    return run_sb3(agent, servers.get(train_config["machine"]), env_config, train_config,
                   SetEvaluator(servers, sets, env_config), seed, steps, eval_every, progress,
                   curve)


class InProcessSetEvaluator:
    """The reference agent's evaluation: one deterministic episode (seed 0) per application
    of every set, all the applications of a set side by side in one in-process vector
    environment (the same episodes as the server's, bit for bit), the policy's most likely
    allowed choice per region (fast_ppo.greedy_actions): {label: {app: return}}."""

    def __init__(self, fast_ppo, fast_args, sets, task):
        self.fast_ppo, self.parts = fast_ppo, []
        for s in sets:
            envs = tiergym.InProcessVectorEnv(len(s.apps), threads=1,
                                              autoreset_mode=tiergym.DISABLED,
                                              **dict(task, **s.config()))
            self.parts.append((s, envs, fast_ppo.Masks(fast_args.mask, envs.tier_spec)))

    def __call__(self, policy):
        out = {}
        for s, envs, masks in self.parts:
            obs, info = envs.reset(seed=[0] * len(s.apps), options={"profile": s.apps})
            total = np.zeros(len(s.apps))
            while True:  # one configuration: every episode ends at the same step
                obs, reward, terminated, truncated, info = envs.step(
                    self.fast_ppo.greedy_actions(policy, obs, masks(info)))
                total += reward
                if (terminated | truncated).all():
                    break
            out[s.label] = {a: float(r) for a, r in zip(s.apps, total)}
        return out

    def close(self):
        for _, envs, _ in self.parts:
            envs.close()


def agent_task(task, agent):
    """The task an agent trains and is evaluated on: the protocol's, with the keys its entry
    of AGENTS changes (`task`: cem-fill-load's observation)."""
    return dict(task, **agent.get("task", {}))


def train_reference_general(agent, task, train_config, sets, seed, steps, eval_every,
                            progress, curve, oracle=None):
    """The reference agent (agents_examples/fast_ppo.py: masked PPO on the in-process vector
    environment; with trainer "es_regions", agents_examples/es_regions.py: the cross-entropy
    method or evolution strategies) on the training split, evaluated on every set. With
    select_best among its
    kwargs, the checkpoint it ends with is the one scoring best on the set `train` (some of
    the applications trained on; oracle: {label: {app: oracle's return}}), never on a
    held-out set."""
    import fast_ppo
    overrides = {k: v for k, v in task.items() if tiergym.DEFAULT_TASK.get(k) != v}
    common = dict(seed=seed, total_steps=steps, eval_every=eval_every, quiet=True,
                  train=",".join(train_config["profiles"]), held_out="",
                  config=",".join(f"{k}={v}" for k, v in dict(
                      overrides, machine=train_config["machine"]).items()),
                  **agent["kwargs"])
    if agent.get("trainer") == "es_regions":  # the same policies, searched without gradients
        import es_regions as learner
    else:
        learner = fast_ppo
    fast_args = learner.Args(**common)
    score = None
    if fast_args.select_best or getattr(fast_args, "ensemble_top", 0):
        train_set = next((s for s in sets if s.label == "train"), None)
        if train_set is None or oracle is None:
            raise ValueError(f"{agent['kwargs']}: select_best / ensemble_top choose by the set "
                             "'train', which --sets does not name")
        score = lambda point: set_score(point["returns"]["train"],  # noqa: E731
                                        oracle["train"], train_set)
    started = time.monotonic()
    scratch = tempfile.TemporaryDirectory(prefix="tiergym-bc-")
    if agent.get("pretrain"):  # a warm start: its env steps are logged, not in the curve
        import bc_regions
        fast_args.init_from = os.path.join(scratch.name, "bc.pt")
        bc_regions.pretrain(fast_args, bc_regions.BCArgs(**agent["pretrain"]),
                            fast_args.init_from, log=log)
    evaluator = InProcessSetEvaluator(fast_ppo, fast_args, sets, task)

    def on_eval(point):
        curve.append({"steps": int(point["steps"]), "returns": point["returns"]})
        if getattr(fast_args, "target_kl", 0) and "approx_kl" in point:  # the update's reach
            curve[-1].update({k: point[k] for k in ("approx_kl", "minibatches", "kl_stops")})
        if "learner_returns" in point:  # ema_decay: the learner's own, beside the average's
            curve[-1]["learner_returns"] = point["learner_returns"]
        if "selected_steps" in point:  # select_best: the checkpoint the last point repeats
            curve[-1]["selected_steps"] = point["selected_steps"]
        if "ensemble_steps" in point:  # ensemble_top: the checkpoints the last point averages
            curve[-1]["ensemble_steps"] = point["ensemble_steps"]
        if point["steps"] > 0:
            progress(int(point["steps"]), point["returns"], point["train_s"])

    try:
        _, metrics = learner.train(fast_args, on_eval=on_eval, evaluator=evaluator,
                                   score=score)
    finally:
        evaluator.close()
        scratch.cleanup()
    return curve, metrics["train_s"], time.monotonic() - started


def summarize_sets(runs, oracle, sets):
    """{agent: {label: [mean, std] over seeds at the last evaluation, "seeds", "steps",
    "wall_s", "steps_per_s"}}."""
    table = {}
    for name in dict.fromkeys(r["agent"] for r in runs):
        mine = [r for r in runs if r["agent"] == name]
        last = [r["curve"][-1] for r in mine]
        row = {"seeds": len(mine), "steps": int(np.mean([p["steps"] for p in last])),
               "wall_s": float(np.mean([r["wall_s"] for r in mine])),
               "steps_per_s": float(np.mean([r["steps_per_s"] for r in mine]))}
        for s in sets:
            f = [set_score(p["returns"][s.label], oracle[s.label], s) for p in last]
            row[s.label] = [float(np.mean(f)), float(np.std(f))]
        table[name] = row
    return table


def print_sets_table(summary, heuristics, oracle, sets, out=sys.stdout):
    saved = [s.label for s in sets if getattr(s, "saved", False)]
    print("fraction of the oracle's time saved"
          + (f" ({', '.join(saved)}: % of the all-slow runtime saved, the oracle's row "
             "beside it)" if saved else "")
          + " (mean +- std over seeds; last evaluation); "
          + ", ".join(f"{s.label}: {s.dataset.name} ({len(s.apps)})" for s in sets), file=out)
    print(f"{'agent':<20}{'steps':>8}{'seeds':>6}"
          + "".join(f"{s.label:>16}" for s in sets) + f"{'wall s':>9}{'steps/s':>9}", file=out)
    for name, row in summary.items():
        print(f"{name:<20}{row['steps']:>8}{row['seeds']:>6}"
              + "".join(f"{row[s.label][0]:>10.3f} +-{row[s.label][1]:.2f}" for s in sets)
              + f"{row['wall_s']:>9.0f}{row['steps_per_s']:>9.0f}", file=out)
    # The oracle's row (1 on the fractions) when a set is scored in % saved.
    for name in list(next(iter(heuristics.values()))) + (["oracle"] if saved else []):
        scores = [set_score(policy_returns(heuristics, oracle, s.label, name), oracle[s.label],
                            s) for s in sets]
        print(f"{name:<20}{'':>8}{'':>6}" + "".join(f"{x:>16.3f}" for x in scores), file=out)


def policy_returns(heuristics, oracle, label, name):
    """{app: return} of heuristic `name` (or "oracle") on set `label`."""
    return oracle[label] if name == "oracle" else heuristics[label][name]


def plot_sets(path, runs, heuristics, oracle, sets, title):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, len(sets), figsize=(4.2 * len(sets), 4.4), squeeze=False)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    agents = list(dict.fromkeys(r["agent"] for r in runs))
    for ax, s in zip(axes[0], sets):
        for i, name in enumerate(agents):
            curves = [r["curve"] for r in runs if r["agent"] == name]
            n = min(len(c) for c in curves)
            xs = np.mean([[p["steps"] for p in c[:n]] for c in curves], axis=0)
            ys = np.array([[set_score(p["returns"][s.label], oracle[s.label], s)
                            for p in c[:n]] for c in curves])
            color = colors[i % len(colors)]
            ax.plot(xs, ys.mean(axis=0), color=color,
                    label=f"{name} ({len(curves)} seed{'s' if len(curves) > 1 else ''})")
            if len(curves) > 1:
                ax.fill_between(xs, ys.min(axis=0), ys.max(axis=0), color=color, alpha=0.15)
        names = list(heuristics[s.label])
        for j, h in enumerate(names):
            y = set_score(heuristics[s.label][h], oracle[s.label], s)
            ax.axhline(y, color="0.4", lw=0.8, ls=(0, (1 + j, 2)))
            ax.annotate(h, (1.0, y), xycoords=("axes fraction", "data"), fontsize=7,
                        color="0.3", xytext=(2, 0), textcoords="offset points", va="center")
        ax.set_title(f"{SET_TITLES.get(s.label, s.label)}\n{s.dataset.name} "
                     f"({len(s.apps)} applications)", fontsize=9)
        ax.set_xlabel("environment steps")
        panel_scale(ax, s, [set_score(heuristics[s.label][h], oracle[s.label], s)
                            for h in names], set_score(oracle[s.label], oracle[s.label], s))
    axes[0][-1].legend(loc="lower right", fontsize=7)
    fig.suptitle(title, fontsize=9)
    # Margins set, not tight_layout's: the heuristics' labels right of each panel left it
    # nothing to fit, and the title ran over the panels' titles.
    fig.subplots_adjust(left=0.05, right=0.95, top=0.82, bottom=0.12, wspace=0.3)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def panel_scale(ax, evalset, lines, best):
    """A panel's reference line (the oracle: 1 on a fraction, its % saved on a set scored in
    % saved), its y range (fractions from -0.3 at most to 1.1, as every such panel) and its
    label."""
    ax.axhline(best, color="k", lw=0.8)
    ax.set_ylabel(score_name(evalset), fontsize=8)
    if getattr(evalset, "saved", False):
        low, high = min([ax.get_ylim()[0]] + lines), max([ax.get_ylim()[1], best] + lines)
        pad = 0.05 * max(high - low, 1.0)
        ax.set_ylim(bottom=low - pad, top=high + pad)
        ax.annotate("oracle", (1.0, best), xycoords=("axes fraction", "data"), fontsize=7,
                    xytext=(2, 0), textcoords="offset points", va="center")
        return
    low = min([ax.get_ylim()[0]] + [y - 0.05 for y in lines])
    ax.set_ylim(bottom=max(-0.3, low), top=1.1)


# --- The benchmark ------------------------------------------------------------------------------

def summarize(runs, oracle, train, held_out):
    """{agent: {"train": [mean, std], "held_out": [...], "steps", "steps_per_s", "wall_s"}}
    over the seeds, from the last evaluation of each run."""
    table = {}
    for name in dict.fromkeys(r["agent"] for r in runs):
        mine = [r for r in runs if r["agent"] == name]
        last = [r["curve"][-1] for r in mine]
        tr = [fraction_of_oracle(p["returns"], oracle, train) for p in last]
        ho = [fraction_of_oracle(p["returns"], oracle, held_out) for p in last]
        table[name] = {"seeds": len(mine), "steps": int(np.mean([p["steps"] for p in last])),
                       "train": [float(np.mean(tr)), float(np.std(tr))],
                       "held_out": [float(np.mean(ho)), float(np.std(ho))],
                       "wall_s": float(np.mean([r["wall_s"] for r in mine])),
                       "steps_per_s": float(np.mean([r["steps_per_s"] for r in mine]))}
    return table


def print_table(summary, heuristics, oracle, train, held_out, out=sys.stdout):
    print("fraction of the oracle's time saved (mean +- std over seeds; last evaluation)",
          file=out)
    print(f"{'agent':<18}{'steps':>8}{'seeds':>6}{'train':>16}{'held out':>16}"
          f"{'wall s':>9}{'steps/s':>9}", file=out)
    for name, s in summary.items():
        print(f"{name:<18}{s['steps']:>8}{s['seeds']:>6}"
              f"{s['train'][0]:>10.3f} +-{s['train'][1]:.2f}"
              f"{s['held_out'][0]:>10.3f} +-{s['held_out'][1]:.2f}"
              f"{s['wall_s']:>9.0f}{s['steps_per_s']:>9.0f}", file=out)
    for name, returns in heuristics.items():
        print(f"{name:<18}{'':>8}{'':>6}{fraction_of_oracle(returns, oracle, train):>16.3f}"
              f"{fraction_of_oracle(returns, oracle, held_out):>16.3f}", file=out)


def plot(path, runs, heuristics, oracle, train, held_out, title):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.6), sharey=True)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    agents = list(dict.fromkeys(r["agent"] for r in runs))
    # An agent and its tuned configuration share a colour; the tuned one is dashed.
    families = list(dict.fromkeys(name.removesuffix("-tuned") for name in agents))
    for ax, apps, label in ((axes[0], train, "training applications"),
                            (axes[1], held_out, "held-out applications")):
        for name in agents:
            curves = [r["curve"] for r in runs if r["agent"] == name]
            n = min(len(c) for c in curves)
            xs = np.mean([[p["steps"] for p in c[:n]] for c in curves], axis=0)
            ys = np.array([[fraction_of_oracle(p["returns"], oracle, apps) for p in c[:n]]
                           for c in curves])
            color = colors[families.index(name.removesuffix("-tuned")) % len(colors)]
            seeds_label = f"{len(curves)} seed" + ("s" if len(curves) > 1 else "")
            ax.plot(xs, ys.mean(axis=0), color=color, label=f"{name} ({seeds_label})",
                    ls="--" if name.endswith("-tuned") else "-")
            if len(curves) > 1:
                ax.fill_between(xs, ys.min(axis=0), ys.max(axis=0), color=color, alpha=0.15)
        for j, (name, returns) in enumerate(heuristics.items()):
            ax.axhline(fraction_of_oracle(returns, oracle, apps), color="0.4", lw=0.8,
                       ls=(0, (1 + j, 2)))
            ax.annotate(name, (1.0, fraction_of_oracle(returns, oracle, apps)),
                        xycoords=("axes fraction", "data"), fontsize=7, color="0.3",
                        xytext=(2, 0), textcoords="offset points", va="center")
        ax.axhline(1.0, color="k", lw=0.8)
        ax.set_title(f"{label} ({', '.join(apps)})")
        ax.set_xlabel("environment steps")
        lowest = min([ax.get_ylim()[0]] + [fraction_of_oracle(r, oracle, apps) - 0.05
                                            for r in heuristics.values()])
        ax.set_ylim(bottom=max(-0.6, lowest))
    axes[0].set_ylabel("fraction of the oracle's time saved")
    axes[1].legend(loc="lower right", fontsize=7)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_json(path, args, oracle, heuristics, runs):
    if args.protocol == "generalization":
        doc = {"protocol": "generalization", "task": args.task,
               "train_split": args.train_split,
               "sets": {s.label: s.describe() for s in args.sets},
               "oracle": oracle, "heuristics": heuristics,
               "summary": summarize_sets(runs, oracle, args.sets) if all(
                   r["curve"] for r in runs) else {},
               "runs": runs}
    else:
        doc = {"protocol": "two-apps", "task": args.task, "train": args.train,
               "held_out": args.held_out, "oracle": oracle, "heuristics": heuristics,
               "summary": summarize(runs, oracle, args.train, args.held_out) if all(
                   r["curve"] for r in runs) else {},
               "runs": runs}
    with open(path + ".tmp", "w") as f:
        json.dump(doc, f, indent=1)
    os.replace(path + ".tmp", path)


def report(args, oracle, heuristics, runs):
    """The table on stdout, the JSON and the plot."""
    seeds = sorted({r["seed"] for r in runs})
    if args.protocol == "generalization":
        print(f"Learning benchmark (generalization): {json.dumps(args.task)}, trained on "
              f"{args.train_split}, seeds {','.join(map(str, seeds))}")
        print_sets_table(summarize_sets(runs, oracle, args.sets), heuristics, oracle, args.sets)
    else:
        print(f"Learning benchmark: {json.dumps(args.task)}, train {','.join(args.train)}, "
              f"held out {','.join(args.held_out)}, seeds {','.join(map(str, seeds))}")
        print_table(summarize(runs, oracle, args.train, args.held_out), heuristics, oracle,
                    args.train, args.held_out)
    if args.json:
        write_json(args.json, args, oracle, heuristics, runs)
    if not args.no_plot and runs:
        if args.protocol == "generalization":
            plot_sets(args.plot, runs, heuristics, oracle, args.sets,
                      f"trained on {args.train_split} ({json.dumps(args.task)}); mean of "
                      "seeds, band min-max; heuristics as lines")
        else:
            plot(args.plot, runs, heuristics, oracle, args.train, args.held_out,
                 f"tiergym default task ({json.dumps(args.task)}); mean of seeds, band min-max")
        log(f"plot: {args.plot}")


def merge(args):
    """--merge: the runs of several JSON files of the same protocol, task and sets."""
    runs, first = [], None
    for path in args.merge:
        try:
            with open(path) as f:
                data = json.load(f)
        except (OSError, ValueError) as e:
            log(f"learning_benchmark: --merge {path}: {e}")
            return 1
        data.setdefault("protocol", "two-apps")  # files written before the protocols
        # The sets compared without "score" (files written before it are the same sets).
        sets = {label: {k: v for k, v in d.items() if k != "score"}
                for label, d in (data.get("sets") or {}).items()}
        key = ((data["protocol"], data["task"], data.get("train_split"), sets)
               if data["protocol"] == "generalization" else
               (data["protocol"], data["task"], data["train"], data["held_out"]))
        if first is None:
            first, first_key = data, key
        elif key != first_key:
            log(f"learning_benchmark: --merge {path}: another protocol, task or sets than "
                f"{args.merge[0]}")
            return 1
        runs += [r for r in data["runs"] if r["curve"]]
    args.protocol, args.task = first["protocol"], first["task"]
    if args.protocol == "generalization":
        args.train_split = first["train_split"]
        args.sets = [EvalSet(label, tiergym.datasets.get(d["split"]), d["n"])
                     for label, d in first["sets"].items()]
    else:
        args.train, args.held_out = first["train"], first["held_out"]
    report(args, first["oracle"], first["heuristics"], runs)
    return 0


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--protocol", choices=("generalization", "two-apps"),
                        default="generalization",
                        help="generalization (default): train on procedural applications, "
                             "evaluate on the sets of --sets; two-apps: train on --train, "
                             "evaluate on those and --held-out (the protocol of "
                             "tiergym/TierPlacement-v1's first results)")
    parser.add_argument("--agents", default=None,
                        help=f"comma-separated, among {', '.join(AGENTS)} (default: all of "
                             "the protocol's: " + ", ".join(GENERAL_AGENTS) + " for "
                             "generalization, every agent but the reference ones for two-apps)")
    parser.add_argument("--seeds", default="0,1,2", help="comma-separated (default 0,1,2)")
    parser.add_argument("--steps", type=int, default=None,
                        help="environment steps per run (default: each agent's budget, "
                             "200000 for the libraries' agents, 2000000 for the reference "
                             "agents)")
    parser.add_argument("--eval-every", type=int, default=None,
                        help="environment steps between evaluations (default 10240, five "
                             "of PPO's 2048-step rollouts; the reference agents 262144)")
    parser.add_argument("--train-split", default=TRAIN_SPLIT,
                        help="generalization: the applications trained on, a split of "
                             "tiergym.datasets and how many of it (default %(default)s)")
    parser.add_argument("--sets", default=EVAL_SETS,
                        help="generalization: the evaluation sets, LABEL=SPLIT[:N] items "
                             "(default %(default)s; an unavailable split is left out with a "
                             "note)")
    parser.add_argument("--train", default=",".join(learning_common.DEFAULT_TRAIN),
                        help="two-apps: applications to train on (default %(default)s)")
    parser.add_argument("--held-out", default=",".join(learning_common.DEFAULT_HELD_OUT),
                        help="two-apps: applications to evaluate on only (default %(default)s)")
    parser.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                        help="override a configuration key of the task (repeatable), "
                             "e.g. num_regions=16")
    parser.add_argument("--heuristics", default=None,
                        help="reference policies drawn as lines (default: "
                             f"{','.join(GENERAL_HEURISTICS)} for generalization, "
                             f"{','.join(HEURISTICS)} for two-apps; the oracle always runs: "
                             "the score is a fraction of its time saved)")
    parser.add_argument("--json", help="write every curve and the summary here")
    parser.add_argument("--plot", default="learning-benchmark.png",
                        help="the learning curves (default %(default)s)")
    parser.add_argument("--no-plot", action="store_true")
    parser.add_argument("--merge", nargs="+", metavar="JSON",
                        help="no training: the table and plot of the runs in these JSON files "
                             "(runs of the same task made apart, e.g. one seed per process)")
    parser.add_argument("--plain-sb3", action="store_true",
                        help="SB3's own MultiCategorical (one Categorical per region; half "
                             "as fast) instead of the vectorized one: same distribution, "
                             "other random draws")
    parser.add_argument("--torch-threads", type=int, default=1,
                        help="torch threads per process (default 1: the machine is shared)")
    args = parser.parse_args(argv)
    general = args.protocol == "generalization"
    if args.agents is None:
        args.agents = ",".join(GENERAL_AGENTS if general else
                               [a for a in AGENTS if AGENTS[a]["library"] != "reference"])
    args.agents = [a for a in args.agents.split(",") if a]
    unknown = [a for a in args.agents if a not in AGENTS]
    if unknown:
        parser.error(f"unknown agent(s) {', '.join(unknown)} (known: {', '.join(AGENTS)})")
    if general:
        rllib = [a for a in args.agents if AGENTS[a]["library"] == "rllib"]
        if rllib:
            parser.error(f"{', '.join(rllib)}: the generalization protocol runs the SB3 and "
                         "the reference agents (RLlib's run --protocol two-apps)")
    try:
        args.seeds = [int(s) for s in args.seeds.split(",") if s]
    except ValueError:
        parser.error(f"--seeds: {args.seeds!r} is not a comma-separated list of integers")
    if args.heuristics is None:
        args.heuristics = ",".join(GENERAL_HEURISTICS if general else HEURISTICS)
    args.heuristics = [h for h in args.heuristics.split(",") if h]
    bad = [h for h in args.heuristics if h not in policies.POLICIES or h == "oracle"]
    if bad:
        parser.error(f"--heuristics: unknown {', '.join(bad)} (known: "
                     f"{', '.join(GENERAL_HEURISTICS)})")
    if not general:
        needs = [h for h in args.heuristics if h in policies.NEEDS_RELATIVE]
        if needs:
            parser.error(f"--heuristics: {', '.join(needs)} read the relative observation; "
                         "the two-apps protocol's task has the normalized one")
    args.train = learning_common.split_apps(args.train)
    args.held_out = learning_common.split_apps(args.held_out)
    config = dict(GENERAL_TASK if general else TASK)
    for item in args.config:
        key, eq, value = item.partition("=")
        if not eq or not key:
            parser.error(f"--config: {item!r} is not KEY=VALUE")
        config[key] = value
    args.task = config
    if general and not args.merge:
        try:
            found = tiergym.datasets.parse_entry(args.train_split)
            if found is None:
                raise ValueError(f"no split {args.train_split!r} (known: "
                                 f"{', '.join(tiergym.datasets.names())})")
            if not found[0].available:
                raise ValueError(f"{found[0].name}: {found[0].unavailable_reason}")
            args.sets = parse_sets(args.sets)
        except ValueError as e:
            parser.error(f"--train-split/--sets: {e}")
    if (args.steps is not None and args.steps <= 0) or (
            args.eval_every is not None and args.eval_every <= 0):
        parser.error("--steps and --eval-every must be positive")
    for name in args.agents:
        module = {"sb3": "stable_baselines3", "rllib": "ray",
                  "reference": "torch"}[AGENTS[name]["library"]]
        if importlib.util.find_spec(module) is None:
            parser.error(f"{name} needs {module}: pip install \"tiergym[test]\" (or [sb3], "
                         "[rllib], [torch])")
        if AGENTS[name]["library"] == "reference" and importlib.util.find_spec("fast_ppo") is None:
            parser.error(f"{name} needs agents_examples/fast_ppo.py beside this script")
    return args


def budget(args, agent):
    """(steps, eval_every) of a run: the command line's, else the agent's own."""
    reference = AGENTS[agent]["library"] == "reference"
    steps = args.steps or (2_000_000 if reference else 200_000)
    every = args.eval_every or (262_144 if reference else 10_240)
    return steps, every


def run_agents(args, trainer_for, oracle, heuristics):
    """Every agent and seed: trainer(agent, seed, steps, eval_every, progress, curve) ->
    (curve, train_s, wall_s); the JSON rewritten after each evaluation."""
    runs = []

    def save():
        if args.json:
            write_json(args.json, args, oracle, heuristics, runs)

    def score(returns):
        if args.protocol == "generalization":
            return ", ".join(f"{s.label} {set_score(returns[s.label], oracle[s.label], s):+.3f}"
                             + ("% saved" if s.saved else "") for s in args.sets) + (
                                 " (fractions: of the oracle's time saved)")
        return (f"train {fraction_of_oracle(returns, oracle, args.train):+.3f}, held out "
                f"{fraction_of_oracle(returns, oracle, args.held_out):+.3f} of the oracle")

    for name in args.agents:
        trainer = trainer_for(name)
        steps, every = budget(args, name)
        for seed in args.seeds:
            bar = Progress(f"{name} seed {seed}", steps)
            run = {"agent": name, "seed": seed, "curve": [], "wall_s": 0.0, "train_s": 0.0,
                   "steps_per_s": 0.0}
            if AGENTS[name].get("task"):  # keys the agent's task changes (its observation)
                run["task"] = dict(AGENTS[name]["task"])
            runs.append(run)
            t0 = time.monotonic()

            def progress(done, returns, train_s, bar=bar, t0=t0, run=run):
                run.update(wall_s=time.monotonic() - t0, train_s=train_s,
                           steps_per_s=done / max(train_s, 1e-9))
                save()  # partial results survive an interrupted run
                bar.update(done, f"{run['steps_per_s']:.0f} steps/s, {score(returns)}")

            _, train_s, wall_s = trainer(AGENTS[name], seed, steps, every, progress,
                                         run["curve"])
            bar.close()
            run.update(wall_s=wall_s, train_s=train_s,
                       steps_per_s=run["curve"][-1]["steps"] / max(train_s, 1e-9))
            save()
    return runs


def main(argv=None):
    args = parse_args(argv)
    if args.merge:
        return merge(args)
    import torch
    torch.set_num_threads(args.torch_threads)
    # torch checks every distribution's arguments by default: with one Categorical per
    # region (SB3's MultiDiscrete), that check was half of PPO's time (profiled). It changes
    # no result, only the speed; the libraries' hyperparameters stay as they are.
    torch.distributions.Distribution.set_default_validate_args(False)
    # Likewise SB3's MultiCategorical, one Categorical per region: vectorized (half of
    # PPO's remaining time, measured: 4.6 -> 2.3 ms of CPU per step); --plain-sb3 keeps it.
    if not args.plain_sb3 and any(AGENTS[a]["library"] == "sb3" for a in args.agents):
        vectorize_multicategorical()
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    if args.protocol == "generalization":
        return main_generalization(args)
    apps = list(dict.fromkeys(args.train + args.held_out))
    # The evaluation session waits through a whole training chunk (many minutes on a
    # shared CPU): no idle reclamation on this private server.
    server = tiergym.Server(args=["--threads", "1", "--quiet", "--idle-timeout", "0"])
    try:
        log(f"task: {json.dumps(args.task)}; train {args.train}, held out {args.held_out}")
        log("reference policies (placement mode, same machine):")
        heuristics = heuristic_returns(server, apps, args.task, args.heuristics)
        oracle = heuristics.pop("oracle")

        def trainer_for(name):
            train_fn = train_sb3 if AGENTS[name]["library"] == "sb3" else train_rllib

            def trainer(agent, seed, steps, every, progress, curve):
                return train_fn(agent, server, args.task, args.train, apps, seed, steps,
                                every, progress, curve)
            return trainer

        runs = run_agents(args, trainer_for, oracle, heuristics)
        report(args, oracle, heuristics, runs)
    finally:
        server.close()
    return 0


def main_generalization(args):
    log(f"task: {json.dumps(args.task)}; trained on {args.train_split}; evaluated on "
        + ", ".join(f"{s.label} ({s.dataset.name}, {len(s.apps)})" for s in args.sets))
    train_dataset, train_n = tiergym.datasets.parse_entry(args.train_split)
    log(f"preparing {args.train_split} (generated into the cache on first use)...")
    train_config = train_dataset.config(train_n, progress=log)
    servers = SetServers(args.sets, {train_config["machine"]: train_config["profiles"][0]})
    try:
        log("reference policies (placement mode), per set:")
        table = set_heuristic_returns(servers, args.sets, args.task, args.heuristics)
        oracle = {label: t.pop("oracle") for label, t in table.items()}

        def trainer_for(name):
            def trainer(agent, seed, steps, every, progress, curve):
                if agent["library"] == "reference":
                    return train_reference_general(agent, agent_task(args.task, agent),
                                                   train_config, args.sets,
                                                   seed, steps, every, progress, curve,
                                                   oracle=oracle)
                return train_sb3_general(agent, servers, args.task, train_config, args.sets,
                                         seed, steps, every, progress, curve)
            return trainer

        runs = run_agents(args, trainer_for, oracle, table)
        report(args, oracle, table, runs)
    finally:
        servers.close()
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(130)
    except Exception as e:  # a failure of a run: said in one line, exit 1
        log(f"learning_benchmark: {type(e).__name__}: {e}")
        sys.exit(1)

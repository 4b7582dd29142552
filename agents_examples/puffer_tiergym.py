"""PufferLib's trainer and vectorization on tiergym's in-process vector environment.

    python agents_examples/puffer_tiergym.py                          # 1M steps, Serial backend
    python agents_examples/puffer_tiergym.py --backend Multiprocessing --workers 2

PufferLib (pufferlib-core 3.0.19 from PyPI, the `puffer` extra): its trainer
`pufferlib.pufferl.PuffeRL` (PPO with V-trace-clipped advantages and prioritized
minibatches, its rollout loop over `vecenv.recv()` / `vecenv.send()` into preallocated
buffers) drives `TierPufferEnv`, a native PufferEnv: one tiergym.InProcessVectorEnv of n
environments, seen by PufferLib as n agents, writing into PufferLib's buffers. PufferLib's
vectorization runs it in this process (`Serial`) or in worker processes that write into
shared memory (`Multiprocessing`: each worker its own in-process vector env; with two
workers the trainer infers one worker's batch while the other steps).

Why 3.0.19: the `pufferlib` package's 3.0 release has no wheel for this Python (a source
distribution that compiles PufferLib's own C environments), pufferlib-core 3.0.0 is a
vectorization-only wheel that does not import (it needs `gym` and names that its
`__init__` lacks), and pufferlib-core 3.0.20 and later pin torch 2.9.0; 3.0.17-3.0.19 are
wheels for this Python that accept any torch, so torch stays at the project's 2.13.0. Their
compiled extension (`pufferlib._C`, built against another torch; it fails to load with
2.13: undefined symbols) holds one CPU kernel the trainer calls, the advantage; this module
registers the same operator (`pufferlib::compute_puff_advantage`, the same recurrence,
tests/python/test_puffer.py compares it with a transcription of the C++ loop) before
importing the trainer. PufferLib's trainer has no action masks: TierPufferEnv appends the
environment's flat mask to the observation and MaskedPolicy applies it to the logits.

Importing pufferlib.pufferl installs rich's traceback hook and a SIGINT handler that exits
the process at once; import_pufferl() puts both back as they were.
"""

import argparse
import contextlib
import json
import signal
import sys
import tempfile
import time
import types
import warnings

import gymnasium
import numpy as np
import torch
import torch.nn as nn

import tiergym

PUFFERLIB_CORE_VERSION = "3.0.19"


# --- PufferLib, imported for torch 2.13 -----------------------------------------------------

def puff_advantage(values, rewards, dones, importance, advantages, gamma, gae_lambda,
                   rho_clip, c_clip):
    """PufferLib's CPU advantage kernel (extensions/pufferlib.cpp, puff_advantage_row) over
    [segments, horizon] float32 tensors, vectorized over the segments: GAE with V-trace's
    clipped importance weights; writes advantages in place (the last column stays 0)."""
    horizon = values.shape[1]
    last = torch.zeros(values.shape[0], dtype=values.dtype)
    for t in range(horizon - 2, -1, -1):
        nonterminal = 1.0 - dones[:, t + 1]
        rho = importance[:, t].clamp(max=rho_clip)
        c = importance[:, t].clamp(max=c_clip)
        delta = rho * (rewards[:, t + 1] + gamma * values[:, t + 1] * nonterminal - values[:, t])
        last = delta + gamma * gae_lambda * c * last * nonterminal
        advantages[:, t] = last


_LIBRARY = []


def register_advantage_op():
    """torch.ops.pufferlib.compute_puff_advantage with the schema of PufferLib's extension,
    once per process."""
    if _LIBRARY:
        return
    lib = torch.library.Library("pufferlib", "DEF")
    lib.define("compute_puff_advantage(Tensor(a!) values, Tensor(b!) rewards, "
               "Tensor(c!) dones, Tensor(d!) importance, Tensor(e!) advantages, float gamma, "
               "float lambda, float rho_clip, float c_clip) -> ()")
    lib.impl("compute_puff_advantage", puff_advantage, "CPU")
    _LIBRARY.append(lib)


def import_pufferl():
    """pufferlib.pufferl (the trainer), with the advantage operator registered here and the
    process's SIGINT handler and exception hook kept as they were."""
    if "pufferlib.pufferl" in sys.modules:
        return sys.modules["pufferlib.pufferl"]
    import pufferlib
    register_advantage_op()
    sys.modules.setdefault("pufferlib._C", types.ModuleType("pufferlib._C"))
    handler, hook = signal.getsignal(signal.SIGINT), sys.excepthook
    try:
        import pufferlib.pufferl as pufferl
    finally:
        if handler is not None:
            signal.signal(signal.SIGINT, handler)
        sys.excepthook = hook
    return pufferl


# --- tiergym as a native PufferEnv ----------------------------------------------------------

class TierPufferEnv:
    """Made by make_env (the class derives from pufferlib.PufferEnv there, so that importing
    this module does not need PufferLib)."""


def make_env_class():
    import pufferlib

    class _TierPufferEnv(pufferlib.PufferEnv):
        """num_envs tiergym environments (an InProcessVectorEnv, same-step autoreset) as
        PufferLib agents. Observation: tiergym's, then the flat action mask (1 allowed)."""

        def __init__(self, num_envs=256, buf=None, seed=0, threads=1, reward_scale=100.0,
                     **config):
            self.envs = tiergym.InProcessVectorEnv(num_envs, threads=threads,
                                                   autoreset_mode=tiergym.SAME_STEP, **config)
            self.num_agents = num_envs
            self.obs_size = self.envs.single_observation_space.shape[0]
            space = self.envs.single_action_space
            self.regions, self.choices = len(space.nvec), int(space.nvec[0])
            width = self.obs_size + self.regions * self.choices
            self.single_observation_space = gymnasium.spaces.Box(0.0, 1.0, (width,), np.float32)
            self.single_action_space = space
            self.reward_scale = reward_scale
            self.seed = seed
            self.returns = np.zeros(num_envs)
            super().__init__(buf)

        def _write(self, obs, info):
            self.observations[:, :self.obs_size] = obs
            self.observations[:, self.obs_size:] = info["action_mask"].reshape(self.num_agents, -1)

        def reset(self, seed=None):
            obs, info = self.envs.reset(seed=self.seed if seed is None else seed)
            self._write(obs, info)
            self.returns[:] = 0
            return self.observations, []

        def step(self, actions):
            obs, rewards, terminated, truncated, info = self.envs.step(
                np.asarray(actions, dtype=np.int64).reshape(self.num_agents, self.regions))
            self._write(obs, info)
            self.rewards[:] = rewards * self.reward_scale
            self.terminals[:] = terminated
            self.truncations[:] = truncated
            self.returns += rewards
            ended = terminated | truncated
            infos = []
            if ended.any():  # the episode's return: its time saved
                infos.append({"episode_return": float(self.returns[ended].mean())})
                self.returns[ended] = 0
            return self.observations, self.rewards, self.terminals, self.truncations, infos

        def close(self):
            self.envs.close()

    return _TierPufferEnv


class MaskedPolicy(nn.Module):
    """PufferLib's policy interface (forward_eval / forward -> logits, value) for a
    MultiDiscrete action: an MLP over tiergym's observation, its logits per region masked
    by the mask at the end of PufferLib's observation."""

    def __init__(self, obs_size, regions, choices, hidden=64):
        super().__init__()
        self.obs_size, self.regions, self.choices = obs_size, regions, choices

        def mlp(out, std):
            last = nn.Linear(hidden, out)
            nn.init.orthogonal_(last.weight, std)
            nn.init.zeros_(last.bias)
            return nn.Sequential(nn.Linear(obs_size, hidden), nn.Tanh(),
                                 nn.Linear(hidden, hidden), nn.Tanh(), last)

        self.actor = mlp(regions * choices, 0.01)
        self.critic = mlp(1, 1.0)

    def logits(self, obs):
        return self.actor(obs).view(-1, self.regions, self.choices)

    def forward_eval(self, observations, state=None):
        obs = observations[:, :self.obs_size]
        mask = observations[:, self.obs_size:].view(-1, self.regions, self.choices) > 0.5
        logits = self.logits(obs).masked_fill(~mask, -1e9)
        return list(logits.unbind(1)), self.critic(obs)

    def forward(self, observations, state=None):
        return self.forward_eval(observations, state)


class GreedyView(nn.Module):
    """The policy as fast_ppo's evaluation calls one: tiergym's observation -> (logits
    [B, K, C], value); the evaluation applies the masks."""

    def __init__(self, policy):
        super().__init__()
        self.policy = policy

    def forward(self, obs):
        return self.policy.logits(obs), self.policy.critic(obs).squeeze(-1)


# --- Training -------------------------------------------------------------------------------

def QuietPuffeRL(pufferl):
    """PuffeRL without its full-screen dashboard (progress goes through on_eval)."""

    class Trainer(pufferl.PuffeRL):
        def print_dashboard(self, *args, **kwargs):
            pass

    return Trainer


def trainer_config(args, total_agents, data_dir):
    return {
        "env": "tiergym", "seed": args.seed, "device": "cpu", "torch_deterministic": True,
        "cpu_offload": False, "compile": False, "compile_mode": "default",
        "compile_fullgraph": False, "use_rnn": False, "precision": "float32",
        "optimizer": "adam", "learning_rate": args.learning_rate, "adam_beta1": 0.9,
        "adam_beta2": 0.999, "adam_eps": 1e-5, "anneal_lr": False,
        "total_timesteps": args.total_steps,
        "batch_size": total_agents * args.horizon, "bptt_horizon": args.horizon,
        "minibatch_size": total_agents * args.horizon // args.minibatches,
        "max_minibatch_size": total_agents * args.horizon,
        "update_epochs": args.epochs, "gamma": 1.0, "gae_lambda": 0.95,
        "clip_coef": 0.2, "vf_coef": 0.5, "vf_clip_coef": 1e9, "ent_coef": args.ent_coef,
        "max_grad_norm": 0.5, "vtrace_rho_clip": 1.0, "vtrace_c_clip": 1.0,
        "prio_alpha": 0.0, "prio_beta0": 1.0,   # uniform minibatches, as PPO samples them
        "checkpoint_interval": 10 ** 9, "data_dir": data_dir,
    }


def train(args, oracle=None, on_eval=None):
    """PuffeRL on TierPufferEnv for args.total_steps; returns (policy, metrics) with the
    evaluations (fast_ppo's, on the training and held-out applications)."""
    import pufferlib
    import pufferlib.vector
    import fast_ppo
    pufferl = import_pufferl()
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)
    fargs = fast_ppo.Args(train=args.train, held_out=args.held_out)
    config = dict(fast_ppo.task_config(fargs), profiles=args.train)
    env_class = make_env_class()
    per_worker = args.num_envs // args.workers
    kwargs = {}
    if args.backend == "Multiprocessing":
        kwargs = dict(num_workers=args.workers, batch_size=1 if args.workers > 1 else None,
                      overwork=True)
    vecenv = pufferlib.vector.make(env_class, env_kwargs=dict(num_envs=per_worker, **config),
                                   backend=getattr(pufferlib.vector, args.backend),
                                   num_envs=args.workers, seed=args.seed, **kwargs)
    driver = vecenv.driver_env
    policy = MaskedPolicy(driver.obs_size, driver.regions, driver.choices, args.hidden)
    train_apps, held_out = fast_ppo.apps(args.train), fast_ppo.apps(args.held_out)
    evaluator = fast_ppo.Evaluator(fargs, train_apps + held_out)
    metrics = {"curve": [], "steps": 0, "train_s": 0.0, "version": PUFFERLIB_CORE_VERSION}
    trainer = None
    with tempfile.TemporaryDirectory() as data_dir, contextlib.redirect_stdout(sys.stderr):
        try:
            with warnings.catch_warnings():  # its float32 autocast context is a no-op on CPU
                warnings.filterwarnings("ignore", message="CPU Autocast only supports")
                trainer = QuietPuffeRL(pufferl)(trainer_config(args, vecenv.num_agents, data_dir),
                                                vecenv, policy)

            def evaluate():
                returns = evaluator(GreedyView(policy))
                point = {"steps": int(trainer.global_step), "train_s": metrics["train_s"],
                         "returns": returns}
                if oracle is not None:
                    point["train"] = fast_ppo.fraction_of_oracle(returns, oracle, train_apps)
                    if held_out:
                        point["held_out"] = fast_ppo.fraction_of_oracle(returns, oracle,
                                                                        held_out)
                metrics["curve"].append(point)
                if on_eval is not None:
                    on_eval(point)

            evaluate()
            next_eval = args.eval_every
            while trainer.global_step < args.total_steps:
                t0 = time.perf_counter()
                trainer.evaluate()   # PufferLib's name for collecting a rollout
                trainer.train()
                metrics["train_s"] += time.perf_counter() - t0
                if trainer.global_step >= next_eval or trainer.global_step >= args.total_steps:
                    next_eval = (trainer.global_step // args.eval_every + 1) * args.eval_every
                    evaluate()
            metrics["steps"] = int(trainer.global_step)
            metrics["steps_per_s"] = metrics["steps"] / max(metrics["train_s"], 1e-9)
            return policy, metrics
        finally:
            if trainer is not None:
                trainer.utilization.stop()
                trainer.utilization.join()
            vecenv.close()
            evaluator.close()


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--total-steps", type=int, default=1_000_000)
    parser.add_argument("--num-envs", type=int, default=512, help="all workers together")
    parser.add_argument("--horizon", type=int, default=32, help="steps per agent per rollout")
    parser.add_argument("--minibatches", type=int, default=4)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--learning-rate", type=float, default=3e-3)
    parser.add_argument("--ent-coef", type=float, default=0.001)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--backend", choices=("Serial", "Multiprocessing"), default="Serial")
    parser.add_argument("--workers", type=int, default=1,
                        help="environment workers (Multiprocessing: processes)")
    parser.add_argument("--eval-every", type=int, default=131_072)
    parser.add_argument("--train", default="minife,lulesh")
    parser.add_argument("--held-out", default="nekbone,lammps")
    parser.add_argument("--json", help="write the curve here")
    args = parser.parse_args(argv)
    if args.workers < 1 or args.num_envs % args.workers:
        parser.error("--workers must be at least 1 and divide --num-envs")
    if args.backend == "Serial" and args.workers != 1:
        parser.error("--workers > 1 needs --backend Multiprocessing")
    return args


def main(argv=None):
    args = parse_args(argv)
    import fast_ppo
    refs = fast_ppo.reference_returns(fast_ppo.Args(train=args.train, held_out=args.held_out))
    oracle = refs.pop("oracle")

    def show(p):
        print(f"puffer_tiergym: {p['steps']} steps, {p['train_s']:.1f} s, train "
              f"{p['train']:.3f}, held out {p.get('held_out', np.nan):.3f} of the oracle",
              file=sys.stderr, flush=True)

    _, metrics = train(args, oracle=oracle, on_eval=show)
    print(f"PufferLib (pufferlib-core {PUFFERLIB_CORE_VERSION}) PuffeRL, {args.backend} x "
          f"{args.workers}: {metrics['steps']} steps in {metrics['train_s']:.1f} s "
          f"({metrics['steps_per_s']:,.0f} env steps/s)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(metrics, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

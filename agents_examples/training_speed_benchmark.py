"""How fast the learners train on tiergym's default task, measured in one run.

    python agents_examples/training_speed_benchmark.py               # SB3 PPO tuned, RLlib PPO tuned, fast_ppo; 3 seeds
    python agents_examples/training_speed_benchmark.py --quick       # the same in about 10 minutes
    python agents_examples/training_speed_benchmark.py --agents sb3-ppo-tuned,fast-ppo --seeds 0 \\
        --json speed.json --plot speed.png

For each agent and seed, on the same machine in the same process, one after the other:

- **env steps/s while training**: environment steps over training time (rollouts and
  updates together; evaluations excluded);
- **where the time goes**: the environment, inference (the policy's forward passes while
  collecting), the update, and the rest of the rollout loop (Python and the library's
  glue), each as measured inside the library (SB3: its VecEnv calls, policy forward and
  train(), wrapped with timers; RLlib: its own timers; fast_ppo: its own);
- **time to HeMem**: the training time (evaluations excluded, and stated) until a
  deterministic evaluation first scores HeMem-like's fraction of the oracle's time saved
  on the training applications; SB3's and RLlib's runs stop there, or at their step
  budget or training-time cap ("not reached in X s"); fast_ppo's go on to their step
  budget (a steady rate, and where they end up) and report the first evaluation that
  reached it.

`--quick` is the whole comparison in about 10 minutes on the project's 2-core machine:
3 seeds of SB3 PPO tuned (capped at 75 s of training each), RLlib PPO tuned (capped at
30 s: it does not get there that soon, and says so) and fast-ppo (524,288 steps), and
fast-ppo's first seed again. The run ends with the issue's targets checked against its
own figures (50,000 env steps/s, 50x SB3 PPO tuned's rate, a tenth of its time to
HeMem-like's share).

Agents: `sb3-ppo-tuned` and `rllib-ppo-tuned` as learning_benchmark.py defines them
(evaluated after every 2048-step rollout / iteration, the finest their loops allow),
`fast-ppo` (agents_examples/fast_ppo.py --overlap-update, flat MLP; evaluated after every
update) and `fast-ppo-regions` (its per-region shared-weight policy, --overlap-update too). `--repeat` reruns fast-ppo's
first seed and reports whether the curve is the same, evaluation for evaluation.

The table goes to stdout, progress to stderr, every curve and timer to --json, and the
score against training time (beside learning-benchmark.png's score against steps) to
--plot. Exit status 0, 1 on a failure, 2 on a usage error.
"""

import argparse
import dataclasses
import importlib.util
import json
import os
import sys
import time

import numpy as np

import fast_ppo
import learning_benchmark
import tiergym

AGENTS = ("sb3-ppo-tuned", "rllib-ppo-tuned", "fast-ppo", "fast-ppo-regions")
# Step budgets: each run stops at HeMem's fraction or here.
BUDGET = {"sb3-ppo-tuned": 300_000, "rllib-ppo-tuned": 20_000, "fast-ppo": 1_048_576,
          "fast-ppo-regions": 300_000}
# Training-time caps of the slow learners, seconds (evaluations excluded): a run that has
# not reached HeMem-like's share by then is reported as not reached in that time.
CAP_S = {"sb3-ppo-tuned": 600.0, "rllib-ppo-tuned": 300.0}
QUICK = dict(agents="sb3-ppo-tuned,rllib-ppo-tuned,fast-ppo", seeds="0,1,2",
             budget={"fast-ppo": 524_288}, cap_s={"sb3-ppo-tuned": 75.0, "rllib-ppo-tuned": 30.0})
# The targets (done-when), checked against the run's own figures.
TARGET_RATE, TARGET_SPEEDUP, TARGET_TIME_FRACTION = 50_000, 50.0, 0.1
# The fast path: fast_ppo's defaults with the update overlapped with the next rollout.
FAST_ARGS = {"fast-ppo": dict(policy="mlp", overlap_update=True),
             "fast-ppo-regions": dict(policy="regions", overlap_update=True)}


def log(*parts):
    print(*parts, file=sys.stderr, flush=True)


class Timers:
    """Named accumulated seconds, and wrappers that time a callable into one of them."""

    def __init__(self, *names):
        self.s = dict.fromkeys(names, 0.0)

    def wrap(self, name, fn):
        def timed(*a, **kw):
            t0 = time.perf_counter()
            try:
                return fn(*a, **kw)
            finally:
                self.s[name] += time.perf_counter() - t0
        return timed


def cpu_seconds(server=None):
    """CPU seconds so far of this process (every thread) and of the server's process (the
    environment of SB3's and RLlib's runs): the figure a loaded machine inflates less than
    the wall time. (Ray's own daemons are not counted.)"""
    total = time.process_time()
    process = server.process if server is not None else None
    if process is not None:
        try:
            with open(f"/proc/{process.pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, ValueError, IndexError):
            pass
    return total


# --- SB3 ------------------------------------------------------------------------------------

def run_sb3(name, seed, oracle, target, args, server, progress):
    """SB3 PPO tuned (learning_benchmark.AGENTS), evaluated at each rollout's start."""
    import stable_baselines3
    from stable_baselines3.common.callbacks import BaseCallback
    from tiergym.sb3 import TierVecEnv

    agent = learning_benchmark.AGENTS[name]
    config = dict(learning_benchmark.TASK)
    venv = TierVecEnv(agent["n_envs"], address=server, profiles=",".join(args.train), **config)
    venv.seed(seed)
    eval_env = tiergym.TierEnv(address=server, **config)
    model = getattr(stable_baselines3, agent["algo"])("MlpPolicy", venv, seed=seed, verbose=0,
                                                      **agent["kwargs"])
    timers = Timers("env", "inference", "update", "rollout", "evaluation", "in_rollout")
    venv.step_async = timers.wrap("env", venv.step_async)
    venv.step_wait = timers.wrap("env", venv.step_wait)
    model.policy.forward = timers.wrap("inference", model.policy.forward)  # rollouts only
    model.train = timers.wrap("update", model.train)
    model.collect_rollouts = timers.wrap("rollout", model.collect_rollouts)
    curve, state = [], {"reached": None, "stop": False}
    apps = args.train + args.held_out

    def train_s():
        return timers.s["rollout"] + timers.s["update"] - timers.s["in_rollout"]

    cpu = {"evaluation": 0.0}

    def evaluate(in_rollout=False):
        t0, c0 = time.perf_counter(), cpu_seconds(server)
        returns = learning_benchmark.evaluate_predict(
            eval_env, lambda o: model.predict(o, deterministic=True)[0], apps)
        timers.s["evaluation"] += time.perf_counter() - t0
        cpu["evaluation"] += cpu_seconds(server) - c0
        if in_rollout:  # the callback runs inside collect_rollouts, whose timer counts it
            timers.s["in_rollout"] += time.perf_counter() - t0
        point = point_of(int(model.num_timesteps), train_s(), returns, oracle, args)
        curve.append(point)
        progress(point)
        if point["train"] >= target and state["reached"] is None:
            state["reached"] = point
            state["stop"] = True
        if point["train_s"] >= args.cap_s[name]:
            state["stop"] = True

    class EvaluateEachRollout(BaseCallback):
        def _on_rollout_start(self):
            if self.model.num_timesteps > 0:
                evaluate(in_rollout=True)

        def _on_step(self):
            return not state["stop"]

    try:
        evaluate()
        cpu["evaluation"] = 0.0
        c0 = cpu_seconds(server)
        if not state["stop"]:
            model.learn(args.budget[name],
                        callback=EvaluateEachRollout())
        cpu["train"] = cpu_seconds(server) - c0 - cpu["evaluation"]
        if not state["stop"]:
            evaluate()
    finally:
        venv.close()
        eval_env.close()
    s = timers.s
    rollout = s["rollout"] - s["in_rollout"]
    where = {"environment": s["env"], "inference": s["inference"], "update": s["update"],
             "python": rollout - s["env"] - s["inference"]}
    return finish(name, seed, curve, state["reached"], train_s(), s["evaluation"], where,
                  cpu_s=cpu["train"])


# --- RLlib ------------------------------------------------------------------------------------

def run_rllib(name, seed, oracle, target, args, server, progress):
    """RLlib PPO tuned (learning_benchmark.AGENTS), sampling in the driver, evaluated after
    each iteration (2048 steps)."""
    import ray
    import torch
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.core.columns import Columns
    from ray.tune.registry import register_env

    import rllib_env
    agent = learning_benchmark.AGENTS[name]
    config = dict(learning_benchmark.TASK)
    env_config = {"addresses": [server.endpoint],
                  "tiergym": dict(config, profiles=",".join(args.train))}
    register_env("tiergym", rllib_env.env_creator)
    kwargs = dict(agent["kwargs"])
    hiddens = kwargs.pop("fcnet_hiddens")
    ppo = (PPOConfig().environment("tiergym", env_config=env_config).framework("torch")
           .env_runners(num_env_runners=0).debugging(seed=seed).training(**kwargs)
           .rl_module(model_config={"fcnet_hiddens": hiddens}))
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
    eval_env = tiergym.TierEnv(address=server, **config)
    nvec = eval_env.action_space.nvec
    apps = args.train + args.held_out
    algo, curve, reached = None, [], None
    train_s = evaluation_s = cpu_s = 0.0
    where = dict.fromkeys(("environment", "inference", "update", "python"), 0.0)
    budget = args.budget[name]
    try:
        algo = ppo.build_algo()

        def evaluate(steps):
            nonlocal evaluation_s
            t0 = time.perf_counter()
            module = algo.get_module()

            def predict(obs):  # the most likely choice per region (keep mode: equal nvec)
                with torch.no_grad():
                    logits = module.forward_inference(
                        {Columns.OBS: torch.as_tensor(obs[None])})[Columns.ACTION_DIST_INPUTS]
                return logits[0].reshape(len(nvec), -1).argmax(-1).numpy()

            returns = learning_benchmark.evaluate_predict(eval_env, predict, apps)
            evaluation_s += time.perf_counter() - t0
            point = point_of(steps, train_s, returns, oracle, args)
            curve.append(point)
            progress(point)
            return point

        point, sampled = evaluate(0), 0
        while point["train"] < target and sampled < budget and train_s < args.cap_s[name]:
            t0, c0 = time.perf_counter(), cpu_seconds(server)
            result = algo.train()
            took = time.perf_counter() - t0
            cpu_s += cpu_seconds(server) - c0
            train_s += took
            before, sampled = sampled, int(result["env_runners"]["num_env_steps_sampled_lifetime"])
            split_rllib_time(result, sampled - before, took, where)
            point = evaluate(sampled)
        reached = point if point["train"] >= target else None
    finally:
        if algo is not None:
            algo.stop()
        ray.shutdown()
        eval_env.close()
    return finish(name, seed, curve, reached, train_s, evaluation_s, where, cpu_s=cpu_s)


def split_rllib_time(result, steps, took, where):
    """Adds one iteration's time to where: RLlib's own timers (the env runner's sampling
    and the learner's update per iteration; the environment's step and the module's
    inference as means per call, times the calls: one per env step here, sampling in the
    driver with one environment); the rest of the iteration is Python (connectors, episode
    bookkeeping, the algorithm's loop)."""
    timers = learning_benchmark.rllib_timers(result)

    def find(suffix):
        hits = [v for k, v in timers.items() if k.endswith(suffix)]
        return hits[0] if hits else 0.0

    env = find("env_step_timer") * steps
    inference = find("rlmodule_inference_timer") * steps
    update = find("learner_update_timer")
    where["environment"] += env
    where["inference"] += inference
    where["update"] += update
    where["python"] += max(took - env - inference - update, 0.0)


# --- fast_ppo ---------------------------------------------------------------------------------

def run_fast(name, seed, oracle, target, args, server, progress):
    # No target: the run goes on to its budget (a steady rate, and where it ends up); the
    # first evaluation at HeMem-like's share is read from its curve.
    fargs = fast_ppo.Args(seed=seed, quiet=True, train=",".join(args.train),
                          held_out=",".join(args.held_out), total_steps=args.budget[name],
                          **FAST_ARGS[name])
    fargs.eval_every = fargs.num_envs * fargs.num_steps  # after every update
    _, m = fast_ppo.train(fargs, oracle=oracle,
                          on_eval=lambda p: progress(point_of(p["steps"], p["train_s"],
                                                              p["returns"], oracle, args)))
    t = m["timers"]
    where = {"environment": t["env"], "inference": t["inference"], "update": t["update"],
             "python": t["rollout"] - t["env"] - t["inference"]}
    curve = [point_of(p["steps"], p["train_s"], p["returns"], oracle, args) for p in m["curve"]]
    reached = next((p for p in curve if p["train"] >= target), None)
    return finish(name, seed, curve, reached, m["train_s"], t["evaluation"], where,
                  cpu_s=m["cpu_s"], update_busy_s=t["update_busy"])


# --- The run ----------------------------------------------------------------------------------

def point_of(steps, train_s, returns, oracle, args):
    return {"steps": int(steps), "train_s": float(train_s), "returns": returns,
            "train": learning_benchmark.fraction_of_oracle(returns, oracle, args.train),
            "held_out": learning_benchmark.fraction_of_oracle(returns, oracle, args.held_out)}


def finish(name, seed, curve, reached, train_s, evaluation_s, where, **extra):
    steps = curve[-1]["steps"]
    return {"agent": name, "seed": seed, "curve": curve, "steps": steps, "train_s": train_s,
            "evaluation_s": evaluation_s, "steps_per_s": steps / max(train_s, 1e-9),
            "where_s": where,
            "reached_s": None if reached is None else reached["train_s"],
            "reached_steps": None if reached is None else reached["steps"], **extra}


RUNNERS = {"sb3-ppo-tuned": run_sb3, "rllib-ppo-tuned": run_rllib, "fast-ppo": run_fast,
           "fast-ppo-regions": run_fast}


def summarize(runs):
    table = {}
    for name in dict.fromkeys(r["agent"] for r in runs if not r.get("repeat")):
        mine = [r for r in runs if r["agent"] == name and not r.get("repeat")]
        total = {k: sum(r["where_s"][k] for r in mine) for k in mine[0]["where_s"]}
        whole = sum(total.values()) or 1.0
        reached = [r["reached_s"] for r in mine]
        table[name] = {
            "seeds": [r["seed"] for r in mine],
            "steps_per_s": float(np.mean([r["steps_per_s"] for r in mine])),
            # CPU microseconds per environment step while training (every thread of the
            # process, and the server's): a figure the machine's load inflates less than
            # the wall rate.
            "cpu_us_per_step": float(1e6 * sum(r.get("cpu_s", np.nan) for r in mine)
                                     / sum(r["steps"] for r in mine)),
            "where_share": {k: v / whole for k, v in total.items()},
            "reached_s": reached,
            "reached_steps": [r["reached_steps"] for r in mine],
            "train_s": [r["train_s"] for r in mine],
            "mean_reached_s": (float(np.mean(reached)) if all(x is not None for x in reached)
                               else None),
            # A seed that did not get there counts its whole training time: a lower bound
            # of the mean time to HeMem-like's share.
            "mean_reached_s_at_least": float(np.mean([r["train_s"] if r["reached_s"] is None
                                                      else r["reached_s"] for r in mine])),
            "evaluation_s": float(np.sum([r["evaluation_s"] for r in mine])),
            "last_train": float(np.mean([r["curve"][-1]["train"] for r in mine])),
            "last_held_out": float(np.mean([r["curve"][-1]["held_out"] for r in mine])),
        }
    return table


def print_table(summary, target, load, out=sys.stdout):
    base = summary.get("sb3-ppo-tuned")
    print(f"target: HeMem-like's {target:.3f} of the oracle's time saved on the training "
          f"applications; load average {load}", file=out)
    print(f"{'agent':<18}{'env steps/s':>12}{'x SB3':>8}{'CPU us/step':>12}{'x SB3':>7}"
          f"{'env':>6}{'infer':>7}{'update':>7}"
          f"{'python':>7}{'to HeMem s (per seed)':>44}{'x SB3':>8}", file=out)
    for name, s in summary.items():
        w = s["where_share"]
        per_seed = ", ".join(f"not in {t:.0f}" if x is None else f"{x:.1f}"
                             for x, t in zip(s["reached_s"], s["train_s"]))
        mean = (f">{s['mean_reached_s_at_least']:.1f}" if s["mean_reached_s"] is None
                else f"{s['mean_reached_s']:.1f}")
        speed_x = s["steps_per_s"] / base["steps_per_s"] if base else float("nan")
        time_x, bound = time_ratio(base, s)
        cpu_x = base["cpu_us_per_step"] / s["cpu_us_per_step"] if base else float("nan")
        print(f"{name:<18}{s['steps_per_s']:>12,.0f}{speed_x:>8.1f}"
              f"{s['cpu_us_per_step']:>12,.1f}{cpu_x:>7.1f}"
              f"{100 * w['environment']:>5.0f}%{100 * w['inference']:>6.0f}%"
              f"{100 * w['update']:>6.0f}%{100 * w['python']:>6.0f}%"
              f"{mean + ' (' + per_seed + ')':>44}{bound + format(time_x, '.1f'):>8}", file=out)


def time_ratio(base, s):
    """SB3 PPO tuned's mean time to HeMem-like's share over s's, and "" or ">" (a lower
    bound: some of SB3's seeds did not get there, their whole time counted) or "<"."""
    if not base or s["mean_reached_s"] is None:
        return float("nan"), ""
    if base["mean_reached_s"] is not None:
        return base["mean_reached_s"] / s["mean_reached_s"], ""
    return base["mean_reached_s_at_least"] / s["mean_reached_s"], ">"


def check_targets(summary, fast="fast-ppo", out=sys.stdout):
    """The issue's targets against this run's figures; True when all are met."""
    base, s = summary.get("sb3-ppo-tuned"), summary.get(fast)
    if base is None or s is None:
        return None
    rate, speedup = s["steps_per_s"], s["steps_per_s"] / base["steps_per_s"]
    ratio, bound = time_ratio(base, s)
    checks = [
        (rate >= TARGET_RATE, f"{fast} env steps/s while training {rate:,.0f} "
                              f"(target at least {TARGET_RATE:,})"),
        (speedup >= TARGET_SPEEDUP, f"{fast}'s rate / SB3 PPO tuned's {speedup:.1f}x "
                                    f"(target at least {TARGET_SPEEDUP:.0f}x)"),
        (ratio >= 1 / TARGET_TIME_FRACTION and bound != "<",
         f"time to HeMem-like's share, mean of {len(s['seeds'])} seeds: {fast} "
         + ("not reached by every seed" if s["mean_reached_s"] is None else
            f"{s['mean_reached_s']:.1f} s, SB3 PPO tuned {'at least ' if bound else ''}"
            f"{base['mean_reached_s_at_least']:.1f} s: 1/{ratio:.1f} of it{' or less' if bound else ''}")
         + f" (target at most 1/{1 / TARGET_TIME_FRACTION:.0f})"),
    ]
    print("the issue's targets against this run:", file=out)
    for ok, text in checks:
        print(f"  {'met    ' if ok else 'NOT met'}  {text}", file=out)
    return all(ok for ok, _ in checks)


def plot(path, runs, heuristics, oracle, args, title):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.6), sharey=True)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    agents = list(dict.fromkeys(r["agent"] for r in runs))
    for ax, key, apps, label in ((axes[0], "train", args.train, "training applications"),
                                 (axes[1], "held_out", args.held_out, "held-out applications")):
        for i, name in enumerate(agents):
            for j, r in enumerate(r for r in runs if r["agent"] == name and not r.get("repeat")):
                xs = [max(p["train_s"], 0.05) for p in r["curve"]]
                ax.plot(xs, [p[key] for p in r["curve"]], color=colors[i % len(colors)],
                        lw=1.2, alpha=0.85, label=name if j == 0 else None)
        for j, (hname, returns) in enumerate(heuristics.items()):
            y = learning_benchmark.fraction_of_oracle(returns, oracle, apps)
            ax.axhline(y, color="0.4", lw=0.8, ls=(0, (1 + j, 2)))
            ax.annotate(hname, (1.0, y), xycoords=("axes fraction", "data"), fontsize=7,
                        color="0.3", xytext=(2, 0), textcoords="offset points", va="center")
        ax.axhline(1.0, color="k", lw=0.8)
        ax.set(xscale="log", xlabel="training time, s (log; evaluations excluded)",
               title=f"{label} ({', '.join(apps)})")
    axes[0].set(ylabel="fraction of the oracle's time saved")
    axes[0].legend(loc="lower right", fontsize=7)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    try:
        fig.savefig(path, dpi=110)
    finally:
        plt.close(fig)


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--agents", default=None,
                        help=f"comma-separated, among {', '.join(AGENTS)} (default all)")
    parser.add_argument("--seeds", default="0,1,2", help="comma-separated (default 0,1,2)")
    parser.add_argument("--steps", type=int, default=None,
                        help="step budget of every run (default per agent: "
                             + ", ".join(f"{k} {v}" for k, v in BUDGET.items()) + ")")
    parser.add_argument("--cap-s", type=float, default=None,
                        help="training-time cap of SB3's and RLlib's runs, seconds (default "
                             + ", ".join(f"{k} {v:.0f}" for k, v in CAP_S.items()) + ")")
    parser.add_argument("--quick", action="store_true",
                        help="about 10 minutes: " + QUICK["agents"] + ", seeds " + QUICK["seeds"]
                             + ", SB3 capped at 75 s, RLlib at 30 s, fast-ppo 524,288 steps")
    parser.add_argument("--repeat", action=argparse.BooleanOptionalAction, default=True,
                        help="rerun fast-ppo's first seed and compare the curves (default on)")
    parser.add_argument("--json", help="every curve, timer and the summary")
    parser.add_argument("--plot", default="training-speed.png",
                        help="score against training time (default %(default)s)")
    parser.add_argument("--no-plot", action="store_true")
    args = parser.parse_args(argv)
    args.budget, args.cap_s_of = dict(BUDGET), dict(CAP_S)
    if args.quick:
        args.agents = args.agents or QUICK["agents"]
        args.budget.update(QUICK["budget"])
        args.cap_s_of.update(QUICK["cap_s"])
    args.agents = args.agents or ",".join(AGENTS)
    if args.steps is not None:
        args.budget = dict.fromkeys(BUDGET, args.steps)
    if args.cap_s is not None:
        if args.cap_s <= 0:
            parser.error("--cap-s must be positive")
        args.cap_s_of = dict.fromkeys(CAP_S, args.cap_s)
    args.cap_s = args.cap_s_of
    del args.cap_s_of
    try:
        args.agents = fast_ppo.apps(args.agents)
        unknown = set(args.agents) - set(AGENTS)
        if unknown:
            raise ValueError(f"--agents: unknown {', '.join(sorted(unknown))} "
                             f"(known: {', '.join(AGENTS)})")
        args.seeds = [int(s) for s in fast_ppo.apps(args.seeds)]
    except ValueError as e:
        parser.error(str(e))
    for name in args.agents:
        module = {"sb3-ppo-tuned": "stable_baselines3", "rllib-ppo-tuned": "ray"}.get(name)
        if module and importlib.util.find_spec(module) is None:
            parser.error(f"{name} needs {module}: pip install \"tiergym[test]\"")
    args.train = list(fast_ppo.apps(fast_ppo.Args.train))
    args.held_out = list(fast_ppo.apps(fast_ppo.Args.held_out))
    return args


def main(argv=None):
    args = parse_args(argv)
    import torch
    torch.set_num_threads(1)
    torch.distributions.Distribution.set_default_validate_args(False)
    learning_benchmark.vectorize_multicategorical()
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    load_start = os.getloadavg()
    server = tiergym.Server(args=["--threads", "1", "--quiet", "--idle-timeout", "0"])
    runs = []
    try:
        heuristics = learning_benchmark.heuristic_returns(
            server, args.train + args.held_out, learning_benchmark.TASK, ("random", "hemem"))
        oracle = heuristics.pop("oracle")
        target = learning_benchmark.fraction_of_oracle(heuristics["hemem"], oracle, args.train)
        log(f"target: hemem's {target:.4f} of the oracle on {','.join(args.train)}")
        # Seed by seed, every agent in turn: a change of the machine's load spreads over
        # all agents instead of falling on one.
        plan = [(a, s, False) for s in args.seeds for a in args.agents]
        if args.repeat and "fast-ppo" in args.agents:
            plan.append(("fast-ppo", args.seeds[0], True))
        began = time.perf_counter()
        for index, (name, seed, repeat) in enumerate(plan):
            def progress(p, name=name, seed=seed):
                log(f"{name} seed {seed}: {p['steps']} steps, {p['train_s']:.1f} s of training, "
                    f"train {p['train']:.3f}, held out {p['held_out']:.3f}")
            cap = (f", at most {args.cap_s[name]:.0f} s of training" if name in args.cap_s
                   else "")
            log(f"[run {index + 1}/{len(plan)}, {time.perf_counter() - began:.0f} s into the "
                f"benchmark, load {os.getloadavg()[0]:.1f}] {name} seed {seed}"
                f"{' again' if repeat else ''}: up to {args.budget[name]:,} steps{cap}")
            run = RUNNERS[name](name, seed, oracle, target, args, server, progress)
            run["repeat"] = repeat
            run["load"] = os.getloadavg()
            runs.append(run)
            if args.json:
                write_json(args.json, args, target, oracle, heuristics, runs, load_start)
        load = f"{load_start[0]:.2f} at the start, {os.getloadavg()[0]:.2f} at the end (1 min)"
        summary = summarize(runs)
        print(f"training_speed_benchmark: {json.dumps(learning_benchmark.TASK)}, train "
              f"{','.join(args.train)}, seeds {','.join(map(str, args.seeds))}")
        print_table(summary, target, load)
        evaluation = sum(r["evaluation_s"] for r in runs)
        print(f"evaluations (excluded from every time above): {evaluation:.1f} s in all")
        same = None
        for r in runs:
            if r["repeat"]:
                first = next(x for x in runs if x["agent"] == r["agent"]
                             and x["seed"] == r["seed"] and not x["repeat"])
                same = ([p["returns"] for p in r["curve"]] == [p["returns"] for p in first["curve"]])
                print(f"{r['agent']} seed {r['seed']} run again: "
                      f"{'the same curve' if same else 'a DIFFERENT curve'} "
                      f"({len(r['curve'])} evaluations)")
        if "fast-ppo" in summary:
            rate = summary["fast-ppo"]["steps_per_s"]
            print(f"fast-ppo: 1 million steps take {1e6 / rate:.0f} s of training on this "
                  f"machine at this load ({rate:,.0f} env steps/s)")
            mine = [r for r in runs if r["agent"] == "fast-ppo" and not r["repeat"]]
            busy = sum(r.get("update_busy_s", 0.0) for r in mine)
            waited = sum(r["where_s"]["update"] for r in mine)
            if busy > waited:
                print(f"fast-ppo's updates ran beside the next rollouts: {busy:.1f} s of "
                      f"updating, {waited:.1f} s of it waited for (the table's update share)")
        met = check_targets(summary)
        if args.json:
            write_json(args.json, args, target, oracle, heuristics, runs, load_start,
                       summary=summary, load=load, repeat_same=same, targets_met=met)
        if not args.no_plot:
            plot(args.plot, runs, heuristics, oracle, args,
                 f"tiergym default task; score against training time (evaluations excluded); "
                 f"load {load}")
            log(f"plot: {args.plot}")
    finally:
        server.close()
    return 0


def write_json(path, args, target, oracle, heuristics, runs, load_start, **extra):
    data = {"task": learning_benchmark.TASK, "train": args.train, "held_out": args.held_out,
            "target": target, "oracle": oracle, "heuristics": heuristics,
            "budget": args.budget, "cap_s": args.cap_s, "load_start": load_start, "runs": runs,
            **extra}
    with open(path + ".tmp", "w") as f:
        json.dump(data, f, indent=1)
    os.replace(path + ".tmp", path)


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(130)
    except Exception as e:
        log(f"training_speed_benchmark: {type(e).__name__}: {e}")
        sys.exit(1)

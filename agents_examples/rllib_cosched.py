"""Co-scheduled tenants on RLlib's multi-agent API: tiergym.cosched's PettingZoo
ParallelEnv (K applications sharing one node, one agent per tenant) trained with RLlib's
PPO (new API stack), either one policy per tenant or one policy shared by all.

    pip install "tiergym[rllib,pettingzoo]"
    python agents_examples/rllib_cosched.py                         # knl-2, a policy per tenant
    python agents_examples/rllib_cosched.py --shared                # one policy for every tenant
    python agents_examples/rllib_cosched.py --scenario knl-4 --iterations 50 --num-env-runners 2
    python agents_examples/rllib_cosched.py --ray-address auto      # on a running Ray cluster

    from ray.tune.registry import register_env
    import rllib_cosched
    register_env("tiergym-cosched", rllib_cosched.env_creator)
    config = rllib_cosched.ppo_config({"scenario": "knl-4"}, shared=False)

The environment: env_creator wraps tiergym.cosched.parallel_env(**env_config) in RLlib's
ParallelPettingZooEnv (a MultiAgentEnv); env_config holds parallel_env's arguments
(scenario, global_weight, address, and configuration keys such as steps or num_regions).
Agents are named after their tenants ("minife", "lulesh", ...; a repeated application
"#2"); each sees its own regions and the node's fill and interference, and is rewarded
with its own time saved (mixed with the node's by global_weight). A tenant that finishes
leaves the episode; one that has not yet joined (knl-4's staggered starts) acts without
effect.

Policies: with a policy per tenant, agent "minife" is trained by the module "minife", and
so on (policy_mapping_fn maps an agent to its own name); with --shared, every agent maps to
the module "shared", trained on all tenants' experience (the tenants' observation and
action spaces are the same: same num_regions and tiers). Progress per iteration on stderr
(env steps, the mean return per agent); the last iteration's per-agent returns on stdout.
"""

import argparse
import importlib.util
import os
import sys
import time

import numpy as np

from tiergym import cosched


def env_creator(env_config):
    """RLlib's multi-agent view of a co-scheduling node (register_env's creator)."""
    from ray.rllib.env.wrappers.pettingzoo_env import ParallelPettingZooEnv
    config = dict(env_config)  # RLlib's EnvContext (worker_index ...) is a dict of the keys
    return ParallelPettingZooEnv(cosched.parallel_env(**config))


def tenants(env_config):
    """The agents (tenants) of the node env_config describes."""
    env = cosched.parallel_env(**dict(env_config))
    try:
        return list(env.possible_agents)
    finally:
        env.close()


def ppo_config(env_config, shared=False, num_env_runners=0, batch=128, hidden=(64, 64), seed=0):
    """RLlib PPO on the co-scheduled node: a policy (RLModule) per tenant, or one shared;
    `num_env_runners` remote env runners (0: sampling in the driver), `batch` env steps
    per iteration."""
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.core.rl_module.multi_rl_module import MultiRLModuleSpec
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec
    from ray.tune.registry import register_env

    register_env("tiergym-cosched", env_creator)
    if shared:
        policies = {"shared"}

        def mapping(agent_id, episode, **kwargs):
            return "shared"
    else:
        policies = set(tenants(env_config))

        def mapping(agent_id, episode, **kwargs):
            return agent_id
    runners = max(num_env_runners, 1)
    return (PPOConfig()
            .environment("tiergym-cosched", env_config=dict(env_config))
            .framework("torch")
            .env_runners(num_env_runners=num_env_runners, num_envs_per_env_runner=1,
                         num_cpus_per_env_runner=1,
                         rollout_fragment_length=max(1, batch // runners))
            .learners(num_learners=0)
            .multi_agent(policies=policies, policy_mapping_fn=mapping)
            .rl_module(rl_module_spec=MultiRLModuleSpec(rl_module_specs={
                p: RLModuleSpec(model_config={"fcnet_hiddens": list(hidden)})
                for p in sorted(policies)}))
            .training(train_batch_size_per_learner=batch, minibatch_size=max(batch // 2, 1),
                      num_epochs=2, lr=3e-4, gamma=1.0)
            .debugging(seed=seed))


def train(env_config, iterations, shared=False, num_env_runners=0, batch=128, ray_address=None,
          num_cpus=2, log=print, seed=0):
    """Trains for `iterations` on a Ray cluster: the one this process is connected to when
    Ray is initialised (left running), else `ray_address` or a local one of `num_cpus`
    CPUs (shut down at the end, also on errors). Returns (the per-agent mean returns after
    each iteration, {module: {parameter: numpy array}} before training, the same after)."""
    import ray
    own = not ray.is_initialized()
    if own:
        if ray_address:
            ray.init(address=ray_address)
        else:
            ray.init(num_cpus=num_cpus, include_dashboard=False, log_to_driver=False)
    algo = None
    returns = []
    try:
        algo = ppo_config(env_config, shared, num_env_runners, batch, seed=seed).build_algo()
        before = module_weights(algo)
        for i in range(iterations):
            t0 = time.monotonic()
            result = algo.train()
            runners = result.get("env_runners", {})
            per_agent = {str(a): float(v) for a, v in
                         (runners.get("agent_episode_returns_mean") or {}).items()}
            returns.append(per_agent)
            log(f"iteration {i}: {runners.get('num_env_steps_sampled_lifetime', '?')} env steps, "
                f"mean return per agent "
                f"{', '.join(f'{a} {v:+.4f}' for a, v in per_agent.items()) or '-'}, "
                f"{time.monotonic() - t0:.1f} s")
        after = module_weights(algo)
    finally:
        if algo is not None:
            algo.stop()
        if own:
            ray.shutdown()
    return returns, before, after


def module_weights(algo):
    """{module: {parameter: numpy array}} of the algorithm's learner."""
    return {module: {k: np.array(v) for k, v in state.items()}
            for module, state in algo.learner_group.get_weights().items()}


def main(argv=None):
    parser = argparse.ArgumentParser(description="PPO (RLlib, multi-agent) on co-scheduled "
                                                 "tenants (tiergym.cosched)")
    parser.add_argument("--scenario", default="knl-2",
                        help=f"a bundled scenario ({', '.join(cosched.SCENARIOS)}; default knl-2)")
    parser.add_argument("--shared", action="store_true",
                        help="one policy for every tenant (default: one per tenant)")
    parser.add_argument("--iterations", type=int, default=10, help="training iterations (default 10)")
    parser.add_argument("--batch", type=int, default=512, help="env steps per iteration (default 512)")
    parser.add_argument("--steps", type=int, default=None,
                        help="decisions per episode (default: the scenario's)")
    parser.add_argument("--num-regions", type=int, default=None,
                        help="regions per tenant (default: the scenario's)")
    parser.add_argument("--global-weight", type=float, default=0.0,
                        help="weight of the node's mean reward in each agent's (default 0)")
    parser.add_argument("--num-env-runners", type=int, default=0,
                        help="remote env runners (default 0: sampling in the driver)")
    parser.add_argument("--ray-address", help="a running Ray cluster (default: a local one)")
    parser.add_argument("--num-cpus", type=int, default=2, help="CPUs of the local cluster (default 2)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.iterations < 1 or args.batch < 1:
        parser.error("--iterations and --batch must be positive")
    if importlib.util.find_spec("ray") is None:
        print("ray is not installed; `pip install \"tiergym[rllib,pettingzoo]\"`", file=sys.stderr)
        return 1
    env_config = {"scenario": args.scenario, "global_weight": args.global_weight}
    if args.steps is not None:
        env_config["steps"] = args.steps
    if args.num_regions is not None:
        env_config["num_regions"] = args.num_regions
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    returns, before, after = train(env_config, args.iterations, args.shared,
                                   args.num_env_runners, args.batch, args.ray_address,
                                   args.num_cpus, seed=args.seed,
                                   log=lambda *m: print(*m, file=sys.stderr, flush=True))
    policies = "one shared policy" if args.shared else "a policy per tenant"
    last = ", ".join(f"{a} {v:+.4f}" for a, v in sorted(returns[-1].items())) or "no episode ended"
    print(f"rllib_cosched: {args.iterations} iterations of PPO on {args.scenario} with "
          f"{policies}; mean return per agent: {last}")
    moved = ", ".join(f"{m} {weight_change(before[m], after[m]):.4g}" for m in sorted(after))
    print(f"rllib_cosched: how far training moved each policy's weights (L2): {moved}")
    return 0


def weight_change(before, after):
    """The L2 norm of the change of a module's parameters."""
    return float(np.sqrt(sum(np.sum((np.asarray(after[k], dtype=np.float64) - before[k]) ** 2)
                             for k in after)))


if __name__ == "__main__":
    sys.exit(main())

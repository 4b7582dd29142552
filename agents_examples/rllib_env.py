"""tiergym on RLlib (Ray): an `env_creator` with which every RLlib env runner connects to a
tiergym server chosen by its `worker_index`, so that the runners of a cluster spread over
the servers running on its nodes; and, run as a script, PPO on a local Ray cluster.
Importing this module does not need ray; registering it and training do
(`pip install "tiergym[rllib]"`).

    python agents_examples/rllib_env.py                      # PPO, 2 env runners, private servers
    python agents_examples/rllib_env.py --iterations 20 --addresses tcp://node1:5555,tcp://node2:5555
    python agents_examples/rllib_env.py --ray-address auto   # on a running Ray cluster

    from ray.tune.registry import register_env
    from rllib_env import env_creator
    register_env("tiergym", env_creator)
    config = (PPOConfig().environment("tiergym", env_config={
                  "addresses": ["tcp://node1:5555", "tcp://node2:5555"],
                  "tiergym": {"num_regions": 64, "steps": 100}})
              .env_runners(num_env_runners=8))

RLlib calls env_creator(env_config) in every env runner with an EnvContext: a dict (the
env_config above) with the attributes `worker_index` (0 for the local runner of the driver,
1..N for the remote env runners) and `vector_index` (the sub-environment within a
worker when it holds several). Keys of env_config:

- "addresses": a list of server endpoints; worker i uses addresses[i % len(addresses)]
  (the local worker 0 the first one). Or:
- "host" and "base_port": worker i uses tcp://HOST:(base_port + i % servers), with
  "servers" (default 1) servers listening on consecutive ports, e.g. started on that host
  with `tiergym serve --endpoint tcp://0.0.0.0:5555` (and its CURVE keys) and so on.
- neither: every worker starts a private server on its own node (`tiergym serve` must be
  built there), the simplest on one machine.
- "tiergym": configuration keys of the environment (num_regions, steps, machine, ...).
- "timeout": seconds per request (default 60).
- "reconnect": True (or a dict: give_up_after_s, max_backoff_s) to carry on when a server
  dies: the runner's episode is truncated with info["interrupted"], the server (a private
  one started again, or whatever serves the address) gets its session made again, and
  training goes on; count_interrupted (the on_episode_end callback ppo_config installs)
  reports the cut episodes as the metric tiergym_interrupted_episodes. Default off.
- "curve": CURVE keys for servers started with --curve-key, as TierEnv takes them:
  {"server_key": ".../server.key", "key": ".../learner.key_secret"} (the files must be on
  every node that runs an env runner); the script's --curve-server-key and --curve-key.

`tiergym serve` binds 127.0.0.1 unless told otherwise (--endpoint tcp://0.0.0.0:PORT, or
the node's address): a server reached from other nodes must listen on an address they can
reach, and requires CURVE there (`tiergym keygen`, --curve-key, --curve-clients) unless it
is opened on purpose (--insecure-open) on a network whose hosts are all trusted.
"""


import argparse
import importlib.util
import os
import sys
import time

import tiergym


def server_address(env_config, worker_index):
    """The endpoint worker `worker_index` uses, or None for a private server (see the
    module's documentation for the keys)."""
    index = int(worker_index)
    if index < 0:
        raise ValueError(f"worker_index must be >= 0, got {index}")
    addresses = env_config.get("addresses")
    if addresses:
        if isinstance(addresses, str):
            addresses = [a for a in addresses.split(",") if a]
        return addresses[index % len(addresses)]
    if "base_port" in env_config:
        servers = int(env_config.get("servers", 1))
        if servers < 1:
            raise ValueError(f"servers must be at least 1, got {servers}")
        host = env_config.get("host", "127.0.0.1")
        return f"tcp://{host}:{int(env_config['base_port']) + index % servers}"
    return None


def env_creator(env_config):
    """A tiergym.TierEnv for RLlib's register_env: env_config is RLlib's EnvContext (a
    dict with `worker_index`) or a plain dict (worker_index taken from the key of that
    name, default 0)."""
    worker_index = getattr(env_config, "worker_index", None)
    if worker_index is None:
        worker_index = env_config.get("worker_index", 0)
    address = server_address(env_config, worker_index)
    return tiergym.TierEnv(address=address, timeout=float(env_config.get("timeout", 60)),
                           curve=env_config.get("curve"), reconnect=env_config.get("reconnect"),
                           **dict(env_config.get("tiergym", {})))


def count_interrupted(episode, metrics_logger=None, **kwargs):
    """RLlib's on_episode_end callback: an episode cut by the loss of its tiergym server
    (reconnect; its last info has "interrupted") adds 1 to the metric
    tiergym_interrupted_episodes (summed over the run)."""
    infos = episode.get_infos()
    if metrics_logger is not None and len(infos) and "interrupted" in infos[-1]:
        metrics_logger.log_value("tiergym_interrupted_episodes", 1, reduce="lifetime_sum")


def ppo_config(env_config, num_env_runners=2, batch=64, seed=0):
    """RLlib's PPO on tiergym: `num_env_runners` remote env runners (1 CPU each), one
    environment each, batches of `batch` steps, a small network, the learner in the
    driver."""
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.tune.registry import register_env
    register_env("tiergym", env_creator)
    return (PPOConfig()
            .environment("tiergym", env_config=env_config)
            .framework("torch")
            .env_runners(num_env_runners=num_env_runners, num_envs_per_env_runner=1,
                         num_cpus_per_env_runner=1,
                         rollout_fragment_length=max(1, batch // max(num_env_runners, 1)))
            .learners(num_learners=0)
            .training(train_batch_size_per_learner=batch, minibatch_size=batch // 2,
                      num_epochs=1, lr=3e-4)
            .rl_module(model_config={"fcnet_hiddens": [32, 32]})
            .callbacks(on_episode_end=count_interrupted)
            .debugging(seed=seed))


def train(env_config, iterations, num_env_runners=2, batch=64, ray_address=None,
          num_cpus=2, log=print):
    """Trains PPO for `iterations` on a Ray cluster: the one this process is connected to
    when Ray is initialised (left running), else `ray_address` or a local one of
    `num_cpus` CPUs, shut down at the end, also on errors. The algorithm (its env runners
    and their private servers) is stopped in any case. Returns the episode return means
    reported after each iteration (None while no episode has ended)."""
    import ray
    own = not ray.is_initialized()
    if own and ray_address:
        ray.init(address=ray_address)
    elif own:
        ray.init(num_cpus=num_cpus, include_dashboard=False, log_to_driver=False)
    algo = None
    returns = []
    try:
        algo = ppo_config(env_config, num_env_runners, batch).build_algo()
        for i in range(iterations):
            t0 = time.monotonic()
            result = algo.train()
            runners = result.get("env_runners", {})
            mean = runners.get("episode_return_mean")
            returns.append(mean)
            cut = runners.get("tiergym_interrupted_episodes")  # (absent until one is)
            cut = int(cut) if isinstance(cut, (int, float)) and cut == cut else 0
            log(f"iteration {i}: {runners.get('num_env_steps_sampled_lifetime', '?')} env steps, "
                f"episode return mean {mean if mean is None else round(mean, 4)}, "
                f"{time.monotonic() - t0:.1f} s, {cut} episodes interrupted")
    finally:
        if algo is not None:
            algo.stop()
        if own:
            ray.shutdown()
    return returns


def main(argv=None):
    parser = argparse.ArgumentParser(description="PPO (RLlib) on tiergym over a Ray cluster")
    parser.add_argument("--iterations", type=int, default=5, help="training iterations (default 5)")
    parser.add_argument("--num-env-runners", type=int, default=2,
                        help="remote env runners, one CPU each (default 2)")
    parser.add_argument("--batch", type=int, default=128, help="env steps per iteration (default 128)")
    parser.add_argument("--addresses", default="",
                        help="tiergym servers, comma-separated; runner i uses the i-th (modulo). "
                             "Default: a private server in each runner")
    parser.add_argument("--ray-address", help="a running Ray cluster (default: a local one)")
    parser.add_argument("--num-cpus", type=int, default=2, help="CPUs of the local cluster (default 2)")
    parser.add_argument("--reconnect", action="store_true",
                        help="carry on when a server dies (episodes cut are counted)")
    parser.add_argument("--curve-server-key", metavar="FILE",
                        help="the servers' public key (NAME.key from `tiergym keygen`), for "
                             "servers started with --curve-key; with --curve-key")
    parser.add_argument("--curve-key", metavar="FILE",
                        help="the learners' key pair (NAME.key_secret), listed by the "
                             "servers' --curve-clients; on every node running an env runner")
    parser.add_argument("--num-regions", type=int, default=16)
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args(argv)
    if importlib.util.find_spec("ray") is None:
        print("ray is not installed; `pip install \"tiergym[rllib]\"`", file=sys.stderr)
        return 1
    env_config = {"tiergym": {"num_regions": args.num_regions, "steps": args.steps}}
    if args.addresses:
        env_config["addresses"] = args.addresses
    if args.reconnect:
        env_config["reconnect"] = True
    if (args.curve_server_key is None) != (args.curve_key is None):
        parser.error("--curve-server-key and --curve-key go together")
    if args.curve_key is not None:
        env_config["curve"] = {"server_key": args.curve_server_key, "key": args.curve_key}
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    returns = train(env_config, args.iterations, args.num_env_runners, args.batch,
                    args.ray_address, args.num_cpus,
                    log=lambda *m: print(*m, file=sys.stderr, flush=True))
    print(f"rllib_env: {args.iterations} iterations of PPO with {args.num_env_runners} env "
          f"runners; episode return mean {returns[-1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

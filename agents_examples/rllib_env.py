"""An RLlib `env_creator` for tiergym: every RLlib rollout worker connects to a tiergym
server chosen by its `worker_index`, so that the workers of a cluster spread over the
servers running on its nodes. Importing this module does not need ray; only registering
it does.

    from ray.tune.registry import register_env
    from rllib_env import env_creator
    register_env("tiergym", env_creator)
    config = (PPOConfig().environment("tiergym", env_config={
                  "addresses": ["tcp://node1:5555", "tcp://node2:5555"],
                  "tiergym": {"num_regions": 64, "steps": 100}})
              .rollouts(num_rollout_workers=8))

RLlib calls env_creator(env_config) in every worker with an EnvContext: a dict (the
env_config above) with the attributes `worker_index` (0 for the local worker of the driver,
1..N for the remote rollout workers) and `vector_index` (the sub-environment within a
worker when it holds several). Keys of env_config:

- "addresses": a list of server endpoints; worker i uses addresses[i % len(addresses)]
  (the local worker 0 the first one). Or:
- "host" and "base_port": worker i uses tcp://HOST:(base_port + i % servers), with
  "servers" (default 1) servers listening on consecutive ports, e.g. started on that host
  with `tiergym serve --endpoint tcp://0.0.0.0:5555` and so on.
- neither: every worker starts a private server on its own node (`tiergym serve` must be
  built there), the simplest on one machine.
- "tiergym": configuration keys of the environment (num_regions, steps, machine, ...).
- "timeout": seconds per request (default 60).

`tiergym serve` binds 127.0.0.1 unless told otherwise (--endpoint tcp://0.0.0.0:PORT, or
the node's address): a server reached from other nodes must listen on an address they can
reach, on a trusted network (the protocol has no authentication).
"""


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
                           **dict(env_config.get("tiergym", {})))

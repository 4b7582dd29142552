"""tiergym: a Python client of the tiergym environment server (env/PROTOCOL.md).

    import tiergym
    env = tiergym.make("tiergym/TierPlacement-v0", num_regions=16, steps=50)
    obs, info = env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
    env.close()

    envs = tiergym.VectorEnv(8, num_regions=16)   # batched: one message per step
    envs = tiergym.VectorEnv(8, inprocess=True)   # in this process, no server (inprocess.py)

Without an address the environment starts a private `tiergym serve` (found through
$TIERGYM_BIN, $TIERGYM_BIN_DIR or build/bin/tiergym) and stops it on close(); pass
address="tcp://127.0.0.1:5555" (or a tiergym.Server) to use a running server. With
gymnasium installed, TierEnv is a gymnasium.Env with gymnasium spaces, VectorEnv a
gymnasium.vector.VectorEnv, and the id "tiergym/TierPlacement-v0" is registered for
gymnasium.make. Dependencies: numpy, pyzmq, msgpack (Debian packages).
"""

from . import spaces
from ._protocol import ENV_ID, VERSION
from .connection import Connection, Server, find_binary
from .env import TierEnv
from .errors import BinaryNotFound, ServerError, ServerUnavailable, TierGymError
from .vector import NEXT_STEP, SAME_STEP, VectorEnv
from .inprocess import InProcessVectorEnv

__all__ = ["ENV_ID", "VERSION", "make", "config_keys", "TierEnv", "VectorEnv", "Server",
           "Connection", "find_binary", "spaces", "TierGymError", "ServerError",
           "ServerUnavailable", "BinaryNotFound", "NEXT_STEP", "SAME_STEP", "InProcessVectorEnv"]


def make(env_id=ENV_ID, **kwargs):
    """A TierEnv. Keyword arguments: address, timeout, server_args, and configuration keys."""
    if env_id != ENV_ID:
        raise ValueError(f"unknown environment id {env_id!r}; tiergym serves {ENV_ID!r}")
    return TierEnv(**kwargs)


def config_keys(address):
    """[(name, default, help)] of the configuration keys a server accepts."""
    connection = Connection(address.endpoint if isinstance(address, Server) else address)
    try:
        envs = connection.call("list")["envs"]
        return [(k["name"], k["default"], k["help"]) for k in envs[0]["config_keys"]]
    finally:
        connection.close()


if spaces.HAVE_GYMNASIUM:  # pragma: no cover - depends on the machine
    if ENV_ID not in spaces.gymnasium.registry:
        spaces.gymnasium.register(id=ENV_ID, entry_point="tiergym.env:TierEnv")

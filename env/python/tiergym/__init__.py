"""tiergym: a Python client of the tiergym environment server (env/PROTOCOL.md).

    import gymnasium, tiergym
    env = gymnasium.make("tiergym/TierPlacement-v0", num_regions=16, steps=50)
    obs, info = env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
    env.close()

    envs = tiergym.VectorEnv(8, num_regions=16)   # batched: one server, one message per step
    envs = tiergym.VectorEnv(8, inprocess=True)   # in this process, no server (inprocess.py)

Without an address an environment starts a private `tiergym serve` (the binary installed
inside this package; $TIERGYM_BIN or $TIERGYM_BIN_DIR override it) and stops it on close();
pass address="tcp://127.0.0.1:5555" (or a tiergym.Server) to use a running server. TierEnv
is a gymnasium.Env, VectorEnv a gymnasium.vector.VectorEnv, and the id
"tiergym/TierPlacement-v0" is registered with Gymnasium (on import of tiergym, and in every
process of an environment where the package is installed, see _tiergym_gymnasium.py).
"""

from ._protocol import DEFAULT_TASK, DEFAULT_TASK_ID, ENV_ID, VERSION
from .connection import Connection, Server, find_binary
from .env import TierEnv
from .errors import BinaryNotFound, ServerError, ServerUnavailable, TierGymError
from .vector import DISABLED, NEXT_STEP, SAME_STEP, VectorEnv
from .inprocess import InProcessVectorEnv

__all__ = ["ENV_ID", "DEFAULT_TASK_ID", "DEFAULT_TASK", "VERSION", "__version__", "make", "config_keys", "register_envs",
           "TierEnv", "VectorEnv", "Server", "Connection", "find_binary", "TierGymError",
           "ServerError", "ServerUnavailable", "BinaryNotFound", "NEXT_STEP", "SAME_STEP",
           "DISABLED", "InProcessVectorEnv"]


def _package_version():
    """The installed distribution's version (pyproject.toml takes it from project(VERSION)
    in CMakeLists.txt, which the binaries are compiled with)."""
    from importlib import metadata
    try:
        return metadata.version("tiergym")
    except metadata.PackageNotFoundError:  # a source tree on sys.path, not installed
        return "0+unknown"


__version__ = _package_version()


def make(env_id=ENV_ID, **kwargs):
    """A TierEnv. Keyword arguments: address, timeout, server_args, render_mode, and
    configuration keys. DEFAULT_TASK_ID ("tiergym/TierPlacement-v1") starts from the
    default task's keys (DEFAULT_TASK), which keyword arguments override."""
    if env_id == DEFAULT_TASK_ID:
        return TierEnv(**{**DEFAULT_TASK, **kwargs})
    if env_id != ENV_ID:
        raise ValueError(f"unknown environment id {env_id!r}; tiergym serves {ENV_ID!r} "
                         f"and {DEFAULT_TASK_ID!r}")
    return TierEnv(**kwargs)


def config_keys(address):
    """[(name, default, help)] of the configuration keys a server accepts."""
    connection = Connection(address.endpoint if isinstance(address, Server) else address)
    try:
        envs = connection.call("list")["envs"]
        return [(k["name"], k["default"], k["help"]) for k in envs[0]["config_keys"]]
    finally:
        connection.close()


def register_envs():
    """Registers tiergym/TierPlacement-v0 (the server's defaults) and
    tiergym/TierPlacement-v1 (the default task, DEFAULT_TASK) with Gymnasium (idempotent):
    `gymnasium.make` gives a TierEnv, `gymnasium.make_vec(...,
    vectorization_mode="vector_entry_point")` (the default mode for these ids) the batched
    VectorEnv. Also the entry point of the "gymnasium.envs" plugin group."""
    import gymnasium
    for env_id, kwargs in ((ENV_ID, {}), (DEFAULT_TASK_ID, DEFAULT_TASK)):
        if env_id not in gymnasium.registry:
            gymnasium.register(id=env_id, entry_point="tiergym.env:TierEnv",
                               vector_entry_point="tiergym.vector:VectorEnv",
                               kwargs=dict(kwargs))


register_envs()

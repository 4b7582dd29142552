"""tiergym: a Python client of the tiergym environment server (env/PROTOCOL.md).

    import gymnasium, tiergym
    env = gymnasium.make("tiergym/TierPlacement-v1")   # the default task (DEFAULT_TASK)
    obs, info = env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
    env.close()

    envs = tiergym.make_vec("tiergym/TierPlacement-v1", 8)   # batched: one server, one
                                                             # message per step (vector.py)
    envs = tiergym.make_vec("tiergym/TierPlacement-v1", 8, inprocess=True)   # in this
                                                      # process, no server (inprocess.py)

Without an address an environment starts a private `tiergym serve` (the binary installed
inside this package; $TIERGYM_BIN or $TIERGYM_BIN_DIR override it) and stops it on close();
pass address="tcp://127.0.0.1:5555" (or a tiergym.Server) to use a running server. TierEnv
is a gymnasium.Env, VectorEnv a gymnasium.vector.VectorEnv, and the ids
"tiergym/TierPlacement-v1" (the default task: 512 MiB of HBM, 16 regions, keep action mode,
normalized observations; "tiergym/TierPlacement" resolves to it) and
"tiergym/TierPlacement-v0" (the server's defaults: all of knl's HBM, 64 regions, placement
action mode, raw observations) are registered with Gymnasium (on import of tiergym, and in
every process of an environment where the package is installed, see _tiergym_gymnasium.py).

The package's modules import one another as a tree (tests/python/test_package_imports.py):
errors, _protocol (the wire codec) and _native (the extension loader) at the bottom; _values
(spaces, configurations, actions) and tasks (the presets) on them; connection, _shm and
_vector_base above; env, vector, inprocess and cosched, then factory (make_vec), and this
module at the top.
"""

from ._protocol import ENV_ID, VERSION
from ._vector_base import DISABLED, NEXT_STEP, SAME_STEP
from .connection import Connection, Reconnect, Server, curve_keys, find_binary
from .env import TierEnv
from .errors import (BinaryNotFound, EpisodeInterrupted, NotAuthorized, ServerError,
                     ServerUnavailable, TierGymError)
from .factory import make_vec
from .inprocess import InProcessVectorEnv
from .tasks import DEFAULT_TASK, DEFAULT_TASK_ID, TASK_NAME, TASKS, V0_TASK, task_config
from .vector import VectorEnv
from . import datasets

__all__ = ["ENV_ID", "DEFAULT_TASK_ID", "DEFAULT_TASK", "TASK_NAME", "V0_TASK", "VERSION",
           "__version__", "make", "make_vec", "config_keys", "register_envs",
           "TierEnv", "VectorEnv", "Server", "Connection", "find_binary", "TierGymError",
           "ServerError", "ServerUnavailable", "BinaryNotFound", "NEXT_STEP", "SAME_STEP",
           "DISABLED", "InProcessVectorEnv", "Reconnect", "EpisodeInterrupted", "NotAuthorized",
           "curve_keys", "datasets"]


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
    configuration keys, which override the task's. DEFAULT_TASK_ID
    ("tiergym/TierPlacement-v1", also TASK_NAME without a version, as in Gymnasium) is the
    default task (DEFAULT_TASK); ENV_ID ("tiergym/TierPlacement-v0", the default here for
    compatibility) the server's own defaults, which V0_TASK spells out (tiergym.tasks).
    tiergym.make_vec makes vector environments of the same ids."""
    return TierEnv(**{**task_config(env_id), **kwargs})


def config_keys(address, env=ENV_ID, curve=None):
    """[(name, default, help)] of the configuration keys a server accepts for `env`: the
    placement task's, or "tiergym/CoschedNode-v0" for its co-scheduling nodes' (both made
    with `make`). KeyError when the server does not serve `env`. `curve`: CURVE keys,
    as TierEnv takes them."""
    connection = Connection(address.endpoint if isinstance(address, Server) else address,
                            curve=curve)
    try:
        envs = connection.call("list")["envs"]
        for e in envs:
            if e["id"] == env:
                return [(k["name"], k["default"], k["help"]) for k in e["config_keys"]]
        raise KeyError(f"the server does not serve {env!r} (it serves "
                       f"{', '.join(e['id'] for e in envs)})")
    finally:
        connection.close()


def register_envs():
    """Registers tiergym/TierPlacement-v0 (the server's defaults, V0_TASK) and
    tiergym/TierPlacement-v1 (the default task, DEFAULT_TASK; the highest version, so
    `gymnasium.make("tiergym/TierPlacement")` resolves to it) with Gymnasium (idempotent):
    `gymnasium.make` gives a TierEnv, `gymnasium.make_vec(...,
    vectorization_mode="vector_entry_point")` (the default mode for these ids) the batched
    VectorEnv, or with inprocess=True the InProcessVectorEnv (tiergym.factory.vector_env).
    Also the entry point of the "gymnasium.envs" plugin group."""
    import gymnasium
    for env_id, kwargs in TASKS.items():
        if env_id not in gymnasium.registry:
            gymnasium.register(id=env_id, entry_point="tiergym.env:TierEnv",
                               vector_entry_point="tiergym.factory:vector_env",
                               kwargs=dict(kwargs))
    # Co-scheduled tenants, one scheduler placing them all (cosched.py).
    if "tiergym/CoschedScheduler-v0" not in gymnasium.registry:
        gymnasium.register(id="tiergym/CoschedScheduler-v0",
                           entry_point="tiergym.cosched:SchedulerEnv")


register_envs()

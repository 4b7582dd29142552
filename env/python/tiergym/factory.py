"""Making vector environments: through a server, or in this process.

    envs = tiergym.make_vec("tiergym/TierPlacement-v1", 8)                  # a VectorEnv
    envs = tiergym.make_vec("tiergym/TierPlacement-v1", 64, inprocess=True, threads=2)
    envs = gymnasium.make_vec("tiergym/TierPlacement-v1", num_envs=64, inprocess=True)

vector_env() is the vector entry point registered with Gymnasium for tiergym's ids: it
gives a tiergym.VectorEnv (vector.py: sessions of `tiergym serve`, one step_batch per step)
or, with inprocess=True, a tiergym.InProcessVectorEnv (inprocess.py: the compiled core in
this process, no server). Both are gymnasium.vector.VectorEnv with the same spaces, infos
and episodes for the same seeds and actions.
"""

from .inprocess import InProcessVectorEnv
from .tasks import task_config
from .vector import VectorEnv


def vector_env(num_envs=None, address=None, *, inprocess=False, **kwargs):
    """A VectorEnv of num_envs sessions (address: a server's endpoint or a
    connection.Server; default a private server), or with inprocess=True an
    InProcessVectorEnv (no address). Keyword arguments: those of the class made, and
    configuration keys."""
    if inprocess:
        if address is not None:
            raise ValueError("inprocess=True runs the environments in this process; it "
                             f"takes no address (got {address!r})")
        return InProcessVectorEnv(num_envs, **kwargs)
    return VectorEnv(num_envs, address, **kwargs)


def make_vec(env_id, num_envs=1, *, inprocess=False, **kwargs):
    """num_envs sub-environments of task `env_id` (tiergym.tasks: its configuration, then
    `kwargs` over it), as vector_env() makes them."""
    return vector_env(num_envs, inprocess=inprocess, **{**task_config(env_id), **kwargs})

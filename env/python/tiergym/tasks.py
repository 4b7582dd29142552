"""The tasks tiergym registers with Gymnasium: configuration presets of the placement
environment, by id.

    tiergym/TierPlacement-v1   the default task (DEFAULT_TASK): knl with a fast tier that
                               holds a fifth to a half of each bundled application's
                               footprint (512 MiB of HBM), 16 regions, 100 decisions, the
                               keep action mode and normalized observations
                               (agents_examples/README.md, "Learning benchmark"). It is the
                               highest version, so the unversioned TASK_NAME resolves to it.
    tiergym/TierPlacement-v0   the server's defaults when v0 was the only task, spelled out
                               (V0_TASK; a test checks that they still are), so that its
                               results reproduce even if those change.

Environment ids are the protocol's (ENV_ID, env/PROTOCOL.md); a task is a configuration
on top of it. _tiergym_gymnasium.py repeats these presets (it may import nothing of
tiergym); a test checks that they agree.
"""

from ._protocol import ENV_ID

DEFAULT_TASK_ID = "tiergym/TierPlacement-v1"
DEFAULT_TASK = {"tier_capacity_mib": "hbm:512", "num_regions": 16, "action_mode": "keep",
                "observation": "normalized"}
TASK_NAME = "tiergym/TierPlacement"
V0_TASK = {"machine": "knl", "num_regions": 64, "steps": 100, "action_mode": "placement",
           "observation": "raw"}

# id -> its preset (the keyword arguments Gymnasium's registration passes).
TASKS = {ENV_ID: V0_TASK, DEFAULT_TASK_ID: DEFAULT_TASK}


def task_config(env_id):
    """The configuration of task `env_id`, for tiergym.make and tiergym.make_vec: TASK_NAME
    and DEFAULT_TASK_ID give DEFAULT_TASK; ENV_ID gives no preset (the server's own
    defaults, which V0_TASK spells out, for compatibility). ValueError for another id."""
    if env_id in (DEFAULT_TASK_ID, TASK_NAME):
        return dict(DEFAULT_TASK)
    if env_id == ENV_ID:
        return {}
    raise ValueError(f"unknown environment id {env_id!r}; tiergym serves {TASK_NAME!r} "
                     f"(= {DEFAULT_TASK_ID!r}, the default task) and {ENV_ID!r}")

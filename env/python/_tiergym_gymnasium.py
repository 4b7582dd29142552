"""Registers tiergym/TierPlacement-v0 and -v1 (the default task, to which the unversioned
tiergym/TierPlacement resolves) with Gymnasium in every process of a Python
environment where tiergym is installed, as soon as that process imports gymnasium, without
importing tiergym itself (the registration names its entry points by string).

Gymnasium 1.x no longer loads the "gymnasium.envs" entry points of installed packages, so a
process that never imports tiergym (an AsyncVectorEnv worker started with spawn, a Ray
worker, SB3's SubprocVecEnv under forkserver) would fail with "Namespace tiergym not found".
tiergym-gymnasium.pth imports this module at interpreter start-up: it only adds an import
hook (standard library only), which registers the id once gymnasium.envs has loaded and
then removes itself. Anything unexpected leaves gymnasium untouched.
"""

import sys

ENV_ID = "tiergym/TierPlacement-v0"
# The tasks (tiergym.tasks: DEFAULT_TASK_ID, DEFAULT_TASK and V0_TASK, repeated here
# because this module may import nothing of tiergym; a test checks that they agree).
DEFAULT_TASK_ID = "tiergym/TierPlacement-v1"
DEFAULT_TASK = {"tier_capacity_mib": "hbm:512", "num_regions": 16, "action_mode": "keep",
                "observation": "normalized"}
V0_TASK = {"machine": "knl", "num_regions": 64, "steps": 100, "action_mode": "placement",
           "observation": "raw"}


def register():
    try:
        from gymnasium.envs.registration import register as gym_register
        from gymnasium.envs.registration import registry
        for env_id, kwargs in ((ENV_ID, V0_TASK), (DEFAULT_TASK_ID, DEFAULT_TASK)):
            if env_id not in registry:
                gym_register(id=env_id, entry_point="tiergym.env:TierEnv",
                             vector_entry_point="tiergym.factory:vector_env",
                             kwargs=dict(kwargs))
    except Exception:  # an unknown gymnasium: `import tiergym` still registers
        pass


class _Hook:
    """A meta path finder that wraps the loader of gymnasium.envs (where Gymnasium
    registers its own environments) to register tiergym's right after it."""

    def find_spec(self, name, path=None, target=None):
        if name != "gymnasium.envs":
            return None
        try:
            sys.meta_path.remove(self)
        except ValueError:
            pass
        from importlib.util import find_spec
        spec = find_spec(name)
        loader = getattr(spec, "loader", None)
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        run = loader.exec_module

        def exec_module(module):
            run(module)
            register()

        loader.exec_module = exec_module
        return spec


def install():
    if "gymnasium.envs" in sys.modules:
        register()
    elif not any(isinstance(f, _Hook) for f in sys.meta_path):
        sys.meta_path.insert(0, _Hook())

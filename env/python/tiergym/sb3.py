"""Stable-Baselines3 on the batched path: TierVecEnv is an SB3 VecEnv over one
tiergym.VectorEnv (one server, one step_batch message per step for all sub-environments),
where SB3's own DummyVecEnv / SubprocVecEnv would step n TierEnvs one message each.

    from stable_baselines3 import PPO
    from tiergym.sb3 import TierVecEnv
    venv = TierVecEnv(8, num_regions=16, steps=50)         # or TierVecEnv(tiergym.VectorEnv(...))
    venv = TierVecEnv(8, inprocess=True, num_regions=16)    # the environments in this process
                                                           # (tiergym.make_vec's inprocess)
    model = PPO("MlpPolicy", venv).learn(10_000)

SB3's conventions: the episode that ends is reset in the same step (the VectorEnv runs
with autoreset_mode="same_step"), its last observation is in info["terminal_observation"]
and info["TimeLimit.truncated"] says it was cut by a time limit; seeds given with
seed(n) and options with set_options() apply to the next reset(). sb3-contrib's MaskablePPO
finds the action masks through env_method("action_masks").

Needs stable-baselines3 (`pip install "tiergym[sb3]"`).
"""

import numpy as np
from stable_baselines3.common.vec_env.base_vec_env import VecEnv

from ._vector_base import SAME_STEP, VectorEnvBase, mode_name
from .factory import vector_env
from .inprocess import InProcessVectorEnv


class TierVecEnv(VecEnv):
    """An SB3 VecEnv over a tiergym.VectorEnv: pass one (made with
    autoreset_mode="same_step"), or the VectorEnv's arguments (num_envs, address=...,
    configs=..., inprocess=..., configuration keys). An in-process one must return fresh
    arrays (copy=True, the default here): SB3 keeps the last observation across a step."""

    def __init__(self, venv_or_num_envs=None, **kwargs):
        if isinstance(venv_or_num_envs, InProcessVectorEnv) and not venv_or_num_envs.copy:
            raise ValueError("SB3 keeps the last observation across a step: make the "
                             "InProcessVectorEnv with copy=True")
        if isinstance(venv_or_num_envs, VectorEnvBase):
            if kwargs:
                raise TypeError("pass either a VectorEnv or its arguments, not both")
            if mode_name(venv_or_num_envs.autoreset_mode) != SAME_STEP:
                raise ValueError("SB3 resets an ended episode in the step that ends it: make "
                                 "the VectorEnv with autoreset_mode='same_step'")
            self.venv = venv_or_num_envs
        else:
            kwargs["autoreset_mode"] = SAME_STEP
            if kwargs.get("inprocess"):
                kwargs.setdefault("copy", True)
            self.venv = vector_env(venv_or_num_envs, **kwargs)
        super().__init__(self.venv.num_envs, self.venv.single_observation_space,
                         self.venv.single_action_space)
        self._actions = None

    def reset(self):
        seeds = self._seeds if any(s is not None for s in self._seeds) else None
        options = self._options[0] if self._options and self._options[0] else None
        obs, infos = self.venv.reset(seed=seeds, options=options)
        self.reset_infos = [_row(infos, i) for i in range(self.num_envs)]
        self._reset_seeds()
        self._reset_options()
        return obs

    def step_async(self, actions):
        self._actions = np.asarray(actions)

    def step_wait(self):
        obs, rewards, terminated, truncated, infos = self.venv.step(self._actions)
        dones = terminated | truncated
        rows = [_row(infos, i) for i in range(self.num_envs)]
        for i in np.flatnonzero(dones):
            rows[i] = _row(infos["final_info"], i)
            rows[i]["terminal_observation"] = infos["final_obs"][i]
            rows[i]["TimeLimit.truncated"] = bool(truncated[i] and not terminated[i])
            self.reset_infos[i] = _row(infos, i)
        return obs, rewards.astype(np.float32), dones, rows

    def action_masks(self):
        """[num_envs, mask size] bool (MaskablePPO)."""
        return self.venv.action_masks()

    def close(self):
        self.venv.close()

    def _indices(self, indices):
        if indices is None:
            return list(range(self.num_envs))
        if isinstance(indices, int):
            return [indices]
        return list(indices)

    def get_attr(self, attr_name, indices=None):
        idx = self._indices(indices)
        if attr_name == "action_masks":
            return [lambda i=i: self.venv.action_masks()[i] for i in idx]
        if attr_name == "render_mode":
            return [None for _ in idx]
        value = getattr(self.venv, attr_name)
        return [value for _ in idx]

    def set_attr(self, attr_name, value, indices=None):
        setattr(self.venv, attr_name, value)  # one object holds every sub-environment

    def env_method(self, method_name, *method_args, indices=None, **method_kwargs):
        idx = self._indices(indices)
        if method_name == "action_masks":
            masks = self.venv.action_masks()
            return [masks[i] for i in idx]
        method = getattr(self.venv, method_name)
        return [method(*method_args, **method_kwargs) for _ in idx]

    def env_is_wrapped(self, wrapper_class, indices=None):
        return [False for _ in self._indices(indices)]

    def get_images(self):
        return [None for _ in range(self.num_envs)]


def _row(columns, i):
    """Sub-environment i's info from column-wise vector infos (keys whose "_key" mask is
    set for it)."""
    out = {}
    for key, column in columns.items():
        if key.startswith("_") or key in ("final_obs", "final_info"):
            continue
        mask = columns.get("_" + key)
        if mask is not None and not mask[i]:
            continue
        value = column[i]
        out[key] = value.item() if isinstance(value, np.generic) else value
    return out

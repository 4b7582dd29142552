"""Gymnasium wrappers for mask-aware agents.

ActionMaskObservation puts the action mask into the observation, as a Dict
{"observation": the observation, "action_mask": the flat int8 mask}, the layout that
RLlib's action-masking modules and many hand-written agents read (sb3-contrib's MaskablePPO
takes the mask from env.action_masks() instead, which every TierEnv has).

    env = ActionMaskObservation(gymnasium.make("tiergym/TierPlacement-v0"))
"""

import gymnasium
import numpy as np
from gymnasium import spaces


class ActionMaskObservation(gymnasium.Wrapper, gymnasium.utils.RecordConstructorArgs):
    def __init__(self, env):
        gymnasium.utils.RecordConstructorArgs.__init__(self)
        gymnasium.Wrapper.__init__(self, env)
        inner = env.unwrapped
        if isinstance(inner.action_space, spaces.Discrete):
            size = int(inner.action_space.n)
        else:  # placement: [regions, tiers]; keep: [regions, 1 + tiers], flattened
            size = int(np.sum(inner.action_space.nvec))
        self.observation_space = spaces.Dict({"observation": env.observation_space,
                                              "action_mask": spaces.MultiBinary(size)})

    def _observe(self, obs, info):
        mask = np.asarray(info["action_mask"], dtype=np.int8).reshape(-1)
        return {"observation": obs, "action_mask": mask}

    def reset(self, *, seed=None, options=None):
        obs, info = self.env.reset(seed=seed, options=options)
        return self._observe(obs, info), info

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        return self._observe(obs, info), reward, terminated, truncated, info

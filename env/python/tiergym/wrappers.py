"""Gymnasium wrappers: for mask-aware agents, and the set-structured observation layout.

ActionMaskObservation puts the action mask into the observation, as a Dict
{"observation": the observation, "action_mask": the flat int8 mask}, the layout that
RLlib's action-masking modules and many hand-written agents read (sb3-contrib's MaskablePPO
takes the mask from env.action_masks() instead, which every TierEnv has).

    env = ActionMaskObservation(gymnasium.make("tiergym/TierPlacement-v0"))

SetObservation (one environment) and SetObservationVector (a tiergym.VectorEnv or
InProcessVectorEnv) give the observation in its set-structured layout, a Dict {"regions":
[num_regions, region_features], "globals": [global_features]} (batched: [n, ...]), for
policies whose weights are shared across regions (permutation-equivariant networks, Deep
Sets): the same numbers as the flat observation, row r of "regions" being region r's
features. split_observation() does the same on any flat observation (views, no copy),
feature_names() names the columns. The layout comes from the environment's spec
(obs_region_features, obs_global_offset), so it follows the configuration: any number of
regions and tiers, any observation mode.

    env = SetObservation(gymnasium.make("tiergym/TierPlacement-v1", observation="relative"))
    obs, info = env.reset(seed=0)      # obs["regions"].shape == (16, 20)
    envs = SetObservationVector(tiergym.make_vec("tiergym/TierPlacement-v1", 64,
                                                 inprocess=True, observation="relative"))
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


# --- The set-structured observation layout ---------------------------------------------------


def observation_layout(spec):
    """(num_regions, region_features, global_offset, global_features) of a spec
    (env.tier_spec: PROTOCOL.md "make"): the flat observation is num_regions rows of
    region_features values, from 0 to global_offset, then global_features values."""
    k = int(spec["num_regions"])
    f = int(spec["obs_region_features"])
    g = int(spec["obs_global_offset"])
    total = int(np.prod(spec["observation"]["shape"]))
    if g != k * f or total < g:
        raise ValueError(f"spec: obs_global_offset {g} is not num_regions {k} x "
                         f"obs_region_features {f} within an observation of {total}")
    return k, f, g, total - g


def split_observation(obs, spec):
    """(regions, globals) of flat observations `obs` ([..., size]: one or a batch): views
    of `obs`, regions [..., num_regions, region_features] and globals [..., global_features]
    (no copy when `obs` is contiguous)."""
    k, f, g, _ = observation_layout(spec)
    obs = np.asarray(obs)
    return obs[..., :g].reshape(obs.shape[:-1] + (k, f)), obs[..., g:]


def join_observation(regions, globals_):
    """The flat observation of a set-structured one (split_observation's inverse)."""
    regions = np.asarray(regions)
    flat = regions.reshape(regions.shape[:-2] + (-1,))
    return np.concatenate([flat, np.asarray(globals_, dtype=flat.dtype)], axis=-1)


_RAW = ["tier", "last_share", "decayed_share", "size_share"]
_NORMALIZED = _RAW + ["last_density", "decayed_density", "size_vs_average"]
_RELATIVE_COMMON = _NORMALIZED + ["mean_density", "trend", "traffic_vs_default_bandwidth"]
_RELATIVE_PER_TIER = ["on", "rank_decayed", "rank_mean", "room", "migration"]
_RELATIVE_GLOBAL_PER_TIER = ["holds_footprint", "bandwidth", "latency", "traffic"]


def feature_names(spec):
    """(region feature names, global feature names) of a spec's layout, in the order of
    the observation (env/README.md, "Observations that transfer"); per-tier features are
    named "NAME[TIER]". The observation mode is told by the number of region features."""
    k, f, g, n_globals = observation_layout(spec)
    tiers = list(spec["tiers"])
    if f == len(_RAW):
        regions, extra = list(_RAW), []
    elif f == len(_NORMALIZED):
        regions, extra = list(_NORMALIZED), []
    elif f - len(_RELATIVE_COMMON) - len(_RELATIVE_PER_TIER) * len(tiers) in (0, 1):
        regions = list(_RELATIVE_COMMON) + [f"{name}[{t}]" for name in _RELATIVE_PER_TIER
                                            for t in tiers]
        regions += ["load"][:f - len(regions)]                  # observation=relative-load
        extra = [f"{name}[{t}]" for name in _RELATIVE_GLOBAL_PER_TIER for t in tiers]
    else:
        raise ValueError(f"spec: {f} features per region is no observation mode this client "
                         "knows")
    globals_ = [f"fill[{t}]" for t in tiers] + ["progress", "last_ratio"] + extra
    globals_ += [f"interference[{t}]" for t in tiers][:n_globals - len(globals_)]
    if len(globals_) != n_globals:
        raise ValueError(f"spec: {n_globals} global features where the layout has "
                         f"{len(globals_)}")
    return regions, globals_


def _set_space(spec, batch=None):
    k, f, _, n_globals = observation_layout(spec)
    lead = () if batch is None else (batch,)
    return spaces.Dict({
        "regions": spaces.Box(0.0, 1.0, shape=lead + (k, f), dtype=np.float32),
        "globals": spaces.Box(0.0, 1.0, shape=lead + (n_globals,), dtype=np.float32)})


class SetObservation(gymnasium.ObservationWrapper, gymnasium.utils.RecordConstructorArgs):
    """The observation as {"regions": [num_regions, region_features], "globals":
    [global_features]} (module docstring): views of the flat observation, the same
    numbers."""

    def __init__(self, env):
        gymnasium.utils.RecordConstructorArgs.__init__(self)
        gymnasium.ObservationWrapper.__init__(self, env)
        self.spec_layout = env.unwrapped.tier_spec
        self.observation_space = _set_space(self.spec_layout)

    def observation(self, observation):
        regions, globals_ = split_observation(observation, self.spec_layout)
        return {"regions": regions, "globals": globals_}


class SetObservationVector(gymnasium.vector.VectorWrapper):
    """SetObservation for a vector environment (tiergym.VectorEnv, InProcessVectorEnv):
    {"regions": [n, num_regions, region_features], "globals": [n, global_features]}, in
    every autoreset mode (infos["final_obs"] of same_step is split too)."""

    def __init__(self, env):
        super().__init__(env)
        self.spec_layout = env.unwrapped.tier_spec
        self.single_observation_space = _set_space(self.spec_layout)
        self.observation_space = _set_space(self.spec_layout, env.num_envs)

    def _split(self, observations):
        regions, globals_ = split_observation(observations, self.spec_layout)
        return {"regions": regions, "globals": globals_}

    def _infos(self, infos):
        final = infos.get("final_obs") if isinstance(infos, dict) else None
        if final is None:
            return infos
        infos = dict(infos)
        infos["final_obs"] = np.array(
            [None if o is None else self._split(np.asarray(o, dtype=np.float32))
             for o in final], dtype=object)
        return infos

    def reset(self, *, seed=None, options=None):
        observations, infos = self.env.reset(seed=seed, options=options)
        return self._split(observations), infos

    def step(self, actions):
        observations, rewards, terminations, truncations, infos = self.env.step(actions)
        return (self._split(observations), rewards, terminations, truncations,
                self._infos(infos))

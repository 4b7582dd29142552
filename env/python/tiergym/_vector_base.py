"""What tiergym's two vector environments share: VectorEnv (vector.py, through `tiergym
serve`) and InProcessVectorEnv (inprocess.py, the compiled core in this process). The
autoreset modes, the checks of the common arguments, seeds and reset masks, the spaces from
the sub-environments' spec, the info layout of a partial reset, and close(). Neither
transport is imported here.
"""

import numbers

import gymnasium
import numpy as np
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space

from ._values import SEED_BOUND, space_from_spec

NEXT_STEP = "next_step"
SAME_STEP = "same_step"
DISABLED = "disabled"
_MODES = {NEXT_STEP: AutoresetMode.NEXT_STEP, SAME_STEP: AutoresetMode.SAME_STEP,
          DISABLED: AutoresetMode.DISABLED}
_NAMES = {member: name for name, member in _MODES.items()}


def mode_name(mode):
    """tiergym's name of an autoreset mode ("next_step", "same_step", "disabled") from that
    name, Gymnasium's AutoresetMode member, or the member's value ("NextStep", as
    Gymnasium's own vector environments take it)."""
    if isinstance(mode, AutoresetMode):
        return _NAMES[mode]
    if isinstance(mode, str):
        if mode in _MODES:
            return mode
        for member, name in _NAMES.items():
            if mode == member.value:
                return name
    raise ValueError(f"autoreset_mode must be one of {sorted(_MODES)} or a "
                     f"gymnasium.vector.AutoresetMode, got {mode!r}")


def batch_seeds(seed, which, num_envs, seeded):
    """Seeds for the sub-environments `which`: an int gives env i seed + i, a list one
    each; None seeds those never seeded (seeded[i] False) from entropy and lets the others
    go on (None)."""
    fresh = np.random.SeedSequence().generate_state(len(which), np.uint64) % SEED_BOUND
    if seed is None:
        given = [None] * len(which)
    elif isinstance(seed, (list, tuple, np.ndarray)):
        if len(seed) != num_envs:
            raise ValueError(f"{len(seed)} seeds for {num_envs} environments")
        given = [None if seed[i] is None else int(seed[i]) for i in which]
    else:
        given = [int(seed) + i for i in which]
    return [g if g is not None else (None if seeded[i] else int(fresh[j]))
            for j, (i, g) in enumerate(zip(which, given))]


def fork_ids(env_ids, num_envs):
    """The sub-environments fork(env_ids) copies, as a list of ints: None for every one in
    order, an int for one, a sequence (ids may repeat). ValueError naming an id out of
    range, or for none."""
    if env_ids is None:
        return list(range(num_envs))
    if isinstance(env_ids, numbers.Integral):
        ids = [int(env_ids)]
    else:
        ids = [int(i) for i in np.asarray(env_ids).reshape(-1)]
    if not ids:
        raise ValueError("env_ids: at least one environment")
    for k, i in enumerate(ids):
        if not 0 <= i < num_envs:
            raise ValueError(f"env_ids[{k}]: {i} is not an environment (0..{num_envs - 1})")
    return ids


def reset_mask(options, num_envs, first):
    """(the bool mask [num_envs] of options["reset_mask"], or all True; the other options)."""
    options = dict(options or {})
    mask = options.pop("reset_mask", None)
    if mask is None:
        return np.ones(num_envs, dtype=bool), options
    mask = np.asarray(mask)
    if mask.dtype != np.bool_ or mask.shape != (num_envs,):
        raise ValueError(f"options['reset_mask'] must be a bool array of shape "
                         f"({num_envs},), got {mask.dtype} {mask.shape}")
    if first and not mask.all():
        raise ValueError("the first reset resets every sub-environment (no reset_mask)")
    return mask, options


class VectorEnvBase(gymnasium.vector.VectorEnv):
    """The base of tiergym's two vector environments (VectorEnv, through `tiergym serve`;
    InProcessVectorEnv, in this process): the checks of the common arguments, an
    idempotent close() that is safe on an object whose __init__ failed half-way, and the
    context manager. Subclasses free what they hold in close_extras()."""

    # Until _init_common has checked the arguments the object holds nothing and counts as
    # closed (gymnasium.vector.VectorEnv says False, and its __del__ closes what is not).
    closed = True

    def _init_common(self, num_envs, configs, config, autoreset_mode, render_mode):
        """Checks the common arguments and sets num_envs, autoreset_mode (Gymnasium's
        AutoresetMode member; _mode its tiergym name), metadata, render_mode and closed;
        returns each sub-environment's configuration (configs[i] merged over the common
        keyword arguments `config`)."""
        mode = mode_name(autoreset_mode)
        if configs is not None:
            configs = [dict(c or {}) for c in configs]
            if num_envs is None:
                num_envs = len(configs)
            elif len(configs) != int(num_envs):
                raise ValueError(f"configs has {len(configs)} entries for {num_envs} "
                                 "environments (one configuration per sub-environment)")
        if num_envs is None or int(num_envs) < 1:
            raise ValueError("num_envs must be at least 1")
        if render_mode is not None:
            raise ValueError(f"render_mode {render_mode!r}: the batched VectorEnv does not "
                             "render (TierEnv renders 'ansi')")
        self.num_envs = int(num_envs)
        self._mode = mode
        self.autoreset_mode = _MODES[mode]
        self.metadata = {"render_modes": [], "autoreset_mode": self.autoreset_mode}
        self.render_mode = None
        self.closed = False
        return [dict(config, **(configs[i] if configs else {})) for i in range(self.num_envs)]

    def _init_spec(self, tier_spec, configs):
        """Sets what the sub-environments' spec gives: tier_spec, configs (each one's
        configuration in force) and config, tiers, profiles and num_regions (as TierEnv
        has them), the spaces, and the shape of one action."""
        self.tier_spec = tier_spec
        self.configs = configs
        self.config = configs[0]
        self.tiers = list(tier_spec["tiers"])
        self.profiles = list(tier_spec["profiles"])
        self.num_regions = int(tier_spec["num_regions"])
        self.single_observation_space = space_from_spec(tier_spec["observation"])
        self.single_action_space = space_from_spec(tier_spec["action"])
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self._move_mode = tier_spec["action"]["type"] == "discrete"
        self._action_shape = (() if self._move_mode else (self.num_regions,))

    def close(self, **kwargs):
        """Frees the sub-environments (close_extras, once). Idempotent."""
        if self.closed:  # closed, or __init__ failed before _init_common
            return
        try:
            self.close_extras(**kwargs)
        finally:
            self.closed = True

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def scatter_infos(part, which, n):
    """Infos of the entries `which` spread over n rows: Gymnasium's layout for a partial
    reset (zeros / None elsewhere, "_key" masks True only at `which`)."""
    out = {}
    mask = np.zeros(n, dtype=bool)
    mask[which] = True
    for key, column in part.items():
        if key.startswith("_"):
            continue
        if column.dtype == object:
            full = np.full(n, None, dtype=object)
        else:
            full = np.zeros((n, *column.shape[1:]), dtype=column.dtype)
        full[which] = column
        out[key] = full
        out["_" + key] = mask.copy()
    return out


def merge_masks(current, infos, which):
    masks = infos["action_mask"]
    if current is None:
        return masks
    current = current.copy()
    current[which] = masks[which]
    return current

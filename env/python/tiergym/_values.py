"""Values between Python and the protocol (env/PROTOCOL.md): spaces from their
descriptions, configurations, actions and placements as the wire takes them, action masks as
mask-aware agents take them. Shared by the single environment (env.py), the vector
environments (vector.py, inprocess.py) and the co-scheduling views (cosched.py); no
connection, no server.
"""

import numbers

import numpy as np
from gymnasium import spaces

from . import datasets
from ._protocol import encode_array

# Seeds drawn for unseeded first resets stay below 2^63 (the server takes any uint64).
SEED_BOUND = 2**63 - 1


def space_from_spec(space):
    """A gymnasium space from its protocol description (PROTOCOL.md "Spaces")."""
    kind = space["type"]
    if kind == "box":
        return spaces.Box(low=space["low"], high=space["high"], shape=tuple(space["shape"]),
                          dtype=np.float32)
    if kind == "discrete":
        return spaces.Discrete(int(space["n"]))
    if kind == "multi_discrete":
        return spaces.MultiDiscrete(np.full(space["shape"], space["nvec"], dtype=np.int64))
    raise ValueError(f"unknown space type {kind!r}")


def config_to_wire(config):
    """Configuration values as the protocol takes them (str, int, float, bool, [str]).
    Splits of tiergym.datasets named in `profiles` are resolved first, in this process
    (datasets.resolve_config: their profile directories, generated on first use)."""
    config = datasets.resolve_config(config)
    out = {}
    for key, value in config.items():
        if isinstance(value, (list, tuple)):
            out[key] = [str(v) for v in value]
        elif isinstance(value, (bool, np.bool_)):
            out[key] = bool(value)
        elif isinstance(value, numbers.Integral):
            out[key] = int(value)
        elif isinstance(value, numbers.Real):
            out[key] = float(value)
        else:
            out[key] = str(value)
    return out


def placement_to_wire(placement):
    """A placement as the protocol takes it: JSON text as it is, a dict as a map whose
    numbers are plain Python ints and floats (numpy scalars included)."""
    if isinstance(placement, str):
        return placement

    def plain(value):
        if isinstance(value, dict):
            return {str(k): plain(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [plain(v) for v in value]
        if isinstance(value, (bool, np.bool_)):
            return bool(value)
        if isinstance(value, numbers.Integral):
            return int(value)
        if isinstance(value, numbers.Real):
            return float(value)
        return value

    if not isinstance(placement, dict):
        raise TypeError(f"a placement is a dict or JSON text, not {type(placement).__name__}")
    return plain(placement)


def integer_actions(action, name="action"):
    """`action` as an int64 array. Floats are taken only when they hold whole numbers (a
    float 0.7 is refused, never truncated to tier 0)."""
    a = np.asarray(action)
    if a.dtype == object:
        try:
            a = a.astype(np.float64)
        except (TypeError, ValueError):
            raise ValueError(f"{name}: expected integers, got {action!r}") from None
    if np.issubdtype(a.dtype, np.integer) or a.dtype == np.bool_:
        return a.astype(np.int64)
    if np.issubdtype(a.dtype, np.floating):
        bad = ~np.isfinite(a) | (a != np.round(a))
        if bad.any():
            where = tuple(int(i) for i in np.argwhere(bad)[0])
            index = "".join(f"[{i}]" for i in where)
            raise ValueError(f"{name}{index}: {a[where].item()!r} is not a whole number; actions are "
                             "tier (or move) indices, integers")
        return a.astype(np.int64)
    raise ValueError(f"{name}: expected integers, got dtype {a.dtype}")


def action_to_wire(action, space):
    a = integer_actions(action)
    if isinstance(space, spaces.Discrete):
        if a.size != 1:
            raise ValueError(f"action: expected one integer, got shape {a.shape}")
        return int(a.reshape(()))
    return encode_array(a, "int64")


def flat_mask(mask):
    """An info's action_mask as MaskablePPO takes it: one flat bool array (placement mode:
    the per-region masks concatenated, [num_regions * tiers]; move mode: [n])."""
    return np.asarray(mask, dtype=bool).reshape(-1)

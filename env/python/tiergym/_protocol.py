"""Wire format of the tiergym protocol, version 2 (env/PROTOCOL.md), on the Python side.

Mirrors env/protocol/protocol.h: constants, arrays as {"dtype", "shape", "data"} maps, and the
conversion of replies (observations, step infos, batch columns) into numpy values.
"""

import numpy as np

VERSION = 2
ENV_ID = "tiergym/TierPlacement-v0"
# (The task presets, DEFAULT_TASK and the others, are tiergym.tasks'.)

DTYPES = {
    "float32": np.dtype("<f4"),
    "float64": np.dtype("<f8"),
    "int8": np.dtype("i1"),
    "int16": np.dtype("<i2"),
    "int32": np.dtype("<i4"),
    "int64": np.dtype("<i8"),
    "uint8": np.dtype("u1"),
    "uint16": np.dtype("<u2"),
    "uint32": np.dtype("<u4"),
    "uint64": np.dtype("<u8"),
    "bool": np.dtype("?"),
}

# Keys of a step info (PROTOCOL.md "Step info") that hold scalars.
INFO_FLOATS = ("interval_ns", "default_interval_ns", "migration_ns", "elapsed_ns",
               "default_elapsed_ns", "default_total_ns")
INFO_INTS = ("step", "migrated_bytes")


def encode_array(array, dtype):
    """A numpy array as a protocol array map (little-endian, C order)."""
    a = np.ascontiguousarray(array, dtype=DTYPES[dtype])
    return {"dtype": dtype, "shape": list(a.shape), "data": a.tobytes()}


def decode_array(message):
    """A protocol array map as a (writable) numpy array."""
    dtype = DTYPES[message["dtype"]]
    return np.frombuffer(message["data"], dtype=dtype).reshape(message["shape"]).copy()


SPEC_ARRAYS = ("tier_capacity_bytes", "tier_migration_gbps", "tier_bandwidth_gbps",
               "region_bounds")


def decode_spec(spec):
    """The `spec` of a make reply with its arrays as numpy arrays: tier_capacity_bytes
    (uint64 [tiers]), tier_migration_gbps and tier_bandwidth_gbps (float64 [tiers]), region_bounds (uint64
    [profiles, num_regions, 2]: region r of profile p covers bytes [start, end))."""
    out = dict(spec)
    for key in SPEC_ARRAYS:
        out[key] = decode_array(spec[key])
    return out


def decode_info(info):
    """A step info map as Gymnasium's vector environments batch it: numbers as Python int
    and float, arrays of one shape per episode as numpy arrays (tier_used_bytes uint64
    [tiers], action_mask int8 as space.sample(mask=...) takes it), and refused_regions (its
    length varies from step to step) as a tuple of ints."""
    out = {"profile": info["profile"]}
    for key in INFO_FLOATS:
        out[key] = float(info[key])
    for key in INFO_INTS:
        out[key] = int(info[key])
    out["tier_used_bytes"] = decode_array(info["tier_used_bytes"])
    out["refused_regions"] = tuple(int(r) for r in decode_array(info["refused_regions"]))
    out["action_mask"] = decode_array(info["action_mask"]).astype(np.int8)
    return out


def decode_info_columns(info, mask=None):
    """Column-wise batch infos as Gymnasium's vector environments batch single infos
    (decode_info): one row per entry, int64 / float64 / object columns, and a boolean
    "_key" mask per key, True where the row holds a value (`mask`; default all rows)."""
    n = len(info["profile"])
    mask = np.ones(n, dtype=bool) if mask is None else np.asarray(mask, dtype=bool)
    out = {"profile": np.array(info["profile"], dtype=object)}
    for key in INFO_FLOATS:
        out[key] = decode_array(info[key]).astype(np.float64)
    for key in INFO_INTS:
        out[key] = decode_array(info[key]).astype(np.int64)
    out["tier_used_bytes"] = decode_array(info["tier_used_bytes"])
    column = np.empty(n, dtype=object)
    for i, row in enumerate(info["refused_regions"]):
        column[i] = tuple(int(r) for r in decode_array(row))
    out["refused_regions"] = column
    out["action_mask"] = decode_array(info["action_mask"]).astype(np.int8)
    for key in list(out):
        out["_" + key] = mask.copy()
    return out


def no_refusals(cache, rows):
    """The refused_regions column of `rows` entries none of which was refused: a read-only
    object array of empty tuples, made once per length and kept in `cache` (a dict)."""
    refused = cache.get(rows)
    if refused is None:
        refused = np.empty(rows, dtype=object)
        refused.fill(())
        refused.flags.writeable = False
        cache[rows] = refused
    return refused

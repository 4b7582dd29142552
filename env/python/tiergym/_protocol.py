"""Wire format of the tiergym protocol, version 2 (env/PROTOCOL.md), on the Python side.

Mirrors env/protocol/protocol.h: constants, arrays as {"dtype", "shape", "data"} maps, and the
conversion of replies (observations, step infos, batch columns) into numpy values.
"""

import numpy as np

VERSION = 2
ENV_ID = "tiergym/TierPlacement-v0"

_DTYPES = {
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
    a = np.ascontiguousarray(array, dtype=_DTYPES[dtype])
    return {"dtype": dtype, "shape": list(a.shape), "data": a.tobytes()}


def decode_array(message):
    """A protocol array map as a (writable) numpy array."""
    dtype = _DTYPES[message["dtype"]]
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
    """A step info map with its arrays as numpy arrays and its numbers as Python numbers."""
    out = {"profile": info["profile"]}
    for key in INFO_FLOATS:
        out[key] = float(info[key])
    for key in INFO_INTS:
        out[key] = int(info[key])
    for key in ("tier_used_bytes", "refused_regions", "action_mask"):
        out[key] = decode_array(info[key])
    return out


def decode_info_columns(info):
    """Column-wise batch infos: every key an array with one row per entry, plus the boolean
    "_key" masks of Gymnasium's vector info convention (all rows hold a value)."""
    n = len(info["profile"])
    out = {"profile": np.array(info["profile"], dtype=object)}
    for key, value in info.items():
        if key == "profile":
            continue
        if key == "refused_regions":
            column = np.empty(n, dtype=object)
            for i, row in enumerate(value):
                column[i] = decode_array(row)
            out[key] = column
        else:
            out[key] = decode_array(value)
    for key in list(out):
        out["_" + key] = np.ones(n, dtype=bool)
    return out

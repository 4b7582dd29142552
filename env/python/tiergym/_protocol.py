"""Wire format of the tiergym protocol (env/PROTOCOL.md), on the Python side.

The protocol's tables (its version, environment ids, dtypes, the step info's fields and
columns) are generated from its declaration, env/protocol/schema.json, into tiergym._wire
(env/protocol/gen_protocol.py, at build time); this module adds arrays as {"dtype", "shape",
"data"} maps and the conversion of replies (observations, step infos, batch columns) into
numpy values, driven by those tables: a field added to the schema's step info is decoded
without a change here.
"""

import numpy as np

from ._native import load_built_module

try:
    from . import _wire
except ImportError:  # a source tree on sys.path: the build tree's
    _wire = load_built_module("_wire", "_wire.py")

VERSION = _wire.VERSION
ENV_ID = _wire.ENV_ID
COSCHED_ENV_ID = _wire.COSCHED_ENV_ID
# (The task presets, DEFAULT_TASK and the others, are tiergym.tasks'.)


def _numpy_dtype(name, itemsize):
    if name == "bool":
        return np.dtype("?")
    kind = {"float": "f", "int": "i", "uint": "u"}[name.rstrip("0123456789")]
    return np.dtype(f"{'<' if itemsize > 1 else '|'}{kind}{itemsize}")


DTYPES = {name: _numpy_dtype(name, size) for name, size in _wire.DTYPES.items()}

# The step info's fields by how they are read (_wire.INFO_FIELDS): "name" (a string; the
# columns hold its index into the spec's profiles), "int", "float", "array" (one per row),
# "tuple" (ints, the row's length varying: its count column says how many), "mask" (int8).
INFO_KINDS = dict(_wire.INFO_FIELDS)
INFO_FLOATS = tuple(k for k, kind in _wire.INFO_FIELDS if kind == "float")
INFO_INTS = tuple(k for k, kind in _wire.INFO_FIELDS if kind == "int")
# The numeric columns, kept as arrays in a batch's infos.
INFO_ARRAYS = tuple(k for k, kind in _wire.INFO_FIELDS if kind in ("float", "int", "array", "mask"))
INFO_KEYS = tuple(k for k, _ in _wire.INFO_FIELDS)
INFO_NAME = next(k for k, kind in _wire.INFO_FIELDS if kind == "name")
INFO_COUNTS = dict(_wire.INFO_COUNTS)
# The field whose rows vary in length (refused_regions) and its count column.
((INFO_TUPLE, INFO_TUPLE_COUNT),) = INFO_COUNTS.items()
# Each column's dtype (the segment's info.NAME arrays, the extension's buffers).
INFO_COLUMN_DTYPES = {name: dtype for name, dtype, _ in _wire.INFO_COLUMNS}
SPEC_ARRAYS = _wire.SPEC_ARRAYS
# The request area of a shared-memory segment (PROTOCOL.md "Requests through the segment").
SHM_REQUEST_ARRAYS = _wire.SHM_REQUEST_ARRAYS


def encode_array(array, dtype):
    """A numpy array as a protocol array map (little-endian, C order)."""
    a = np.ascontiguousarray(array, dtype=DTYPES[dtype])
    return {"dtype": dtype, "shape": list(a.shape), "data": a.tobytes()}


def decode_array(message):
    """A protocol array map as a (writable) numpy array."""
    dtype = DTYPES[message["dtype"]]
    return np.frombuffer(message["data"], dtype=dtype).reshape(message["shape"]).copy()


def decode_spec(spec):
    """The `spec` of a make reply with its arrays as numpy arrays: tier_capacity_bytes
    (uint64 [tiers]), tier_migration_gbps and tier_bandwidth_gbps (float64 [tiers]), region_bounds (uint64
    [profiles, num_regions, 2]: region r of profile p covers bytes [start, end))."""
    out = dict(spec)
    for key in SPEC_ARRAYS:
        out[key] = decode_array(spec[key])
    return out


def decode_info(info, sequences=tuple, masks=np.int8):
    """A step info map as Gymnasium's vector environments batch it: numbers as Python int
    and float, arrays of one shape per episode as numpy arrays (tier_used_bytes uint64
    [tiers], action_mask int8 as space.sample(mask=...) takes it; `masks` None keeps the
    wire's uint8), and refused_regions (its length varies from step to step) as a tuple of
    ints (`sequences`: another type for them). KeyError for a declared key that is missing."""
    out = {}
    for key, kind in _wire.INFO_FIELDS:
        value = info[key]
        if kind == "name":
            out[key] = value
        elif kind == "int":
            out[key] = int(value)
        elif kind == "float":
            out[key] = float(value)
        elif kind == "tuple":
            out[key] = sequences(int(r) for r in decode_array(value))
        elif kind == "mask" and masks is not None:
            out[key] = decode_array(value).astype(masks)
        else:
            out[key] = decode_array(value)
    return out


def decode_info_columns(info, mask=None):
    """Column-wise batch infos as Gymnasium's vector environments batch single infos
    (decode_info): one row per entry, int64 / float64 / object columns, and a boolean
    "_key" mask per key, True where the row holds a value (`mask`; default all rows)."""
    n = len(info[INFO_NAME])
    mask = np.ones(n, dtype=bool) if mask is None else np.asarray(mask, dtype=bool)
    out = {}
    for key, kind in _wire.INFO_FIELDS:
        value = info[key]
        if kind == "name":
            out[key] = np.array(value, dtype=object)
        elif kind == "int":
            out[key] = decode_array(value).astype(np.int64)
        elif kind == "float":
            out[key] = decode_array(value).astype(np.float64)
        elif kind == "tuple":
            column = np.empty(n, dtype=object)
            for i, row in enumerate(value):
                column[i] = tuple(int(r) for r in decode_array(row))
            out[key] = column
        elif kind == "mask":
            out[key] = decode_array(value).astype(np.int8)
        else:
            out[key] = decode_array(value)
    for key in list(out):
        out["_" + key] = mask.copy()
    return out


def typed_column(key, array):
    """An info column's array (the segment's, the extension's buffers) in the dtype a reply's
    infos give it (decode_info_columns), without a copy: counts (below 2^63) as int64, masks
    as int8, other arrays as their own numpy dtype (nanobind's uint64 is numpy's 'Q', another
    type than np.uint64 although the same bytes: torch.as_tensor refuses it)."""
    kind = INFO_KINDS.get(key)
    if kind == "int":
        return array.view(np.int64)
    if kind == "mask":
        return array.view(np.int8)
    if kind == "array":
        return array.view(DTYPES[INFO_COLUMN_DTYPES[key]])
    return array


def tuple_column(counts, values, rows):
    """The object column of the field whose rows vary in length (refused_regions, from its
    count column and its [rows, capacity] values): row i the first counts[i] values of
    values[i] as a tuple of ints, () where there are none."""
    column = np.empty(rows, dtype=object)
    column.fill(())
    # The refused rows' values converted to Python in one call, not one per row (with 410
    # of 512 rows refused: 122 us instead of 174, measured).
    refused = np.flatnonzero(counts[:rows])
    for i, row, count in zip(refused.tolist(), values[refused].tolist(), counts[refused].tolist()):
        column[i] = tuple(row[:count])
    return column


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

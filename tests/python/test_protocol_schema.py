"""The Python side of the protocol's one declaration, env/protocol/schema.json: the generated
parts of env/PROTOCOL.md are up to date, the Python codec's tables (tiergym._wire, generated
at build time) are the declared ones and env/python/tiergym/_protocol.py decodes with them,
and a field added to the schema's step info reaches every generated file.
tests/env/protocol/protocol_schema_test.cc holds the C++ codec to the same file."""

import importlib.util
import json
import pathlib

import numpy as np

import tiergym_testing  # noqa: F401  (puts env/python on sys.path)
from tiergym import _protocol  # noqa: E402
from tiergym.env import config_to_wire  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCHEMA = json.loads((ROOT / "env" / "protocol" / "schema.json").read_text())


def fields(path):
    node = SCHEMA
    for part in path.split("."):
        node = node[part]
    return node


def names(path, wire=None):
    return [f["name"] for f in fields(path)
            if wire is None or any(w == wire or w.startswith(wire + ":") for w in f["wire"])]


def load_generator():
    spec = importlib.util.spec_from_file_location(
        "gen_protocol", ROOT / "env" / "protocol" / "gen_protocol.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_protocol_md_tables_are_generated_from_the_schema():
    gen = load_generator()
    text = (ROOT / "env" / "PROTOCOL.md").read_text()
    _, changed = gen.render(text, SCHEMA)
    assert changed == [], (f"env/PROTOCOL.md tables differ from schema.json: {changed}; "
                           "run env/protocol/gen_protocol.py --doc")
    # Every operation's request and reply that has fields has its table.
    for op in SCHEMA["ops"]:
        for side in ("request", "reply"):
            if SCHEMA["operations"][op][side]:
                assert f"<!-- schema: operations.{op}.{side} -->" in text, (op, side)


def test_the_generator_notices_a_drift():
    gen = load_generator()
    drifted = json.loads(json.dumps(SCHEMA))
    drifted["operations"]["step"]["request"][1]["doc"] = "something else"
    _, changed = gen.render((ROOT / "env" / "PROTOCOL.md").read_text(), drifted)
    assert changed == ["operations.step.request"]


def test_python_codec_constants_are_the_declared_ones():
    from tiergym import _wire
    gen = load_generator()
    # The installed tables are those of the schema in this tree (a stale build would differ).
    assert pathlib.Path(_wire.__file__).read_text() == gen.gen_python(gen.Model(SCHEMA))
    assert _protocol.VERSION == SCHEMA["version"]
    assert _protocol.ENV_ID == SCHEMA["env_id"]
    assert {k: v.itemsize for k, v in _protocol.DTYPES.items()} == SCHEMA["dtypes"]
    assert set(_protocol.INFO_FLOATS) == set(names("structs.info", "float"))
    assert set(_protocol.INFO_INTS) == set(names("structs.info", "uint"))
    assert set(_protocol.SPEC_ARRAYS) == set(names("structs.spec", "ndarray"))


def sample_info():
    """A step info with every declared key, of its declared wire type."""
    info = {}
    for f in fields("structs.info"):
        wire = f["wire"][0]
        if wire == "str":
            info[f["name"]] = "minife"
        elif wire == "uint":
            info[f["name"]] = 3
        elif wire == "float":
            info[f["name"]] = 0.5
        else:
            dtype = wire.split(":")[1]
            info[f["name"]] = _protocol.encode_array(np.ones(2), dtype)
    return info


def test_decode_info_reads_every_declared_key_and_nothing_else():
    out = _protocol.decode_info(sample_info())
    assert set(out) == set(names("structs.info"))
    for key in names("structs.info"):
        missing = sample_info()
        del missing[key]
        try:
            _protocol.decode_info(missing)
        except KeyError:
            continue
        raise AssertionError(f"decode_info ignores the declared key {key!r}")


def test_config_values_go_out_with_the_declared_wire_types():
    wire = fields("operations.make.request")[1]
    assert wire["name"] == "config"
    out = config_to_wire({"num_regions": np.int64(8), "history_decay": 0.25, "flag": True,
                          "profiles": ("a", "b,c"), "machine": "knl"})
    assert out == {"num_regions": 8, "history_decay": 0.25, "flag": True,
                   "profiles": ["a", "b,c"], "machine": "knl"}
    assert type(out["num_regions"]) is int


def test_placements_go_out_as_maps_of_plain_numbers():
    from tiergym.env import placement_to_wire
    out = placement_to_wire({"default": "ddr", "ranges": [
        {"start": np.uint64(4096), "end": np.int64(8192), "tier": "hbm"}]})
    assert out == {"default": "ddr", "ranges": [{"start": 4096, "end": 8192, "tier": "hbm"}]}
    assert type(out["ranges"][0]["start"]) is int
    assert placement_to_wire('{"default": "ddr"}') == '{"default": "ddr"}'


def test_a_step_info_field_added_to_the_schema_reaches_every_generated_file():
    """What "one schema edit" gives: a new float field of the step info is a StepInfo
    member, a column (InfoColumns, ForEachInfoColumn, WriteInfoValues), a map field and a
    column of the codec, a field of the Python tables, a row of PROTOCOL.md's tables."""
    gen = load_generator()
    schema = json.loads(json.dumps(SCHEMA))
    schema["structs"]["info"].insert(5, {"name": "stall_ns", "type": "float", "wire": ["float"],
                                         "doc": "time the last interval stalled"})
    out = gen.outputs(schema)
    info = out["env/spec/step_info.h"]
    assert "double stall_ns = 0;" in info
    assert "double* stall_ns = nullptr;" in info
    assert 'f("stall_ns", &InfoColumns::stall_ns, "float64", InfoWidth::kOne, 0);' in info
    assert "c.stall_ns[row] = info.stall_ns;" in info
    assert 'f("stall_ns", info.stall_ns);' in info
    codec = out["env/protocol/codec.cc"]
    assert 'p.Str("stall_ns");\n  p.Double(v.stall_ns);' in codec
    assert 'NeedMember(o, "stall_ns", path, ReadDouble, v.stall_ns)' in codec
    assert 'ReadColumn<double>(o, "stall_ns", "float64"' in codec
    assert "size_t CountFields(const StepInfo& ) {\n  return 13;" in codec
    wire = gen.gen_python(gen.Model(schema))
    namespace = {}
    exec(wire, namespace)
    assert ("stall_ns", "float") in namespace["INFO_FIELDS"]
    assert ("stall_ns", "float64", "one") in namespace["INFO_COLUMNS"]
    text, changed = gen.render((ROOT / "env" / "PROTOCOL.md").read_text(), schema)
    assert changed == ["structs.info", "shm_layout"]
    assert "| `stall_ns` | float | time the last interval stalled |" in text
    assert "| `info.stall_ns` | float64 | `[rows]` |" in text

#!/usr/bin/env python3
"""Generates the protocol's code and tables from its one declaration, env/protocol/schema.json.

  gen_protocol.py --out DIR --python-out PYDIR
                                   the C++ code into DIR, the Python module into PYDIR (the
                                   build runs it: CMake at configure time, and again whenever
                                   the schema or this file changes), each file written only
                                   when it changes:
      DIR/env/spec/step_info.h       StepInfo, its columns (InfoColumns, ForEachInfoColumn,
                                     WriteInfoValues, ForEachInfoField)
      DIR/env/protocol/messages.h    the version, the ops, every request and reply struct
      DIR/env/protocol/codec.cc      their msgpack encoders and decoders
      DIR/env/protocol/internal/codec_fields.h   their fields' writers, declared
      DIR/env/protocol/shm_layout.h  the shared-memory segment's arrays
      PYDIR/_wire.py                 the Python codec's tables
  gen_protocol.py --doc            rewrite the generated parts of env/PROTOCOL.md in place
  gen_protocol.py --doc --check    exit 1 (naming them) when they are not up to date

What stays hand-written (env/protocol/protocol.cc, internal/codec_support.h) is what is not
a plain field: the semantic readers and writers a field names in its `cpp` entry (actions,
configurations, placements, spaces, a batch's columns), the strict pass over a request, the
envelope. A generated file opens with "generated from env/protocol/schema.json by
env/protocol/gen_protocol.py; do not edit".
"""

import argparse
import json
import pathlib
import pprint
import re
import sys
import textwrap

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCHEMA = ROOT / "env" / "protocol" / "schema.json"
DOC = ROOT / "env" / "PROTOCOL.md"
NOTE = "generated from env/protocol/schema.json by env/protocol/gen_protocol.py; do not edit"

# --- The model ------------------------------------------------------------------------------

# dtype -> (C++ element type, bytes)
DTYPE_CXX = {"float32": "float", "float64": "double", "int8": "int8_t", "int16": "int16_t",
             "int32": "int32_t", "int64": "int64_t", "uint8": "uint8_t", "uint16": "uint16_t",
             "uint32": "uint32_t", "uint64": "uint64_t", "bool": "uint8_t"}


def camel(name):
    return "".join(part.capitalize() for part in name.split("_"))


def expand(text, schema):
    """A doc with its placeholders filled: {version}, {ops}."""
    ops = ", ".join(f"`{op}`" for op in schema["ops"])
    return text.replace("{version}", str(schema["version"])).replace("{ops}", ops)


class Kind:
    """How a C++ value is held, read and written. `generic`: one of the plain kinds below,
    else a type the hand-written code reads and writes."""

    def __init__(self, ctype):
        self.ctype = ctype
        self.optional = False
        self.struct = None      # "struct X" / "structs X": the schema struct's name
        self.many = False       # structs X: a vector
        self.dtype = None       # ndarray:DT
        t = ctype
        if t.startswith("optional "):
            self.optional = True
            t = t[len("optional "):]
        if t.startswith("std::optional<"):
            self.optional = True
        self.base = t
        if t.startswith("structs "):
            self.struct, self.many = t.split()[1], True
        elif t.startswith("struct "):
            self.struct = t.split()[1]
        elif t.startswith("ndarray:"):
            self.dtype = t.split(":")[1]

    @property
    def generic(self):
        return self.struct is not None or self.dtype is not None or self.base in GENERIC


# generic kind -> (C++ type, initializer, reader (o, field) -> StatusOr, writer (p, v), present(v))
GENERIC = {
    "uint64": ("uint64_t", " = 0", "ReadUint", "p.Uint({v})", "{v} != 0"),
    "int": ("int", " = 0", "ReadIntFromUint", "p.Int({v})", "{v} != 0"),
    "double": ("double", " = 0", "ReadDouble", "p.Double({v})", "{v} != 0"),
    "bool": ("bool", " = false", "ReadBool", "p.Bool({v})", "{v}"),
    "string": ("std::string", "", "ReadString", "p.Str({v})", "!{v}.empty()"),
    "session": ("SessionId", "", "ReadSession", "p.Str({v})", "!{v}.empty()"),
    "name": ("std::string", "", "ReadName", "p.Str({v})", "!{v}.empty()"),
    "strings": ("std::vector<std::string>", "", "ReadStrings", "WriteStrings(p, {v})",
                "!{v}.empty()"),
    "uints": ("std::vector<uint64_t>", "", "ReadUints", "WriteUints(p, {v})", "!{v}.empty()"),
    "text_map": ("ConfigText", "", "ReadTextMap", "WriteTextMap(p, {v})", "!{v}.empty()"),
    "count_map": ("std::map<std::string, uint64_t>", "", "ReadCountMap", "WriteCountMap(p, {v})",
                  "!{v}.empty()"),
}


def default_ctype(field):
    wire = field["wire"][0]
    if wire == "uint":
        return "uint64"
    if wire == "float":
        return "double"
    if wire == "bool":
        return "bool"
    if wire == "str":
        return "string"
    if wire.startswith("ndarray:"):
        return wire
    if wire.startswith("map:"):
        return "struct " + wire.split(":")[1]
    raise ValueError(f"field {field['name']!r}: give its cpp type (wire {field['wire']})")


class Field:
    def __init__(self, raw, owner):
        self.raw = raw
        self.name = raw["name"]
        self.owner = owner
        c = raw.get("cpp", {})
        self.cpp = c
        self.member = c.get("member", self.name)
        self.members = c.get("members")
        self.read = c.get("read")
        self.read_into = c.get("read_into")
        self.write = c.get("write")
        self.write_struct = c.get("write_struct")
        self.encode_if = c.get("encode_if")
        self.present_with = c.get("present_with")
        self.default = c.get("default")
        self.column = c.get("column")
        self.required = raw.get("required", False)
        self.optional = raw.get("optional", False)
        # Fields of which a request gives exactly one (the required one unless another is).
        self.one_of = raw.get("one_of", [])
        ctype = c.get("type")
        if ctype is None and not self.members:
            try:
                ctype = default_ctype(raw)
            except ValueError:
                if not self.write_struct:
                    raise
        self.kind = Kind(ctype) if ctype else None

    def cxx_type(self, structs):
        k = self.kind
        if k.struct:
            t = structs[k.struct].cxx
            t = f"std::vector<{t}>" if k.many else t
        elif k.dtype:
            t = f"std::vector<{DTYPE_CXX[k.dtype]}>"
        elif k.base in GENERIC:
            t = GENERIC[k.base][0]
        else:
            t = k.base
        if k.optional and not t.startswith("std::optional<"):
            t = f"std::optional<{t}>"
        return t

    def init(self):
        # Every member has an initializer: a struct made by aggregate initialization that
        # leaves out members added later compiles without -Wmissing-field-initializers.
        if self.default is not None:
            return f" = {self.default}"
        k = self.kind
        if k.optional:  # absent until read: `= 0` would make an absent seed the seed 0
            return " = {}"
        if k.base in GENERIC and GENERIC[k.base][1]:
            return GENERIC[k.base][1]
        return " = {}"

    def doc(self, schema):
        return expand(self.cpp.get("doc") or self.raw.get("doc", ""), schema)


class Struct:
    """A struct of the protocol: the wire fields and the C++ declaration around them."""

    def __init__(self, key, fields, decl, schema):
        self.key = key
        decl = decl or {}
        self.codec = decl.get("codec", "generated")
        self.fields = [Field(f, self) for f in fields] if self.codec == "generated" else []
        self.cxx = decl.get("type", camel(key))
        self.declared = decl.get("declared", "generated")
        self.doc = decl.get("doc", "")
        self.extra = decl.get("extra", [])
        self.explicit_members = decl.get("members")
        self.decode_fn = decl.get("decode")
        self.schema = schema

    @property
    def generated(self):
        return self.declared in ("generated", "generated_spec")

    def members(self, structs):
        """[(type, name, init, doc)] of the C++ struct."""
        out = []
        if self.explicit_members is not None:
            for m in self.explicit_members:
                out.append((m["type"], m["member"],
                            f" = {m['default']}" if "default" in m else " = {}", m.get("doc", "")))
            seen = {m["member"] for m in self.explicit_members}
        else:
            seen = set()
        for f in self.fields:
            if f.members:
                for m in f.members:
                    if m["member"] in seen:
                        continue
                    seen.add(m["member"])
                    out.append((m["type"], m["member"],
                                f" = {m['default']}" if "default" in m else " = {}",
                                m.get("doc", "")))
                continue
            # (A field written from the whole struct fills members declared apart.)
            if "." in f.member or f.member in seen or f.kind is None:
                continue
            if f.write_struct and self.explicit_members is not None:
                continue
            seen.add(f.member)
            out.append((f.cxx_type(structs), f.member, f.init(), f.doc(self.schema)))
        for m in self.extra:
            out.append((m["type"], m["member"], f" = {m['default']}" if "default" in m else "",
                        m.get("doc", "")))
        return out


class Model:
    def __init__(self, schema):
        self.schema = schema
        decls = schema.get("cpp_structs", {})
        self.structs = {k: Struct(k, v, decls.get(k), schema) for k, v in schema["structs"].items()}
        self.ops = schema["ops"]
        cops = schema.get("cpp_operations", {})
        self.requests = {}
        self.replies = {}
        self.reply_of = {}
        # op -> {"when": a key, "as": an op}: a reply holding the key is that op's reply.
        self.alternatives = {op: c["reply"]["alternative"] for op, c in cops.items()
                             if "alternative" in c.get("reply", {})}
        for op in self.ops:
            o = schema["operations"][op]
            c = cops.get(op, {})
            if o["request"]:
                self.requests[op] = Struct(f"{op}_request", o["request"],
                                           {"type": camel(op) + "Request", **c.get("request", {})},
                                           schema)
            if "reply_as" in c:
                self.reply_of[op] = c["reply_as"]
                continue
            self.reply_of[op] = op
            decl = {k: v for k, v in c.get("reply", {}).items() if k != "alternative"}
            self.replies[op] = Struct(f"{op}_reply", o["reply"],
                                      {"type": camel(op) + "Reply", **decl}, schema)
        # Every struct by its name, for `struct X` kinds.
        self.by_name = dict(self.structs)

    def reply_struct(self, op):
        return self.replies[self.reply_of[op]]


# --- Helpers for C++ text ---------------------------------------------------------------------


def comment(text, indent="", width=96):
    if not text:
        return []
    text = re.sub(r"\s+", " ", text).strip()
    return [indent + "// " + line
            for line in textwrap.wrap(text, width - len(indent) - 3, break_long_words=False)]


def header_guard(path):
    return "TIERGYM_" + re.sub(r"[^A-Za-z0-9]", "_", path).upper() + "_"


def member_ref(var, member):
    return f"{var}.{member}"


# --- step_info.h -------------------------------------------------------------------------------

WIDTH = {"one": "InfoWidth::kOne", "tiers": "InfoWidth::kTiers", "regions": "InfoWidth::kRegions",
         "mask": "InfoWidth::kMask"}


def info_columns(model):
    """[(name, C++ element type, dtype, width, fill, field)] of the step info's columns, count
    columns before the arrays they count."""
    out = []
    for f in model.structs["info"].fields:
        col = f.column or {}
        wire = f.raw["wire"][0]
        if wire == "uint":
            dtype, width = "uint64", "one"
        elif wire == "float":
            dtype, width = "float64", "one"
        elif wire == "str":
            dtype, width = col.get("dtype", "int32"), "one"
        elif wire.startswith("ndarray:"):
            dtype, width = col.get("dtype", wire.split(":")[1]), col.get("width", "tiers")
        else:
            raise ValueError(f"info field {f.name}: no column for wire {wire}")
        dtype = col.get("dtype", dtype)
        width = col.get("width", width)
        if "count" in col:
            out.append((col["count"], "int32_t", "int32", "one", 0, None))
        out.append((f.name, DTYPE_CXX[dtype], dtype, width, col.get("fill", 0), f))
    return out


def gen_step_info(model):
    info = model.structs["info"]
    lines = [f"// {NOTE}.", "//"]
    lines += comment("The step info of env/PROTOCOL.md (\"Step info\"): what a reset or a step "
                     "tells besides its observation and reward, field by field (StepInfo, which "
                     "env/environment.h fills), and column by column for a batch of them "
                     "(InfoColumns: the batch replies, the shared-memory segment, the in-process "
                     "vector environment's buffers and the Python extension's views all lay them "
                     "out from ForEachInfoColumn). A field added to the schema's `info` struct "
                     "appears in all of them; the code that computes it is the environment's.")
    guard = header_guard("env/spec/step_info.h")
    lines += [f"#ifndef {guard}", f"#define {guard}", "", "#include <algorithm>",
              "#include <cstddef>", "#include <cstdint>", "#include <string>", "#include <vector>",
              "", "namespace tiergym::env {", ""]
    lines += comment(info.doc)
    lines.append(f"struct {info.cxx} {{")
    for t, name, init, doc in info.members(model.by_name):
        lines += comment(doc, "  ")
        lines.append(f"  {t} {name}{init};")
    lines += ["};", ""]
    cols = info_columns(model)
    lines += comment("How wide a column of step infos is: one value per row, or a row of the "
                     "tiers, of the regions or of the action mask.")
    lines += ["enum class InfoWidth { kOne, kTiers, kRegions, kMask };", ""]
    lines += comment("The step infos of a batch, column by column: row i of every array belongs "
                     "to row i of the batch (widths: ForEachInfoColumn). `profile` is an index "
                     "into EnvSpec::profiles (-1: not there); row i's refused regions are the "
                     "first refused_count[i] values of its row (the rest unspecified); the mask's "
                     "row is the action mask's values.")
    lines.append("struct InfoColumns {")
    for name, cxx, _, _, _, _ in cols:
        lines.append(f"  {cxx}* {name} = nullptr;")
    lines += ["};", ""]
    lines += comment("Calls f(name, &InfoColumns::member, dtype, width, fill) for every column, "
                     "in the schema's order: `fill` is the value a column starts with.")
    lines += ["template <typename F>", "void ForEachInfoColumn(F&& f) {"]
    for name, _, dtype, width, fill, _ in cols:
        lines.append(f'  f("{name}", &InfoColumns::{name}, "{dtype}", {WIDTH[width]}, {fill});')
    lines += ["}", ""]
    lines += comment("Writes the fields of `info` that are plain values (numbers and per-tier "
                     "arrays) into row `row` of `c` (a row of `tiers` per tier). The others "
                     "(profile, refused_regions, action_mask) are written by WriteInfoRow "
                     "(env/spec/info_columns.h), which calls this.")
    lines += [f"inline void WriteInfoValues(const {info.cxx}& info, size_t row, size_t tiers, "
              "const InfoColumns& c) {"]
    for name, cxx, _, width, _, f in cols:
        if f is None or f.column and ("write" in f.column or f.raw["wire"][0] == "str"):
            continue
        if width == "one":
            lines.append(f"  c.{name}[row] = info.{name};")
        elif width == "tiers":
            lines.append(f"  std::copy_n(info.{name}.begin(), std::min(info.{name}.size(), tiers), "
                         f"c.{name} + row * tiers);")
    lines += ["}", ""]
    lines += comment("Calls f(name, value) for every field of `info` (a StepInfo, const or not), "
                     "in the schema's order.")
    lines += ["template <typename Info, typename F>", "void ForEachInfoField(Info& info, F&& f) {"]
    for fld in info.fields:
        lines.append(f'  f("{fld.name}", info.{fld.member});')
    lines += ["}", "", "}  // namespace tiergym::env", "", f"#endif  // {guard}", ""]
    return "\n".join(lines)


# --- messages.h --------------------------------------------------------------------------------


def gen_messages(model):
    s = model.schema
    guard = header_guard("env/protocol/messages.h")
    lines = [f"// {NOTE}.", "//"]
    lines += comment("The protocol's messages (env/PROTOCOL.md): its version, its ops and every "
                     "request and reply struct, declared once in schema.json. env/protocol/"
                     "protocol.h includes this and holds the codec's interface.")
    lines += [f"#ifndef {guard}", f"#define {guard}", "", "#include <array>", "#include <cstdint>",
              "#include <map>", "#include <optional>", "#include <string>",
              "#include <string_view>", "#include <variant>", "#include <vector>", "",
              '#include "absl/status/status.h"', '#include "env/protocol/types.h"',
              '#include "env/spec/env_spec.h"', '#include "traces/placement.h"', "",
              "namespace tiergym::env::protocol {", ""]
    lines += comment("The protocol's version: the one written on every message.")
    lines += [f"inline constexpr uint64_t kVersion = {s['version']};"]
    lines += comment("What `hello` and `list` call the placement environments (made by make) and "
                     "the co-scheduling nodes (made by make too; cosched_make is its older spelling).")
    lines += [f'inline constexpr char kEnvId[] = "{s["env_id"]}";',
              f'inline constexpr char kCoschedEnvId[] = "{s["cosched_env_id"]}";', ""]
    lines += ["enum class Op {"]
    lines += [f"  k{camel(op)}," for op in model.ops]
    lines += ["};", f"inline constexpr int kNumOps = {len(model.ops)};"]
    names = ", ".join(f'"{op}"' for op in model.ops)
    lines += [f"inline constexpr std::array<std::string_view, kNumOps> kOpNames = {{{names}}};", ""]

    def emit(struct):
        out = comment(struct.doc)
        out.append(f"struct {struct.cxx} {{")
        for t, name, init, doc in struct.members(model.by_name):
            out += comment(doc, "  ")
            out.append(f"  {t} {name}{init};")
        out += ["};", ""]
        return out

    # Structs in dependency order: nested ones first.
    order = ["error", "limits", "shm_array", "shm", "env", "tenant"]
    for key in order:
        st = model.structs[key]
        if st.generated and st.declared == "generated":
            lines += emit(st)
    for st in model.structs.values():
        if st.generated and st.declared == "generated" and st.key not in order:
            lines += emit(st)
    for op in model.ops:
        if op in model.requests:
            lines += emit(model.requests[op])
    for op in model.ops:
        if op in model.replies:
            lines += emit(model.replies[op])
    req = ", ".join(["std::monostate"] + [model.requests[op].cxx for op in model.ops
                                          if op in model.requests])
    rep = ", ".join(["Error"] + [model.replies[op].cxx for op in model.ops if op in model.replies])
    lines += comment("A request's body: monostate for the ops without fields.")
    lines += [f"using RequestBody = std::variant<{req}>;", ""]
    lines += [f"using ReplyBody = std::variant<{rep}>;", ""]
    lines += ["}  // namespace tiergym::env::protocol", "", f"#endif  // {guard}", ""]
    return "\n".join(lines)


# --- codec.cc ----------------------------------------------------------------------------------


def column_kind(f):
    """How the step info's field f travels in a batch's columns: ("custom", None) through
    its column's hand-written writer and reader, ("str", None) an array of strings,
    ("scalar", dtype) one value per row, ("rows", dtype) one array per row."""
    wire = f.raw["wire"][0]
    if "write" in (f.column or {}):
        return "custom", None
    if wire == "str":
        return "str", None
    if wire in ("uint", "float"):
        return "scalar", "uint64" if wire == "uint" else "float64"
    return "rows", wire.split(":")[1]


class CodecWriter:
    def __init__(self, model):
        self.m = model
        self.out = []

    def w(self, *lines):
        self.out.extend(lines)

    def struct_of(self, key):
        return self.m.by_name[key]

    # Presence of a field when encoding `v`.
    def present(self, f, v, side):
        ref = member_ref(v, f.member)
        rule = f.encode_if
        if rule is None:
            if side == "request":
                if f.required:
                    return None
            elif not f.optional:
                return None
            rule = "default"
        if rule == "always":
            return None
        if rule == "nonzero":
            return f"{ref} != 0"
        if rule == "not_empty":
            return f"!{ref}.empty()"
        if rule == "default":
            k = f.kind
            if k.optional:
                return f"{ref}.has_value()"
            if k.base in GENERIC:
                return GENERIC[k.base][4].format(v=ref)
            return f"!{ref}.empty()"
        return f"{rule}({v})"

    def write_value(self, f, v):
        """The statements writing field f's value of struct variable v (its key written)."""
        if f.write_struct:
            return [f"{f.write_struct}(p, {v});"]
        ref = member_ref(v, f.member)
        k = f.kind
        val = f"*{ref}" if k.optional else ref
        if f.write:
            return [f"{f.write}(p, {val});"]
        if k.struct:
            st = self.struct_of(k.struct)
            if k.many:
                return [f"p.Array({ref}.size());",
                        f"for (const {st.cxx}& item : {ref}) WriteStruct(p, item);"]
            return [f"WriteStruct(p, {val});"]
        if k.dtype:
            return [f'WriteArray(p, "{k.dtype}", {val});']
        if k.base in GENERIC:
            return [GENERIC[k.base][3].format(v=val) + ";"]
        raise ValueError(f"{f.owner.key}.{f.name}: no writer for {k.ctype}")

    def encoder(self, st, side):
        v = "v"
        always = [f for f in st.fields if self.present(f, v, side) is None]
        optional = [f for f in st.fields if self.present(f, v, side) is not None]
        self.w(f"size_t CountFields(const {st.cxx}& {v if optional else ''}) {{")
        if optional:
            terms = " + ".join(f"({self.present(f, v, side)} ? 1 : 0)" for f in optional)
            self.w(f"  return {len(always)} + {terms};")
        else:
            self.w(f"  return {len(always)};")
        self.w("}", "")
        self.w(f"void WriteFields(Packer& p, const {st.cxx}& {v if st.fields else ''}) {{")
        for f in st.fields:
            cond = self.present(f, v, side)
            body = [f'p.Str("{f.name}");'] + self.write_value(f, v)
            if cond is None:
                self.w(*["  " + b for b in body])
            else:
                self.w(f"  if ({cond}) {{", *["    " + b for b in body], "  }")
        if not st.fields:
            self.w("  (void)p;")
        self.w("}", "")

    # The reader of field f: a callable (const object&, std::string_view field) giving a
    # StatusOr of its value, or (read_into) a status after filling the struct `v`.
    def reader(self, f, side):
        if f.read_into:
            extra = ", limits" if side == "request" else ""
            return (f"[&](const object& x, std::string_view field) {{ "
                    f"return {f.read_into}(x, field, v{extra}); }}")
        k = f.kind
        if f.read:
            return f.read
        if k.struct:
            st = self.struct_of(k.struct)
            if k.many:
                return (f"[](const object& x, std::string_view field) {{ "
                        f"return ReadList<{st.cxx}>(x, field, DecodeStruct<{st.cxx}>); }}")
            return f"DecodeStruct<{st.cxx}>"
        if k.dtype:
            cxx = DTYPE_CXX[k.dtype]
            return (f"[](const object& x, std::string_view field) {{ "
                    f'return ReadArrayOf<{cxx}>(x, field, "{k.dtype}"); }}')
        if k.base in GENERIC:
            return GENERIC[k.base][2]
        raise ValueError(f"{f.owner.key}.{f.name}: no reader for {k.ctype}")

    def reply_decoder(self, st):
        if st.decode_fn:
            return  # hand-written
        self.w("template <>",
               f"absl::StatusOr<{st.cxx}> DecodeStruct<{st.cxx}>(const object& o, "
               "std::string_view path) {",
               f"  {st.cxx} v;")
        if not st.fields:
            self.w("  (void)o;", "  (void)path;")
        for f in st.fields:
            read = self.reader(f, "reply")
            into = "" if f.read_into else f", v.{f.member}"
            call = "Into" if f.read_into else ""
            need = f'NeedMember{call}(o, "{f.name}", path, {read}{into})'
            optional = f'OptionalMember{call}(o, "{f.name}", path, {read}{into})'
            if f.present_with:
                self.w(f'  TG_RETURN_IF_ERROR(Get(o, "{f.present_with}") != nullptr ? {need} : '
                       f"{optional});")
            elif f.optional:
                self.w(f"  TG_RETURN_IF_ERROR({optional});")
            else:
                self.w(f"  TG_RETURN_IF_ERROR({need});")
        self.w("  return v;", "}", "")

    def request_decoder(self, st):
        self.w(f"absl::Status Decode{st.cxx}(MapReader& r, {st.cxx}& v, const DecodeLimits& limits) {{")
        if not any(f.read_into for f in st.fields):
            self.w("  (void)limits;")
        seen = []
        for f in st.fields:
            read = self.reader(f, "request")
            others = [x for x in f.one_of if x != f.name]
            required = "true" if f.required else "false"
            if f.required and others:  # unless another of its group is given
                required = " && ".join(f'!r.Has("{x}")' for x in others)
            for x in others:
                if x in seen:
                    group = " or ".join(f"`{y}`" for y in f.one_of)
                    self.w(f'  if (r.Has("{f.name}") && r.Has("{x}")) {{',
                           f'    return Invalid(r.Field("{f.name}"), "give {group}, not both");',
                           "  }")
            seen.append(f.name)
            if f.read_into:
                self.w(f'  TG_RETURN_IF_ERROR(RequestMemberInto(r, "{f.name}", {required}, {read}));')
            else:
                self.w(f'  TG_RETURN_IF_ERROR(RequestMember(r, "{f.name}", {required}, {read}, '
                       f"v.{f.member}));")
        self.w("  return absl::OkStatus();", "}", "")

    def info_columns(self):
        info = self.m.structs["info"]
        self.w("void WriteInfoColumns(Packer& p, const std::vector<const StepInfo*>& infos) {",
               "  const size_t n = infos.size();",
               "  const size_t tiers = n == 0 ? 0 : infos[0]->tier_used_bytes.size();",
               "  (void)tiers;",
               f"  p.Map({len(info.fields)});")
        for f in info.fields:
            kind, dtype = column_kind(f)
            self.w(f'  p.Str("{f.name}");')
            if kind == "custom":
                self.w(f"  {f.column['write']}(p, infos);")
            elif kind == "str":
                self.w("  p.Array(n);", f"  for (const StepInfo* i : infos) p.Str(i->{f.member});")
            elif kind == "scalar":
                self.w(f'  WriteColumn<{DTYPE_CXX[dtype]}>(p, "{dtype}", infos, '
                       f"[](const StepInfo& i) {{ return i.{f.member}; }});")
            else:
                self.w(f'  WriteRowsColumn<{DTYPE_CXX[dtype]}>(p, "{dtype}", infos, tiers, '
                       f"[](const StepInfo& i) -> const auto& {{ return i.{f.member}; }});")
        self.w("}", "")
        self.w("absl::Status ReadInfoColumns(const object& o, std::string_view path, "
               "std::vector<StepResult>& rows) {")
        readers = {"str": "ReadStringColumn", "scalar": "ReadColumn", "rows": "ReadRowsColumn"}
        for f in info.fields:
            kind, dtype = column_kind(f)
            if kind == "custom":
                self.w(f"  TG_RETURN_IF_ERROR({f.column['read']}(o, path, rows));")
                continue
            template = f"<{DTYPE_CXX[dtype]}>" if dtype else ""
            dtype_arg = f', "{dtype}"' if dtype else ""
            self.w(f'  TG_RETURN_IF_ERROR({readers[kind]}{template}(o, "{f.name}"{dtype_arg}, path, '
                   f"rows, [](StepInfo& i) -> auto& {{ return i.{f.member}; }}));")
        self.w("  return absl::OkStatus();", "}", "")

    def generate(self):
        m = self.m
        self.w(f"// {NOTE}.", "//")
        self.w(*comment("The msgpack encoders and decoders of every message struct "
                        "(messages.h), field by field as schema.json declares them; the "
                        "semantic readers and writers they call are hand-written "
                        "(internal/codec_support.h, protocol.cc)."))
        self.w('#include "env/protocol/internal/codec_support.h"', "",
               "namespace tiergym::env::protocol::internal {", "")
        # Structs (nested first: their decoders are used by later ones).
        for key in ["error", "limits", "shm_array", "shm", "config_key", "env", "info", "spec",
                    "tenant"]:
            st = m.structs[key]
            self.encoder(st, "reply")
            self.reply_decoder(st)
        self.info_columns()
        for op in m.ops:
            if op in m.requests:
                st = m.requests[op]
                self.encoder(st, "request")
                self.request_decoder(st)
        for op in m.ops:
            if op in m.replies:
                st = m.replies[op]
                self.encoder(st, "reply")
                self.reply_decoder(st)
        # Dispatch by op.
        self.w("absl::Status DecodeRequestBody(MapReader& r, Request& req, const DecodeLimits& limits) {",
               "  switch (req.op) {")
        for op in m.ops:
            if op in m.requests:
                self.w(f"    case Op::k{camel(op)}:",
                       f"      return DecodeBodyAs(r, req, limits, Decode{m.requests[op].cxx});")
        self.w("    default:  // no fields", "      return absl::OkStatus();", "  }", "}", "")
        self.w("absl::StatusOr<ReplyBody> DecodeOkBody(const object& o, Op op) {", "  switch (op) {")
        for op in m.ops:
            self.w(f"    case Op::k{camel(op)}:")
            alt = m.alternatives.get(op)
            if alt:  # another kind of session answers with another reply
                self.w(f'      if (Get(o, "{alt["when"]}") != nullptr) '
                       f"return DecodeReplyAs<{m.reply_struct(alt['as']).cxx}>(o);")
            self.w(f"      return DecodeReplyAs<{m.reply_struct(op).cxx}>(o);")
        self.w("  }", '  return absl::InternalError("unhandled op");', "}", "")
        self.w("}  // namespace tiergym::env::protocol::internal", "")
        return "\n".join(self.out)


def gen_codec_fields(model):
    guard = header_guard("env/protocol/internal/codec_fields.h")
    lines = [f"// {NOTE}.", "//"]
    lines += comment("The fields of every struct of the protocol as the generated codec "
                     "(codec.cc) writes them: CountFields(v), how many are present (a map's "
                     "header), and WriteFields(p, v), each key and value. Included at the end of "
                     "codec_support.h.")
    lines += [f"#ifndef {guard}", f"#define {guard}", "", "namespace tiergym::env::protocol::internal {", ""]
    types = [model.structs[k].cxx for k in ("error", "limits", "shm_array", "shm", "config_key",
                                              "env", "info", "spec", "tenant")]
    types += [model.requests[op].cxx for op in model.ops if op in model.requests]
    types += [model.replies[op].cxx for op in model.ops if op in model.replies]
    lines += comment("The dtypes arrays may have (PROTOCOL.md \"Arrays\").")
    lines += ["inline constexpr DtypeInfo kDtypes[] = {"]
    for name, size in model.schema["dtypes"].items():
        integer = "true" if not name.startswith("float") else "false"
        signed = "true" if name.startswith(("int", "float")) else "false"
        lines.append(f'    {{"{name}", {size}, {integer}, {signed}}},')
    lines += ["};", ""]
    for t in types:
        lines += [f"size_t CountFields(const {t}& v);", f"void WriteFields(Packer& p, const {t}& v);"]
    lines += ["", "// A struct as a map: its header, then its fields.", "template <typename T>",
              "void WriteStruct(Packer& p, const T& v) {", "  p.Map(CountFields(v));",
              "  WriteFields(p, v);", "}", "", "}  // namespace tiergym::env::protocol::internal",
              "", f"#endif  // {guard}", ""]
    return "\n".join(lines)


# --- shm_layout.h ------------------------------------------------------------------------------


def gen_shm_layout(model):
    lay = model.schema["shm_layout"]
    guard = header_guard("env/protocol/shm_layout.h")
    lines = [f"// {NOTE}.", "//"]
    lines += comment("The arrays of a shared-memory segment of step_batch results (env/PROTOCOL.md "
                     "\"Shared memory\"), in the order they are laid out: the header's words at "
                     "fixed offsets, then every array at the next 64-byte boundary (the step "
                     "info's columns where a `columns` group stands: ForEachInfoColumn, "
                     "env/spec/step_info.h), then, for a segment taking requests, the request "
                     "area. Dimensions are symbolic, resolved by the segment's shape "
                     "(env/server/shm_batch.h).")
    lines += [f"#ifndef {guard}", f"#define {guard}", "", "#include <cstddef>", "#include <cstdint>",
              "#include <string_view>", "", "namespace tiergym::env::protocol {", "",
              f"inline constexpr uint64_t kShmAlign = {lay['align']};",
              "inline constexpr char kShmMagic[8] = {"
              + ", ".join(f"'{c}'" if c.isalnum() else str(ord(c)) for c in
                          lay["magic"].encode().decode("unicode_escape")) + "};", ""]
    lines += comment("A dimension: a number, or the segment's rows, observation values, or "
                     "values of one action.")
    lines += ["enum class ShmDim { kNumber, kRows, kObs, kAction };", "",
              "struct ShmArrayDecl {", "  std::string_view name;", "  std::string_view dtype;",
              "  size_t itemsize;", "  int rank;", "  ShmDim dims[2];", "  uint64_t numbers[2];",
              "  uint64_t offset;  // the header's fixed offset; 0: laid out in order", "};", ""]

    def decl(a):
        dims, nums = [], []
        for d in a["shape"]:
            if d.isdigit():
                dims.append("ShmDim::kNumber")
                nums.append(d)
            else:
                dims.append({"rows": "ShmDim::kRows", "obs": "ShmDim::kObs",
                             "action": "ShmDim::kAction"}[d])
                nums.append("0")
        while len(dims) < 2:
            dims.append("ShmDim::kNumber")
            nums.append("0")
        size = model.schema["dtypes"][a["dtype"]]
        return (f'{{"{a["name"]}", "{a["dtype"]}", {size}, {len(a["shape"])}, {{{", ".join(dims)}}}, '
                f'{{{", ".join(nums)}}}, {a.get("offset", 0)}}}')

    lines += comment("The header's words, at their fixed offsets.")
    lines += ["inline constexpr ShmArrayDecl kShmHeader[] = {"]
    lines += [f"    {decl(a)}," for a in lay["header"]]
    lines += ["};", ""]
    groups = [[]]
    prefixes = []
    for a in lay["results"]:
        if "columns" in a:
            prefixes.append(a["prefix"])
            groups.append([])
        else:
            groups[-1].append(a)
    if len(groups) != 3 or len(prefixes) != 2:
        raise ValueError("shm_layout.results: arrays, info columns, arrays, info columns")
    for name, group in (("kShmResults", groups[0]), ("kShmFinal", groups[1])):
        lines += [f"inline constexpr ShmArrayDecl {name}[] = {{"]
        lines += [f"    {decl(a)}," for a in group]
        lines += ["};"]
    lines += [f'inline constexpr std::string_view kShmInfoPrefix = "{prefixes[0]}";',
              f'inline constexpr std::string_view kShmFinalInfoPrefix = "{prefixes[1]}";', ""]
    lines += comment("The request area of a segment taking requests.")
    lines += ["inline constexpr ShmArrayDecl kShmRequests[] = {"]
    lines += [f"    {decl(a)}," for a in lay["requests"]]
    lines += ["};", "", "}  // namespace tiergym::env::protocol", "", f"#endif  // {guard}", ""]
    return "\n".join(lines)


# --- _wire.py ----------------------------------------------------------------------------------


def gen_python(model):
    s = model.schema
    info = model.structs["info"]
    out = [f'"""The protocol\'s tables for the Python client ({NOTE}).', "",
           "tiergym._protocol decodes replies with them; the step info's fields and columns say",
           "how a step info is read from a reply, from its columns and from the shared-memory",
           'segment or the in-process buffers."""', ""]
    out.append(f"VERSION = {s['version']}")
    out.append(f"ENV_ID = {s['env_id']!r}")
    out.append(f"COSCHED_ENV_ID = {s['cosched_env_id']!r}")
    out.append(f"OPS = {pprint.pformat(tuple(s['ops']), width=96)}")
    out.append(f"DTYPES = {pprint.pformat(dict(s['dtypes']), width=96, sort_dicts=False)}")
    out.append("# op -> {request field: required}")
    req = {op: {f["name"]: bool(f.get("required")) for f in s["operations"][op]["request"]}
           for op in s["ops"]}
    out.append(f"REQUEST_FIELDS = {pprint.pformat(req, width=96, sort_dicts=False)}")
    fields = []
    for f in info.fields:
        col = f.column or {}
        wire = f.raw["wire"][0]
        kind = col.get("python") or {"uint": "int", "float": "float"}.get(wire, "array")
        fields.append((f.name, kind))
    out.append("# The step info's fields and how each is read: name (str), int, float, array,")
    out.append("# tuple (of ints, its length varying), mask (int8 array).")
    out.append(f"INFO_FIELDS = {pprint.pformat(tuple(fields), width=96)}")
    cols = tuple((name, dtype, width) for name, _, dtype, width, _, _ in info_columns(model))
    out.append("# The step info's columns (the segment's info.NAME arrays, the extension's")
    out.append("# buffers): (name, dtype, width: one, tiers, regions or mask).")
    out.append(f"INFO_COLUMNS = {pprint.pformat(cols, width=96)}")
    counts = {f.name: f.column["count"] for f in info.fields if f.column and "count" in f.column}
    out.append("# A column of varying-length rows -> the column holding each row's length.")
    out.append(f"INFO_COUNTS = {counts!r}")
    spec = tuple(f["name"] for f in s["structs"]["spec"] if f["wire"][0].startswith("ndarray"))
    out.append(f"SPEC_ARRAYS = {spec!r}")
    out.append(f"SHM_REQUEST_ARRAYS = {tuple(a['name'] for a in s['shm_layout']['requests'])!r}")
    return "\n".join(out) + "\n"


# --- PROTOCOL.md --------------------------------------------------------------------------------

BLOCK = re.compile(r"(<!-- schema: (?P<path>[\w.]+) -->\n)(?P<body>.*?)(<!-- /schema -->)", re.S)
VERSION = re.compile(r"(<!-- schema: version -->)(?P<body>\d+)(<!-- /schema -->)")


def fields_at(schema, path):
    node = schema
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            raise KeyError(f"schema.json has no {path!r}")
        node = node[part]
    return node


def table(schema, path):
    node = fields_at(schema, path)
    if path == "shm_layout":
        return shm_table(schema, node)
    if not isinstance(node, list):
        raise KeyError(f"{path!r} in schema.json is not a field list")
    rows = ["| key | type | meaning |", "| --- | --- | --- |"]
    for f in node:
        meaning = expand(f["doc"], schema)
        others = [x for x in f.get("one_of", []) if x != f["name"]]
        if f.get("required") and others:
            meaning = (meaning + " Required, unless "
                       + " or ".join(f"`{x}`" for x in others) + " is given.").strip()
        elif f.get("required"):
            meaning = (meaning + " Required.").strip()
        rows.append(f"| `{f['name']}` | {f['type']} | {meaning} |")
    return "\n".join(rows) + "\n"


def shm_table(schema, lay):
    model = Model(schema)
    rows = ["| array | dtype | shape | what |", "| --- | --- | --- | --- |"]

    def row(a, prefix=""):
        shape = "[" + ", ".join(a["shape"]) + "]"
        rows.append(f"| `{prefix}{a['name']}` | {a['dtype']} | `{shape}` | {a['doc']} |")

    shapes = {"one": "[rows]", "tiers": "[rows, tiers]", "regions": "[rows, num_regions]",
              "mask": "[rows, ...]"}
    for a in lay["header"]:
        row(a)
    seen_columns = False
    for a in lay["results"]:
        if "columns" not in a:
            row(a)
            continue
        if seen_columns:
            rows.append(f"| `{a['prefix']}KEY` | | | {a['doc']}: as `info.KEY` |")
            continue
        seen_columns = True
        for name, _, dtype, width, _, f in info_columns(model):
            col = (f.column or {}) if f else {}
            if f is None:
                doc = next(x.column.get("count_doc", "") for x in model.structs["info"].fields
                           if x.column and x.column.get("count") == name)
            else:
                doc = col.get("doc") or f"as the reply's info column: {expand(f.raw['doc'], schema)}"
            rows.append(f"| `{a['prefix']}{name}` | {dtype} | `{shapes[width]}` | {doc} |")
    for a in lay["requests"]:
        row(a)
    return "\n".join(rows) + "\n"


def render(text, schema):
    """(the document with every generated part rewritten, the paths whose part changed)"""
    changed = []

    def replace(m):
        body = table(schema, m.group("path"))
        if body != m.group("body"):
            changed.append(m.group("path"))
        return m.group(1) + body + m.group(4)

    def version(m):
        if m.group("body") != str(schema["version"]):
            changed.append("version")
        return m.group(1) + str(schema["version"]) + m.group(3)

    text = BLOCK.sub(replace, text)
    return VERSION.sub(version, text), changed


# --- Main --------------------------------------------------------------------------------------


def outputs(schema):
    model = Model(schema)
    return {
        "env/spec/step_info.h": gen_step_info(model),
        "env/protocol/messages.h": gen_messages(model),
        "env/protocol/codec.cc": CodecWriter(model).generate(),
        "env/protocol/internal/codec_fields.h": gen_codec_fields(model),
        "env/protocol/shm_layout.h": gen_shm_layout(model),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--schema", type=pathlib.Path, default=SCHEMA)
    parser.add_argument("--out", type=pathlib.Path, help="write the generated C++ into OUT")
    parser.add_argument("--python-out", type=pathlib.Path,
                        help="write the generated Python module _wire.py into this directory")
    parser.add_argument("--doc", action="store_true", help="rewrite env/PROTOCOL.md's tables")
    parser.add_argument("--check", action="store_true",
                        help="with --doc: only check that env/PROTOCOL.md is up to date")
    args = parser.parse_args()
    schema = json.loads(args.schema.read_text())
    written = {}
    if args.out:
        written.update({args.out / rel: text for rel, text in outputs(schema).items()})
    if args.python_out:
        written[args.python_out / "_wire.py"] = gen_python(Model(schema))
    for path, text in written.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
    if args.doc:
        text = DOC.read_text()
        out, changed = render(text, schema)
        if args.check:
            if changed:
                print(f"{DOC.relative_to(ROOT)}: out of date with schema.json: "
                      f"{', '.join(changed)}; run env/protocol/gen_protocol.py --doc",
                      file=sys.stderr)
                return 1
            return 0
        DOC.write_text(out)
        print(f"{DOC.relative_to(ROOT)}: {len(changed)} part(s) rewritten")
    if not args.out and not args.python_out and not args.doc:
        parser.error("give --out DIR, --python-out DIR and/or --doc")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Writes the field tables of env/PROTOCOL.md from the protocol's declaration,
env/protocol/schema.json.

A table lives between `<!-- schema: PATH -->` and `<!-- /schema -->`, PATH naming a field list
of the schema: `request` and `reply` (the envelopes), `structs.NAME`, or
`operations.OP.request` / `operations.OP.reply`. Everything outside the markers is left as is.

  gen_protocol_doc.py            rewrite env/PROTOCOL.md in place
  gen_protocol_doc.py --check    exit 1 (naming the tables) when it is not up to date
"""

import argparse
import json
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCHEMA = ROOT / "env" / "protocol" / "schema.json"
DOC = ROOT / "env" / "PROTOCOL.md"
BLOCK = re.compile(r"(<!-- schema: (?P<path>[\w.]+) -->\n)(?P<body>.*?)(<!-- /schema -->)", re.S)


def fields_at(schema, path):
    node = schema
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            raise KeyError(f"schema.json has no {path!r}")
        node = node[part]
    if not isinstance(node, list):
        raise KeyError(f"{path!r} in schema.json is not a field list")
    return node


def table(fields):
    rows = ["| key | type | meaning |", "| --- | --- | --- |"]
    for f in fields:
        meaning = f["doc"]
        if f.get("required"):
            meaning = (meaning + " Required.").strip()
        rows.append(f"| `{f['name']}` | {f['type']} | {meaning} |")
    return "\n".join(rows) + "\n"


def render(text, schema):
    """(the document with every table regenerated, the paths whose table changed)"""
    changed = []

    def replace(m):
        body = table(fields_at(schema, m.group("path")))
        if body != m.group("body"):
            changed.append(m.group("path"))
        return m.group(1) + body + m.group(4)

    return BLOCK.sub(replace, text), changed


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="only check that env/PROTOCOL.md is up to date")
    args = parser.parse_args()
    schema = json.loads(SCHEMA.read_text())
    text = DOC.read_text()
    out, changed = render(text, schema)
    if args.check:
        if changed:
            print(f"{DOC.relative_to(ROOT)}: tables out of date with schema.json: "
                  f"{', '.join(changed)}; run env/protocol/gen_protocol_doc.py", file=sys.stderr)
            return 1
        return 0
    DOC.write_text(out)
    print(f"{DOC.relative_to(ROOT)}: {len(changed)} table(s) rewritten")
    return 0


if __name__ == "__main__":
    sys.exit(main())

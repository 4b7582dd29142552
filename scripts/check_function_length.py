#!/usr/bin/env python3
"""Lists the C++ functions longer than a limit, and fails if there are any (issue 27).

A function's length is counted in lines from the first line of its declaration (its return
type or template header) to its closing brace, both included; lambdas and local classes
count towards the function that holds them. The scan matches braces after removing
comments, string and character literals (raw strings too) and preprocessor lines, so it
needs no compiler flags; it knows namespaces, classes, `extern "C"` blocks, constructor
initialiser lists and brace initialisers.

usage: scripts/check_function_length.py [--max-lines N] [--list] PATH...
  PATH     a C or C++ source or header, or a folder (its *.cc, *.cpp, *.c, *.h, searched
           recursively)
  --max-lines N  the limit (default 80)
  --list   print every function with its length, longest first, not only those over
Exit status: 0 when none is longer than the limit, 1 when some are, 2 on bad arguments.
"""
import argparse
import pathlib
import re
import sys

SOURCE_SUFFIXES = {".cc", ".cpp", ".cxx", ".c", ".h", ".hpp"}
CONTAINER = re.compile(r"^(?:template\s*<.*>\s*)?(?:inline\s+)?(?:namespace|class|struct|union|extern)\b",
                       re.S)
NOT_FUNCTION = re.compile(r"^(?:template\s*<.*>\s*)?(?:enum|typedef|using)\b", re.S)
# How a function's header ends: its parameter list, then qualifiers.
FUNCTION_END = re.compile(r"\)\s*(?:(?:const|volatile|noexcept|override|final|&&|&)\s*(?:\(\))?\s*)*$")
ACCESS_LABEL = re.compile(r"^\s*(?:(?:public|private|protected)\s*:(?!:)\s*)+")


def strip_code(text):
    """The text with comments, literals and preprocessor lines blanked (newlines kept)."""
    out = []
    i, n = 0, len(text)
    at_line_start = True
    while i < n:
        c = text[i]
        if at_line_start and c == "#":
            # A preprocessor directive, with its backslash continuations.
            while i < n and text[i] != "\n":
                if text[i] == "\\" and i + 1 < n and text[i + 1] == "\n":
                    out.append(" \n")
                    i += 2
                    continue
                out.append(" ")
                i += 1
            continue
        if c == "\n":
            out.append(c)
            at_line_start = True
            i += 1
            continue
        if not c.isspace():
            at_line_start = False
        if text.startswith("//", i):
            while i < n and text[i] != "\n":
                out.append(" ")
                i += 1
            continue
        if text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            out.append(re.sub(r"[^\n]", " ", text[i:end]))
            i = end
            continue
        raw = re.match(r'(?:u8|u|U|L)?R"([^()\\\s]{0,16})\(', text[i:i + 24])
        if raw and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            close = ")" + raw.group(1) + '"'
            end = text.find(close, i + raw.end())
            end = n if end < 0 else end + len(close)
            out.append('""' + re.sub(r"[^\n]", " ", text[i + 2:end]))
            i = end
            continue
        if c in "\"'":
            # A digit separator (1'000'000) is not a character literal.
            if c == "'" and i > 0 and text[i - 1].isalnum() and i + 1 < n and text[i + 1].isalnum() \
                    and not re.match(r"(?:u8|u|U|L)$", text[max(0, i - 2):i]):
                out.append(" ")
                i += 1
                continue
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(c + " " * (min(j, n) - i - 1) + (c if j < n else ""))
            i = j + 1
            continue
        out.append(c)
        i += 1
    return "".join(out)


def _top_level(header):
    """The header with the inside of every parenthesised or bracketed group removed (angle
    brackets are left alone: `<` is ambiguous)."""
    out, depth = [], 0
    for c in header:
        if c in "([":
            if depth == 0:
                out.append(c)
            depth += 1
        elif c in ")]":
            depth -= 1
            if depth == 0:
                out.append(c)
        elif depth == 0:
            out.append(c)
    return "".join(out)


def _function_name(header):
    """The qualified name before the parameter list, for the report."""
    match = re.search(r"((?:[A-Za-z_~][\w]*\s*(?:<[^(){};]*>)?\s*::\s*)*"
                      r"(?:operator\s*(?:\(\s*\)|[^\s(]+)|~?[A-Za-z_]\w*))\s*\(", header)
    return re.sub(r"\s+", "", match.group(1)) if match else header.strip()[:40]


def functions(text):
    """[(name, first line, last line)] of the function definitions in C++ source `text`."""
    code = strip_code(text)
    line_of = [0] * (len(code) + 1)
    line = 1
    for k, c in enumerate(code):
        line_of[k] = line
        if c == "\n":
            line += 1
    line_of[len(code)] = line
    found = []
    header_start = 0  # where the declaration being read began
    i, n = 0, len(code)
    while i < n:
        c = code[i]
        if c == ";":
            header_start = i + 1
        elif c == "}":
            header_start = i + 1  # the end of a container
        elif c == "{":
            header = code[header_start:i]
            label = ACCESS_LABEL.match(header)
            start = header_start + (label.end() if label else 0)
            header = code[start:i]
            flat = _top_level(header)
            stripped = header.strip()
            prev = code[:i].rstrip()[-1:] if code[:i].rstrip() else ""
            if CONTAINER.match(stripped) and not FUNCTION_END.search(flat):
                header_start = i + 1  # inside a namespace or a class: keep scanning
                i += 1
                continue
            close = _matching_brace(code, i)
            is_function = (
                "(" in flat and not NOT_FUNCTION.match(stripped)
                and "=" not in flat.replace("operator=", "").replace("==", "")
                .replace("!=", "").replace("<=", "").replace(">=", "")
            )
            ctor_init = re.search(r"\)[^:]*?(?<!:):(?!:)", flat)
            if is_function and ctor_init and (prev.isalnum() or prev in "_>"):
                # A member's brace initialiser in a constructor's initialiser list.
                i = close + 1
                continue
            if is_function:
                first = start + (len(header) - len(header.lstrip()))
                found.append((_function_name(header), line_of[first], line_of[close]))
                header_start = close + 1
            else:
                # An enum, an aggregate or a braced initialiser: part of the declaration.
                pass
            i = close + 1
            continue
        i += 1
    return found


def _matching_brace(code, i):
    depth = 0
    for k in range(i, len(code)):
        if code[k] == "{":
            depth += 1
        elif code[k] == "}":
            depth -= 1
            if depth == 0:
                return k
    return len(code) - 1


def source_files(paths):
    for path in paths:
        p = pathlib.Path(path)
        if p.is_dir():
            yield from sorted(f for f in p.rglob("*") if f.suffix in SOURCE_SUFFIXES and f.is_file())
        elif p.is_file():
            yield p
        else:
            raise FileNotFoundError(f"{path}: no such file or folder")


def main(argv=None):
    parser = argparse.ArgumentParser(
        description="List the C++ functions longer than a limit; exit 1 if there are any.")
    parser.add_argument("paths", nargs="+", metavar="PATH", help="C++ sources or folders of them")
    parser.add_argument("--max-lines", type=int, default=80, help="the limit in lines (default 80)")
    parser.add_argument("--list", action="store_true", help="print every function's length")
    args = parser.parse_args(argv)
    if args.max_lines < 1:
        parser.error("--max-lines must be at least 1")
    try:
        files = list(source_files(args.paths))
    except FileNotFoundError as error:
        parser.error(str(error))
    rows = []
    for path in files:
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError as error:
            print(f"check_function_length: {path}: {error.strerror}", file=sys.stderr)
            return 2
        for name, first, last in functions(text):
            rows.append((last - first + 1, f"{path}:{first}", name))
    rows.sort(key=lambda row: (-row[0], row[1]))
    over = [row for row in rows if row[0] > args.max_lines]
    for length, where, name in (rows if args.list else over):
        print(f"{where}: {name}: {length} lines")
    if over:
        print(f"check_function_length: {len(over)} function(s) longer than {args.max_lines} lines "
              f"in {len(files)} file(s)", file=sys.stderr)
        return 1
    print(f"check_function_length: {len(rows)} functions in {len(files)} file(s), "
          f"none longer than {args.max_lines} lines")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The tiergym package's modules import one another as a tree (issue 27): no cycle, counting
imports inside functions too (a cycle held apart by an import inside a function is still a
cycle), no module importing the package's root, and no private name (a leading underscore)
taken from another module; private modules (_protocol, _native, ...) are fine to import."""

import ast
import pathlib

import tiergym

PACKAGE = "tiergym"


def _modules():
    """{module name: its source file} of the package, generated modules included."""
    out = {}
    for directory in tiergym.__path__:
        for path in pathlib.Path(directory).glob("*.py"):
            name = PACKAGE if path.stem == "__init__" else f"{PACKAGE}.{path.stem}"
            out.setdefault(name, path)
    return out


def _imports(name, path, modules):
    """[(imported module, [names taken from it])] of module `name`, anywhere in its code."""
    package = PACKAGE if name == PACKAGE else name.rsplit(".", 1)[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == PACKAGE or alias.name.startswith(PACKAGE + "."):
                    found.append((alias.name, []))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                target = f"{base}.{node.module}" if node.module else base
            else:
                target = node.module or ""
            if target != PACKAGE and not target.startswith(PACKAGE + "."):
                continue
            names = [a.name for a in node.names]
            if target == PACKAGE:  # `from . import x`: x is a submodule (or a name of the root)
                for n in names:
                    sub = f"{PACKAGE}.{n}"
                    found.append((sub, []) if sub in modules or n == "_core" else (PACKAGE, [n]))
            else:
                found.append((target, names))
    return found


def _graph():
    modules = _modules()
    return modules, {name: _imports(name, path, modules) for name, path in modules.items()}


def test_the_package_has_its_modules():
    modules, _ = _graph()
    for expected in ("tiergym.vector", "tiergym.inprocess", "tiergym._shm", "tiergym._native",
                     "tiergym.factory", "tiergym._vector_base"):
        assert expected in modules


def test_no_module_imports_the_package_root():
    _, graph = _graph()
    for name, imports in graph.items():
        if name == PACKAGE:
            continue
        assert all(target != PACKAGE for target, _ in imports), (
            f"{name} imports the package's root (tiergym/__init__.py), which imports everything")


def test_imports_form_no_cycle():
    modules, graph = _graph()
    edges = {name: sorted({t for t, _ in imports if t in modules and t != name})
             for name, imports in graph.items()}
    state = {}  # name -> 1 visiting, 2 done

    def visit(name, path):
        state[name] = 1
        for nxt in edges[name]:
            if state.get(nxt) == 1:
                cycle = path[path.index(nxt):] + [nxt]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if nxt not in state:
                visit(nxt, path + [nxt])
        state[name] = 2

    for name in sorted(edges):
        if name not in state:
            visit(name, [name])


def test_no_private_name_crosses_modules():
    modules, graph = _graph()
    crossing = [f"{name} takes {n} from {target}"
                for name, imports in graph.items() for target, names in imports
                for n in names
                if n.startswith("_") and not n.startswith("__") and f"{target}.{n}" not in modules
                and n != "_core"]
    assert not crossing, "; ".join(crossing)


def test_the_walk_finds_a_cycle_and_a_private_name(tmp_path, monkeypatch):
    """The checks above can fail: a package whose two modules import each other (one of
    them inside a function) and share a private name is caught."""
    pkg = tmp_path / PACKAGE
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from .b import _helper\n")
    (pkg / "b.py").write_text("def f():\n    from . import a\n\n\ndef _helper():\n    pass\n")
    monkeypatch.setattr(tiergym, "__path__", [str(pkg)])
    _fails_with(test_imports_form_no_cycle, "tiergym.a -> tiergym.b -> tiergym.a")
    _fails_with(test_no_private_name_crosses_modules, "tiergym.a takes _helper from tiergym.b")


def _fails_with(check, text):
    try:
        check()
    except AssertionError as e:
        assert text in str(e)
    else:
        raise AssertionError(f"{check.__name__} found nothing; expected {text!r}")

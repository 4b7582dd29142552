"""What the build makes for the package: the extension module tiergym._core
(env/python/_core/: the in-process vector environment, the co-scheduling node and the
shared-memory transport's waits, compiled) and the protocol's generated tables,
tiergym._wire (env/protocol/gen_protocol.py).

load_core() imports it from the package when it is installed there (`pip install .` builds
it with nanobind), else from $TIERGYM_PYTHON_EXT_DIR, $TIERGYM_BIN_DIR/../python/tiergym or
the repository's build tree (CMake with nanobind, TIERGYM_BUILD_PYTHON_EXT, writes it into
build/python/tiergym/, beside _wire.py). It imports nothing else of tiergym: every module
that needs the extension (inprocess, cosched, _shm) finds it here.
"""

import glob
import importlib.util
import os
import pathlib
import sys

_core = None


def _candidate_dirs():
    dirs = []
    if os.environ.get("TIERGYM_PYTHON_EXT_DIR"):
        dirs.append(pathlib.Path(os.environ["TIERGYM_PYTHON_EXT_DIR"]))
    if os.environ.get("TIERGYM_BIN_DIR"):
        dirs.append(pathlib.Path(os.environ["TIERGYM_BIN_DIR"]).parent / "python" / "tiergym")
    dirs.append(pathlib.Path(__file__).resolve().parents[3] / "build" / "python" / "tiergym")
    return dirs


def load_built_module(name, pattern):
    """The module tiergym.NAME from the first of the build directories (_candidate_dirs)
    holding a file matching `pattern`; ImportError says where it was looked for."""
    dirs = _candidate_dirs()
    for d in dirs:
        found = sorted(glob.glob(str(d / pattern)))
        if not found:
            continue
        spec = importlib.util.spec_from_file_location(f"{__package__}.{name}", found[0])
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        sys.modules[f"{__package__}.{name}"] = module
        return module
    raise ImportError(
        f"tiergym.{name} was not found (looked in the package, $TIERGYM_PYTHON_EXT_DIR, "
        f"$TIERGYM_BIN_DIR/../python/tiergym and {dirs[-1]}): `pip install .` builds it, "
        "or CMake into build/python/tiergym/")


def load_core():
    """The extension module tiergym._core; ImportError says where it was looked for."""
    global _core
    if _core is not None:
        return _core
    try:
        from . import _core as module  # installed beside the package
        _core = module
        return _core
    except ImportError:
        pass
    try:
        _core = load_built_module("_core", "_core*.so")
    except ImportError:
        raise ImportError(
            "the in-process extension tiergym._core was not found (looked in the package, "
            "$TIERGYM_PYTHON_EXT_DIR, $TIERGYM_BIN_DIR/../python/tiergym and "
            f"{_candidate_dirs()[-1]}); `pip install .` builds it (nanobind is a build "
            "requirement), or CMake with nanobind: pip install nanobind, then cmake "
            "-DPython_EXECUTABLE=$(which python) ... (TIERGYM_BUILD_PYTHON_EXT)") from None
    return _core


def have_core():
    """Whether the extension can be loaded."""
    try:
        load_core()
        return True
    except ImportError:
        return False

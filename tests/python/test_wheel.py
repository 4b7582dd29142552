"""The binary wheel (scripts/build_wheel.sh: auditwheel from PyPI bundles the shared
libraries) installed with pip's rules into a fresh virtual environment, as on a cluster
without root: the installed server and extension resolve, by ldd, to nothing but the base
system (glibc's libraries, libstdc++, libgcc) and the libraries the wheel carries (none of
Debian's ZeroMQ or Abseil); the environment made from the installed package passes
Gymnasium's check_env, the in-process vector environment steps, and `tiergym serve`
answers. The wheel is built from the compiler cache the test command's setup filled (a
few seconds of linking and packaging)."""

import os
import pathlib
import re
import shutil
import subprocess
import sys
import textwrap

import pytest

from tiergym_testing import REPO

pytestmark = pytest.mark.skipif(shutil.which("ldd") is None, reason="ldd is not installed")

# What a Linux system has without any package of ours: glibc (libc, libm, libpthread,
# libdl, librt, libresolv, the loader, the vDSO), GCC's runtime (libgcc_s) and libstdc++.
BASE = {"linux-vdso.so.1", "ld-linux-x86-64.so.2", "libc.so.6", "libm.so.6",
        "libpthread.so.0", "libdl.so.2", "librt.so.1", "libresolv.so.2", "libgcc_s.so.1",
        "libstdc++.so.6"}


def clean_env(**extra):
    """This process's environment without what would point the installed package at the
    repository (TIERGYM_BIN*, PYTHONPATH) or at a virtual environment."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("TIERGYM_", "PYTHON", "VIRTUAL_ENV", "LD_"))}
    env.update(extra)
    return env


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """The wheel built by the script and installed into a fresh venv: (venv, site, wheel)."""
    root = tmp_path_factory.mktemp("wheel")
    out = subprocess.run([str(REPO / "scripts" / "build_wheel.sh"), "--out", str(root / "dist")],
                         capture_output=True, text=True, timeout=1200,
                         env=dict(os.environ, TIERGYM_WERROR="ON"))  # setup's flags for `test`
    assert out.returncode == 0, out.stdout + out.stderr
    wheels = list((root / "dist").glob("tiergym-*-manylinux_*_x86_64.whl"))
    assert len(wheels) == 1, out.stdout
    venv = root / "venv"
    base = getattr(sys, "_base_executable", sys.executable)
    uv = shutil.which("uv", path=str(pathlib.Path(sys.executable).parent))
    if uv:
        commands = [[uv, "venv", "-q", "--python", base, str(venv)],
                    [uv, "pip", "install", "-q", "--python", str(venv / "bin" / "python"),
                     str(wheels[0])]]
    else:
        commands = [[base, "-m", "venv", str(venv)],
                    [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", str(wheels[0])]]
    for command in commands:
        done = subprocess.run(command, capture_output=True, text=True, timeout=600,
                              env=clean_env(HOME=os.environ.get("HOME", str(root))))
        assert done.returncode == 0, (command, done.stderr)
    site = next((venv / "lib").glob("python3*/site-packages"))
    return venv, site, wheels[0]


def resolved_libraries(path):
    """{library name: the file ldd resolves it to ("not found" when none)}."""
    out = subprocess.run(["ldd", str(path)], capture_output=True, text=True, check=True,
                         env=clean_env()).stdout
    found = {}
    for line in out.splitlines():
        line = line.strip()
        m = re.match(r"(\S+) => (not found|\S+)", line)
        if m:
            where = m.group(2)
            found[m.group(1)] = where if where == "not found" else os.path.realpath(where)
        elif line:
            name = line.split()[0]
            found[pathlib.Path(name).name] = name
    return found


def test_the_installed_server_and_extension_need_only_the_base_system(installed):
    venv, site, wheel = installed
    carried = pathlib.Path(os.path.realpath(site / "tiergym.libs"))
    binaries = [site / "tiergym" / "_bin" / "tiergym", *(site / "tiergym").glob("_core*.so")]
    assert len(binaries) == 2, binaries
    for binary in binaries:
        libraries = resolved_libraries(binary)
        assert "libc.so.6" in libraries
        outside = {name: where for name, where in libraries.items()
                   if name not in BASE and not where.startswith(str(carried) + "/")}
        assert not outside, f"{binary.name} needs libraries of this system: {outside}"
    # What the wheel carries is what the server needs beyond the base: ZeroMQ and Abseil,
    # under names of their own (so that no system copy can stand in for them).
    names = {p.name for p in carried.iterdir()}
    assert any(n.startswith("libzmq-") for n in names), names
    assert any(n.startswith("libabsl_status-") for n in names), names
    server_libraries = resolved_libraries(binaries[0])
    assert any(n.startswith("libzmq-") and w.startswith(str(carried))
               for n, w in server_libraries.items()), server_libraries


def test_the_installed_package_passes_check_env_and_serves(installed, tmp_path):
    venv, site, _ = installed
    code = textwrap.dedent("""
        import gymnasium, numpy as np, tiergym
        from gymnasium.utils.env_checker import check_env
        print("package", tiergym.__file__)
        print("binary", tiergym.find_binary())
        env = gymnasium.make("tiergym/TierPlacement-v1")   # a private `tiergym serve`
        check_env(env.unwrapped, skip_render_check=True)
        env.close()
        with tiergym.VectorEnv(4, inprocess=True, **tiergym.DEFAULT_TASK) as envs:  # the extension
            envs.reset(seed=0)
            obs, rewards, *_ = envs.step(np.zeros((4, 16), dtype=np.int64))
        print("stepped", obs.shape)
        """)
    home = tmp_path / "home"  # the bundled profiles are generated into its cache
    home.mkdir()
    out = subprocess.run([str(venv / "bin" / "python"), "-W", "error::UserWarning", "-c", code],
                         capture_output=True, text=True, timeout=600, cwd=tmp_path,
                         env=clean_env(HOME=str(home)))
    assert out.returncode == 0, out.stderr[-3000:]
    lines = dict(line.split(" ", 1) for line in out.stdout.strip().splitlines())
    assert lines["package"].startswith(str(site)), lines  # the wheel's, not the repository's
    assert lines["binary"] == str(site / "tiergym" / "_bin" / "tiergym")
    assert lines["stepped"] == "(4, 116)"
    version = subprocess.run([str(venv / "bin" / "tiergym"), "--version"], capture_output=True,
                             text=True, timeout=60, env=clean_env(HOME=str(home)))
    assert version.returncode == 0 and version.stdout.startswith("tiergym "), version

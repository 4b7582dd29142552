"""The extension tiergym._core as installed: it links no ZeroMQ and defines none of libc's
functions (the ZMTP guard's accept, accept4, recv and close belong to the `tiergym`
program alone, env/server/zmtp_hooks.cc), so that loading it, even RTLD_GLOBAL, replaces
nothing in the process. tests/layers/check_symbols.sh checks the C++ build's libraries."""

import shutil
import subprocess

import pytest

from tiergym._native import have_core, load_core

LIBC_NAMES = {"accept", "accept4", "recv", "close"}


def _tool(name):
    path = shutil.which(name)
    if path is None:
        pytest.skip(f"{name} (binutils) is not installed")
    return path


@pytest.mark.skipif(not have_core(), reason="the extension tiergym._core is not built")
def test_the_extension_defines_no_libc_function_and_links_no_zeromq():
    path = load_core().__file__
    nm = subprocess.run([_tool("nm"), "-D", "--defined-only", path], check=True,
                        capture_output=True, text=True).stdout
    defined = {line.split()[-1] for line in nm.splitlines() if line.strip()}
    assert not defined & LIBC_NAMES, f"{path} defines {sorted(defined & LIBC_NAMES)}"
    undefined = subprocess.run([_tool("nm"), "-D", "--undefined-only", path], check=True,
                               capture_output=True, text=True).stdout
    assert " zmq_" not in undefined, f"{path} calls ZeroMQ"
    dynamic = subprocess.run([_tool("readelf"), "-d", path], check=True,
                             capture_output=True, text=True).stdout
    assert "libzmq" not in dynamic, f"{path} needs libzmq"

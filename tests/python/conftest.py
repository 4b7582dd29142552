"""What a test process looks like when a ZeroMQ exchange times out.

One fresh-clone run of the suite (2026-11-27, the machine loaded by two trainings) saw every
exchange of one pytest-xdist worker time out from some test on to the end of the run, those
with an in-process fake peer on loopback ipc included, while the other worker passed; reruns
passed. Whatever state that process was in is what is needed to find the cause, so a test
failing on a client timeout gets a report section with it: open file descriptors, the
process's OS threads, the Python threads and every thread's stack.
"""

import faulthandler
import os
import tempfile
import threading

import pytest


def _is_timeout(excinfo):
    if excinfo is None:
        return False
    text = str(excinfo.value)
    return type(excinfo.value).__name__ == "_Timeout" or "no reply from" in text or \
        "where 0 = poll(" in text


def _process_state():
    lines = []
    try:
        fds = os.listdir("/proc/self/fd")
        lines.append(f"open file descriptors: {len(fds)}")
        kinds = {}
        for fd in fds:
            try:
                target = os.readlink(f"/proc/self/fd/{fd}")
            except OSError:
                continue
            kind = target.split(":")[0] if ":" in target else target.rsplit("/", 1)[0]
            kinds[kind] = kinds.get(kind, 0) + 1
        lines.append("  by kind: " + ", ".join(f"{k} {n}" for k, n in
                                               sorted(kinds.items(), key=lambda kv: -kv[1])))
        tasks = os.listdir("/proc/self/task")
        names = []
        for tid in tasks:
            try:
                with open(f"/proc/self/task/{tid}/stat") as f:
                    fields = f.read().split()
                names.append(f"{tid}:{fields[1]}:{fields[2]}")
            except OSError:
                continue
        lines.append(f"OS threads: {len(tasks)}: " + " ".join(names))
    except OSError as e:
        lines.append(f"/proc not readable: {e}")
    try:
        import zmq
        context = zmq.Context.instance()
        sockets = getattr(context, "_sockets", None)
        lines.append(f"pyzmq {zmq.pyzmq_version()}, libzmq {zmq.zmq_version()}: the global "
                     f"context {'closed' if context.closed else 'open'}, "
                     f"{len(sockets) if sockets is not None else 'unknown'} sockets")
    except Exception as e:  # noqa: BLE001 (a report must not fail the report)
        lines.append(f"pyzmq state unreadable: {e!r}")
    lines.append("Python threads: " + ", ".join(
        f"{t.name}{' (daemon)' if t.daemon else ''}" for t in threading.enumerate()))
    with tempfile.TemporaryFile(mode="w+") as f:
        faulthandler.dump_traceback(file=f, all_threads=True)
        f.seek(0)
        lines.append(f.read())
    return "\n".join(lines)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.failed and _is_timeout(call.excinfo):
        report.sections.append(("process state at the timeout", _process_state()))

"""Talking to `tiergym serve`: a DEALER connection with timeouts, and private servers.

A Connection sends one request at a time and waits for the reply with the same id, at most
`timeout` seconds; a late reply to an earlier request that timed out is discarded. When the
connection belongs to a private server (Server), the wait also watches the process, so a
server that dies is reported at once, with the end of its log, instead of after the
timeout. Nothing here ever blocks without a timeout.
"""

import os
import pathlib
import selectors
import shutil
import subprocess
import tempfile
import threading
import time
import weakref

import msgpack
import zmq

from ._protocol import VERSION
from .errors import BinaryNotFound, ProtocolError, ServerError, ServerUnavailable

DEFAULT_TIMEOUT_S = 60.0
DEFAULT_STARTUP_TIMEOUT_S = 300.0


def find_binary():
    """The `tiergym` binary: $TIERGYM_BIN, $TIERGYM_BIN_DIR/tiergym, build/bin/tiergym of the
    repository this package sits in, or `tiergym` on PATH."""
    candidates = []
    if os.environ.get("TIERGYM_BIN"):
        candidates.append(pathlib.Path(os.environ["TIERGYM_BIN"]))
    if os.environ.get("TIERGYM_BIN_DIR"):
        candidates.append(pathlib.Path(os.environ["TIERGYM_BIN_DIR"]) / "tiergym")
    repo = pathlib.Path(__file__).resolve().parents[3]
    candidates.append(repo / "build" / "bin" / "tiergym")
    for c in candidates:
        if c.is_file() and os.access(c, os.X_OK):
            return str(c)
    on_path = shutil.which("tiergym")
    if on_path:
        return on_path
    raise BinaryNotFound(
        "the tiergym binary was not found (looked at $TIERGYM_BIN, $TIERGYM_BIN_DIR/tiergym, "
        f"{repo / 'build' / 'bin' / 'tiergym'} and PATH); build it with ./scripts/build.sh "
        "or set TIERGYM_BIN")


class Server:
    """A private `tiergym serve` on an ipc:// endpoint in a fresh temporary directory.

    Stopped by close() (idempotent), when it is garbage-collected, or at interpreter exit
    (weakref.finalize);
    it also stops by itself when this process is gone (--parent-pid). Extra `serve` options
    go in `args`, e.g. ["--threads", "4", "--profiles", "a/profile,b/profile"].
    """

    def __copy__(self):
        return self  # a handle on one running process: copies share it

    def __deepcopy__(self, memo):
        # gymnasium.make deep-copies its keyword arguments (env.spec.make(), check_env):
        # an environment made with address=server must reach the same server.
        return self

    def __reduce__(self):
        raise TypeError("a tiergym.Server cannot be sent to another process; pass its "
                        "endpoint (server.endpoint) as the address instead")

    def __init__(self, args=(), binary=None, startup_timeout=DEFAULT_STARTUP_TIMEOUT_S):
        self._binary = binary or find_binary()
        self._dir = tempfile.mkdtemp(prefix="tiergym-")
        self.endpoint = None
        self._log_path = os.path.join(self._dir, "server.log")
        args = [str(a) for a in args]
        # A private server is its owner's (its socket is in a 0700 directory): it may read
        # whatever files the owner's configurations name (PROTOCOL.md, data access).
        trust = [] if "--data-dir" in args else ["--data-dir", "/"]
        command = [self._binary, "serve", "--endpoint", f"ipc://{self._dir}/server.sock",
                   "--parent-pid", str(os.getpid()), *trust, *args]
        log = open(self._log_path, "wb")
        try:
            self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=log,
                                            stdin=subprocess.DEVNULL)
        finally:
            log.close()
        self._finalizer = weakref.finalize(self, _stop_process, self.process, self._dir)
        try:
            self.endpoint = self._wait_listening(startup_timeout)
        except BaseException:
            self.close()
            raise

    def _wait_listening(self, timeout):
        deadline = time.monotonic() + timeout
        line = b""
        with selectors.DefaultSelector() as sel:
            sel.register(self.process.stdout, selectors.EVENT_READ)
            while not line.endswith(b"\n"):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise ServerUnavailable(
                        f"tiergym serve did not start within {timeout} s; log: {self.log_tail()}")
                if sel.select(timeout=min(left, 0.2)):
                    chunk = os.read(self.process.stdout.fileno(), 4096)
                    if not chunk:
                        break
                    line += chunk
                elif self.process.poll() is not None:
                    break
        text = line.decode(errors="replace").strip()
        if not text.startswith("listening on "):
            self.process.wait(timeout=10)
            raise ServerUnavailable(
                f"tiergym serve exited with code {self.process.returncode} before serving: "
                f"{self.log_tail()}")
        return text[len("listening on "):]

    def alive(self):
        return self.process.poll() is None

    def log_tail(self, lines=5):
        try:
            with open(self._log_path, "rb") as f:
                tail = f.read().decode(errors="replace").strip().splitlines()[-lines:]
            return " | ".join(tail) if tail else "(empty log)"
        except OSError:
            return "(no log)"

    def close(self):
        """Stops the server (SIGTERM, then SIGKILL after 10 s). Idempotent."""
        self._finalizer()


def _stop_process(process, directory):
    try:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)
        if process.stdout is not None:
            process.stdout.close()
    finally:
        shutil.rmtree(directory, ignore_errors=True)


class Connection:
    """One DEALER connection to a server; `server` (a Server) is watched while waiting."""

    def __init__(self, endpoint, timeout=DEFAULT_TIMEOUT_S, server=None):
        self.endpoint = endpoint
        self.timeout = float(timeout)
        self._server = server
        # The process-wide context, never terminated: zmq_ctx_term waits for every socket
        # of its context and, with a peer that vanished, was seen to wait forever.
        self._socket = zmq.Context.instance().socket(zmq.DEALER)
        self._socket.setsockopt(zmq.LINGER, 0)
        self._socket.connect(endpoint)
        self._next_id = 1
        self._lock = threading.Lock()
        self.hello = self.call("hello")
        if self.hello["protocol"] != VERSION:
            self.close()
            raise ServerUnavailable(f"{endpoint} speaks protocol version "
                                    f"{self.hello['protocol']}; this client speaks {VERSION}")

    def call(self, op, timeout=None, **fields):
        """Sends a request and returns the reply map; ServerError for an error reply,
        ServerUnavailable when no reply comes in time or the private server died."""
        if self._socket is None:
            raise ServerUnavailable("the connection is closed")
        timeout = self.timeout if timeout is None else timeout
        with self._lock:
            request_id = self._next_id
            self._next_id += 1
            self._socket.send(msgpack.packb({"v": VERSION, "op": op, "id": request_id, **fields},
                                            use_bin_type=True))
            deadline = time.monotonic() + timeout
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise ServerUnavailable(
                        f"no reply from {self.endpoint} within {timeout} s (op {op}); is the "
                        "server running?")
                if self._socket.poll(timeout=int(min(left, 0.1) * 1000) + 1, flags=zmq.POLLIN):
                    raw = self._socket.recv()
                    try:
                        reply = msgpack.unpackb(raw, raw=False)
                    except (ValueError, msgpack.UnpackException) as e:
                        raise ProtocolError(f"{self.endpoint} sent a reply that is not a "
                                            f"protocol message ({e}) (op {op})") from None
                    if not isinstance(reply, dict):
                        raise ProtocolError(f"{self.endpoint} sent a reply that is not a map "
                                            f"(op {op})")
                    if reply.get("id") != request_id:
                        continue  # a late reply to a request that timed out
                    if not reply.get("ok"):
                        e = reply["error"]
                        raise ServerError(e["code"], e["field"], e["message"])
                    return reply
                if self._server is not None and not self._server.alive():
                    raise ServerUnavailable(
                        f"the tiergym server (pid {self._server.process.pid}) exited with code "
                        f"{self._server.process.returncode} (op {op}); its log: "
                        f"{self._server.log_tail()}")

    def close(self):
        if self._socket is not None:
            self._socket.close(linger=0)
            self._socket = None


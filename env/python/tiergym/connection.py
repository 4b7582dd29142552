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
import socket
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
CONNECT_TIMEOUT_S = 10.0  # a tcp connection that is neither accepted nor refused by then fails


def _package_binary():
    """The server binary installed inside this package (tiergym/_bin/tiergym), or None.
    An editable install keeps the sources elsewhere: its RECORD says where the binary went."""
    here = pathlib.Path(__file__).resolve().parent / "_bin" / "tiergym"
    if here.is_file():
        return here
    try:
        from importlib import metadata
        for f in metadata.files("tiergym") or ():
            if f.parts[-2:] == ("_bin", "tiergym"):
                return pathlib.Path(f.locate()).resolve()
    except Exception:  # not installed (a source checkout on sys.path)
        pass
    return None


def find_binary(use_path=True):
    """The `tiergym` server binary: $TIERGYM_BIN, $TIERGYM_BIN_DIR/tiergym (overrides for
    developers), the one installed inside this package, or (use_path) `tiergym` on PATH."""
    candidates = []
    if os.environ.get("TIERGYM_BIN"):
        candidates.append(pathlib.Path(os.environ["TIERGYM_BIN"]))
    if os.environ.get("TIERGYM_BIN_DIR"):
        candidates.append(pathlib.Path(os.environ["TIERGYM_BIN_DIR"]) / "tiergym")
    installed = _package_binary()
    if installed is not None:
        candidates.append(installed)
    for c in candidates:
        if c.is_file() and os.access(c, os.X_OK):
            return str(c)
    on_path = shutil.which("tiergym") if use_path else None
    if on_path:
        return on_path
    raise BinaryNotFound(
        "the tiergym server binary was not found: looked at $TIERGYM_BIN, "
        "$TIERGYM_BIN_DIR/tiergym, the package (tiergym/_bin/tiergym)"
        + (" and PATH" if use_path else "") + "; install the package with "
        "`pip install .` from the repository (it builds the binary) or set TIERGYM_BIN")


def normalize_endpoint(address):
    """A ZeroMQ endpoint from what a user may type: "tcp://h:p" and "ipc://path" as they are,
    "host:port" and "port" as tcp. Anything else is a ValueError that says what is expected."""
    text = str(address).strip()
    if text.startswith(("tcp://", "ipc://")):
        return text
    if "://" in text:
        raise ValueError(f"address {text!r}: the protocol must be tcp:// or ipc://")
    host, sep, port = text.rpartition(":")
    if not sep:
        host, port = "127.0.0.1", text
    if not port.isdigit() or not 0 < int(port) < 65536 or (sep and not host):
        raise ValueError(f"address {text!r} is not an endpoint: expected tcp://HOST:PORT, "
                         "ipc://PATH or HOST:PORT")
    return f"tcp://{host}:{port}"


def _check_reachable(endpoint, timeout):
    """Fails at once when nothing can serve `endpoint`: an ipc socket file that does not
    exist, or a tcp port that refuses connections (ZeroMQ alone would retry in silence until
    the request timeout)."""
    if endpoint.startswith("ipc://"):
        path = endpoint[len("ipc://"):]
        if not path.startswith("@") and not os.path.exists(path):
            raise ServerUnavailable(f"no tiergym server at {endpoint}: {path} does not exist")
        return
    host, _, port = endpoint[len("tcp://"):].rpartition(":")
    host = host.strip("[]")
    if host == "*" or not port.isdigit():
        return  # let ZeroMQ report it
    try:
        socket.create_connection((host, int(port)), timeout=timeout).close()
    except socket.gaierror as e:
        raise ServerUnavailable(f"no tiergym server at {endpoint}: unknown host {host!r} "
                                f"({e.strerror})") from None
    except ConnectionRefusedError:
        raise ServerUnavailable(f"no tiergym server at {endpoint}: connection refused (is "
                                "`tiergym serve` running there, on that port?)") from None
    except OSError as e:  # timeout, unreachable network
        raise ServerUnavailable(f"no tiergym server at {endpoint}: {e}") from None


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
        # Sent to another process (AsyncVectorEnv, Ray, multiprocessing) a server handle is
        # its endpoint: environments made there connect to this same server.
        return (str, (self.endpoint,))

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
        endpoint = self.endpoint = normalize_endpoint(endpoint)
        if server is None:
            _check_reachable(endpoint, min(self.timeout, CONNECT_TIMEOUT_S))
        self._socket = zmq.Context.instance().socket(zmq.DEALER)
        self._socket.setsockopt(zmq.LINGER, 0)
        self._socket.connect(endpoint)
        self._next_id = 1
        self._lock = threading.Lock()
        # hello is answered at once by any tiergym server, busy or not: a peer that stays
        # silent this long is not one (or not there).
        self.hello = self.call("hello", timeout=min(self.timeout, CONNECT_TIMEOUT_S))
        if self.hello["protocol"] != VERSION:
            self.close()
            raise ServerUnavailable(f"{endpoint} speaks protocol version "
                                    f"{self.hello['protocol']}; this client speaks {VERSION}")

    def call(self, op, timeout=None, **fields):
        """Sends a request and returns the reply map; ServerError for an error reply,
        ServerUnavailable when no reply comes in time or the private server died."""
        return self.call_signalled(op, None, timeout, **fields)

    def call_signalled(self, op, ready, timeout=None, **fields):
        """call() for a request that is answered only when it fails (step_batch with
        shm_signal): ready(seconds) waits up to that long for the success signal and says
        whether it came; then None is returned. ready=None: an ordinary call()."""
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
                if ready is not None:
                    # The signal, and now and then the socket (where an error arrives).
                    if ready(min(left, 0.002)):
                        return None
                    poll_ms = 0
                else:
                    poll_ms = int(min(left, 0.1) * 1000) + 1
                if self._socket.poll(timeout=poll_ms, flags=zmq.POLLIN):
                    reply = self._read_reply(op)
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

    def _read_reply(self, op):
        raw = self._socket.recv()
        try:
            reply = msgpack.unpackb(raw, raw=False)
        except (ValueError, msgpack.UnpackException) as e:
            raise ProtocolError(f"{self.endpoint} sent a reply that is not a "
                                f"protocol message ({e}) (op {op})") from None
        if not isinstance(reply, dict):
            raise ProtocolError(f"{self.endpoint} sent a reply that is not a map (op {op})")
        return reply

    def close(self):
        if self._socket is not None:
            self._socket.close(linger=0)
            self._socket = None


def open_connection(address, timeout, server_args):
    """(connection, private server or None) for an address, a Server, or None."""
    if address is None:
        server = Server(args=server_args)
        try:
            return Connection(server.endpoint, timeout, server=server), server
        except BaseException:
            server.close()
            raise
    if isinstance(address, Server):
        return Connection(address.endpoint, timeout, server=address), None
    return Connection(str(address), timeout), None


def close_connection(connection, server, sessions):
    """Closes `sessions` on the server (when it is still there), then the connection and a
    private server. Stops at the first session that cannot be closed: the server is gone
    or has reclaimed it."""
    try:
        if connection is not None and (server is None or server.alive()):
            for session in sessions:
                try:
                    connection.call("close", timeout=5, session=session)
                except Exception:  # the server is gone or the session was reclaimed
                    break
    finally:
        if connection is not None:
            connection.close()
        if server is not None:
            server.close()

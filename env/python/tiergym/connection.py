"""Talking to `tiergym serve`: a DEALER connection with timeouts, and private servers.

A Connection sends one request at a time and waits for the reply with the same id, at most
`timeout` seconds; a late reply to an earlier request that timed out is discarded. While it
waits it watches the connection (a ZeroMQ socket monitor: a closed connection, a failed
handshake) and, for a private server (Server), the process, so a server that dies is
reported at once, with the end of its log, instead of after the timeout. Nothing here ever
blocks without a timeout.

CURVE (`curve=`): the connection is authenticated and encrypted with ZeroMQ's CURVE
mechanism (libzmq's, through pyzmq; keys from `tiergym keygen`), for a server started with
`--curve-key`; see curve_keys().

Reconnection (`reconnect=`, off by default; see Reconnect): when the connection is lost,
the request that noticed waits for a server at the same endpoint (a private server is
started again there), makes every session of this connection again with its configuration
(the handles the caller holds keep working) and then either repeats the request (hello,
list, stats, make, reset, estimate, close, cosched_make, cosched_reset: nothing of an
episode is lost by doing them again) or raises EpisodeInterrupted (step, step_batch,
cosched_step: the episode was cut), which the environments turn into a truncated step.
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
from .errors import (BinaryNotFound, EpisodeInterrupted, NotAuthorized, ProtocolError, ServerError,
                     ServerUnavailable)

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


class Reconnect:
    """How a client carries on when its server goes away (reconnect=True, a dict of these
    fields, or a Reconnect; None or False: not at all, the default).

    The request that notices the loss (the connection closed, the handshake failed, a
    private server's process exited, or a reply saying a session is unknown right after a
    disconnection) waits for a server at the same endpoint for up to `give_up_after_s`
    seconds (libzmq retries connecting, the pause between attempts doubling from 0.1 s up
    to `max_backoff_s`; a private server is started again, at the same endpoint, the same
    way), then makes every session of the connection again with its configuration. When no
    server answers in time the request raises ServerUnavailable saying so; a server that
    refuses this client's CURVE key, speaks another protocol version, or gives the sessions
    other spaces than before ends it at once.

    Off by default: an interrupted episode changes what an evaluation measures, so carrying
    on must be asked for; a training run asks for it with one argument."""

    def __init__(self, give_up_after_s=60.0, max_backoff_s=5.0):
        self.give_up_after_s = float(give_up_after_s)
        self.max_backoff_s = float(max_backoff_s)
        if self.give_up_after_s <= 0 or self.max_backoff_s <= 0:
            raise ValueError(f"Reconnect: give_up_after_s and max_backoff_s must be positive, "
                             f"got {give_up_after_s} and {max_backoff_s}")

    @classmethod
    def of(cls, value):
        """A Reconnect from what `reconnect=` takes, or None for "do not"."""
        if value is None or value is False:
            return None
        if value is True:
            return cls()
        if isinstance(value, cls):
            return value
        if isinstance(value, dict):
            return cls(**value)
        raise TypeError(f"reconnect: expected True, False, None, a dict or a "
                        f"tiergym.Reconnect, got {value!r}")

    def __repr__(self):
        return (f"Reconnect(give_up_after_s={self.give_up_after_s}, "
                f"max_backoff_s={self.max_backoff_s})")


def _curve_key(value, what):
    """A Z85 key (bytes) from a key or the path of a certificate holding it."""
    if isinstance(value, bytes):
        value = value.decode("ascii", errors="replace")
    text = str(value)
    if len(text) == 40 and not os.path.exists(text):
        import zmq.utils.z85
        try:
            zmq.utils.z85.decode(text)
            return text.encode()
        except (ValueError, KeyError, IndexError):
            pass
    import zmq.auth
    path = os.path.expanduser(text)
    try:
        public, secret = zmq.auth.load_certificate(path)
    except (OSError, ValueError) as e:
        raise ValueError(f"curve {what}: {text!r} is neither a Z85 key (40 characters) nor a "
                         f"certificate file ({e})") from None
    return public, secret, path


def curve_keys(curve):
    """(server public key, client public key, client secret key), Z85 bytes, from `curve=`:
    a dict {"server_key": the server's public key or public certificate (NAME.key),
    "key": this client's secret certificate (NAME.key_secret from `tiergym keygen`)} or
    {"server_key": ..., "public_key": ..., "secret_key": ...} with Z85 keys. A secret
    certificate must be private to its owner (mode 0600), as the server's is: ValueError
    otherwise, saying how to fix it."""
    if not isinstance(curve, dict):
        raise TypeError(f"curve: expected a dict with server_key and key (or public_key and "
                        f"secret_key), got {type(curve).__name__}")
    unknown = set(curve) - {"server_key", "key", "public_key", "secret_key"}
    if unknown or "server_key" not in curve:
        raise ValueError(f"curve: takes server_key and key (or public_key and secret_key); "
                         f"got {sorted(curve)}")
    if not zmq.has("curve"):
        raise ValueError("curve: this pyzmq's libzmq has no CURVE")
    server = _curve_key(curve["server_key"], "server_key")
    server = server if isinstance(server, bytes) else server[0]
    if "key" in curve:
        if "public_key" in curve or "secret_key" in curve:
            raise ValueError("curve: give either key (a certificate) or public_key and secret_key")
        loaded = _curve_key(curve["key"], "key")
        if isinstance(loaded, bytes) or loaded[1] is None:
            raise ValueError(f"curve key: {curve['key']!r} holds no secret key: give this "
                             "client's secret certificate (NAME.key_secret from tiergym keygen)")
        public, secret, path = loaded
        st = os.stat(path)
        if st.st_uid != os.geteuid() or st.st_mode & 0o077:
            raise ValueError(f"curve key: {path} must be its owner's alone (it is mode "
                             f"{st.st_mode & 0o7777:04o}, owner uid {st.st_uid}): chmod 600 "
                             f"{path}, and make a new key pair if others may have read it")
        return server, public, secret
    if "public_key" not in curve or "secret_key" not in curve:
        raise ValueError("curve: needs key (a secret certificate) or public_key and secret_key")
    keys = []
    for name in ("public_key", "secret_key"):
        k = _curve_key(curve[name], name)
        if not isinstance(k, bytes):
            raise ValueError(f"curve {name}: expected a Z85 key (40 characters)")
        keys.append(k)
    return server, keys[0], keys[1]


class Server:
    """A private `tiergym serve` on an ipc:// endpoint in a fresh temporary directory.

    Stopped by close() (idempotent), when it is garbage-collected, or at interpreter exit
    (weakref.finalize);
    it also stops by itself when this process is gone (--parent-pid). Extra `serve` options
    go in `args`, e.g. ["--threads", "4", "--profiles", "a/profile,b/profile"].
    ensure_running() starts it again, at the same endpoint, when it has died (what a
    reconnecting Connection does).
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
        self._startup_timeout = startup_timeout
        self._lock = threading.Lock()
        self.restarts = 0  # times ensure_running() started it again
        args = [str(a) for a in args]
        # A private server is its owner's (its socket is in a 0700 directory): it may read
        # whatever files the owner's configurations name (PROTOCOL.md, data access).
        trust = [] if "--data-dir" in args else ["--data-dir", "/"]
        self._command = [self._binary, "serve", "--endpoint", f"ipc://{self._dir}/server.sock",
                         "--parent-pid", str(os.getpid()), *trust, *args]
        self._box = [None]  # the process, shared with the finalizer (restarts replace it)
        self._finalizer = weakref.finalize(self, _stop_process, self._box, self._dir)
        try:
            self._start()
        except BaseException:
            self.close()
            raise

    @property
    def process(self):
        return self._box[0]

    def _start(self):
        log = open(self._log_path, "ab")
        try:
            self._box[0] = subprocess.Popen(self._command, stdout=subprocess.PIPE, stderr=log,
                                            stdin=subprocess.DEVNULL)
        finally:
            log.close()
        self.endpoint = self._wait_listening(self._startup_timeout)

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
        return self.process is not None and self.process.poll() is None

    def ensure_running(self):
        """Starts the server again, at the same endpoint, when its process has exited (and
        the server is not closed); returns the endpoint. ServerUnavailable when the new
        process does not start. Thread-safe: connections sharing this server restart it
        once."""
        with self._lock:
            if not self._finalizer.alive:
                raise ServerUnavailable("the private tiergym server was closed")
            if self.alive():
                return self.endpoint
            old = self.process
            if old is not None and old.stdout is not None:
                old.stdout.close()
            with open(self._log_path, "ab") as log:
                log.write(f"tiergym (client): the server (pid {old.pid if old else '?'}) "
                          f"exited with code {old.returncode if old else '?'}; starting it "
                          "again\n".encode())
            self.restarts += 1
            self._start()
            return self.endpoint

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


def _stop_process(box, directory):
    process = box[0]
    try:
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)
        if process is not None and process.stdout is not None:
            process.stdout.close()
    finally:
        shutil.rmtree(directory, ignore_errors=True)


class _Lost(Exception):
    """The connection is lost (internal: turned into ServerUnavailable, NotAuthorized or a
    reconnection)."""

    def __init__(self, reason, refused=False):
        super().__init__(reason)
        self.reason = reason
        self.refused = refused


_MONITOR_EVENTS = (zmq.EVENT_DISCONNECTED | zmq.EVENT_HANDSHAKE_SUCCEEDED
                   | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
                   | zmq.EVENT_HANDSHAKE_FAILED_AUTH | zmq.EVENT_CONNECT_RETRIED)
# Requests done again after a reconnection (nothing of an episode is lost by that); the
# others (step, step_batch, cosched_step) raise EpisodeInterrupted.
_REPEATED = frozenset({"hello", "list", "stats", "make", "reset", "estimate", "close",
                       "cosched_make", "cosched_reset"})
_MAKES = ("make", "cosched_make")
# How often a wait looks at the monitor and the private server's process.
_CHECK_EVERY_S = 0.1


class Connection:
    """One DEALER connection to a server; `server` (a Server) is watched while waiting.
    `curve`: CURVE keys (see curve_keys()); `reconnect`: see Reconnect."""

    def __init__(self, endpoint, timeout=DEFAULT_TIMEOUT_S, server=None, curve=None,
                 reconnect=None):
        self.timeout = float(timeout)
        self._server = server
        self._curve = curve_keys(curve) if curve is not None else None
        self.reconnect = Reconnect.of(reconnect)
        self._socket = self._monitor = None
        self._lock = threading.Lock()
        self._next_id = 1
        # Sessions made on this connection, to make again after a reconnection (only with
        # `reconnect`): the handle the caller holds -> [op, fields, spaces, current id].
        self._sessions = {}
        self._moved = False  # a session's id on the server is no longer its handle
        self._lost = None  # why the connection was lost, when it is not made again
        self.reconnections = 0
        # Environments whose sessions live on this connection (share(), close_connection):
        # an environment and its forks, since a session belongs to the connection that
        # made it. The last one to go closes the connection (and the private server).
        self._users = 1
        endpoint = self.endpoint = normalize_endpoint(endpoint)
        if server is None:
            _check_reachable(endpoint, min(self.timeout, CONNECT_TIMEOUT_S))
        self._open()
        # hello is answered at once by any tiergym server, busy or not: a peer that stays
        # silent this long is not one (or not there).
        self.hello = self.call("hello", timeout=min(self.timeout, CONNECT_TIMEOUT_S))
        if self.hello["protocol"] != VERSION:
            self.close()
            raise ServerUnavailable(f"{endpoint} speaks protocol version "
                                    f"{self.hello['protocol']}; this client speaks {VERSION}")

    def _open(self):
        # The process-wide context, never terminated: zmq_ctx_term waits for every socket
        # of its context and, with a peer that vanished, was seen to wait forever.
        s = zmq.Context.instance().socket(zmq.DEALER)
        s.setsockopt(zmq.LINGER, 0)
        if self._curve is not None:
            s.curve_serverkey, s.curve_publickey, s.curve_secretkey = self._curve
        if self.reconnect is not None:
            # A server whose node vanished without closing the connection is noticed too.
            s.setsockopt(zmq.HEARTBEAT_IVL, 2000)
            s.setsockopt(zmq.HEARTBEAT_TIMEOUT, 6000)
            s.setsockopt(zmq.RECONNECT_IVL_MAX, int(self.reconnect.max_backoff_s * 1000))
        self._monitor = s.get_monitor_socket(_MONITOR_EVENTS)
        self._handshaken = False
        self._retries = 0  # attempts to connect that failed (libzmq retries by itself)
        s.connect(self.endpoint)
        self._socket = s

    def _close_socket(self):
        if self._socket is not None:
            try:
                self._socket.disable_monitor()
            except zmq.ZMQError:
                pass
            self._monitor.close(linger=0)
            self._socket.close(linger=0)
            self._socket = self._monitor = None

    def _check_lost(self):
        """Raises _Lost when the monitor reported the connection closed or its handshake
        failed, or the private server's process exited."""
        server = self._server
        if server is not None and not server.alive():
            raise _Lost(f"the tiergym server (pid {server.process.pid}) exited with code "
                        f"{server.process.returncode}; its log: {server.log_tail()}")
        from zmq.utils.monitor import parse_monitor_message
        lost = None
        while self._monitor.poll(0):
            event = parse_monitor_message(self._monitor.recv_multipart())
            what, value = event["event"], event["value"]
            if what == zmq.EVENT_HANDSHAKE_SUCCEEDED:
                self._handshaken = True
            elif what == zmq.EVENT_CONNECT_RETRIED:
                self._retries += 1
            elif what == zmq.EVENT_HANDSHAKE_FAILED_AUTH:
                lost = lost or _Lost(
                    f"the server at {self.endpoint} refused this client's CURVE key (status "
                    f"{value}): add its public certificate (NAME.key) to the server's "
                    "--curve-clients", refused=True)
            elif what == zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL:
                mismatch = value == getattr(zmq, "PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH",
                                            0x11000002)
                lost = lost or _Lost(
                    f"the server at {self.endpoint} and this client disagree on CURVE (one "
                    "side uses it, the other not: curve= here, --curve-key there)"
                    if mismatch else
                    f"the handshake with {self.endpoint} failed (protocol error {value:#x})",
                    refused=mismatch)
            elif what == zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL:
                lost = lost or _Lost(
                    f"the handshake with {self.endpoint} failed "
                    + ("(with CURVE: is curve's server_key the server's public key, and this "
                       "client's key in its --curve-clients?)" if self._curve is not None else
                       "(does the server require CURVE? then pass curve=)"))
            elif what == zmq.EVENT_DISCONNECTED:
                lost = lost or _Lost(
                    f"the connection to {self.endpoint} was closed (the server went away)"
                    if self._handshaken else
                    f"the connection to {self.endpoint} was closed during the handshake "
                    "(the server is full: --max-connections; or, with CURVE, curve's "
                    "server_key is not the server's public key)")
        if lost is not None:
            raise lost

    def call(self, op, timeout=None, **fields):
        """Sends a request and returns the reply map; ServerError for an error reply,
        ServerUnavailable when no reply comes in time or the server is gone (with
        `reconnect`: EpisodeInterrupted for a step whose connection was made again),
        NotAuthorized when a CURVE server refuses this client."""
        return self.call_signalled(op, None, timeout, **fields)

    def call_signalled(self, op, ready, timeout=None, **fields):
        """call() for a request that is answered only when it fails (step_batch with
        shm_signal): ready(seconds) waits up to that long for the success signal and says
        whether it came; then None is returned. ready=None: an ordinary call()."""
        if self._lost is not None:
            raise ServerUnavailable(f"{self._lost} (op {op}, earlier); the sessions of this "
                                    "connection are gone with it")
        if self._socket is None:
            raise ServerUnavailable("the connection is closed")
        timeout = self.timeout if timeout is None else timeout
        with self._lock:
            try:
                return self._exchange(op, ready, timeout, fields)
            except _Lost as lost:
                return self._after_loss(op, ready, timeout, fields, lost)

    def check(self):
        """Raises when the connection is known to be lost (a wait that sends no message,
        as a step through a shared-memory segment, calls it): EpisodeInterrupted once it is
        made again (reconnect), ServerUnavailable or NotAuthorized otherwise."""
        with self._lock:
            if self._lost is not None:
                raise ServerUnavailable(f"{self._lost} (earlier)")
            if self._socket is None:
                raise ServerUnavailable("the connection is closed")
            try:
                self._check_lost()
            except _Lost as lost:
                self._after_loss("step", None, self.timeout, {}, lost)

    def _after_loss(self, op, ready, timeout, fields, lost):
        if lost.refused:
            raise NotAuthorized(lost.reason) from None
        if self.reconnect is None:
            self._lost = lost.reason
            if not hasattr(self, "hello"):  # connecting: there are no sessions yet
                raise ServerUnavailable(f"{lost.reason} (op {op})") from None
            raise ServerUnavailable(f"{lost.reason} (op {op}); the sessions of this connection "
                                    "are gone with it (reconnect=True carries on)") from None
        for _ in range(3):  # lost again while repeating the request: at most so often
            self._reconnect(lost.reason)
            if op not in _REPEATED:
                raise EpisodeInterrupted(lost.reason) from None
            try:
                return self._exchange(op, ready, timeout, fields)
            except _Lost as again:
                if again.refused:
                    raise NotAuthorized(again.reason) from None
                lost = again
        raise ServerUnavailable(f"{lost.reason} (op {op}; lost 3 times in a row)") from None

    def _reconnect(self, reason):
        """A new connection to the endpoint (a private server started again), hello, and
        every session made again; ServerUnavailable (or NotAuthorized) when that fails."""
        policy = self.reconnect
        deadline = time.monotonic() + policy.give_up_after_s
        attempts, pause, last = 0, 0.1, reason
        while True:
            if self._socket is not None:
                attempts += self._retries
            self._close_socket()
            left = deadline - time.monotonic()
            if left <= 0:
                break
            attempts += 1
            try:
                if self._server is not None:
                    self._server.ensure_running()
                self._open()
                hello = self._exchange("hello", None, left, {})
                if hello["protocol"] != VERSION:
                    raise ServerUnavailable(
                        f"reconnected to {self.endpoint}, which speaks protocol version "
                        f"{hello['protocol']}; this client speaks {VERSION}")
                self._remake()
            except _Lost as lost:
                if lost.refused:
                    raise NotAuthorized(lost.reason) from None
                last = lost.reason
            except _Timeout as e:
                last = str(e)
                break
            except ServerUnavailable as e:
                if self._server is None or not str(e).startswith("tiergym serve"):
                    raise
                last = str(e)  # the private server did not start: again, after a pause
            else:
                self.hello = hello
                self.reconnections += 1
                return
            time.sleep(max(0.0, min(pause, deadline - time.monotonic())))
            pause = min(2 * pause, policy.max_backoff_s)
        if self._socket is not None:
            attempts += self._retries
            self._close_socket()
        self._lost = (f"{self.endpoint}: no tiergym server came back within "
                      f"{policy.give_up_after_s} s ({attempts} attempts to connect) after: "
                      f"{reason}")
        raise ServerUnavailable(f"{self._lost} (last: {last})")

    def _remake(self):
        for handle, entry in self._sessions.items():
            op, fields, spaces, _ = entry
            try:
                reply = self._exchange(op, None, self.timeout, dict(fields), register=False)
            except ServerError as e:
                raise ServerUnavailable(
                    f"reconnected to {self.endpoint}, but making session {handle} again "
                    f"failed: {e}") from None
            if (reply["spec"]["observation"], reply["spec"]["action"]) != spaces:
                raise ServerUnavailable(
                    f"reconnected to {self.endpoint}, but session {handle} made again has "
                    "other spaces (another server, serving something else?)")
            entry[3] = reply["session"]
        self._moved = bool(self._sessions)

    def _current(self, fields):
        """`fields` with the sessions' ids on the server now."""
        fields = dict(fields)
        session = fields.get("session")
        if isinstance(session, str) and session in self._sessions:
            fields["session"] = self._sessions[session][3]
        sessions = fields.get("sessions")
        if isinstance(sessions, list):
            fields["sessions"] = [self._sessions[s][3] if s in self._sessions else s
                                  for s in sessions]
        return fields

    def _exchange(self, op, ready, timeout, fields, register=True):
        """One request and its reply (the caller holds the lock); _Lost when the connection
        is lost while waiting, _Timeout when no reply comes in time."""
        wire = self._current(fields) if self._moved else fields
        request_id = self._next_id
        self._next_id += 1
        self._socket.send(msgpack.packb({"v": VERSION, "op": op, "id": request_id, **wire},
                                        use_bin_type=True))
        deadline = time.monotonic() + timeout
        next_check = time.monotonic() + _CHECK_EVERY_S
        while True:
            now = time.monotonic()
            left = deadline - now
            if left <= 0:
                self._check_lost()
                raise _Timeout(f"no reply from {self.endpoint} within {timeout} s (op {op}); "
                               "is the server running?")
            if ready is not None:
                # The signal, and now and then the socket (where an error arrives).
                if ready(min(left, 0.002)):
                    return None
                poll_ms = 0
            else:
                poll_ms = int(min(left, _CHECK_EVERY_S) * 1000) + 1
            if self._socket.poll(timeout=poll_ms, flags=zmq.POLLIN):
                reply = self._read_reply(op)
                if reply.get("id") != request_id:
                    continue  # a late reply to a request that timed out
                if not reply.get("ok"):
                    e = reply["error"]
                    if e.get("code") == "NOT_FOUND":
                        # A server that does not know the session: maybe a new one, which
                        # libzmq reconnected this socket to after the old one went.
                        self._check_lost()
                    raise ServerError(e["code"], e["field"], e["message"])
                if register and self.reconnect is not None:
                    self._track(op, fields, reply)
                return reply
            if ready is None or time.monotonic() >= next_check:
                self._check_lost()
                next_check = time.monotonic() + _CHECK_EVERY_S

    def _track(self, op, fields, reply):
        if op in _MAKES:
            spec = reply["spec"]
            self._sessions[reply["session"]] = [op, dict(fields),
                                                (spec["observation"], spec["action"]),
                                                reply["session"]]
        elif op == "fork" and fields.get("session") in self._sessions:
            # Made again as its original is (a new session of its configuration): its
            # episode is lost with the connection, as every episode of the connection is.
            made_by, made_with, spaces, _ = self._sessions[fields["session"]]
            self._sessions[reply["session"]] = [made_by, made_with, spaces, reply["session"]]
        elif op == "close":
            self._sessions.pop(fields.get("session"), None)

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
        self._close_socket()

    def share(self):
        """Counts one more environment using this connection (a fork's: its session lives
        here); close_connection() closes the connection when the last one goes."""
        with self._lock:
            if self._socket is None:
                raise ServerUnavailable("the connection is closed")
            self._users += 1
        return self

    def _release(self):
        """One environment fewer; True when it was the last (close the connection)."""
        with self._lock:
            self._users -= 1
            return self._users <= 0


class _Timeout(ServerUnavailable):
    """No reply in time (a ServerUnavailable)."""


def open_connection(address, timeout, server_args, curve=None, reconnect=None, machine=None):
    """(connection, private server or None) for an address, a Server, or None; `curve` and
    `reconnect` as Connection takes them (CURVE only for a server given by address: a
    private server is reached through a socket only its owner can open). A private server
    for a configuration naming a machine preset (`machine`, e.g. "ddr5cxl") serves the
    bundled profiles recorded on that machine (`tiergym serve --machine`), unless
    server_args say otherwise."""
    if address is None:
        if curve is not None:
            raise ValueError("curve= is for a server given by address; a private server "
                             "needs none (its socket is in a directory only you can open)")
        server_args = list(server_args)
        if (isinstance(machine, str) and machine not in ("", "knl")
                and not any(c in machine for c in "/.") and "--machine" not in server_args):
            server_args += ["--machine", machine]
        server = Server(args=server_args)
        try:
            return Connection(server.endpoint, timeout, server=server,
                              reconnect=reconnect), server
        except BaseException:
            server.close()
            raise
    if isinstance(address, Server):
        return Connection(address.endpoint, timeout, server=address, curve=curve,
                          reconnect=reconnect), None
    return Connection(str(address), timeout, curve=curve, reconnect=reconnect), None


def close_connection(connection, server, sessions):
    """Closes `sessions` on the server (when it is still there), then, unless other
    environments still use them (forks: Connection.share), the connection and a private
    server. Stops at the first session that cannot be closed: the server is gone or has
    reclaimed it."""
    last = True
    try:
        if connection is not None and (server is None or server.alive()):
            for session in sessions:
                try:
                    connection.call("close", timeout=5, session=session)
                except Exception:  # the server is gone or the session was reclaimed
                    break
    finally:
        if connection is not None:
            last = connection._release()
            if last:
                connection.close()
        if server is not None and last:
            server.close()

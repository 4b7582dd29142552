"""step_batch results through shared memory (env/PROTOCOL.md, "Shared memory"), client side.

The server writes a batch's arrays into a POSIX shared-memory segment and replies with its
number only; SharedResults maps the segment once (read-only, from the name the reply that
made it gave) and hands the arrays out as numpy views, without a copy, in the layout and
dtypes tiergym.VectorEnv gives from replies (decode_info_columns). A view is overwritten
by the next batch written to the segment; copy=True gives fresh arrays instead. When the
server offers it, the client waits for a batch on the segment's seq word (a futex the server
wakes) instead of for a reply: wait() and announced().

Requests through the segment (PROTOCOL.md "Requests through the segment"): when the reply
that made the segment says `requests`, the segment is mapped read-write and request() writes
a batch's actions, resets and autoreset mode into its request area, bumps the request number
and wakes the server's thread of that segment (a futex); the server answers through the seq
word as above, with an error written into the segment instead of a reply. No message at all.
The client's stores reach the server in program order only where the processor keeps them
so (x86-64): elsewhere requests keep travelling as messages (requests_supported()).
"""

import ctypes
import ipaddress
import mmap
import os
import platform
import time

import numpy as np

from ._native import load_core
from ._protocol import (DTYPES, INFO_ARRAYS, INFO_KEYS, INFO_NAME, INFO_TUPLE, INFO_TUPLE_COUNT,
                        SHM_REQUEST_ARRAYS, no_refusals, tuple_column, typed_column)
from .errors import ServerError


# The futex system call (the ready signal of PROTOCOL.md "Shared memory"): its number on the
# machines that have one here; elsewhere no signal is asked for (the replies carry it).
_SYS_FUTEX = {"x86_64": 202, "aarch64": 98}.get(platform.machine())
_FUTEX_WAIT = 0  # shared (no FUTEX_PRIVATE_FLAG): the server's process wakes it
_FUTEX_WAKE = 1
# A request's wait for its batch: a few reads of `seq` then a sleep on it, or reads for up to
# _SPIN_S first. Reading on is faster when a core is free for this process while the server
# steps (a sleeping process's wake-up costs tens of us on idle cores), slower when the two
# share one (the reading takes the core the server needs): each segment takes the way that
# was faster lately (_TwoWays).
_SPIN_S = 300e-6


class _TwoWays:
    """One of two ways (0, 1) of doing something, chosen by the time each took lately
    (moving averages): the faster, and the other after TRY_OTHER_AFTER uses, then after
    twice as many each time it stays slower (at most TRY_OTHER_MAX). As the server's
    choices (env/server/two_ways.h TwoWays)."""

    TRY_OTHER_AFTER, TRY_OTHER_MAX = 32, 1024

    def __init__(self):
        self.seconds = [0.0, 0.0]
        self._uses, self._try_other_after, self._trying_other = 0, self.TRY_OTHER_AFTER, False

    def _faster(self):
        return 1 if self.seconds[1] < self.seconds[0] else 0

    def choose(self):
        if not self.seconds[0]:
            return 0
        if not self.seconds[1]:
            return 1
        self._uses += 1
        self._trying_other = self._uses >= self._try_other_after
        return 1 - self._faster() if self._trying_other else self._faster()

    def took(self, way, seconds):
        old = self.seconds[way]
        self.seconds[way] = 0.875 * old + 0.125 * seconds if old else max(seconds, 1e-9)
        if self._trying_other:
            self._trying_other, self._uses = False, 0
            self._try_other_after = (self.TRY_OTHER_AFTER if self._faster() == way else
                                     min(2 * self._try_other_after, self.TRY_OTHER_MAX))


# Reads of the seq word before sleeping on it. A batch takes tens of us: the reads find it
# done only when it ran while this process was off the core (as after its wake-up call);
# 64 instead of 16 found it no more often, measured interleaved, and took more CPU time.
_SPINS = 16


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


def _futex_functions():
    if _SYS_FUTEX is None:
        return None, None
    try:
        syscall = ctypes.CDLL(None, use_errno=True).syscall  # releases the GIL while waiting
    except (OSError, AttributeError):
        return None, None
    syscall.restype = ctypes.c_long
    syscall.argtypes = [ctypes.c_long, ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32,
                        ctypes.POINTER(_Timespec), ctypes.c_void_p, ctypes.c_uint32]

    def wait(address, value, seconds):
        """Sleeps while the 32-bit word at `address` holds `value`, at most `seconds`
        (returns early on a wake-up, a change, or a signal)."""
        ts = _Timespec(int(seconds), int((seconds % 1) * 1e9))
        syscall(_SYS_FUTEX, address, _FUTEX_WAIT, value, ctypes.byref(ts), None, 0)

    def wake(address):
        """Wakes a process sleeping on the 32-bit word at `address`."""
        syscall(_SYS_FUTEX, address, _FUTEX_WAKE, 1, None, None, 0)
    return wait, wake


_futex_wait, _futex_wake = _futex_functions()
_native = []  # [tiergym._core or None], once looked for


def _native_waits():
    """tiergym._core when it has futex_wake and wait_seq (the compiled extension, when the
    package has it: a call costs a tenth of a ctypes call, and the spin on `seq` runs in C),
    else None (the ctypes functions above serve)."""
    if not _native:
        core = None
        try:
            core = load_core()
        except (ImportError, OSError):
            pass
        _native.append(core if hasattr(core, "wait_seq") and hasattr(core, "futex_wake")
                       else None)
    return _native[0]

# Arrays of the request area (written by the client) and of the error it may get back.
_REQUEST_ARRAYS = SHM_REQUEST_ARRAYS


def requests_supported():
    """Whether this process may write requests into a segment: the futex call is there and
    the processor makes stores visible in program order (x86-64), so that a server that
    sees the new request number sees the request written before it."""
    return _futex_wake is not None and platform.machine() in ("x86_64", "AMD64")


def _text(array):
    return bytes(array).split(b"\0", 1)[0].decode("utf-8", "replace")


def is_local(endpoint):
    """Whether a ZeroMQ endpoint is on this machine: ipc://, or tcp:// to a loopback address
    or localhost (a server elsewhere cannot share memory with this process)."""
    if endpoint.startswith("ipc://"):
        return True
    if not endpoint.startswith("tcp://"):
        return False
    host = endpoint[len("tcp://"):].rpartition(":")[0].strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class SharedResults:
    """A mapped segment: `made` is the `shm` map of the reply that made it; `profiles` the
    profile names of each row's session (spec.profiles). OSError when it cannot be mapped
    (another machine, another /dev/shm), ValueError when it is not what the reply says."""

    def __init__(self, made, profiles):
        self.segment = made["segment"]
        size = int(made["bytes"])
        name = made["name"]
        if not isinstance(name, str) or "/" in name.lstrip("/") or not name.lstrip("/"):
            raise ValueError(f"shm.name {name!r} is not a shared-memory name")
        # Read-write only to write requests into it; the results stay read-only views.
        writable = bool(made.get("requests")) and requests_supported()
        fd = os.open("/dev/shm/" + name.lstrip("/"),
                     (os.O_RDWR if writable else os.O_RDONLY) | os.O_CLOEXEC)
        try:
            if os.fstat(fd).st_size < size:
                raise ValueError(f"shared-memory segment {name} is smaller than {size} bytes")
            buf = mmap.mmap(fd, size, mmap.MAP_SHARED,
                            mmap.PROT_READ | (mmap.PROT_WRITE if writable else 0))
        finally:
            os.close(fd)
        self.arrays = {}
        offsets = {}
        for a in made["layout"]:
            dtype = DTYPES[a["dtype"]]
            shape = tuple(int(d) for d in a["shape"])
            end = int(a["offset"]) + int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
            if end > size:
                raise ValueError(f"shm.layout: {a['name']} ends past the segment")
            array = np.ndarray(shape, dtype=dtype, buffer=buf, offset=int(a["offset"]))
            if a["name"] not in _REQUEST_ARRAYS:
                array.flags.writeable = False
            self.arrays[a["name"]] = array
            offsets[a["name"]] = int(a["offset"])
        # The header's words as memoryviews too: reading one gives an int in a fraction of
        # the time a numpy scalar takes (the spin on `seq` reads it tens of times a batch).
        view = memoryview(buf)

        def word(name, fmt, size):
            return view[offsets[name]:offsets[name] + size].cast(fmt)
        if int(self.arrays["seq"][0]) != int(made["seq"]):
            raise ValueError(f"shared-memory segment {name} does not hold batch {made['seq']}")
        self.last_seq = int(made["seq"])
        # The ready signal: the server offers it, this machine has the futex call, and the
        # segment has the has_final word it needs.
        self.signal = (bool(made.get("signal")) and _futex_wait is not None
                       and "has_final" in self.arrays)
        self._seq = self.arrays["seq"]
        self._seq_word = word("seq", "Q", 8)
        self._waiting = _TwoWays()  # for a request's batch: 0 sleep soon, 1 read on first
        # (Announced batches need a signal or requests, both of which come with has_final.)
        self._has_final = word("has_final", "B", 1) if "has_final" in offsets else None
        # The summary of the batch's rows (a server that writes none: assume everything).
        self._summary = word("summary", "B", 1) if "summary" in offsets else None
        # The low 32 bits of the (little-endian) seq word: the futex.
        self._seq_address = self._seq.ctypes.data
        self._native = _native_waits() if _futex_wait is not None else None
        self._wake = self._native.futex_wake if self._native is not None else _futex_wake
        self.rows = len(self.arrays["obs"])
        # Requests through the segment: offered, writable here, and its request area there.
        self.requests = writable and all(k in self.arrays for k in _REQUEST_ARRAYS)
        if self.requests:
            self._request = self.arrays["request"]
            self._request_address = self._request.ctypes.data
            self._request_actions = self.arrays["request_actions"]
            if self._request_actions.ndim != 2 or len(self._request_actions) != self.rows:
                raise ValueError("shm.layout: request_actions is not [rows, action]")
            self._request_word = word("request", "Q", 8)
            self._request_reset = self.arrays["request_reset"]
            self._request_autoreset = word("request_autoreset", "B", 1)
            self._error_code = word("error_code", "B", 1)  # its first byte: 0 when none
        # Profile names: one table for every row when the sessions share theirs.
        self._per_row = [list(p) + ["?"] for p in profiles]
        self._shared = (np.array(self._per_row[0], dtype=object)
                        if all(p == self._per_row[0] for p in self._per_row) else None)
        self._static = {}
        self._profiles = {}
        self._no_refusals = {}
        # The batch's arrays as read() gives them with copy=False and every row: the same
        # views every time.
        self._views = tuple(self.arrays[k] for k in ("obs", "reward", "terminated", "truncated",
                                                     "reset"))

    def _column(self, prefix, key, rows):
        a = typed_column(key, self.arrays[prefix + key])
        return a if rows == self.rows else a[:rows]

    def _infos(self, prefix, rows, copy, mask=None, summary=3, seq=None):
        """The info columns as decode_info_columns gives them from a reply. `summary` (the
        segment's summary word) and `seq` (the batch's number) say what may be skipped: the
        refused regions when no row has any, the check of the profiles when no entry was
        reset since the batch they were checked at (seq - 1)."""
        key = (prefix, rows)
        static = self._static.get(key)
        if static is None:
            ones = np.ones(rows, dtype=bool)
            ones.flags.writeable = False
            static = {k: self._column(prefix, k, rows) for k in INFO_ARRAYS}
            static.update({"_" + k: ones for k in INFO_KEYS})
            self._static[key] = static
        out = dict(static)
        if copy:
            for k in INFO_ARRAYS:
                out[k] = static[k].copy()
        # The profile column (objects) is built again only when a row's profile changed,
        # which only a reset does: unless one did, the previous batch's column holds.
        cached = self._profiles.get(key)
        if (cached is not None and seq is not None and not summary & 2
                and cached[2] == seq - 1):
            profile = cached[1]
            self._profiles[key] = (cached[0], profile, seq)
        else:
            index = self.arrays[prefix + INFO_NAME][:rows]
            if cached is None or cached[0] != index.tobytes():
                if self._shared is not None:
                    profile = self._shared[index]
                else:
                    profile = np.array([self._per_row[i][j] for i, j in enumerate(index)],
                                       dtype=object)
                profile.flags.writeable = False
            else:
                profile = cached[1]
            self._profiles[key] = (index.tobytes(), profile, seq)
        out[INFO_NAME] = profile.copy() if copy else profile
        counts = self.arrays[prefix + INFO_TUPLE_COUNT][:rows]
        if summary & 1 and counts.any():
            refused = tuple_column(counts, self.arrays[prefix + INFO_TUPLE], rows)
        else:
            refused = no_refusals(self._no_refusals, rows)
            if copy:
                refused = refused.copy()
        out[INFO_TUPLE] = refused
        if mask is not None:
            for k in INFO_KEYS:
                out["_" + k] = mask.copy()
        return out

    def forget(self):
        """Drops what the last batch read lets the next skip: the client sent something else
        (a batch whose results came in its reply, or one that failed), which may have reset
        sessions without the segment's summary saying so."""
        self._profiles.clear()

    def wait(self, seq, seconds, spin_s=0.0):
        """Whether the segment holds batch `seq` within `seconds`: a few reads of the seq
        word (more for up to spin_s), then a sleep on it (the server wakes it when it writes
        a batch)."""
        if self._native is not None:
            return self._native.wait_seq(self._seq_address, seq, _SPINS, seconds, spin_s)
        seq_word = self._seq_word
        if spin_s > 0:
            until = time.perf_counter() + spin_s
            while seq_word[0] != seq and time.perf_counter() < until:
                pass
        for _ in range(_SPINS):
            if seq_word[0] == seq:
                return True
        now = seq_word[0]
        if now == seq:
            return True
        _futex_wait(self._seq_address, now & 0xFFFFFFFF, seconds)
        return seq_word[0] == seq

    def request(self, actions, reset, same_step, timeout, check):
        """Steps the segment's sessions (all its rows) through its request area: `actions`
        an integer array [rows, ...] (rows being reset are ignored), `reset` a bool array
        [rows], `same_step` the autoreset mode. Returns the shm map of the batch, as
        announced(); raises ServerError with the error the server wrote into the segment
        (the fields named as in a step_batch message: actions[i][j], reset[i]), TimeoutError
        when no batch comes within `timeout` s. check() is called between waits (it raises
        when the server is known to be gone)."""
        np.copyto(self._request_actions, actions.reshape(self._request_actions.shape),
                  casting="unsafe")
        np.copyto(self._request_reset, reset, casting="unsafe")
        self._request_autoreset[0] = 1 if same_step else 0
        seq = self.last_seq + 1
        way = self._waiting.choose()
        start = time.perf_counter()
        # The number last (x86-64 keeps the stores in order), then the server's thread woken.
        number = self._request_word
        number[0] = (number[0] + 1) & 0xFFFFFFFFFFFFFFFF
        self._wake(self._request_address)
        if self.wait(seq, min(0.1, timeout), _SPIN_S if way else 0.0):
            self._waiting.took(way, time.perf_counter() - start)
        else:
            deadline = time.monotonic() + timeout
            while not self.wait(seq, min(0.1, max(deadline - time.monotonic(), 0.0))):
                if time.monotonic() >= deadline:
                    raise TimeoutError(
                        f"no batch in the shared-memory segment within {timeout} s")
                check()
        self.last_seq = seq
        if self._error_code[0]:
            code = _text(self.arrays["error_code"])
            field = _text(self.arrays["error_field"])
            message = _text(self.arrays["error_message"])
            for ours, theirs in (("request_actions", "actions"), ("request_reset", "reset"),
                                 ("request_autoreset", "autoreset")):
                if field.startswith(ours):
                    field = theirs + field[len(ours):]
                if message.startswith(ours):
                    message = theirs + message[len(ours):]
            raise ServerError(code, field, message)
        return self.announced(seq, self.rows)

    def announced(self, seq, rows):
        """The reply's `shm` map for batch `seq` of `rows` entries that the ready signal
        announced instead of a reply."""
        return {"segment": self.segment, "seq": seq, "rows": rows,
                "final": bool(self._has_final[0])}

    def read(self, shm, copy):
        """(obs, rewards, terminations, truncations, reset, infos, final) of the batch the
        reply's `shm` map announces; final is None or (final_obs, final_info columns) for
        same_step autoreset (final_info masked by the rows whose episode ended)."""
        rows = int(shm["rows"])
        if not 0 < rows <= self.rows:
            raise ValueError(f"shm.rows {rows}: the segment has {self.rows} rows")
        seq = int(shm["seq"])
        if self._seq_word[0] != seq:
            raise ValueError(f"the shared-memory segment holds batch {self._seq_word[0]}"
                             f", not batch {seq} (two requests in flight on it?)")
        self.last_seq = seq
        a = self.arrays
        if rows == self.rows and not copy:
            obs, rewards, terminations, truncations, reset = self._views
        else:
            def take(name):
                v = a[name] if rows == self.rows else a[name][:rows]
                return v.copy() if copy else v

            obs, rewards = take("obs"), take("reward")
            terminations, truncations, reset = (take("terminated"), take("truncated"),
                                                take("reset"))
        summary = self._summary[0] if self._summary is not None else 3
        infos = self._infos("info.", rows, copy, summary=summary, seq=seq)
        final = None
        if shm.get("final"):
            ended = terminations | truncations
            final_obs = a["final_obs"][:rows].copy()
            final_info = self._infos("final_info.", rows, True, mask=ended)
            final = (final_obs, final_info)
        return obs, rewards, terminations, truncations, reset, infos, final

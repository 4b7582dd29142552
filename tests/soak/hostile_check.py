#!/usr/bin/env python3
"""The security model's claims (README, "Security model"), one by one, as a hostile client
(loopback ipc only).

Starts `tiergym serve` on an ipc socket with a data directory (beside it: a secret file, and
inside it a symbolic link to that file, a FIFO and a corrupt machine file), then, one check
at a time, and prints a figure for each:

  reads     files outside the roots (existing or not, absolute, `..`, symbolic link out) are
            refused the same way whether they exist or not, with no file content;
  special   FIFOs, devices, /dev/zero and /proc are refused at once, two at a time (both
            workers), while hello on another connection is answered;
  hijack    another connection's session handle gets exactly the answer an unknown one
            gets, for step, reset, estimate and close; 1000 guessed handles are NOT_FOUND;
  budget    a configuration over the memory budget is RESOURCE_EXHAUSTED naming its cost
            and the budget, twice, quickly; a small one is made afterwards;
  retry     a make that failed on a corrupt data file succeeds once the file is fixed;
  parts     messages whose parts never end (raw ZMTP peers offering 1 GiB of 1 MiB
            frames) leave the server's RSS within 64 MiB of what it was, hello answered;
  pipeline  a client that pipelines 5000 requests without reading: replies beyond the
            outbox dropped and counted, the same socket then recovers (its next request's
            reply arrives, matched by id), and the Python client's timeout fires;
  fuzz      10,000 mutated and hostile messages: each answered within 10 s, 0 INTERNAL, every
            reply valid msgpack and UTF-8;
  segment   a client writing 2000 random requests (random bytes over the request area of a
            shared-memory segment that takes requests): each answered through the segment
            within 1 s, never INTERNAL, the server alive; another connection's sessions
            untouched (their episodes as expected); the segment's file shrunk: its thread
            ends within 1 s and the server is alive (PROTOCOL.md "Requests through the
            segment");
  killed    clients holding 40 sessions each, killed with SIGKILL: their sessions gone
            within 2 s;
  silent    a raw ZMTP peer that makes 3 sessions, then reads nothing and answers no
            heartbeat (its socket open): its sessions gone within 6 s (--heartbeat 1);
  rss       the server's RSS after the clients left within 20 % of its level before;
  sigterm   SIGTERM with loads, FIFO probes, pipelines and endless parts in flight: exit 0
            within 5 s.

With --curve the server requires CURVE (`tiergym keygen` pairs, --curve-key,
--curve-clients) and the checks whose hostile client holds the allowed key run again over
it (hijack, pipeline, fuzz, segment, killed, rss), beside those only CURVE has:

  strangers a client without keys, one with a key pair not allowed, one with another
            server's key, and one replaying an allowed client's recorded handshake and
            requests (its bytes, on a new connection) get no reply at all: no session made,
            no request seen, the replaying connection closed;
  parts     a message of 16 MiB (1 MiB parts) from an allowed client, whose end the
            encryption hides from the ZMTP guard: its connection is dropped past twice the
            message limit (1 MiB here), the server's RSS within 64 MiB, hello answered.

Exits 1 naming each item not met. Takes about 40 s (--curve: about 25 s).

    .venv/bin/python tests/soak/hostile_check.py [--binary build/bin/tiergym] [--curve]
"""

import argparse
import os
import random
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

import msgpack
import zmq

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "env", "python"))
from tiergym.connection import Connection  # noqa: E402
from tiergym.errors import ServerUnavailable  # noqa: E402

ENV = "tiergym/TierPlacement-v0"
SECRET = "hostile-secret-9d2e"
RSS_BOUND = 1.20  # RSS back within 20 % of its starting level
CONTEXT = zmq.Context.instance()
# With --curve: (server public key, client public key, client secret key), Z85 bytes, which
# every connection of the checks uses.
CURVE = None


def rss_bytes(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def dealer(endpoint, curve=True, **options):
    """A DEALER connected to `endpoint`; with --curve, an allowed CURVE client (curve=True),
    or one with the keys given (a tuple), or none (curve=None)."""
    s = CONTEXT.socket(zmq.DEALER)
    s.setsockopt(zmq.LINGER, 0)
    keys = CURVE if curve is True else curve
    if keys:
        s.curve_serverkey, s.curve_publickey, s.curve_secretkey = keys
    for k, v in options.items():
        s.setsockopt(getattr(zmq, k), v)
    s.connect(endpoint)
    return s


def curve_dict():
    """CURVE as tiergym.Connection takes it (None without --curve)."""
    if not CURVE:
        return None
    return {"server_key": CURVE[0], "public_key": CURVE[1], "secret_key": CURVE[2]}


def ask(sock, timeout_s=10, **request):
    """Sends one request; the reply (a dict), or None after timeout_s."""
    sock.send(msgpack.packb({"v": 2, **request}))
    if not sock.poll(int(timeout_s * 1000)):
        return None
    return msgpack.unpackb(sock.recv(), raw=False)


def make(config):
    return {"op": "make", "env": ENV, "config": config}


class Report:
    def __init__(self):
        self.failed = []

    def item(self, name, ok, figure):
        print(f"  {name:9s} {'ok' if ok else 'NOT MET'}: {figure}", flush=True)
        if not ok:
            self.failed.append(name)


def error_of(reply):
    if reply is None:
        return ("(no reply)", "")
    e = reply.get("error", {}) if not reply.get("ok") else {}
    return (e.get("code", "OK"), str(e.get("message", "")))


def check_reads(endpoint, work, report):
    s = dealer(endpoint)
    pairs = [  # (exists outside the roots, does not exist)
        ("/etc/shadow", "/etc/no-such-shadow"), ("/etc/passwd", "/etc/no-such-passwd"),
        (os.path.join(work, "secret.json"), os.path.join(work, "no-such.json")),
        ("../secret.json", "../no-such.json"), ("escape.json", "no-such.json"),
        ("/proc/self/environ", "/proc/self/no-such"), (work, os.path.join(work, "no-such-dir")),
    ]
    probes = same = leaks = accepted = 0
    different = []
    for key in ("machine", "interference", "profiles", "calibration"):
        for there, absent in pairs:
            answers = []
            for path in (there, absent):
                value = [path] if key == "profiles" else path
                code, message = error_of(ask(s, **make({key: value})))
                probes += 1
                accepted += code == "OK"
                leaks += SECRET in message or "root:" in message or work in message.replace(path, "")
                answers.append((code, message.replace(path, "NAME")))
            if answers[0] == answers[1]:
                same += 1
            else:
                different.append(f"{key}={there}: {answers[0]} vs {answers[1]}")
    s.close()
    report.item("reads", accepted == 0 and leaks == 0 and not different,
                f"{probes} probes, {accepted} accepted, {leaks} with file content or server "
                f"paths, {same}/{same + len(different)} existing/absent pairs answered alike"
                + (f"; differ: {different[:2]}" if different else ""))


def check_special(endpoint, data, report):
    paths = [os.path.join(data, "fifo.json"), "fifo.json", "/dev/zero", "/dev/stdin",
             "/dev/random", "/proc/self/fd/1", "/proc/self/fd/0", "/proc/self/mem",
             "/proc/kcore", "/sys/kernel/mm/transparent_hugepage/enabled"]
    codes, slowest = {}, 0.0
    hello_slowest = 0.0
    for key in ("machine", "interference"):
        for i in range(0, len(paths), 2):
            socks = [dealer(endpoint), dealer(endpoint)]
            t0 = time.monotonic()
            for sock, path in zip(socks, paths[i:i + 2]):
                sock.send(msgpack.packb({"v": 2, **make({key: path})}))
            other = dealer(endpoint)
            h0 = time.monotonic()
            hello = ask(other, timeout_s=5, op="hello")
            hello_slowest = max(hello_slowest, time.monotonic() - h0 if hello else 99)
            other.close()
            for sock in socks:
                if sock.poll(5000):
                    code, _ = error_of(msgpack.unpackb(sock.recv(), raw=False))
                else:
                    code = "(hang)"
                codes[code] = codes.get(code, 0) + 1
                sock.close()
            slowest = max(slowest, time.monotonic() - t0)
    ok = set(codes) <= {"NOT_FOUND", "PERMISSION_DENIED"} and slowest < 2 and hello_slowest < 2
    report.item("special", ok, f"{sum(codes.values())} FIFO/device//proc/sys makes: {codes}; "
                f"slowest pair {slowest:.3f} s; hello meanwhile within {hello_slowest:.3f} s")


def check_hijack(endpoint, report):
    a, b = dealer(endpoint), dealer(endpoint)
    mine = ask(a, **make({"num_regions": 8, "steps": 10}))["session"]
    ask(a, op="reset", session=mine, seed=1)
    unknown = "%032x" % random.getrandbits(128)
    differ, obeyed = [], 0
    for op, extra in (("step", {"action": [0] * 8}), ("reset", {"seed": 2}),
                      ("estimate", {"placement": '{"default": "hbm"}'}), ("close", {})):
        theirs = ask(b, op=op, session=mine, **extra)
        none = ask(b, op=op, session=unknown, **extra)
        obeyed += bool(theirs and theirs.get("ok"))
        t, n = theirs.get("error"), none.get("error")
        if t is None or n is None or t["code"] != n["code"] or \
                t["message"].replace(mine, "H") != n["message"].replace(unknown, "H"):
            differ.append(f"{op}: {t} vs {n}")
    still = ask(a, op="step", session=mine, action=[1] * 8)
    t0 = time.monotonic()
    guessed = {}
    for _ in range(1000):
        code, _ = error_of(ask(b, op="step", session="%032x" % random.getrandbits(128),
                                action=[0] * 8))
        guessed[code] = guessed.get(code, 0) + 1
    guess_s = time.monotonic() - t0
    ask(a, op="close", session=mine)
    a.close()
    b.close()
    ok = obeyed == 0 and not differ and still.get("ok") and guessed == {"NOT_FOUND": 1000}
    report.item("hijack", ok, f"4 ops on another connection's handle: {obeyed} obeyed, "
                f"{4 - len(differ)}/4 answered as an unknown handle; owner still steps: "
                f"{bool(still.get('ok'))}; 1000 guessed handles: {guessed} in {guess_s:.2f} s")


def check_budget(endpoint, report):
    s = dealer(endpoint)
    t0 = time.monotonic()
    replies = [ask(s, timeout_s=30, **make({"num_regions": 65536, "steps": 1000000}))
               for _ in range(2)]
    took = time.monotonic() - t0
    codes = [error_of(r)[0] for r in replies]
    message = error_of(replies[0])[1]
    small = ask(s, timeout_s=30, **make({"num_regions": 8, "steps": 5}))
    stats = ask(s, op="stats")
    if small and small.get("ok"):
        ask(s, op="close", session=small["session"])
    s.close()
    ok = codes == ["RESOURCE_EXHAUSTED"] * 2 and "budget of 2048" in message and \
        "needs about" in message and took < 2 and small.get("ok") and \
        stats["ops"].get("stats", 0) >= 1
    report.item("budget", ok, f"twice {codes[0]} in {took:.2f} s: \"{message}\"; a small "
                f"make afterwards: {'ok' if small.get('ok') else error_of(small)}")


def check_retry(endpoint, data, report):
    s = dealer(endpoint)
    bad = os.path.join(data, "machines", "retry.json")
    with open(bad, "w") as f:
        f.write('{"name": 7}')
    config = {"num_regions": 8, "steps": 5, "machine": "machines/retry.json"}
    first = error_of(ask(s, timeout_s=30, **make(config)))
    again = error_of(ask(s, timeout_s=30, **make(config)))
    with open(os.path.join(data, "machines", "good.json")) as f:
        good = f.read()
    with open(bad, "w") as f:
        f.write(good)
    fixed = ask(s, timeout_s=30, **make(config))
    stats = ask(s, op="stats")
    if fixed and fixed.get("ok"):
        ask(s, op="close", session=fixed["session"])
    s.close()
    ok = first[0] not in ("OK", "INTERNAL", "(no reply)") and again == first and \
        fixed.get("ok") and stats is not None
    report.item("retry", ok, f"corrupt file: {first[0]} \"{first[1][:90]}\" (again: same); "
                f"fixed, the same make: {'ok' if fixed.get('ok') else error_of(fixed)}")


def zmtp_peer(endpoint):
    """A raw ZMTP 3.0 peer (NULL mechanism, a DEALER) on an ipc endpoint: a plain socket, so
    that what it sends reaches the server at once, frame by frame (a libzmq socket would
    keep a message's parts until its last one)."""
    peer = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    peer.connect(endpoint[len("ipc://"):])
    greeting = b"\xff" + b"\0" * 8 + b"\x7f" + b"\x03\x01" + b"NULL".ljust(20, b"\0") + \
        b"\0" + b"\0" * 31
    peer.sendall(greeting)
    got = b""
    while len(got) < 64:
        chunk = peer.recv(64 - len(got))
        if not chunk:
            raise ConnectionError("the server closed the connection during the greeting")
        got += chunk
    ready = b"\x05READY" + b"\x0bSocket-Type" + struct.pack(">I", 6) + b"DEALER"
    peer.sendall(b"\x04" + bytes([len(ready)]) + ready)
    return peer


def endless_parts(endpoint, mib, frame_mib=1):
    """Sends `mib` MiB of one message whose parts never end (each a `frame_mib` MiB frame
    with MORE set); returns the peer and the MiB the server took before it hung up."""
    peer = zmtp_peer(endpoint)
    header = b"\x03" + struct.pack(">Q", frame_mib << 20)  # MORE | LONG
    frame = b"\0" * (frame_mib << 20)
    sent = 0
    peer.settimeout(5)
    try:
        for _ in range(mib // frame_mib):
            peer.sendall(header + frame)
            sent += frame_mib
    except OSError:  # the server dropped the connection (or stopped reading for 5 s)
        pass
    return peer, sent


def peak_growth_and_hello(endpoint, pid, before, peak, seconds):
    """(the server's RSS peak over `before` in MiB, watched `seconds` more, and whether
    hello is answered meanwhile)."""
    for _ in range(int(seconds / 0.2)):
        time.sleep(0.2)
        peak = max(peak, rss_bytes(pid))
    other = dealer(endpoint)
    hello = ask(other, timeout_s=5, op="hello")
    other.close()
    return (peak - before) / 2**20, hello


def check_parts(endpoint, pid, report):
    before = rss_bytes(pid)
    peak = before
    peers, sent = [], []
    for _ in range(8):
        peer, mib = endless_parts(endpoint, 128)
        peers.append(peer)
        sent.append(mib)
        peak = max(peak, rss_bytes(pid))
    grown, hello = peak_growth_and_hello(endpoint, pid, before, peak, 2)
    for peer in peers:
        peer.close()
    report.item("parts", grown < 64 and hello is not None,
                f"never-ending parts from 8 raw ZMTP peers (1 MiB frames, {sum(sent)} MiB taken "
                f"by the server of the 1024 MiB offered, at most {max(sent)} MiB a peer): "
                f"server RSS peak +{grown:.0f} MiB; hello meanwhile: "
                f"{'answered' if hello else 'NO REPLY'}")


def relay_and_record(endpoint, work):
    """A relay between an allowed client and the server (ipc), recording what the client
    sends: its handshake, then its encrypted requests (hello, make, step)."""
    path = endpoint[len("ipc://"):]
    relay_path = os.path.join(work, "relay.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(relay_path)
    listener.listen(1)
    recorded = bytearray()

    def relay():
        client, _ = listener.accept()
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        server.connect(path)
        import selectors
        sel = selectors.DefaultSelector()
        sel.register(client, selectors.EVENT_READ, server)
        sel.register(server, selectors.EVENT_READ, client)
        open_ = True
        while open_:
            for key, _ in sel.select(timeout=5):
                data = key.fileobj.recv(65536)
                if not data:
                    open_ = False
                    break
                if key.fileobj is client:
                    recorded.extend(data)
                key.data.sendall(data)
        client.close()
        server.close()
    t = threading.Thread(target=relay, daemon=True)
    t.start()
    c = dealer(f"ipc://{relay_path}")
    reply = ask(c, **make({"num_regions": 8, "steps": 10}))
    ask(c, op="reset", session=reply["session"], seed=1)
    ask(c, op="step", session=reply["session"], action=[0] * 8)
    c.close()
    t.join(timeout=10)
    listener.close()
    return bytes(recorded)


def check_strangers(endpoint, work, report):
    """CURVE: clients without the allowed key, and a replayed handshake, get nothing."""
    probe = dealer(endpoint)
    before = ask(probe, op="stats")
    stranger = zmq.curve_keypair()
    other_server = zmq.curve_keypair()
    answered = {}
    for name, keys in (("no keys", None), ("a key pair not allowed", (CURVE[0], *stranger)),
                       ("another server's key", (other_server[0], CURVE[1], CURVE[2])),
                       ("the allowed public key, another secret", (CURVE[0], CURVE[1],
                                                                    stranger[1]))):
        s = dealer(endpoint, curve=keys)
        for request in ({"op": "hello"}, make({"num_regions": 8, "steps": 10})):
            try:
                s.send(msgpack.packb({"v": 2, **request}), zmq.NOBLOCK)
            except zmq.Again:
                pass  # ZeroMQ dropped the connection's pipe: nothing can even be sent
        answered[name] = bool(s.poll(1000))
        s.close()
    recorded = relay_and_record(endpoint, work)
    mid = ask(probe, op="stats")
    replays = []
    for _ in range(3):
        raw = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        raw.connect(endpoint[len("ipc://"):])
        raw.settimeout(3)
        raw.sendall(recorded)
        back = b""
        closed = False
        try:
            while True:
                chunk = raw.recv(4096)
                if not chunk:
                    closed = True
                    break
                back += chunk
        except (socket.timeout, ConnectionResetError):
            closed = isinstance(sys.exc_info()[1], ConnectionResetError)
        raw.close()
        replays.append((len(back), closed, b"READY" in back))
    after = ask(probe, op="stats")
    probe.close()
    # The probe's own requests: one stats before, one in the middle, one after.
    seen = after["requests"] - mid["requests"] - 1
    made = after["sessions_made"] - mid["sessions_made"]
    strangers_made = mid["sessions_made"] - before["sessions_made"] - 1  # the recording's
    ok = (not any(answered.values()) and seen == 0 and made == 0 and strangers_made == 0
          and all(n <= 64 + 2 + 168 and closed and not ready for n, closed, ready in replays))
    report.item("strangers", ok,
                f"replies to {', '.join(f'{k}: {v}' for k, v in answered.items())}; "
                f"{len(recorded)} recorded bytes of an allowed client's handshake and 3 "
                f"requests replayed 3 times: {[n for n, _, _ in replays]} bytes back (greeting "
                f"and WELCOME at most: 234), READY {any(r for _, _, r in replays)}, closed by "
                f"the server {all(c for _, c, _ in replays)}; requests the server saw from "
                f"them: {seen}, sessions made: {made + strangers_made}")


def check_curve_parts(endpoint, pid, report):
    """CURVE: an allowed client's message of 16 x 1 MiB parts, over twice the limit."""
    before = rss_bytes(pid)
    senders = []
    frame = b"\0" * (1 << 20)
    for _ in range(8):
        s = dealer(endpoint)
        for i in range(16):
            s.send(frame, zmq.SNDMORE if i < 15 else 0)
        senders.append(s)
    grown, hello = peak_growth_and_hello(endpoint, pid, before, before, 3)
    for s in senders:
        s.close()
    report.item("parts", grown < 64 and hello is not None,
                f"8 allowed clients each sending a 16 MiB message of 1 MiB parts (limit 1 MiB; "
                f"their end hidden from the guard by the encryption): server RSS peak "
                f"+{grown:.0f} MiB; hello meanwhile: {'answered' if hello else 'NO REPLY'}")


def check_pipeline(endpoint, report):
    s = dealer(endpoint, RCVHWM=1, SNDHWM=100000)
    n = 5000
    for i in range(n):
        s.send(msgpack.packb({"v": 2, "op": "hello", "id": i}), zmq.NOBLOCK)
    time.sleep(3)  # the server fills its outbox for this connection, then drops
    probe = dealer(endpoint)
    dropped = ask(probe, op="stats")["replies_dropped"]
    # Recovery: the same socket asks again, skipping replies it no longer waits for.
    s.send(msgpack.packb({"v": 2, "op": "hello", "id": n + 1}))
    got, found, deadline = 0, False, time.monotonic() + 30
    while time.monotonic() < deadline and s.poll(2000):  # until 2 s without a reply
        reply = msgpack.unpackb(s.recv(), raw=False)
        got += 1
        found = found or reply.get("id") == n + 1
    s.close()
    # The Python client never waits forever: a request the server cannot answer in time
    # (one queued behind a slow load here) is a clear timeout, and the next call works.
    c = Connection(endpoint, timeout=0.05, curve=curve_dict())
    timed_out = False
    try:
        c.call("make", env=ENV, config={"num_regions": 2048, "steps": 3000})
    except ServerUnavailable:
        timed_out = True
    c.timeout = 30
    after = c.call("hello")
    c.close()
    probe.close()
    answered = got - 1
    ok = found and answered + dropped == n and timed_out and after.get("protocol") == 2
    report.item("pipeline", ok, f"{n} requests unread: {answered} replies delivered + "
                f"{dropped} dropped and counted (replies_dropped) = {answered + dropped}; the "
                f"socket's next request answered: {found}; Python client: timeout raised "
                f"{timed_out}, next call ok")


def mutate(rng, message):
    m = bytearray(message)
    for _ in range(rng.randint(1, 6)):
        if not m:
            break
        i = rng.randrange(len(m))
        op = rng.randrange(5)
        if op == 0:
            m[i] = rng.randrange(256)
        elif op == 1:
            m.insert(i, rng.randrange(256))
        elif op == 2:
            del m[i:i + rng.randint(1, 8)]
        elif op == 3:
            m[i] ^= 1 << rng.randrange(8)
        else:
            m[i:i] = bytes(rng.choice([b"\xc1", b"\xd4\x01\x00", b"\xa3\xff\xfe\xfd", b"\xdf",
                                       b"\xdd\xff\xff\xff\xff"]))
    return bytes(m)


def check_fuzz(endpoint, pid, report, n=10000, seed=15):
    rng = random.Random(seed)
    s = dealer(endpoint)
    session = ask(s, **make({"num_regions": 8, "steps": 1000}))["session"]
    ask(s, op="reset", session=session, seed=1)
    seeds = [
        msgpack.packb({"v": 2, "op": "hello", "id": 1}),
        msgpack.packb({"v": 2, "op": "list", "id": 2}),
        msgpack.packb({"v": 2, "op": "stats"}),
        msgpack.packb({"v": 2, **make({"num_regions": 8, "steps": 5, "profiles": ["minife"]})}),
        msgpack.packb({"v": 2, **make({"machine": "../../etc/passwd"})}),
        msgpack.packb({"v": 2, "op": "reset", "session": session, "seed": 3}),
        msgpack.packb({"v": 2, "op": "step", "session": session, "action": [0, 1] * 4}),
        msgpack.packb({"v": 2, "op": "step_batch", "sessions": [session],
                       "actions": {"dtype": "int64", "shape": [1, 8], "data": b"\0" * 64}}),
        msgpack.packb({"v": 2, "op": "step_batch", "sessions": [session],
                       "actions": [[0] * 8], "shm": True}),
        msgpack.packb({"v": 2, "op": "estimate", "session": session,
                       "placement": '{"default": "hbm", "ranges": []}'}),
        msgpack.packb({"v": 2, "op": "close", "session": "0" * 32}),
    ]
    codes, internal, bad, hangs = {}, [], 0, 0
    for i in range(n):
        payload = mutate(rng, rng.choice(seeds))
        s.send(payload)
        if not s.poll(10000):
            hangs += 1
            s.close()
            s = dealer(endpoint)
            continue
        try:
            reply = msgpack.unpackb(s.recv(), raw=False)
            code = error_of(reply)[0]
        except Exception:  # noqa: BLE001 - not msgpack or not UTF-8
            bad += 1
            continue
        codes[code] = codes.get(code, 0) + 1
        if code == "INTERNAL":
            internal.append(payload.hex())
    ask(s, op="close", session=session)  # gone before the next check counts sessions
    s.close()
    alive = os.path.exists(f"/proc/{pid}") and open(f"/proc/{pid}/stat").read().split()[2] != "Z"
    ok = hangs == 0 and not internal and bad == 0 and alive
    top = ", ".join(f"{k} {v}" for k, v in sorted(codes.items(), key=lambda kv: -kv[1])[:6])
    report.item("fuzz", ok, f"{n} messages: {hangs} hangs, {len(internal)} INTERNAL, {bad} "
                f"replies not msgpack/UTF-8, server alive: {alive}; replies: {top}"
                + (f"; first INTERNAL input {internal[0]}" if internal else ""))


KILLED = r"""
import sys, msgpack, zmq
s = zmq.Context().socket(zmq.DEALER); s.setsockopt(zmq.LINGER, 0)
if len(sys.argv) > 2:
    s.curve_serverkey, s.curve_publickey, s.curve_secretkey = (k.encode() for k in sys.argv[2:5])
s.connect(sys.argv[1])
for _ in range(40):
    s.send(msgpack.packb({"v": 2, "op": "make", "env": "tiergym/TierPlacement-v0",
                          "config": {"num_regions": 8, "steps": 10}})); s.poll(20000); s.recv()
print("ready", flush=True)
sys.stdin.read()
"""


def check_segment(endpoint, report, n_requests=2000):
    import ctypes
    import mmap
    import platform
    if platform.machine() != "x86_64":
        report.item("segment", True, "skipped: requests through shared memory are written "
                    "by x86-64 clients only")
        return
    a, b = dealer(endpoint), dealer(endpoint)
    cfg = {"num_regions": 8, "steps": 1000}
    mine = [ask(a, **make(cfg))["session"] for _ in range(3)]
    theirs = [ask(b, **make(cfg))["session"] for _ in range(2)]
    for sid in theirs:
        ask(b, op="reset", session=sid, seed=5)
    reset = {"dtype": "bool", "shape": [3], "data": b"\1" * 3}
    acts = {"dtype": "uint8", "shape": [3, 8], "data": b"\0" * 24}
    made = ask(a, op="step_batch", sessions=mine, actions=acts, reset=reset, shm=True,
               shm_requests=True)["shm"]
    fd = os.open("/dev/shm/" + made["name"].lstrip("/"), os.O_RDWR)
    area = mmap.mmap(fd, made["bytes"])
    at = {x["name"]: x["offset"] for x in made["layout"]}
    syscall = ctypes.CDLL(None).syscall
    syscall.argtypes = [ctypes.c_long, ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32,
                        ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint32]
    word = ctypes.addressof(ctypes.c_char.from_buffer(area, at["request"]))
    start, end = at["request_autoreset"], at["error_code"]
    rng = random.Random(20)
    codes, late = {}, 0
    seq = struct.unpack_from("<Q", area, at["seq"])[0]
    for number in range(1, n_requests + 1):
        # Zeros (a valid step), random bytes, or valid modes with random actions.
        buf = bytearray(rng.randbytes(end - start) if number % 4 else bytes(end - start))
        if number % 4 == 2:
            buf[0] = rng.getrandbits(1)
            for i in range(3):
                buf[at["request_reset"] - start + i] = rng.getrandbits(1)
        area[start:end] = bytes(buf)
        struct.pack_into("<Q", area, at["request"], number)
        syscall(202, word, 1, 1, None, None, 0)  # FUTEX_WAKE
        deadline = time.monotonic() + 1
        while struct.unpack_from("<Q", area, at["seq"])[0] == seq:
            if time.monotonic() > deadline:
                late += 1
                break
        seq = struct.unpack_from("<Q", area, at["seq"])[0]
        code = bytes(area[at["error_code"]:at["error_code"] + 32]).split(b"\0")[0].decode()
        codes[code or "OK"] = codes.get(code or "OK", 0) + 1
    # The other connection's sessions were not stepped: their next step is their first.
    steps = [ask(b, op="step", session=sid, action=[0] * 8)["info"]["step"] for sid in theirs]
    # A shrunk segment: the thread ends, nothing faults.
    os.ftruncate(fd, 0)
    t0 = time.monotonic()
    threads = None
    while time.monotonic() - t0 < 5:
        threads = ask(a, op="stats")["shm_request_threads"]
        if threads == 0:
            break
        time.sleep(0.02)
    took = time.monotonic() - t0
    alive = ask(b, op="hello") is not None
    area.close()
    os.close(fd)
    a.close()
    b.close()
    ok = (late == 0 and "INTERNAL" not in codes and steps == [1, 1] and threads == 0
          and took < 1 and alive)
    report.item("segment", ok, f"{n_requests} random requests written into a segment: "
                f"{late} unanswered within 1 s, outcomes {codes}; another connection's "
                f"sessions at step {steps} (1: untouched); shrunk: thread gone after "
                f"{took:.2f} s, server alive: {alive}")


def settled_sessions(probe, seconds=10):
    """The server's session count once it has stopped changing for half a second (the
    sessions of connections an earlier check closed go when the server notices them gone,
    a moment later), or after `seconds`."""
    deadline = time.monotonic() + seconds
    last = ask(probe, op="stats")["sessions"]
    since = time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.05)
        now = ask(probe, op="stats")["sessions"]
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= 0.5:
            break
    return last


def check_killed(endpoint, report):
    probe = dealer(endpoint)
    base = settled_sessions(probe)
    keys = [k.decode() for k in CURVE] if CURVE else []
    procs = [subprocess.Popen([sys.executable, "-c", KILLED, endpoint, *keys],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE) for _ in range(5)]
    for p in procs:
        p.stdout.readline()
    held = ask(probe, op="stats")["sessions"] - base
    t0 = time.monotonic()
    for p in procs:
        p.kill()
    for p in procs:
        p.wait()
    left = held
    while time.monotonic() - t0 < 10:
        left = ask(probe, op="stats")["sessions"] - base
        if left == 0:
            break
        time.sleep(0.02)
    took = time.monotonic() - t0
    probe.close()
    report.item("killed", held == 200 and left == 0 and took < 2,
                f"5 clients holding {held} sessions killed (SIGKILL): {left} left after "
                f"{took:.2f} s")


def check_silent(endpoint, report):
    """A peer that makes sessions, then neither reads nor answers heartbeats, nor closes."""
    probe = dealer(endpoint)
    base = ask(probe, op="stats")["sessions"]
    peer = zmtp_peer(endpoint)
    body = msgpack.packb({"v": 2, **make({"num_regions": 8, "steps": 10})})
    for _ in range(3):
        peer.sendall(b"\x02" + struct.pack(">Q", len(body)) + body)
    t0, held, left = time.monotonic(), 0, None
    while time.monotonic() - t0 < 15:
        n = ask(probe, op="stats")["sessions"] - base
        held = max(held, n)
        if held == 3 and n == 0:
            left = 0
            break
        time.sleep(0.05)
    took = time.monotonic() - t0
    peer.close()
    probe.close()
    report.item("silent", held == 3 and left == 0 and took < 6,
                f"a peer silent with 3 sessions (no reads, no heartbeat replies, socket open): "
                f"{'reclaimed' if left == 0 else 'STILL OPEN'} after {took:.2f} s (heartbeat 1 s)")


def check_sigterm(binary, work, data, report):
    endpoint = f"ipc://{work}/sigterm.sock"
    server = start(binary, endpoint, data, work, "sigterm.log")
    socks = []
    for i in range(2):  # loads on the load thread and queued behind it
        s = dealer(endpoint)
        s.send(msgpack.packb({"v": 2, **make({"num_regions": 4096, "steps": 4000 + i})}))
        socks.append(s)
    for path in ("fifo.json", "/dev/zero"):
        s = dealer(endpoint)
        s.send(msgpack.packb({"v": 2, **make({"machine": path})}))
        socks.append(s)
    s = dealer(endpoint, RCVHWM=1, SNDHWM=100000)
    for i in range(3000):
        s.send(msgpack.packb({"v": 2, "op": "hello", "id": i}), zmq.NOBLOCK)
    socks.append(s)
    socks.append(endless_parts(endpoint, 64)[0])
    time.sleep(0.5)
    t0 = time.monotonic()
    server.send_signal(signal.SIGTERM)
    try:
        rc = server.wait(timeout=10)
    except subprocess.TimeoutExpired:
        server.kill()
        rc = "still running after 10 s"
    took = time.monotonic() - t0
    for s in socks:
        s.close()
    report.item("sigterm", rc == 0 and took < 5,
                f"2 loads, 2 FIFO/device makes, 3000 unread requests, endless parts in flight: "
                f"exit {rc} in {took:.2f} s")


def ended(returncode):
    """How a process ended, from its return code: "exit N" or the signal's name."""
    if returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exit {returncode}"


def start(binary, endpoint, data, work, log, extra=()):
    server = subprocess.Popen(
        [binary, "serve", "--endpoint", endpoint, "--threads", "2", "--quiet", "--data-dir",
         data, "--heartbeat", "1", "--unused-asset-timeout", "1", *extra],
        stdout=subprocess.PIPE, stderr=open(os.path.join(work, log), "wb"))
    line = server.stdout.readline().decode()
    if not line.startswith("listening on"):
        raise SystemExit(f"hostile_check: the server did not start: {line!r}")
    return server


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--binary", default=os.path.join(REPO, "build", "bin", "tiergym"))
    parser.add_argument("--messages", type=int, default=10000, help="fuzzed messages")
    parser.add_argument("--curve", action="store_true",
                        help="the server requires CURVE; the checks that hold over it")
    args = parser.parse_args(argv)
    work = tempfile.mkdtemp(prefix="tiergym-hostile-")
    data = os.path.join(work, "data")
    os.makedirs(os.path.join(data, "machines"))
    with open(os.path.join(work, "secret.json"), "w") as f:
        f.write('{"token": "%s"}\n' % SECRET)
    os.symlink(os.path.join(work, "secret.json"), os.path.join(data, "escape.json"))
    os.mkfifo(os.path.join(data, "fifo.json"))
    with open(os.path.join(REPO, "traces", "synth", "models", "machine_knl.json")) as f:
        knl = f.read()
    with open(os.path.join(data, "machines", "good.json"), "w") as f:
        f.write(knl)
    endpoint = f"ipc://{work}/hostile.sock"
    extra = []
    if args.curve:
        global CURVE
        keys = os.path.join(work, "keys")
        for name in ("server", "learner"):
            subprocess.run([args.binary, "keygen", name, "--dir", keys], check=True,
                           capture_output=True)
        import zmq.auth
        server_public, _ = zmq.auth.load_certificate(os.path.join(keys, "server.key"))
        CURVE = (server_public,
                 *zmq.auth.load_certificate(os.path.join(keys, "learner.key_secret")))
        # A 1 MiB message limit: the guard's bound under CURVE is twice 2 MiB.
        extra = ["--curve-key", os.path.join(keys, "server.key_secret"), "--curve-clients",
                 os.path.join(keys, "learner.key"), "--max-message-bytes", str(1 << 20)]
    server = start(args.binary, endpoint, data, work, "server.log", extra)
    report = Report()
    t_start = time.monotonic()
    print(f"hostile_check: tiergym serve (pid {server.pid}) on {endpoint}", flush=True)

    # Warm up as a reference client would, then take the starting RSS.
    warm = dealer(endpoint)
    for regions in (8, 16):
        reply = ask(warm, timeout_s=60, **make({"num_regions": regions, "steps": 10}))
        ask(warm, op="close", session=reply["session"])
    warm.close()
    # A reference client keeps one session (and so its configuration) open throughout.
    keeper = dealer(endpoint)
    kept = ask(keeper, timeout_s=60, **make({"num_regions": 8, "steps": 10}))["session"]
    # The configurations left unused are freed after 1 s and the memory trimmed on the next
    # four reclamation ticks: the starting level is taken after them.
    time.sleep(6)
    rss_start = rss_bytes(server.pid)

    def run(check, *check_args, on_server=True, **kwargs):
        # A check that breaks (a reply that never came, say) is an item not met, and the
        # server is still stopped at the end. A server that is gone fails every check on it
        # after it (on_server): it is said once, with how it ended, and those checks are
        # not run.
        if on_server and server.poll() is not None:
            return
        try:
            check(*check_args, report, **kwargs)
        except Exception as e:  # noqa: BLE001
            report.item(check.__name__[6:], False, f"the check broke off: {e!r}")
        if on_server and server.poll() is not None:
            report.item("server", False, f"the server ended during the check "
                        f"{check.__name__[6:]}: {ended(server.returncode)}; its stderr: "
                        f"{os.path.join(work, 'server.log')}")

    try:
        if args.curve:
            run(check_strangers, endpoint, work)
            run(check_hijack, endpoint)
            run(check_curve_parts, endpoint, server.pid)
            run(check_pipeline, endpoint)
            run(check_fuzz, endpoint, server.pid, n=args.messages)
            run(check_segment, endpoint)
            run(check_killed, endpoint)
        else:
            run(check_reads, endpoint, work)
            run(check_special, endpoint, data)
            run(check_hijack, endpoint)
            run(check_budget, endpoint)
            run(check_retry, endpoint, data)
            run(check_parts, endpoint, server.pid)
            run(check_pipeline, endpoint)
            run(check_fuzz, endpoint, server.pid, n=args.messages)
            run(check_segment, endpoint)
            run(check_killed, endpoint)
            run(check_silent, endpoint)
    finally:
        if server.poll() is None and sys.exc_info()[0] is not None:
            server.kill()

    if server.poll() is not None:
        print(f"hostile_check: NOT MET: {', '.join(report.failed)}; logs in {work}")
        return 1
    # Every client is gone: the memory must come back (unused configurations go after 1 s,
    # the heap is trimmed on the reclamation ticks after).
    rss_end = None
    for _ in range(6):
        time.sleep(1)
        rss_end = min(rss_end or 1 << 62, rss_bytes(server.pid))
    still = ask(keeper, op="reset", session=kept, seed=1) or {}
    keeper.close()
    report.item("rss", rss_end <= RSS_BOUND * rss_start and still.get("ok"),
                f"{rss_start / 2**20:.1f} MiB before, {rss_end / 2**20:.1f} MiB after "
                f"({rss_end / rss_start:.2f}x; bound {RSS_BOUND:.2f}x), a reference client's "
                f"session open throughout")
    server.send_signal(signal.SIGTERM)
    rc = server.wait(timeout=10)
    if rc != 0:
        report.item("exit", False, f"the first server exited {rc}")
    if not args.curve:
        run(check_sigterm, args.binary, work, data, on_server=False)  # a server of its own

    took = time.monotonic() - t_start
    if report.failed:
        print(f"hostile_check: NOT MET: {', '.join(report.failed)} ({took:.0f} s); logs in {work}")
        return 1
    subprocess.run(["rm", "-rf", work], check=False)
    print(f"hostile_check: every item met ({took:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

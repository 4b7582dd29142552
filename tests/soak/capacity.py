#!/usr/bin/env python3
"""Capacity of one `tiergym serve` on this machine: how many learner connections and
sessions it holds within its limits while a reference client's episodes stay bit-identical
and its step latency stays within a bound, and what happens past the limits.

One server (ipc, --threads 2, its default limits unless told: 1024 connections, 4096
sessions, 1024 per connection, 2048 MiB for configurations and sessions). Load processes
open learner connections level by level (--levels, total connections), each making
--sessions-per-connection sessions (16 regions, 100 steps) and resetting them, then stepping
one of its sessions every --period seconds (a learner computing its policy between steps).
Meanwhile a reference client (this process, its own connection) replays one seeded episode
(16 regions, 20 steps, fixed actions) again and again and times each step.

For each level it prints: connections and sessions open (the server's stats), the server's
RSS, the load's steps/s, the reference's step latency (median and 99th percentile) and
whether every reference episode was bit-identical to the first one, run alone. A level
passes when the reference is bit-identical, its median step latency within --median-ms
(1 ms) and its 99th percentile within --p99-ms (20 ms), and every learner connection and
session was made (the load processes share the machine's cores with the server: on 2
cores the reference's latency reflects the load's steps as much as the server's work).

Past the limits (--past): 64 more connections than --max-connections (each closed as it is
accepted: no reply, the client sees the connection reset), sessions past --max-sessions
(RESOURCE_EXHAUSTED naming the limit), and a configuration past the memory budget
(RESOURCE_EXHAUSTED naming its cost); the server must stay up and the reference
bit-identical.

    .venv/bin/python tests/soak/capacity.py [--binary build/bin/tiergym] [--quick]

Exits 1 when a level below the limits fails, or a refusal past them is not clean.
"""

import argparse
import hashlib
import multiprocessing
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

import msgpack
import numpy as np
import zmq

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ENV = "tiergym/TierPlacement-v0"
LEARNER = {"num_regions": 16, "steps": 100}
REFERENCE = {"num_regions": 16, "steps": 20}


def raise_fd_limit(n):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < n:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(n, hard), hard))


class Dealer:
    """A raw DEALER connection with one request at a time."""

    def __init__(self, context, endpoint):
        self.s = context.socket(zmq.DEALER)
        self.s.setsockopt(zmq.LINGER, 0)
        self.s.connect(endpoint)
        self.next_id = 1

    def send(self, op, **fields):
        self.s.send(msgpack.packb({"v": 2, "op": op, "id": self.next_id, **fields}))
        self.next_id += 1

    def receive(self, timeout_s):
        if not self.s.poll(int(timeout_s * 1000)):
            return None
        return msgpack.unpackb(self.s.recv(), raw=False)

    def ask(self, op, timeout_s=30, **fields):
        self.send(op, **fields)
        return self.receive(timeout_s)


def answered_within(dealers, seconds):
    """How many of `dealers` get their reply within `seconds` in all; each one's reply (or
    None) is left in its `answered`."""
    poller = zmq.Poller()
    by_socket = {}
    for d in dealers:
        d.answered = None
        poller.register(d.s, zmq.POLLIN)
        by_socket[d.s] = d
    deadline = time.monotonic() + seconds
    waiting = len(dealers)
    while waiting and time.monotonic() < deadline:
        for sock, _ in poller.poll(max(1, int((deadline - time.monotonic()) * 1000))):
            d = by_socket[sock]
            d.answered = msgpack.unpackb(sock.recv(), raw=False)
            poller.unregister(sock)
            waiting -= 1
    return len(dealers) - waiting


def actions_for(regions, steps, seed):
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 2, regions, dtype=np.int64) for _ in range(steps)]


def wire(a):
    return {"dtype": "int64", "shape": [len(a)], "data": a.tobytes()}


def worker(endpoint, pipe, sessions_per_connection, period):
    """A load process: opens connections on "grow", steps them on "work"."""
    raise_fd_limit(65536)
    context = zmq.Context()
    conns = []  # [Dealer, [session ids]]
    action = wire(np.zeros(LEARNER["num_regions"], dtype=np.int64))
    while True:
        command = pipe.recv()
        if command[0] == "grow":
            n, codes = command[1], {}
            fresh = [Dealer(context, endpoint) for _ in range(n)]
            for d in fresh:  # hello first: a connection over the limit gets no reply
                d.send("hello")
            answered_within(fresh, 30.0)
            alive = []
            for d in fresh:
                if d.answered is None:
                    codes["NO_REPLY"] = codes.get("NO_REPLY", 0) + 1
                    d.s.close(linger=0)
                else:
                    alive.append([d, []])
            for d, sessions in alive:
                for _ in range(sessions_per_connection):
                    r = d.ask("make", env=ENV, config=LEARNER, timeout_s=60)
                    code = "NO_REPLY" if r is None else (
                        "OK" if r.get("ok") else r["error"]["code"])
                    codes[code] = codes.get(code, 0) + 1
                    if code == "OK":
                        sessions.append(r["session"])
                        d.ask("reset", session=r["session"], seed=1)
                    elif code == "RESOURCE_EXHAUSTED":
                        codes.setdefault("messages", set()).add(r["error"]["message"][:160])
            conns.extend(alive)
            if "messages" in codes:
                codes["messages"] = sorted(codes["messages"])
            pipe.send(codes)
        elif command[0] == "work":
            until = time.monotonic() + command[1]
            steps, late, turn = 0, 0, 0
            while time.monotonic() < until:
                t0 = time.monotonic()
                for d, sessions in conns:  # one step per connection per period
                    if not sessions:
                        continue
                    sid = sessions[turn % len(sessions)]
                    r = d.ask("step", session=sid, action=action, timeout_s=30)
                    if r is None:
                        late += 1
                    elif not r.get("ok"):
                        pass
                    elif r["terminated"] or r["truncated"]:
                        d.ask("reset", session=sid, seed=1)
                    steps += 1
                turn += 1
                left = period - (time.monotonic() - t0)
                if left > 0:
                    time.sleep(min(left, max(0.0, until - time.monotonic())))
            pipe.send({"steps": steps, "late": late})
        else:
            for d, _ in conns:
                d.s.close(linger=0)
            context.term()
            pipe.send("stopped")
            return


class Reference:
    """The reference client: one seeded episode, again and again, each step timed."""

    def __init__(self, endpoint):
        self.d = Dealer(zmq.Context.instance(), endpoint)
        r = self.d.ask("make", env=ENV, config=REFERENCE, timeout_s=60)
        if not r or not r.get("ok"):
            raise SystemExit(f"capacity: the reference could not make its session: {r}")
        self.session = r["session"]
        self.actions = [wire(a) for a in actions_for(REFERENCE["num_regions"],
                                                     REFERENCE["steps"], 3)]

    def episode(self, latencies):
        h = hashlib.sha256()
        r = self.d.ask("reset", session=self.session, seed=7)
        h.update(r["obs"]["data"])
        for a in self.actions:
            t0 = time.perf_counter()
            r = self.d.ask("step", session=self.session, action=a)
            latencies.append(time.perf_counter() - t0)
            if r is None or not r.get("ok"):
                return None
            h.update(r["obs"]["data"])
            h.update(repr(r["reward"]).encode())
        return h.hexdigest()

    def run(self, seconds):
        latencies, digests = [], set()
        until = time.monotonic() + seconds
        episodes = 0
        while time.monotonic() < until:
            digests.add(self.episode(latencies))
            episodes += 1
        return latencies, digests, episodes


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def percentile_ms(values, q):
    return 1000 * float(np.percentile(values, q)) if values else float("nan")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--binary", default=os.path.join(REPO, "build", "bin", "tiergym"))
    parser.add_argument("--levels", default="64,256,512,1020",
                        help="total learner connections, level by level (the reference and "
                             "the stats probe hold two more)")
    parser.add_argument("--sessions-per-connection", type=int, default=4)
    parser.add_argument("--period", type=float, default=1.0,
                        help="seconds between two steps of one learner connection")
    parser.add_argument("--seconds", type=float, default=5.0, help="per level")
    parser.add_argument("--workers", type=int, default=4, help="load processes")
    parser.add_argument("--max-connections", type=int, default=1024)
    parser.add_argument("--max-sessions", type=int, default=4096)
    parser.add_argument("--max-asset-mib", type=int, default=2048)
    parser.add_argument("--median-ms", type=float, default=1.0,
                        help="bound on the reference's median step latency")
    parser.add_argument("--p99-ms", type=float, default=20.0,
                        help="bound on the reference's 99th-percentile step latency")
    parser.add_argument("--no-latency-bound", dest="latency_bound", action="store_false",
                        help="print the latencies without holding them to the bounds (on a "
                             "machine busy with other work)")
    parser.add_argument("--no-past", dest="past", action="store_false",
                        help="skip the checks past the limits")
    parser.add_argument("--quick", action="store_true",
                        help="a small run (levels 8,28 of 32 connections, 1 s each): the test "
                             "suite's")
    args = parser.parse_args(argv)
    if args.quick:
        args.levels, args.max_connections, args.max_sessions = "8,28", 32, 128
        args.seconds, args.workers, args.period = 1.0, 2, 0.2
        args.latency_bound = False  # the suite's machine is busy with the other tests
    levels = [int(x) for x in args.levels.split(",")]
    raise_fd_limit(65536)

    work = tempfile.mkdtemp(prefix="tiergym-capacity-")
    endpoint = f"ipc://{work}/capacity.sock"
    server = subprocess.Popen(
        [args.binary, "serve", "--endpoint", endpoint, "--threads", "2", "--quiet",
         "--max-connections", str(args.max_connections), "--max-sessions",
         str(args.max_sessions), "--max-sessions-per-connection", "1024", "--max-asset-mib",
         str(args.max_asset_mib)],
        stdout=subprocess.PIPE, stderr=open(os.path.join(work, "server.log"), "wb"))
    line = server.stdout.readline().decode()
    if not line.startswith("listening on"):
        raise SystemExit(f"capacity: the server did not start: {line!r}")
    failed = []
    pipes, procs = [], []
    try:
        load = os.getloadavg()
        print(f"capacity: tiergym serve (pid {server.pid}), {os.cpu_count()} cores, load "
              f"average {load[0]:.1f} at start; limits: {args.max_connections} connections, "
              f"{args.max_sessions} sessions, {args.max_asset_mib} MiB", flush=True)
        reference = Reference(endpoint)
        # Warm up (the configurations load), then the reference alone.
        reference.run(1.0)
        solo, digests, episodes = reference.run(args.seconds)
        first = next(iter(digests))
        solo_p50 = percentile_ms(solo, 50)
        print(f"  alone: {episodes} episodes, step latency median {solo_p50:.3f} ms, p99 "
              f"{percentile_ms(solo, 99):.3f} ms, RSS {rss_mib(server.pid):.0f} MiB",
              flush=True)
        if len(digests) != 1 or None in digests:
            failed.append("alone: the reference's episodes differ")
        ctx = multiprocessing.get_context("spawn")
        for _ in range(args.workers):
            a, b = ctx.Pipe()
            p = ctx.Process(target=worker, args=(endpoint, b, args.sessions_per_connection,
                                                 args.period), daemon=True)
            p.start()
            pipes.append(a)
            procs.append(p)
        stats_conn = Dealer(zmq.Context.instance(), endpoint)
        print(f"  {'connections':>11} {'sessions':>8} {'RSS MiB':>7} {'load steps/s':>12} "
              f"{'ref median ms':>13} {'ref p99 ms':>10} {'bit-identical':>13} {'loadavg':>7}"
              f"  verdict", flush=True)
        opened = 0
        for level in levels:
            add = level - opened
            for i, pipe in enumerate(pipes):
                pipe.send(("grow", add // len(pipes) + (1 if i < add % len(pipes) else 0)))
            codes = {}
            for pipe in pipes:
                for k, v in pipe.recv().items():
                    codes[k] = codes.get(k, 0) + v if k != "messages" else v
            opened = level
            for pipe in pipes:
                pipe.send(("work", args.seconds))
            latencies, digests, episodes = reference.run(args.seconds)
            done = [pipe.recv() for pipe in pipes]
            steps = sum(d["steps"] for d in done)
            late = sum(d["late"] for d in done)
            st = stats_conn.ask("stats")
            p50, p99 = percentile_ms(latencies, 50), percentile_ms(latencies, 99)
            same = digests == {first}
            fast = p50 <= args.median_ms and p99 <= args.p99_ms
            ok = (same and (fast or not args.latency_bound) and late == 0
                  and set(codes) <= {"OK"})
            print(f"  {level:>11} {st['sessions']:>8} {rss_mib(server.pid):>7.0f} "
                  f"{steps / args.seconds:>12.0f} {p50:>13.3f} {p99:>10.3f} "
                  f"{'yes' if same else 'NO':>13} {os.getloadavg()[0]:>7.1f}  "
                  f"{'ok' if ok else 'NOT MET'}"
                  + ("" if set(codes) <= {"OK"} else f" (makes: {codes})"), flush=True)
            if not ok:
                failed.append(f"level {level}")
        if args.past:
            past_checks(args, endpoint, server, reference, first, pipes, failed)
        print(f"  load average {os.getloadavg()[0]:.1f} at the end", flush=True)
    finally:
        for pipe in pipes:
            try:
                pipe.send(("stop",))
            except OSError:
                pass
        for p in procs:
            p.join(timeout=30)
            if p.is_alive():
                p.kill()
        alive = server.poll() is None
        server.terminate()
        try:
            rc = server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            rc = "killed"
    if not alive:
        failed.append("the server died")
    if rc != 0:
        failed.append(f"the server exited {rc} on SIGTERM")
    if failed:
        print(f"capacity: NOT MET: {'; '.join(failed)}; log in {work}")
        return 1
    subprocess.run(["rm", "-rf", work], check=False)
    print("capacity: every level met, refusals past the limits clean")
    return 0


def past_checks(args, endpoint, server, reference, first, pipes, failed):
    """Past the limits: more connections, more sessions, more memory."""
    context = zmq.Context.instance()
    probe = Dealer(context, endpoint)
    probe.ask("hello")
    # 64 connections more than the limit: those past it are closed as they are accepted.
    free = args.max_connections - (int(args.levels.split(",")[-1]) + 3)
    extra = [Dealer(context, endpoint) for _ in range(64)]
    for d in extra:
        d.send("hello")
    answered = answered_within(extra, 2.0)
    for d in extra:
        d.s.close(linger=0)
    # Sessions past --max-sessions.
    codes, message = {}, ""
    for _ in range(args.max_sessions):
        r = probe.ask("make", env=ENV, config=LEARNER)
        code = "NO_REPLY" if r is None else ("OK" if r.get("ok") else r["error"]["code"])
        codes[code] = codes.get(code, 0) + 1
        if code != "OK":
            message = r["error"]["message"] if r else ""
            break
    # A configuration past the memory budget.
    big = probe.ask("make", env=ENV, config={"num_regions": 65536, "steps": 10000})
    big_code = big["error"]["code"] if big and not big.get("ok") else "OK"
    latencies, digests, _ = reference.run(1.0)
    alive = server.poll() is None
    ok_conn = answered <= max(free, 0)
    ok = (alive and digests == {first} and codes.get("RESOURCE_EXHAUSTED") == 1
          and big_code == "RESOURCE_EXHAUSTED" and ok_conn)
    print(f"  past the limits: 64 more connections: {answered} answered ({max(free, 0)} "
          f"places were left), {64 - answered} closed at accept; sessions: {codes} "
          f"({message[:120]}); a configuration past the budget: {big_code}; server alive: "
          f"{alive}; reference bit-identical: {digests == {first}}: "
          f"{'ok' if ok else 'NOT MET'}", flush=True)
    probe.s.close(linger=0)
    if not ok:
        failed.append("past the limits")


if __name__ == "__main__":
    sys.exit(main())

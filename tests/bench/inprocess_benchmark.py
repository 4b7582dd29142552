#!/usr/bin/env python3
"""How fast Python steps placement environments, every path measured in one run:

  C++ in-process        build/bin/tiergym-bench-env: BM_InProcessRoundRobin (N environments
                        in turn, one thread) and BM_InProcessParallel (N environments, T threads)
  Python in-process     tiergym.InProcessVectorEnv (the extension tiergym._core): 1, 64 and
                        256 environments at 1 and 2 threads, synchronous step(); and
                        EnvPool-style send/recv (64 environments, batches of 32, 2 threads)
  batched ZeroMQ        tiergym.VectorEnv (one step_batch message per step) against a private
                        `tiergym serve --threads 2` over ipc, the results in the replies
                        (shm=False: msgpack) and through shared memory (shm=True,
                        copy=False): the steps written into the segment, no message at all
                        (the server's thread of the segment woken by a futex; the default
                        when the server offers it), and, interleaved, the steps as messages
                        answered by the segment's ready signal or by a reply
  SyncVectorEnv         gymnasium.vector.SyncVectorEnv of tiergym.TierEnv (one request per
                        environment and step) against the same server: what a Python user
                        gets without a vector environment

in rounds, with the target ratios taken between figures of the same round (median and range
over the rounds) (targets: Python in-process with 64
environments >= 0.5 of C++ in-process at equal threads, >= 5x the batched ZeroMQ path, >= 20x
SyncVectorEnv; the shared-memory path >= 0.5 of Python in-process at equal threads, measured
also interleaved with it in slices of 0.1 s so that both see the same load). Every path runs the default configuration (bundled profiles, 64 regions, 100
steps, placement actions) with the C++ benchmark's actions: at step s, region s mod 64 on
tier 1 and the rest on tier 0 (two regions move per step); episodes autoreset.

    .venv/bin/python tests/bench/inprocess_benchmark.py [--min-time 2] [--rounds 3] [--skip-cpp]
        [--only-interleaved]

The interleaved rows alternate four paths in 0.1 s slices: Python in-process, shared memory
with the steps written into the segment (no message), shared memory with step_batch messages
and the ready signal (a futex in the segment: no reply per batch) and shared memory with a
reply per batch (as before the signal), and give each one's CPU time per environment step
(this process's, plus the server's for the server paths): on a loaded machine wall-clock
figures swing with the load, CPU time much less. --only-interleaved runs only those.

Runs with the package installed (./scripts/setup.sh: `pip install -e .` builds the extension
and the server binary into it) and, for the C++ figures, build/bin/tiergym-bench-env
(scripts/build.sh).
"""

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

import numpy as np

import tiergym

REPO = pathlib.Path(__file__).resolve().parents[2]

REGIONS = 64


def two_moves(n):
    """The C++ benchmark's actions for n environments, one array per step mod REGIONS."""
    out = []
    for s in range(REGIONS):
        a = np.zeros((n, REGIONS), dtype=np.int64)
        a[:, s] = 1
        out.append(a)
    return out


def measure(step, n_envs, min_time_s, warmup=20):
    """Steps/s of `step(i)` (one call = n_envs environment steps) over at least min_time_s."""
    for i in range(warmup):
        step(i)
    calls = 0
    start = time.perf_counter()
    while True:
        for _ in range(10):
            step(calls)
            calls += 1
        elapsed = time.perf_counter() - start
        if elapsed >= min_time_s:
            return calls * n_envs / elapsed


def bench_cpp(threads, batch, min_time_s):
    """items/s of BM_InProcessRoundRobin (threads == 1) or BM_InProcessParallel."""
    binary = REPO / "build" / "bin" / "tiergym-bench-env"
    name = "BM_InProcessRoundRobin" if threads == 1 else "BM_InProcessParallel"
    with tempfile.TemporaryDirectory() as tmp:
        out = pathlib.Path(tmp) / "out.json"
        subprocess.run([str(binary), "--threads", str(threads), "--batch", str(batch),
                        f"--benchmark_filter=^{name}(/|$)", f"--benchmark_min_time={min_time_s}",
                        f"--benchmark_out={out}", "--benchmark_out_format=json"],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        runs = json.loads(out.read_text())["benchmarks"]
        return float(runs[0]["items_per_second"])


def bench_inprocess(n, threads, min_time_s):
    envs = tiergym.InProcessVectorEnv(n, threads=threads)
    try:
        envs.reset(seed=1)
        actions = two_moves(n)
        return measure(lambda i: envs.step(actions[i % REGIONS]), n, min_time_s)
    finally:
        envs.close()


def bench_inprocess_async(n, batch, threads, min_time_s):
    envs = tiergym.InProcessVectorEnv(n, threads=threads, batch_size=batch)
    try:
        envs.async_reset(seed=1)
        actions = two_moves(batch)

        def step(i):
            infos = envs.recv()[4]
            envs.send(actions[i % REGIONS], infos["env_id"])
        return measure(step, batch, min_time_s)
    finally:
        envs.close()


def bench_zmq(server, n, min_time_s, shm=False):
    envs = tiergym.VectorEnv(n, address=server, shm=shm, copy=not shm)
    try:
        envs.reset(seed=1)
        actions = two_moves(n)
        if shm and not (envs.shm and envs._shared.requests):
            raise RuntimeError("the shared-memory path (steps written into the segment) was "
                               "not taken")
        return measure(lambda i: envs.step(actions[i % REGIONS]), n, min_time_s)
    finally:
        envs.close()


def process_cpu_s(pid):
    """CPU seconds (user + system, every thread) of process `pid` so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def bench_interleaved(server, n, threads, min_time_s, slice_s=0.1):
    """{path: (steps/s, CPU us per environment step)} for Python in-process ("in"), shared
    memory with the steps written into the segment ("shm"), with step_batch messages and
    the ready signal ("shm_signal") and with a reply per batch ("shm_reply"), measured in alternating slices of slice_s: every path under the same load
    from other processes (the machine is shared), which sequential measurements a few seconds
    apart are not. CPU time: this process's, plus the server's for the server paths (both
    sides of the round trip; wall-clock figures swing with the load, CPU time less)."""
    inproc = tiergym.InProcessVectorEnv(n, threads=threads)
    shm = tiergym.VectorEnv(n, address=server, shm=True, copy=False)
    shm_signal = tiergym.VectorEnv(n, address=server, shm=True, copy=False)
    shm_signal._use_requests = False  # step_batch messages, answered by the ready signal
    shm_reply = tiergym.VectorEnv(n, address=server, shm=True, copy=False)
    shm_reply._use_requests = False
    shm_reply._use_signal = False  # a reply per batch (as before the ready signal)
    paths = {"in": (inproc, False), "shm": (shm, True), "shm_signal": (shm_signal, True),
             "shm_reply": (shm_reply, True)}
    try:
        actions = two_moves(n)
        for envs, _ in paths.values():
            envs.reset(seed=1)
            for i in range(20):
                envs.step(actions[i % REGIONS])
        if not (shm.shm and shm._shared.requests and shm_signal.shm and shm_signal._shared.signal
                and not shm_signal._shared.requests and shm_reply.shm):
            raise RuntimeError("the shared-memory paths (steps written into the segment, the "
                               "ready signal) were not taken")
        steps = dict.fromkeys(paths, 0)
        spent = dict.fromkeys(paths, 0.0)
        cpu = dict.fromkeys(paths, 0.0)
        i = 0
        while sum(spent.values()) < len(paths) * min_time_s:
            for key, (envs, served) in paths.items():
                start, cpu0 = time.perf_counter(), time.process_time()
                server_cpu0 = process_cpu_s(server.process.pid) if served else 0.0
                calls = 0
                while time.perf_counter() - start < slice_s:
                    envs.step(actions[i % REGIONS])
                    i += 1
                    calls += 1
                spent[key] += time.perf_counter() - start
                cpu[key] += time.process_time() - cpu0
                if served:
                    cpu[key] += process_cpu_s(server.process.pid) - server_cpu0
                steps[key] += calls * n
        return {k: (steps[k] / spent[k], 1e6 * cpu[k] / steps[k]) for k in paths}
    finally:
        for envs, _ in paths.values():
            envs.close()


def bench_sync_vector_env(server, n, min_time_s):
    import gymnasium
    envs = gymnasium.vector.SyncVectorEnv(
        [lambda: tiergym.TierEnv(address=server) for _ in range(n)])
    try:
        envs.reset(seed=1)
        actions = two_moves(n)
        return measure(lambda i: envs.step(actions[i % REGIONS]), n, min_time_s, warmup=5)
    finally:
        envs.close()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--min-time", type=float, default=2.0,
                        help="seconds each path is stepped for (default 2)")
    parser.add_argument("--rounds", type=int, default=3,
                        help="rounds over every path (default 3): medians are reported, and "
                             "ratios of figures measured in the same round")
    parser.add_argument("--skip-cpp", action="store_true",
                        help="leave out the C++ figures (no tiergym-bench-env)")
    parser.add_argument("--only-interleaved", action="store_true",
                        help="only the interleaved rows (in-process against shared memory "
                             "with the steps written into the segment, as messages with the "
                             "ready signal and with a reply per batch, with CPU times)")
    args = parser.parse_args()
    t = args.min_time
    # Rounds: every path once per round, in the same order; ratios are taken within a
    # round and their median reported, so that a burst of load from other processes (this
    # VM's two cores are shared) does not decide a ratio alone.
    def interleaved(server):
        pair = bench_interleaved(server, 64, 2, t)
        return [
            ("pair_in", "Python in-process, 64 environments, 2 threads, interleaved with the "
             "next three rows in slices of 0.1 s", pair["in"][0]),
            ("pair_shm", "shared memory, steps written into the segment (no message), 64 "
             "environments, server 2 threads, interleaved", pair["shm"][0]),
            ("pair_shm_signal", "shared memory, step_batch messages and the ready signal, 64 "
             "environments, server 2 threads, interleaved", pair["shm_signal"][0]),
            ("pair_shm_reply", "batched ZeroMQ with shared memory, a reply per batch (no ready "
             "signal), 64 environments, server 2 threads, interleaved", pair["shm_reply"][0]),
            ("cpu_in", "CPU us per environment step: Python in-process, interleaved",
             pair["in"][1]),
            ("cpu_shm", "CPU us per environment step (client + server): shared memory, "
             "steps written into the segment, interleaved", pair["shm"][1]),
            ("cpu_shm_signal", "CPU us per environment step (client + server): shared memory, "
             "messages and the ready signal, interleaved", pair["shm_signal"][1]),
            ("cpu_shm_reply", "CPU us per environment step (client + server): shared memory, "
             "a reply per batch, interleaved", pair["shm_reply"][1]),
        ]

    def measure_all():
        if args.only_interleaved:
            server = tiergym.Server(args=["--threads", "2", "--quiet"])
            try:
                return interleaved(server)
            finally:
                server.close()
        out = []
        if not args.skip_cpp:
            out.append(("cpp1", "C++ in-process, 64 environments in turn, 1 thread",
                        bench_cpp(1, 64, t)))
            out.append(("cpp2", "C++ in-process, 64 environments, 2 threads", bench_cpp(2, 64, t)))
        for threads in (1, 2):
            for n in (1, 64, 256):
                out.append((f"py{n}_{threads}",
                            f"Python in-process, {n} environment{'s' if n > 1 else ''}, "
                            f"{threads} thread{'s' if threads > 1 else ''}",
                            bench_inprocess(n, threads, t)))
        out.append(("pyasync",
                    "Python in-process send/recv, 64 environments, batches of 32, 2 threads",
                    bench_inprocess_async(64, 32, 2, t)))
        server = tiergym.Server(args=["--threads", "2", "--quiet"])
        try:
            out.append(("zmq", "batched ZeroMQ (tiergym.VectorEnv, step_batch), 64 environments, "
                        "server 2 threads", bench_zmq(server, 64, t)))
            out.append(("shm", "shared memory (tiergym.VectorEnv shm=True, copy=False: steps "
                        "written into the segment), 64 environments, server 2 threads",
                        bench_zmq(server, 64, t, shm=True)))
            out.extend(interleaved(server))
            out.append(("sync", "gymnasium SyncVectorEnv of 64 tiergym.TierEnv, server 2 threads",
                        bench_sync_vector_env(server, 64, t)))
        finally:
            server.close()
        return out

    load_before = os.getloadavg()
    rounds = []  # per round: {key: steps/s}
    labels = {}
    for r in range(args.rounds):
        print(f"round {r + 1} of {args.rounds} (each path for {t:.1f} s) ...", file=sys.stderr)
        this = {}
        for key, label, value in measure_all():
            shown = f"{value:.2f}" if key.startswith("cpu_") else f"{value:,.0f} steps/s"
            print(f"  {label}: {shown}", file=sys.stderr, flush=True)
            labels[key] = label
            this[key] = value
        rounds.append(this)

    def median(xs):
        xs = sorted(xs)
        m = len(xs) // 2
        return xs[m] if len(xs) % 2 else (xs[m - 1] + xs[m]) / 2

    def ratio(a, b):
        """Median over the rounds of a / b measured in the same round, with the range."""
        rs = [rd[a] / rd[b] for rd in rounds]
        return median(rs), min(rs), max(rs)

    def fmt(k, r):
        med, lo, hi = r
        fraction = k.startswith(("cpp", "py", "pair_in"))  # of a faster path; else times a slower
        digits = 2 if fraction else 1
        unit = "" if fraction else "x"
        rng = f" ({lo:.{digits}f}-{hi:.{digits}f})" if len(rounds) > 1 else ""
        return f"**{med:.{digits}f}{unit}**{rng}"

    against = {
        "py64_1": [("cpp1", "C++ 1 thread"), ("zmq", "batched ZeroMQ"), ("sync", "SyncVectorEnv")],
        "py64_2": [("cpp2", "C++ 2 threads"), ("zmq", "batched ZeroMQ"), ("sync", "SyncVectorEnv")],
        "py256_1": [("cpp1", "C++ 1 thread")],
        "py256_2": [("cpp2", "C++ 2 threads")],
        "pyasync": [("cpp2", "C++ 2 threads")],
        "zmq": [("cpp2", "C++ 2 threads")],
        "shm": [("py64_2", "Python in-process 2 threads"), ("zmq", "batched ZeroMQ"),
                ("cpp2", "C++ 2 threads")],
        "pair_shm": [("pair_in", "Python in-process 2 threads, interleaved"),
                     ("pair_shm_signal", "messages and the ready signal, interleaved"),
                     ("pair_shm_reply", "a reply per batch, interleaved")],
        "pair_shm_signal": [("pair_in", "Python in-process 2 threads, interleaved"),
                            ("pair_shm_reply", "a reply per batch, interleaved")],
        "pair_shm_reply": [("pair_in", "Python in-process 2 threads, interleaved")],
        "cpu_shm": [("cpu_in", "in-process"), ("cpu_shm_signal", "messages and the ready signal"),
                    ("cpu_shm_reply", "a reply per batch")],
        "cpu_shm_signal": [("cpu_in", "in-process"), ("cpu_shm_reply", "a reply per batch")],
        "cpu_shm_reply": [("cpu_in", "in-process")],
    }
    print(f"tests/bench/inprocess_benchmark.py --min-time {t} --rounds {args.rounds}: default "
          "configuration (bundled profiles, 64 regions, 100 steps), two regions move per step, "
          "autoreset. steps/s: median of the rounds; ratios: median (range) over the rounds of "
          "the ratio within a round\n")
    load_after = os.getloadavg()
    print(f"Load average (1, 5, 15 min) before: {load_before[0]:.2f} {load_before[1]:.2f} "
          f"{load_before[2]:.2f}; after: {load_after[0]:.2f} {load_after[1]:.2f} "
          f"{load_after[2]:.2f} ({os.cpu_count()} CPUs)\n")
    print("| path | steps/s | against, same round |")
    print("| --- | ---: | --- |")
    for key in rounds[0]:
        notes = [f"{name}: {fmt(k, ratio(key, k))}" for k, name in against.get(key, [])
                 if k in rounds[0]]
        value = median([rd[key] for rd in rounds])
        shown = f"{value:.2f}" if key.startswith("cpu_") else f"{value:,.0f}"
        print(f"| {labels[key]} | {shown} | {'; '.join(notes)} |")
    print()
    checks = []
    if args.only_interleaved:
        checks.append(("Shared memory, steps written into the segment / Python in-process 64 "
                       "envs 2 threads, interleaved", ratio("pair_shm", "pair_in"), 0.5))
        checks.append(("Shared memory, messages and the ready signal / Python in-process, "
                       "interleaved", ratio("pair_shm_signal", "pair_in"), 0.5))
        checks.append(("Shared memory, a reply per batch / Python in-process, interleaved",
                       ratio("pair_shm_reply", "pair_in"), 0.5))
        checks.append(("Python in-process / shared memory with the steps written into the "
                       "segment, CPU time per step", ratio("cpu_in", "cpu_shm"), 0.5))
    else:
        checks.extend(full_checks(rounds, ratio))
    for label, (med, lo, hi), goal in checks:
        print(f"{label}: median {med:.2f}, range {lo:.2f}-{hi:.2f} (goal >= {goal:g}: "
              f"{'met' if med >= goal else 'NOT met'} by the median, "
              f"{'met' if lo >= goal else 'not met'} in every round)")


def full_checks(rounds, ratio):
    """The goals, as (label, (median, low, high), goal)."""
    checks = []
    for threads in (1, 2):
        if f"cpp{threads}" in rounds[0]:
            checks.append((f"Python in-process 64 envs / C++ in-process, {threads} thread(s)",
                           ratio(f"py64_{threads}", f"cpp{threads}"), 0.5))
    checks.append(("Python in-process 64 envs 2 threads / batched ZeroMQ (2 threads)",
                   ratio("py64_2", "zmq"), 5.0))
    checks.append(("Python in-process 64 envs 1 thread / SyncVectorEnv",
                   ratio("py64_1", "sync"), 20.0))
    checks.append(("Shared memory (steps written into the segment) 64 envs (server 2 threads) "
                   "/ Python in-process 64 envs 2 threads", ratio("shm", "py64_2"), 0.5))
    checks.append(("The same, measured interleaved (the same load on both)",
                   ratio("pair_shm", "pair_in"), 0.5))
    checks.append(("Python in-process / shared memory, CPU time per step, interleaved",
                   ratio("cpu_in", "cpu_shm"), 0.5))
    return checks

if __name__ == "__main__":
    main()

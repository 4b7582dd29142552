#!/usr/bin/env python3
"""Parallel rollout workers: several processes, each stepping a tiergym.VectorEnv, against
one shared server or one server each. Measures the aggregate env-steps/s of N workers
against one worker alone, in the same run, and prints the ratio.

    python agents_examples/rollouts.py                         # 2 workers, a server each
    python agents_examples/rollouts.py --workers 4 --shared-server --server-threads 2
    python agents_examples/rollouts.py --address tcp://127.0.0.1:5555 --workers 8

An env-step is one sub-environment advancing one decision interval; a worker with
`--envs` sub-environments makes `--envs` env-steps per step_batch message. Each worker
resets its VectorEnv (autoreset next_step), steps a few batches to warm up, waits for the
others at a barrier, then steps for `--seconds`; the aggregate rate is the sum of the
workers' env-steps over the span from the first start to the last finish. Actions come from
`--policy`: `random` (a uniform tier per region, the costliest: about half the regions move
every step) or `static` (everything on the default tier, nothing moves: the cheapest step,
what the transport and the server add).

Servers: without --address and --shared-server every worker starts its own private
`tiergym serve --threads SERVER_THREADS`; with --shared-server the launcher starts one
server with --server-threads (default: the number of workers) that every worker connects
to; --address uses a running server. Progress goes to stderr, results to stdout.
"""

import argparse
import multiprocessing
import os
import sys
import time

import numpy as np

import tiergym

WARMUP_BATCHES = 3


def log(*parts):
    print(*parts, file=sys.stderr, flush=True)


def worker_loop(index, address, options, barrier=None):
    """One worker: a VectorEnv on `address` (an endpoint, or None for a private server),
    warm-up, the barrier, then `options["seconds"]` of stepping. Returns a dict with the
    worker's index, env_steps, start and end (time.monotonic(), system-wide on Linux)."""
    server = None
    if address is None:
        server = tiergym.Server(args=["--threads", str(options["server_threads"]), "--quiet"])
        address = server
    try:
        config = {"num_regions": options["num_regions"], "steps": options["steps"]}
        if options.get("machine"):
            config["machine"] = options["machine"]
        with tiergym.VectorEnv(options["envs"], address=address, **config) as envs:
            rng = np.random.default_rng(options["seed"] + index)
            tiers = int(envs.single_action_space.nvec[0])
            shape = (envs.num_envs, int(envs.tier_spec["num_regions"]))
            static = np.zeros(shape, dtype=np.int64)

            def actions():
                if options["policy"] == "static":
                    return static
                return rng.integers(0, tiers, shape)

            envs.reset(seed=options["seed"] + 1000 * index)
            for _ in range(WARMUP_BATCHES):
                envs.step(actions())
            if barrier is not None:
                barrier.wait(timeout=600)
            batches = 0
            start = time.monotonic()
            deadline = start + options["seconds"]
            while True:
                envs.step(actions())
                batches += 1
                now = time.monotonic()
                if now >= deadline:
                    break
            return {"worker": index, "env_steps": batches * envs.num_envs, "start": start,
                    "end": now, "pid": os.getpid()}
    finally:
        if server is not None:
            server.close()


def _worker_main(index, address, options, barrier, results):
    try:
        results.put(worker_loop(index, address, options, barrier))
    except BaseException as e:  # reported to the launcher, which fails with it
        barrier.abort()
        results.put({"worker": index, "error": f"{type(e).__name__}: {e}"})


def aggregate(results):
    """{"workers", "env_steps", "seconds", "steps_per_s"} over worker results: the sum of
    the env-steps over the span from the first start to the last end."""
    span = max(r["end"] for r in results) - min(r["start"] for r in results)
    steps = sum(r["env_steps"] for r in results)
    return {"workers": len(results), "env_steps": steps, "seconds": span,
            "steps_per_s": steps / span if span > 0 else 0.0,
            "per_worker": [r["env_steps"] / (r["end"] - r["start"]) for r in results]}


def run_workers(n, address, options):
    """Runs n worker processes (spawned) at once; their aggregate (see aggregate)."""
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(n)
    results = ctx.Queue()
    procs = [ctx.Process(target=_worker_main, args=(i, address, options, barrier, results),
                         daemon=True) for i in range(n)]
    for p in procs:
        p.start()
    out = []
    try:
        for _ in range(n):
            out.append(results.get(timeout=600 + options["seconds"]))
    finally:
        for p in procs:
            p.join(timeout=60)
            if p.is_alive():
                p.terminate()
    errors = [r["error"] for r in out if "error" in r]
    if errors:
        raise RuntimeError("rollout worker failed: " + "; ".join(errors))
    return aggregate(out)


def measure(options, workers, shared_server, address, server_threads, progress=log):
    """One worker alone, then `workers` at once, in this run; returns (single, parallel)
    aggregates. With shared_server (and no address), one private server serves both
    phases; else each worker has its own."""
    server = None
    try:
        if address is None and shared_server:
            server = tiergym.Server(args=["--threads", str(server_threads), "--quiet"])
            address = server.endpoint
            progress(f"shared server {address} with {server_threads} threads")
        progress(f"1 worker x {options['envs']} envs for {options['seconds']} s ...")
        single = run_workers(1, address, options)
        progress(f"  {single['steps_per_s']:.0f} env-steps/s")
        progress(f"{workers} workers x {options['envs']} envs for {options['seconds']} s ...")
        parallel = run_workers(workers, address, options)
        progress(f"  {parallel['steps_per_s']:.0f} env-steps/s")
        return single, parallel
    finally:
        if server is not None:
            server.close()


def add_worker_args(parser):
    parser.add_argument("--envs", type=int, default=8,
                        help="sub-environments per worker's VectorEnv (default 8)")
    parser.add_argument("--seconds", type=float, default=3.0,
                        help="measured stepping time per phase (default 3)")
    parser.add_argument("--policy", choices=("random", "static"), default="random",
                        help="random: a uniform tier per region; static: nothing moves "
                             "(default random)")
    parser.add_argument("--num-regions", type=int, default=64, help="regions (default 64)")
    parser.add_argument("--steps", type=int, default=100,
                        help="decision intervals per episode (default 100)")
    parser.add_argument("--machine", help="machine preset or JSON (default: the server's knl)")
    parser.add_argument("--seed", type=int, default=0, help="seed (default 0)")
    parser.add_argument("--server-threads", type=int, default=None,
                        help="threads of each server (default: 1 per private server; the "
                             "number of workers for a shared one)")


def worker_options(args):
    return {"envs": args.envs, "seconds": args.seconds, "policy": args.policy,
            "num_regions": args.num_regions, "steps": args.steps, "machine": args.machine,
            "seed": args.seed, "server_threads": args.server_threads or 1}


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 2)[2],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=2, help="worker processes (default 2)")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--shared-server", action="store_true",
                       help="one private server for every worker (default: one each)")
    where.add_argument("--address", help="a running server for every worker")
    parser.add_argument("--repeats", type=int, default=1,
                        help="measure both phases this many times (default 1)")
    add_worker_args(parser)
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    if args.workers < 1 or args.envs < 1 or args.seconds <= 0:
        parser.error("--workers and --envs must be at least 1, --seconds positive")
    options = worker_options(args)
    shared_threads = args.server_threads or args.workers
    if args.address:
        servers = f"the server at {args.address}"
    elif args.shared_server:
        servers = f"one shared server ({shared_threads} threads)"
    else:
        servers = f"one server per worker ({options['server_threads']} thread each)"
    print(f"rollouts: {args.policy} actions, {args.num_regions} regions, {args.envs} envs per "
          f"worker, {servers}, {os.cpu_count()} cores")
    ratios = []
    for rep in range(args.repeats):
        if args.repeats > 1:
            log(f"repeat {rep + 1} of {args.repeats}")
        try:
            single, parallel = measure(options, args.workers, args.shared_server,
                                       args.address, shared_threads)
        except (RuntimeError, tiergym.TierGymError) as e:
            print(f"rollouts.py: {e}", file=sys.stderr)
            return 1
        print(f"1 worker: {single['env_steps']} env-steps in {single['seconds']:.2f} s = "
              f"{single['steps_per_s']:.0f} env-steps/s")
        print(f"{args.workers} workers: {parallel['env_steps']} env-steps in "
              f"{parallel['seconds']:.2f} s = {parallel['steps_per_s']:.0f} env-steps/s "
              f"(per worker: {', '.join(f'{r:.0f}' for r in parallel['per_worker'])})")
        ratio = parallel["steps_per_s"] / single["steps_per_s"] if single["steps_per_s"] else 0.0
        ratios.append(ratio)
        print(f"ratio {args.workers} workers / 1 worker: {ratio:.2f}")
    if len(ratios) > 1:
        print(f"ratios over {len(ratios)} repeats: median {float(np.median(ratios)):.2f}, "
              f"range {min(ratios):.2f}-{max(ratios):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Rollouts beyond one machine: an mpi4py launcher where every MPI rank starts its own
tiergym server (on its own host) and its own rollout workers, and rank 0 gathers the
env-steps/s of every rank and the total. Needs mpi4py (PyPI) and an MPI (Debian's openmpi-bin).

    mpirun -n 2 python agents_examples/mpi_rollouts.py
    mpirun -n 4 --host a,b python agents_examples/mpi_rollouts.py --workers-per-rank 2
    # as root, in a container: add --allow-run-as-root --oversubscribe

Two phases, as in rollouts.py: rank 0 alone (the others wait at a barrier), then every
rank at once; rank 0 prints each rank's rate, the total and the ratio to one rank. Within a
rank, --workers-per-rank 1 (the default) steps a VectorEnv in the rank's own process;
more start that many worker processes (rollouts.run_workers) on the rank's server. Ranks
meet at an MPI barrier after their warm-up, so the measured spans overlap. Progress goes to
stderr (rank 0), results to stdout (rank 0).
"""

import argparse
import os
import socket
import sys
import traceback

import rollouts


class MpiBarrier:
    """rollouts.worker_loop's barrier over an MPI communicator."""

    def __init__(self, comm):
        self.comm = comm

    def wait(self, timeout=None):
        self.comm.Barrier()


def run_rank(comm, active, options, workers, server_threads):
    """This rank's part of a phase: its own server and workers when `active`, and the MPI
    barrier that starts the measured span either way. Returns an aggregate or None."""
    server = None
    try:
        if active:
            server = rollouts.tiergym.Server(args=["--threads", str(server_threads), "--quiet"])
            if workers == 1:
                result = rollouts.worker_loop(comm.Get_rank(), server.endpoint, options,
                                              MpiBarrier(comm))
                return rollouts.aggregate([result])
            comm.Barrier()
            return rollouts.run_workers(workers, server.endpoint, options)
        comm.Barrier()
        return None
    finally:
        if server is not None:
            server.close()


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers-per-rank", type=int, default=1,
                        help="rollout workers per rank (default 1: in the rank's process)")
    rollouts.add_worker_args(parser)
    args = parser.parse_args(argv)
    try:
        from mpi4py import MPI  # imported here: spawned worker processes must not init MPI
    except ImportError as e:
        print(f"mpi_rollouts.py: mpi4py is not installed ({e}); install "
              "mpi4py (pip install mpi4py) and openmpi-bin (./scripts/install_deps.sh)", file=sys.stderr)
        return 1
    comm = MPI.COMM_WORLD
    try:
        return run(comm, args)
    except BaseException:
        # A rank that fails must not leave the others waiting at a barrier forever.
        traceback.print_exc()
        sys.stderr.flush()
        comm.Abort(1)
        raise


def run(comm, args):
    rank, size = comm.Get_rank(), comm.Get_size()
    options = rollouts.worker_options(args)
    options["seed"] = args.seed + 100_000 * rank
    threads = args.server_threads or args.workers_per_rank
    say = rollouts.log if rank == 0 else (lambda *a: None)

    say(f"{size} ranks, {args.workers_per_rank} worker(s) x {args.envs} envs each, a server "
        f"per rank ({threads} threads); rank 0 alone for {args.seconds} s ...")
    alone = run_rank(comm, rank == 0, options, args.workers_per_rank, threads)
    if alone is not None:
        say(f"  {alone['steps_per_s']:.0f} env-steps/s")
    say(f"all {size} ranks for {args.seconds} s ...")
    mine = run_rank(comm, True, options, args.workers_per_rank, threads)
    mine["rank"], mine["host"], mine["pid"] = rank, socket.gethostname(), os.getpid()
    gathered = comm.gather(mine, root=0)
    if rank == 0:
        span = (max(r["seconds"] for r in gathered))
        total_steps = sum(r["env_steps"] for r in gathered)
        total = sum(r["steps_per_s"] for r in gathered)
        print(f"mpi_rollouts: {size} ranks, {args.workers_per_rank} worker(s) x {args.envs} envs "
              f"per rank, {args.policy} actions, {args.num_regions} regions")
        for r in gathered:
            print(f"rank {r['rank']} ({r['host']}, pid {r['pid']}): {r['env_steps']} env-steps "
                  f"in {r['seconds']:.2f} s = {r['steps_per_s']:.0f} env-steps/s")
        print(f"total: {total_steps} env-steps, {total:.0f} env-steps/s "
              f"(sum of the ranks' rates; longest span {span:.2f} s)")
        print(f"rank 0 alone: {alone['steps_per_s']:.0f} env-steps/s; ratio {size} ranks / 1: "
              f"{total / alone['steps_per_s']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Exchanges between hosts as pieces under Open MPI's TCP eager limit, against whole messages.

Open MPI's TCP transport sends a message of at most ``btl_tcp_eager_limit`` bytes (64 KiB by
default) at once; a larger one sends its first fragment and waits for the receiver's
acknowledgement before the rest. ``gnnscale.comm.eager_pieces`` sends alltoallv messages to
other hosts of up to 4 times the limit as pieces under it. Two parts, on a virtual cluster of
2 hosts with one core each and one rank per host (``gnnscale.testing.cluster``; root):

- ``exchanges``: the transport alone (mpi4py): two exchanges back to back, ``a`` KiB from
  rank 0 and ``b`` KiB from rank 1 then the reverse, with 3 and 1 ms of computing (testing
  the requests each ms) while they travel; each message whole or as pieces of 64 KiB less 256
  bytes, whatever its size; median per pair after warm-up.
- ``training``: the engine's training step and evaluation with pieces (the default) and
  without (``GNNSCALE_EAGER_PIECE_BYTES=0``) in alternating jobs, each job training every
  ``--methods`` partition in turns (``benchmarks/vertex_cut_overlap.py``'s rank main).

Command (3 min)::

    flock /tmp/gnnscale-bench.lock python benchmarks/eager_pieces.py \\
        --rates 100mbit 1gbit 10gbit --out benchmarks/results/eager_pieces.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "benchmarks")]

from gnnscale.comm.eager_pieces import EAGER_PIECE_BYTES as PIECE_BYTES  # noqa: E402

#: (KiB from rank 0, KiB from rank 1) per exchange
SIZES = [(74, 60), (145, 60), (145, 30), (145, 145), (400, 100), (1000, 1000), (2000, 600)]
COMPUTE_S = {"100mbit": 3e-3, "1gbit": 6e-4, "10gbit": 2e-4, "none": 2e-4}


def _busy(seconds: float, requests, mpi) -> None:
    start = last = time.perf_counter()
    while (now := time.perf_counter()) - start < seconds:
        if now - last >= 1e-3:
            mpi.Request.Testall(requests)
            last = now


def _post(comm, mpi, mode: str, send, recv, n_send: int, n_recv: int) -> list:
    peer = 1 - comm.rank
    if mode == "whole":
        sc, rc = np.zeros(2, int), np.zeros(2, int)
        sc[peer], rc[peer] = n_send, n_recv
        zero = np.zeros(2, int)
        return [comm.Ialltoallv([send, (sc, zero)], [recv, (rc, zero)])]
    piece = PIECE_BYTES // 4
    return [comm.Irecv(recv[o:min(o + piece, n_recv)], peer, 7) for o in range(0, n_recv, piece)] \
        + [comm.Isend(send[o:min(o + piece, n_send)], peer, 7) for o in range(0, n_send, piece)]


def exchanges_main(compute_s: float, result: Path) -> None:
    """Rank main of the ``exchanges`` part: writes rank 0's medians to ``result``."""
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    rows = []
    for a, b in SIZES:
        n = max(a, b) * 256
        send, recv = np.ones(n, np.float32), np.empty(n, np.float32)
        mine, theirs = (a * 256, b * 256) if comm.rank == 0 else (b * 256, a * 256)
        row = {"a_kib": a, "b_kib": b}
        for mode in ("whole", "pieces"):
            times = []
            for _ in range(30):
                comm.Barrier()
                start = time.perf_counter()
                for n_send, n_recv, compute in ((mine, theirs, compute_s),
                                                (theirs, mine, compute_s / 3)):
                    comm.allgather(0)  # the checked communicator's signature exchange
                    requests = _post(comm, MPI, mode, send, recv, n_send, n_recv)
                    _busy(compute, requests, MPI)
                    MPI.Request.Waitall(requests)
                times.append(time.perf_counter() - start)
            row[f"{mode}_pair_s"] = float(np.median(times[5:]))
        row["pieces_ratio"] = row["pieces_pair_s"] / row["whole_pair_s"]
        rows.append(row)
    if comm.rank == 0:
        result.write_text(json.dumps(rows))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rates", nargs="+", default=["100mbit", "1gbit", "10gbit"])
    parser.add_argument("--dataset", default="SNAP-ca-astroph")
    parser.add_argument("--model", default="gcn", choices=["gcn", "sage"])
    parser.add_argument("--methods", nargs="+", default=["libra", "random", "metis"])
    parser.add_argument("--rounds", type=int, default=6, help="turns of 3 epochs per job")
    parser.add_argument("--repeats", type=int, default=2, help="jobs per variant and rate")
    parser.add_argument("--out", default=None)
    parser.add_argument("--exchanges-main", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.exchanges_main:
        exchanges_main(float(args.exchanges_main[0]), Path(args.exchanges_main[1]))
        return
    from vertex_cut_overlap import at_each_rate, job_env, run_job

    args.variants = ["overlapped"]
    envs = {"pieces": job_env(), "whole": {**job_env(), "GNNSCALE_EAGER_PIECE_BYTES": "0"}}
    exchanges, training = [], []
    for cluster, folder, rate in at_each_rate(args.rates, "ep"):
        out = folder / f"{rate}-exchanges.json"
        argv = cluster.mpirun_argv(1, env=envs["pieces"]) + [
            sys.executable, __file__, "--exchanges-main", str(COMPUTE_S.get(rate, 2e-4)),
            str(out)]
        done = cluster.run("node0", argv, cwd=REPO, env=envs["pieces"], timeout=900)
        if done.returncode != 0:
            sys.exit(f"{Path(sys.argv[0]).name}: a job failed:\n{done.stderr[-3000:]}")
        for row in json.loads(out.read_text()):
            exchanges.append({"rate": rate, **row})
            print(f"{rate:>8} {row['a_kib']:5d}/{row['b_kib']:<5d} KiB: whole "
                  f"{row['whole_pair_s'] * 1e3:7.2f} ms, pieces {row['pieces_pair_s'] * 1e3:7.2f}"
                  f" ({row['pieces_ratio']:.2f}x)", flush=True)
        steps = {(m, k): [] for m in args.methods for k in envs}
        evals = {(m, k): [] for m in args.methods for k in envs}
        for repeat in range(args.repeats):
            for name in (list(envs) if repeat % 2 == 0 else list(envs)[::-1]):
                for row in run_job(cluster, envs[name], args, folder / f"{rate}-{name}.json"):
                    steps[(row["method"], name)] += row["steps_s"]
                    evals[(row["method"], name)] += row["evals_s"]
        for method in args.methods:
            row = {"rate": rate, "dataset": args.dataset, "model": args.model, "method": method}
            for name in envs:
                row[name] = {"step_s": float(np.median(steps[(method, name)])),
                             "eval_s": float(np.median(evals[(method, name)]))}
            row["step_ratio"] = row["pieces"]["step_s"] / row["whole"]["step_s"]
            training.append(row)
            print(f"{rate:>8} {method:8s}: step {row['whole']['step_s'] * 1e3:7.1f} ms whole, "
                  f"{row['pieces']['step_s'] * 1e3:7.1f} in pieces ({row['step_ratio']:.2f}x); "
                  f"evaluation {row['whole']['eval_s'] * 1e3:6.1f} / "
                  f"{row['pieces']['eval_s'] * 1e3:6.1f} ms", flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(
            {"piece_bytes": PIECE_BYTES, "rounds": args.rounds, "repeats": args.repeats,
             "exchanges": exchanges, "training": training}, indent=1))


if __name__ == "__main__":
    main()

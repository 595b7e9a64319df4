"""What posting an exchange between two hosts costs the rank that posts it.

A halo exchange is posted on the rank's own thread and completed there: that time is the
rank's work, which no compute hides (``planning/cost_model.py`` charges each exchange's fixed
cost, ``exchange_overhead_s``, at its post). On a virtual cluster of 2 hosts with one core
each and one rank per host (``gnnscale.testing.cluster``; root), each rank posts an exchange
of ``KiB`` to the other and waits for it, 200 times per size (medians after 20): the post
alone and the whole exchange, through

- ``mpi4py``: one ``Ialltoallv`` (the transport's own cost);
- ``gnnscale``: ``MPICommunicator.alltoallv_async`` as the engine posts a halo exchange
  (the signature check travelling with the data, pieces under the TCP eager limit);
- ``gnnscale unchecked``: the same with checked mode off (``GNNSCALE_COMM_CHECK=0``).

Command (1 min)::

    flock /tmp/gnnscale-bench.lock python benchmarks/exchange_post.py \\
        --out benchmarks/results/exchange_post.json
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

SIZES_KIB = [4, 64, 168, 512]
REPEATS, WARMUP = 200, 20


def _timed(post) -> tuple[float, float]:
    """Medians of (post, post to completion) over the repeats; ``post()`` returns a waiter."""
    posts, totals = [], []
    for _ in range(REPEATS):
        start = time.perf_counter()
        finish = post()
        posted = time.perf_counter()
        finish()
        totals.append(time.perf_counter() - start)
        posts.append(posted - start)
    return float(np.median(posts[WARMUP:])), float(np.median(totals[WARMUP:]))


def rank_main(result: Path) -> None:
    """Both ranks: every size through every path; rank 0 writes the medians to ``result``."""
    import torch
    from mpi4py import MPI

    from gnnscale.comm.mpi import MPICommunicator

    torch.set_num_threads(1)
    world = MPI.COMM_WORLD
    paths = {"gnnscale": MPICommunicator(), "gnnscale unchecked": MPICommunicator(check=False)}
    peer, rows = 1 - world.rank, []
    for kib in SIZES_KIB:
        values = kib * 256
        send = torch.ones(values // 16, 16)
        counts = [0, 0]
        counts[peer] = values // 16
        flat_counts = np.array([0, 0])
        flat_counts[peer] = values
        displs = np.zeros(2, dtype=np.int64)
        recv = np.empty(values, np.float32)
        send_np = send.numpy().reshape(-1)

        def raw():
            request = world.Ialltoallv([send_np, (flat_counts, displs)],
                                       [recv, (flat_counts, displs)])
            return request.Wait

        timed = {"mpi4py": raw}
        for name, comm in paths.items():
            timed[name] = lambda comm=comm: comm.alltoallv_async(send, counts, counts).wait
        for name, post in timed.items():
            world.Barrier()
            post_s, total_s = _timed(post)
            rows.append({"kib": kib, "path": name, "post_s": post_s, "total_s": total_s})
    if world.rank == 0:
        result.write_text(json.dumps(rows))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rates", nargs="+", default=["none"])
    parser.add_argument("--out", default=None)
    parser.add_argument("--rank-main", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.rank_main:
        return rank_main(Path(args.rank_main))
    from vertex_cut_overlap import at_each_rate, job_env

    env, out = job_env(), []
    for cluster, folder, rate in at_each_rate(args.rates, "xp"):
        result = folder / f"{rate}.json"
        argv = cluster.mpirun_argv(1, env=env) + [sys.executable, __file__, "--rank-main",
                                                  str(result)]
        done = cluster.run("node0", argv, cwd=REPO, env=env, timeout=600)
        if done.returncode != 0:
            sys.exit(f"{Path(sys.argv[0]).name}: a job failed:\n{done.stderr[-3000:]}")
        for row in json.loads(result.read_text()):
            out.append({"rate": rate, **row})
    print(f"{'link':>8} {'KiB':>5} {'path':<20} {'post (us)':>10} {'exchange (us)':>14}")
    for row in out:
        print(f"{row['rate']:>8} {row['kib']:5d} {row['path']:<20} {row['post_s'] * 1e6:10.1f} "
              f"{row['total_s'] * 1e6:14.1f}")
    if args.out:
        Path(args.out).write_text(json.dumps({"repeats": REPEATS, "warmup": WARMUP,
                                              "rows": out}, indent=1))


if __name__ == "__main__":
    main()

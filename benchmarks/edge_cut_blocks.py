"""Each edge cut's aggregation blocks timed on its own rank: ms and ns per non-zero.

An edge cut's rank aggregates its inner block (owned rows from owned rows) and its boundary
block (owned rows from halo rows). The time model charges every non-zero of both alike; this
measures what each costs for METIS, KaMinPar and random partitions of one graph, forward and
transposed, at one width, the partitions taking turns. Two ranks on this host, one core and
one thread each (``mpirun -n 2``; the script launches it)::

    flock /tmp/gnnscale-bench.lock python benchmarks/edge_cut_blocks.py \\
        --out benchmarks/results/edge_cut_blocks.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "benchmarks")]
METHODS = ("metis", "random", "kaminpar")


def rank_main(dataset: str, width: int, turns: int, out: Path) -> None:
    """Under ``mpirun -n 2``: time every block of every partition in turns; rank 0 writes the
    rows of both ranks to ``out``."""
    import torch

    import tune_validation as tv
    from gnnscale.comm import init
    from gnnscale.engine import LocalProblem
    from partitioning import make_partitioner

    torch.set_num_threads(1)
    comm = init()
    os.sched_setaffinity(0, {comm.rank % os.cpu_count()})
    data = tv.load(dataset)
    blocks = {}
    for method in METHODS:
        parts = make_partitioner(method, num_parts=comm.size, seed=0).fit(data).node_parts
        inner, boundary = LocalProblem.from_graph_data(data, parts, comm).graph.blocks("gcn")
        blocks[(method, "inner")], blocks[(method, "boundary")] = inner, boundary
    forward = {key: [] for key in blocks}
    transposed = {key: [] for key in blocks}
    for _ in range(turns):
        for key, block in blocks.items():
            x, grad = torch.randn(block.shape[1], width), torch.randn(block.shape[0], width)
            start = time.perf_counter()
            block.matmul(x)
            forward[key].append(time.perf_counter() - start)
            start = time.perf_counter()
            block.matmul_transposed(grad)
            transposed[key].append(time.perf_counter() - start)
    rows = []
    for (method, name), block in blocks.items():
        fwd = float(np.median(forward[(method, name)][3:]))
        back = float(np.median(transposed[(method, name)][3:]))
        rows.append({"rank": comm.rank, "method": method, "block": name,
                     "shape": list(block.shape), "nnz": int(block.nnz),
                     "forward_ms": fwd * 1e3, "transposed_ms": back * 1e3,
                     "forward_ns_per_nnz": fwd * 1e9 / max(block.nnz, 1),
                     "transposed_ns_per_nnz": back * 1e9 / max(block.nnz, 1)})
    everyone = comm.allgather_object(rows)
    if comm.rank == 0:
        out.write_text(json.dumps([row for ranks in everyone for row in ranks]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dataset", default="SNAP-ca-astroph")
    parser.add_argument("--width", type=int, default=5, help="values per row")
    parser.add_argument("--turns", type=int, default=15)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--rank-main", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.width < 1 or args.turns < 4:
        parser.error(f"--width must be >= 1 and --turns >= 4, got {args.width}, {args.turns}")
    if args.rank_main:
        return rank_main(args.dataset, args.width, args.turns, args.rank_main)
    result = Path(args.out or "/tmp/edge_cut_blocks.json").with_suffix(".ranks.json")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OMPI_ALLOW_RUN_AS_ROOT": "1",
           "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    mpirun = Path(sys.executable).parent / "mpirun"
    done = subprocess.run([str(mpirun), "-n", "2", "--bind-to", "none", sys.executable,
                           __file__, "--dataset", args.dataset, "--width", str(args.width),
                           "--turns", str(args.turns), "--rank-main", str(result)], env=env,
                          cwd=REPO, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"edge_cut_blocks.py: the ranks failed:\n{done.stderr[-3000:]}")
    rows = json.loads(result.read_text())
    result.unlink()
    for row in rows:
        print(f"rank {row['rank']} {row['method']:9s} {row['block']:9s} nnz {row['nnz']:7d}: "
              f"forward {row['forward_ms']:6.3f} ms ({row['forward_ns_per_nnz']:5.2f} ns/nnz),"
              f" transposed {row['transposed_ms']:6.3f} ms "
              f"({row['transposed_ns_per_nnz']:5.2f})")
    if args.out:
        args.out.write_text(json.dumps({"dataset": args.dataset, "width": args.width,
                                        "turns": args.turns, "blocks": rows}, indent=1))


if __name__ == "__main__":
    main()

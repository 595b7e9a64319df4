"""The CSR aggregation product alone: time and bytes per second, with and without prefetching.

Run from the repository root with the project's venv:

    .venv/bin/python benchmarks/aggregation_kernel.py                 # R-MAT 18
    .venv/bin/python benchmarks/aggregation_kernel.py --scale 21 --widths 100 \\
        --out benchmarks/results/aggregation_kernel_rmat21.json

The graph is the engine tables' R-MAT (``gnnscale.data`` ``rmat``), normalised for GCN (self
loops, rows = destinations) by the engine's one-process ``LocalGraph``, and ``x`` random rows
of each width, float32 or bf16 (the engine's ``--compute-dtype bfloat16`` rows, summed in
float32). For every width and dtype the product runs with the row ``--prefetch-edges``
non-zeros ahead prefetched (the engine's setting, ``gnnscale/graph/prefetch.py``) and with no
prefetch (0), alternating, ``--reps`` times after one warm-up each; medians. Bytes counted:
the CSR arrays once, one source row per non-zero, the output once; the roofline is the best
copy rate (read + write) over 1 GiB arrays (``rooflines.copy_bandwidth_gbs``: NumPy's copy or
torch's with the run's threads), measured in the same process. Writes ``--out`` (JSON) and
prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=int, default=18)
    parser.add_argument("--widths", nargs="+", type=int, default=[16, 128, 256])
    parser.add_argument("--dtypes", nargs="+", default=["float32", "bfloat16"],
                        choices=["float32", "bfloat16"])
    parser.add_argument("--prefetch-edges", type=int, default=None,
                        help="distance compared with no prefetch (default: the engine's)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--out", default=str(ROOT / "benchmarks/results/aggregation_kernel.json"))
    return parser.parse_args()


ARGS = parse_args()
os.environ.setdefault("NUMBA_NUM_THREADS", str(ARGS.threads))
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from gnnscale.comm import SingleCommunicator  # noqa: E402
from gnnscale.data import load_dataset  # noqa: E402
from gnnscale.engine import LocalProblem  # noqa: E402
from gnnscale.engine.memory import retain_freed_memory  # noqa: E402
from gnnscale.graph import kernels  # noqa: E402
from gnnscale.graph.bf16_bits import as_bits  # noqa: E402
from gnnscale.graph.prefetch import PREFETCH_EDGES  # noqa: E402
from rooflines import copy_bandwidth_gbs  # noqa: E402


def engine_adjacency(data):
    """The GCN-normalised CSR arrays (indptr, indices, float32 values) the engine's one-process
    graph multiplies by: its inner block, built by ``LocalGraph`` as in training."""
    problem = LocalProblem.from_graph_data(data, np.zeros(data.num_nodes, np.int64),
                                           SingleCommunicator())
    inner, _ = problem.graph.blocks("gcn")
    csr = inner._forward
    return csr.indptr, csr.indices, csr._values(np.float32)


def main() -> None:
    retain_freed_memory()
    ahead = PREFETCH_EDGES if ARGS.prefetch_edges is None else ARGS.prefetch_edges
    data = load_dataset("rmat", scale=ARGS.scale, num_features=1, num_classes=2)
    indptr, indices, values = engine_adjacency(data)
    n, nnz = len(indptr) - 1, len(indices)
    rng = np.random.default_rng(0)
    rows = []
    for dtype in ARGS.dtypes:
        for width in ARGS.widths:
            dense = torch.from_numpy(rng.standard_normal((n, width), np.float32))
            x = as_bits(dense.bfloat16()) if dtype == "bfloat16" else dense.numpy()
            times = {ahead: [], 0: []}
            for distance in (ahead, 0):  # warm-up (and compilation) of each
                kernels.csr_spmm(indptr, indices, values, x, n, ARGS.threads,
                                 prefetch_edges=distance)
            for _ in range(ARGS.reps):
                for distance in (ahead, 0):
                    t0 = time.perf_counter()
                    kernels.csr_spmm(indptr, indices, values, x, n, ARGS.threads,
                                     prefetch_edges=distance)
                    times[distance].append(time.perf_counter() - t0)
            moved = (indptr.nbytes + indices.nbytes + values.nbytes
                     + (nnz + n) * width * x.itemsize)
            row = {"dtype": dtype, "width": width, "bytes": moved,
                   "median_s": {str(d): statistics.median(t) for d, t in times.items()},
                   "times_s": {str(d): t for d, t in times.items()}}
            rows.append(row)
            print(f"{dtype:>8} {width:>4} wide: prefetch {ahead}: "
                  f"{row['median_s'][str(ahead)] * 1e3:7.1f} ms, none: "
                  f"{row['median_s']['0'] * 1e3:7.1f} ms", flush=True)
    torch.set_num_threads(ARGS.threads)
    roof = copy_bandwidth_gbs() * 1e9
    print(f"\nR-MAT {ARGS.scale}: {n:,} rows, {nnz:,} non-zeros, {ARGS.threads} threads; "
          f"copy roofline {roof / 1e9:.1f} GB/s")
    print(f"| dtype | width | prefetch {ahead} | no prefetch | speed-up | GB/s (of roof) |")
    print("|---|---|---|---|---|---|")
    for row in rows:
        fast, slow = row["median_s"][str(ahead)], row["median_s"]["0"]
        rate = row["bytes"] / fast
        print(f"| {row['dtype']} | {row['width']} | {fast * 1e3:.0f} ms | {slow * 1e3:.0f} ms "
              f"| {slow / fast:.2f}x | {rate / 1e9:.1f} ({rate / roof:.0%}) |")
    out = Path(ARGS.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({
        "benchmark": "aggregation_kernel", "scale": ARGS.scale, "rows": n, "non_zeros": nnz,
        "threads": ARGS.threads, "reps": ARGS.reps, "prefetch_edges": ahead,
        "copy_roofline_bytes_per_s": roof, "command": " ".join(sys.argv),
        "loadavg_end": os.getloadavg(), "results": rows}, indent=1) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()

"""A real graph's aggregation per non-zero at several row widths, against the calibration.

The time model charges an aggregation ``g_nnz + g_edge w`` per non-zero at its cached constants
wherever the rows it reads fit the rank's fitted cache share, and the calibration times those
constants on rows 16, 64 and 128 wide of uniformly random columns in at most 2.5 MB of rows.
This times ``SparseBlock.matmul`` (the engine's product, int32 columns) over a dataset's whole
graph at each ``--widths`` value, and over a graph of the same rows and degrees whose columns are
drawn uniformly at random, all of them taking turns (one thread, ``--rounds`` calls each, the
median), then calibrates the constants in the same process (``compute_constants``, one
thread); ``--repeats`` times over, since this host's speed drifts from one minute to the next::

    gnnscale datasets download amazon0601        # once: 98 MB from PyPI
    flock /tmp/gnnscale-bench.lock python benchmarks/aggregation_widths.py --dataset amazon0601

Results: ``benchmarks/results/aggregation_widths.json`` (ns per non-zero per width, measured and
as the model charges them: cached and beyond the cache).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "benchmarks")]
OUT = REPO / "benchmarks" / "results" / "aggregation_widths.json"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dataset", default="amazon0601")
    parser.add_argument("--widths", type=int, nargs="+", default=[4, 5, 8, 16, 32])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--repeats", type=int, default=3,
                        help="timings, each followed by a calibration")
    parser.add_argument("--out", default=str(OUT))
    args = parser.parse_args()
    import scipy.sparse as sp
    import torch

    from gnnscale.cli.calibrate import _interleaved_median_times, _values, compute_constants
    from gnnscale.graph.sparse import SparseBlock
    from tune_validation import load

    torch.set_num_threads(1)
    graph = load(args.dataset)
    n, nnz = graph.num_nodes, int(graph.indptr[-1])
    ones = np.ones(nnz, np.float32)
    real = SparseBlock(sp.csr_matrix((ones, graph.indices, graph.indptr), shape=(n, n)))
    columns = np.random.default_rng(0).integers(0, n, nnz, dtype=np.int32)
    random = SparseBlock(sp.csr_matrix((ones, columns, graph.indptr), shape=(n, n)))
    calls, labels = [], []
    for width in args.widths:
        x = _values(n, width)
        for name, block in (("graph", real), ("random columns", random)):
            calls.append(lambda b=block, x=x: b.matmul(x))
            labels.append((width, name))
    print(f"{args.dataset}: {n:,} rows, {nnz:,} non-zeros ({nnz / n:.1f} a row), one thread")
    repeats = []
    for repeat in range(args.repeats):
        seconds = _interleaved_median_times(calls, repeats=args.rounds)
        k = compute_constants(1)
        rows = [{"width": width, "columns": name, "ns_per_nnz": s / nnz * 1e9,
                 "working_set_mib": 4 * width * n / 2**20,
                 "model_cached_ns": (k["gamma_nnz"] + k["gamma_edge"] * width) * 1e9,
                 "model_beyond_ns": (k["gamma_nnz_mem"] + k["gamma_edge_mem"] * width) * 1e9}
                for (width, name), s in zip(labels, seconds)]
        repeats.append({"constants": k, "rows": rows})
        print(f"repeat {repeat + 1} of {args.repeats}")
        print("| width | rows read (MiB) | graph ns/nnz | random columns ns/nnz | model cached "
              "| beyond |")
        print("|---|---|---|---|---|---|")
        for graph_row, random_row in zip(rows[::2], rows[1::2]):
            print(f"| {graph_row['width']} | {graph_row['working_set_mib']:.1f} | "
                  f"{graph_row['ns_per_nnz']:.1f} | {random_row['ns_per_nnz']:.1f} | "
                  f"{graph_row['model_cached_ns']:.1f} | {graph_row['model_beyond_ns']:.1f} |")
    Path(args.out).write_text(json.dumps({"dataset": args.dataset, "nodes": n, "nnz": nnz,
                                          "rounds": args.rounds, "repeats": repeats},
                                         indent=1) + "\n")
    print(f"written to {args.out}")


if __name__ == "__main__":
    main()

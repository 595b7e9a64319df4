"""What a sparse product costs per output row beside its cost per non-zero.

The time model charges the aggregation per non-zero (``g_nnz + g_edge w``) and per output row
(``g_row``: the row's bounds read, its accumulator zeroed and stored), which a product over few
non-zeros per row (a vertex cut's master <- mirror block, a boundary block) pays on every row;
``gnnscale tune --calibrate`` fits both on rows of 2 to 20 non-zeros. This times
``SparseBlock.matmul`` at a fixed number of non-zeros spread over rows of 1 to 32 non-zeros
(uniformly random columns among rows that stay in the cache, one thread, median of 15 calls, the
degrees taking turns) and fits ``t = rows x per_row + nnz x per_nnz``::

    flock /tmp/gnnscale-bench.lock python benchmarks/spmm_row_cost.py

Results: ``benchmarks/results/spmm_row_cost.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
OUT = REPO / "benchmarks" / "results" / "spmm_row_cost.json"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nnz", type=int, default=1_000_000)
    parser.add_argument("--width", type=int, default=16)
    parser.add_argument("--source-rows", type=int, default=20_000,
                        help="rows the columns point into (kept in the cache)")
    parser.add_argument("--degrees", type=int, nargs="+", default=[1, 2, 4, 8, 16, 32])
    parser.add_argument("--rounds", type=int, default=15,
                        help="timed calls of each degree, the degrees taking turns")
    args = parser.parse_args()
    import scipy.sparse as sp
    import torch

    from gnnscale.cli.calibrate import _interleaved_median_times, _values
    from gnnscale.graph.sparse import SparseBlock

    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    x = _values(args.source_rows, args.width)
    blocks = []
    for degree in args.degrees:
        rows = args.nnz // degree
        indptr = np.arange(0, rows * degree + 1, degree, dtype=np.int64)
        indices = rng.integers(0, args.source_rows, rows * degree, dtype=np.int32)
        blocks.append(SparseBlock(sp.csr_matrix(
            (np.ones(rows * degree, np.float32), indices, indptr),
            shape=(rows, args.source_rows))))
    # the degrees timed in turns, so that the host's drift weighs on each alike
    times = _interleaved_median_times([lambda b=b: b.matmul(x) for b in blocks],
                                      repeats=args.rounds)
    cells = []
    for degree, block, seconds in zip(args.degrees, blocks, times):
        rows = args.nnz // degree
        cells.append({"degree": degree, "rows": rows, "nnz": block.nnz, "seconds": seconds})
        print(f"degree {degree:>2}: {rows:>9,} rows, {seconds * 1e3:6.2f} ms: "
              f"{seconds / block.nnz * 1e9:5.2f} ns per non-zero, "
              f"{seconds / rows * 1e9:6.1f} ns per row", flush=True)
    design = np.array([[c["rows"], c["nnz"]] for c in cells], dtype=np.float64)
    seconds = np.array([c["seconds"] for c in cells])
    # each measurement's relative error counting alike
    (per_row, per_nnz), *_ = np.linalg.lstsq(design / seconds[:, None],
                                             np.ones_like(seconds), rcond=None)
    fit = {"per_row_s": float(per_row), "per_nnz_s": float(per_nnz)}
    print(f"fit: {per_row * 1e9:.1f} ns per row + {per_nnz * 1e9:.2f} ns per non-zero "
          f"({args.width} wide, one thread)")
    OUT.write_text(json.dumps({"width": args.width, "source_rows": args.source_rows,
                               "threads": 1, "cells": cells, "fit": fit}, indent=1) + "\n")


if __name__ == "__main__":
    main()

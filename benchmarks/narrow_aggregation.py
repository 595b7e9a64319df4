"""The aggregation's cost per non-zero at narrow rows, against the calibration's straight line.

``gnnscale tune --calibrate`` (and ``calibrate_in_job``) fits the aggregation in the cache as
``t = nnz (a + b w) + rows r`` over rows 16, 64 and 128 wide (and 16 wide with 2 non-zeros a
row, for ``r``): :func:`gnnscale.cli.calibrate.per_edge_value_and_row`. Graphs whose raw
features or classes are a few values wide (SNAP's graphs with their 5 degree features, 4
classes) aggregate rows 4-5 wide, below the fitted widths. This measures, on one thread, the
calibration's own four aggregations and the same aggregation (random columns, 10 non-zeros a
row, at most 2.5 MB of rows: in a core's cache) at other widths, in turns (medians), and
prints each one's time against the line fitted to the four.

Command (1 min)::

    flock /tmp/gnnscale-bench.lock python benchmarks/narrow_aggregation.py \\
        --out benchmarks/results/narrow_aggregation.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

#: the calibration's cached aggregations: (rows, non-zeros a row, width)
CALIBRATION = [(40000, 10, 16), (10000, 20, 64), (5000, 10, 128), (40000, 2, 16)]
WIDTHS = [2, 4, 5, 8, 12, 24, 32]
ROW_BYTES_CACHED = 2_560_000  # at most this many bytes of rows, as the calibration's


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    import torch

    from gnnscale.cli.calibrate import (_interleaved_median_times, _random_csr, _values,
                                        per_edge_value_and_row)
    from gnnscale.engine.memory import retain_freed_memory
    from gnnscale.graph.sparse import SparseBlock

    retain_freed_memory()
    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    others = [(min(40000, ROW_BYTES_CACHED // (4 * w)), 10, w) for w in WIDTHS]
    cases = CALIBRATION + others
    blocks = [(SparseBlock(_random_csr(n, degree, rng)), _values(n, w))
              for n, degree, w in cases]
    seconds = _interleaved_median_times([lambda b=b, x=x: b.matmul(x) for b, x in blocks],
                                        what="aggregation")
    nnz = [block.nnz for block, _ in blocks]
    fit = per_edge_value_and_row(nnz[:4], [w for _, _, w in CALIBRATION],
                                 [n for n, _, _ in CALIBRATION], seconds[:4])
    per_nnz, per_value, per_row = fit
    print(f"fitted to the calibration's four: {per_nnz * 1e9:.2f} ns a non-zero, "
          f"{per_value * 1e9:.3f} ns a value, {per_row * 1e9:.2f} ns a row")
    print(f"{'rows':>6} {'nnz/row':>7} {'width':>5} {'ms':>7} {'ns/nnz':>7} {'line':>7}")
    rows = []
    for (n, degree, width), taken, count in zip(cases, seconds, nnz):
        line = count * (per_nnz + per_value * width) + n * per_row
        rows.append({"rows": n, "degree": degree, "width": width, "nnz": count,
                     "seconds": taken, "line_seconds": line,
                     "calibration": (n, degree, width) in CALIBRATION})
        print(f"{n:6d} {degree:7d} {width:5d} {taken * 1e3:7.3f} {taken / count * 1e9:7.2f} "
              f"{100 * (line / taken - 1):+6.0f}%")
    if args.out:
        Path(args.out).write_text(json.dumps(
            {"per_nnz_s": per_nnz, "per_value_s": per_value, "per_row_s": per_row,
             "cases": rows}, indent=1))


if __name__ == "__main__":
    main()

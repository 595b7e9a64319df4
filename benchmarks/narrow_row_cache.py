"""What a model's narrow rows cost as their working set grows: the loss per row and the
aggregation per non-zero against the bytes they touch.

Times, in turns (one thread, ``--repeats`` rounds of 5 timed calls each, the median):

- the training loss (cross-entropy forward and backward, ``reduction="sum"``) of 25,000 to
  800,000 rows of 4 logits: seconds per row;
- the engine's aggregation (``SparseBlock.matmul``) of rows 5 wide over 12 uniformly random
  columns per row, the rows gathered taking 0.5 to 64 MiB: seconds per non-zero.

The time model calibrates both (``gnnscale/cli/calibrate_outputs.py``, and the cache knee on a
ladder of rows 8 wide, ``gnnscale.cli.calibrate.measure_cache_knee``); docs/planning.md,
"Checked on shaped links", quotes these figures. Command::

    flock /tmp/gnnscale-bench.lock python benchmarks/narrow_row_cache.py \\
        --out benchmarks/results/narrow_row_cache.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO)]

LOSS_ROWS = (25_000, 50_000, 100_000, 200_000, 800_000)
AGGREGATION_MIB = (0.5, 1, 2, 4, 8, 16, 64)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    import torch
    import torch.nn.functional as F

    from gnnscale.cli.calibrate import _interleaved_median_times, _random_csr, _values
    from gnnscale.graph.sparse import SparseBlock

    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    calls, labels = [], []
    for rows in LOSS_ROWS:
        logits, target = _values(rows, 4).requires_grad_(), torch.randint(0, 4, (rows,))

        def loss(logits=logits, target=target):
            logits.grad = None
            F.cross_entropy(logits, target, reduction="sum").backward()
        calls.append(loss)
        labels.append(("loss_s_per_row", rows, rows))
    for mib in AGGREGATION_MIB:
        n = int(mib * 2**20 / 20)
        block, x = SparseBlock(_random_csr(n, 12, rng)), _values(n, 5)
        calls.append(lambda b=block, x=x: b.matmul(x))
        labels.append(("aggregation_s_per_nnz", mib, block.nnz))
    rounds = []
    for _ in range(args.repeats):
        seconds = _interleaved_median_times(calls, repeats=5)
        rounds.append([s / units for s, (_, _, units) in zip(seconds, labels)])
        print(" | ".join(f"{kind[:4]} {size}: {r * 1e9:.1f} ns" for (kind, size, _), r in
                         zip(labels, rounds[-1])), flush=True)
    result = {"threads": 1, "rounds": [
        {kind: {str(size): r for (k, size, _), r in zip(labels, one) if k == kind}
         for kind in ("loss_s_per_row", "aggregation_s_per_nnz")} for one in rounds]}
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()

"""A training step with the aggregation kernel for rows under 16 columns against the general one.

Rows of 1 to 15 columns (a graph's few raw features, a model's classes) go to
``kernels._csr_spmm_small``, whose feature loop has a compile-time trip count for each width
(the same sums, bit for bit). This trains one process, one thread, on a dataset (default
amazon0601: 5 features, 4 classes, so GCN aggregates 5 and 4 columns wide) and times its
training step with that kernel and with the general one in alternating turns of 3 epochs (the
first of each turn not counted, the order swapped every round)::

    gnnscale datasets download amazon0601        # once: 98 MB from PyPI
    flock /tmp/gnnscale-bench.lock python benchmarks/small_width_kernel.py --models gcn sage

Results: ``benchmarks/results/small_width_kernel.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "benchmarks")]
OUT = REPO / "benchmarks" / "results" / "small_width_kernel.json"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dataset", default="amazon0601")
    parser.add_argument("--models", nargs="+", default=["gcn", "sage"])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--out", default=str(OUT))
    args = parser.parse_args()
    import torch

    import gnnscale.graph.kernels as kernels
    from _workload import training_step_s
    from gnnscale.comm import init
    from gnnscale.engine import LocalProblem, Trainer
    from gnnscale.nn import GNN
    from tune_validation import load

    torch.set_num_threads(1)
    small = kernels._csr_spmm_small
    kernel_of = {"small-width kernel": small, "general kernel": kernels._csr_spmm}
    data = load(args.dataset)
    comm = init()
    problem = LocalProblem.from_graph_data(data, np.zeros(data.num_nodes, dtype=np.int64), comm)
    results = []
    for model in args.models:
        torch.manual_seed(0)
        trainer = Trainer(GNN(model, data.num_features, 16, data.num_classes, dropout=0.5),
                          problem, comm)
        trainer.fit(2, eval_every=10**6)  # warm-up
        steps = {name: [] for name in kernel_of}
        for turn in range(args.rounds):
            for name in (list(kernel_of) if turn % 2 == 0 else list(kernel_of)[::-1]):
                kernels._csr_spmm_small = kernel_of[name]
                records = trainer.fit(trainer.epoch + 3, eval_every=10**6)
                steps[name] += [training_step_s(r.time) for r in records[1:]]
        kernels._csr_spmm_small = small
        medians = {name: float(np.median(times)) for name, times in steps.items()}
        change = medians["small-width kernel"] / medians["general kernel"] - 1
        print(f"{args.dataset} {model}: step {medians['small-width kernel'] * 1e3:.1f} ms with the "
              f"small-width kernel, {medians['general kernel'] * 1e3:.1f} ms with the general "
              f"one ({change:+.0%})", flush=True)
        results.append({"model": model, "median_step_s": medians, "steps_s": steps,
                        "change": change})
    Path(args.out).write_text(json.dumps({"dataset": args.dataset, "threads": 1,
                                          "rounds": args.rounds, "results": results},
                                         indent=1) + "\n")
    print(f"written to {args.out}")


if __name__ == "__main__":
    main()

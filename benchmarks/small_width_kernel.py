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

``--adding`` compares instead the kernel that adds a product into rows 1 to 8 wide
(``kernels._csr_spmm_rows_small``: a halo's boundary block, a vertex cut's partial sums)
with the general row-summing one, under an mpirun of 2 ranks of one thread each, the graph
split by ``--methods`` (an edge cut adds the halo's product into the owned rows', a vertex
cut adds partial sums twice per aggregation)::

    flock /tmp/gnnscale-bench.lock mpirun -n 2 --bind-to core python \
        benchmarks/small_width_kernel.py --adding --methods random libra

Results: ``benchmarks/results/small_rows_kernel.json``.
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
ADDING_OUT = REPO / "benchmarks" / "results" / "small_rows_kernel.json"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dataset", default="amazon0601")
    parser.add_argument("--models", nargs="+", default=["gcn", "sage"])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--adding", action="store_true",
                        help="the adding kernel for rows 1 to 8 wide, 2 ranks under mpirun")
    parser.add_argument("--methods", nargs="+", default=["random", "libra"],
                        help="with --adding: the partitioners splitting the graph")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    args.out = args.out or str(ADDING_OUT if args.adding else OUT)
    import torch

    import gnnscale.graph.kernels as kernels
    from _workload import training_step_s
    from gnnscale.comm import init
    from gnnscale.engine import Trainer
    from gnnscale.nn import GNN
    from tune_validation import load

    torch.set_num_threads(1)
    kernel_name = "_csr_spmm_rows_small" if args.adding else "_csr_spmm_small"
    small = getattr(kernels, kernel_name)
    general = kernels._csr_spmm_rows if args.adding else kernels._csr_spmm
    kernel_of = {"small-width kernel": small, "general kernel": general}
    data = load(args.dataset)
    comm = init()
    if args.adding and comm.size < 2:
        sys.exit("--adding: run under mpirun with 2 ranks or more (nothing is added on one)")
    results = []
    for model, method in [(m, p) for m in args.models for p in
                          (args.methods if args.adding else [None])]:
        problem = _problem(data, method, comm)
        torch.manual_seed(0)
        trainer = Trainer(GNN(model, data.num_features, 16, data.num_classes, dropout=0.5),
                          problem, comm)
        trainer.fit(2, eval_every=10**6)  # warm-up
        steps = {name: [] for name in kernel_of}
        for turn in range(args.rounds):
            for name in (list(kernel_of) if turn % 2 == 0 else list(kernel_of)[::-1]):
                setattr(kernels, kernel_name, kernel_of[name])
                records = trainer.fit(trainer.epoch + 3, eval_every=10**6)
                steps[name] += [training_step_s(r.time) for r in records[1:]]
        setattr(kernels, kernel_name, small)
        medians = {name: float(np.median(times)) for name, times in steps.items()}
        change = medians["small-width kernel"] / medians["general kernel"] - 1
        if comm.rank:
            continue
        print(f"{args.dataset} {model}{' ' + method if method else ''}: step {medians['small-width kernel'] * 1e3:.1f} ms with the "
              f"small-width kernel, {medians['general kernel'] * 1e3:.1f} ms with the general "
              f"one ({change:+.0%})", flush=True)
        results.append({"model": model, **({"method": method} if method else {}),
                        "median_step_s": medians, "steps_s": steps, "change": change})
    if comm.rank == 0:
        Path(args.out).write_text(json.dumps(
            {"dataset": args.dataset, "threads": 1, "ranks": comm.size, "kernel": kernel_name,
             "rounds": args.rounds, "results": results}, indent=1) + "\n")
        print(f"written to {args.out}")


def _problem(data, method, comm):
    """The rank's problem: the whole graph on one process, else ``method``'s parts."""
    import torch

    from gnnscale.engine import LocalProblem
    from gnnscale.engine.vertex_cut_problem import broadcast_vertex_cut_problem
    from partitioning import make_partitioner

    if method is None:
        return LocalProblem.from_graph_data(data, np.zeros(data.num_nodes, dtype=np.int64), comm)
    partition = (make_partitioner(method, num_parts=comm.size, seed=0).fit(data)
                 if comm.rank == 0 else None)
    if method in ("libra", "hdrf"):  # vertex cuts
        return broadcast_vertex_cut_problem(data, partition, comm)
    parts = (torch.from_numpy(partition.node_parts.astype(np.int64)) if comm.rank == 0
             else torch.empty(data.num_nodes, dtype=torch.int64))
    return LocalProblem.from_graph_data(data, comm.broadcast(parts, root=0).numpy(), comm)


if __name__ == "__main__":
    main()

"""Time per edge of a one-process GCN training step on two graphs in the same process,
alternating, so that the host's drift hits both alike; and, on the larger graph, the step with
every row computed before the last layer (``rows_read_by`` switched off) against the step that
computes only the rows the loss reads.

    .venv/bin/gnnscale convert --dataset rmat --dataset-option scale=18 \\
        --dataset-option num_features=128 --dataset-option num_classes=16 --out /tmp/rmat18-128
    .venv/bin/gnnscale convert --dataset rmat --dataset-option scale=21 \\
        --dataset-option num_features=100 --dataset-option num_classes=47 \\
        --out /tmp/gnnscale-large/rmat21
    flock /tmp/gnnscale-bench.lock .venv/bin/python benchmarks/per_edge_scaling.py \\
        /tmp/rmat18-128 /tmp/gnnscale-large/rmat21

Workload: GCN, 2 layers of 256, dropout 0.5, Adam, 2 threads. Each round runs 3 steps of the
smaller graph, one of the larger, one of the larger with every row computed; the first round
is warm-up. Prints the median step of each and the nanoseconds per edge.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("small", help="converted dataset folder of the smaller graph")
    parser.add_argument("large", help="converted dataset folder of the larger graph")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    os.environ["OMP_NUM_THREADS"] = str(args.threads)

    import numpy as np
    import torch

    from gnnscale.comm import SingleCommunicator
    from gnnscale.data import load_dataset
    from gnnscale.engine import LocalProblem, Trainer
    from gnnscale.nn import GNN

    torch.set_num_threads(args.threads)
    runs = {}
    for key, path in (("small", args.small), ("large", args.large)):
        data = load_dataset(path)
        comm = SingleCommunicator()
        problem = LocalProblem.from_graph_data(data, np.zeros(data.num_nodes, np.int64), comm)
        torch.manual_seed(0)
        model = GNN("gcn", data.num_features, 256, data.num_classes, num_layers=2, dropout=0.5)
        runs[key] = (Trainer(model, problem, comm), data.num_edges, problem.graph)
        print(f"{key}: {data.summary()}", flush=True)
    graph = runs["large"][2]
    narrowed = graph.rows_read_by
    plan = (("small", 3, narrowed), ("large", 1, narrowed), ("large, every row", 1, None))
    times = {name: [] for name, _, _ in plan}
    for round_ in range(args.rounds):
        for name, steps, read_by in plan:
            trainer, _, run_graph = runs[name.split(",")[0]]
            if run_graph is graph:
                graph.rows_read_by = read_by or (lambda rows: None)
            for _ in range(steps):
                start = time.perf_counter()
                trainer.train_step()
                elapsed = time.perf_counter() - start
                if round_:
                    times[name].append(elapsed)
            print(f"round {round_} {name}: {elapsed:.3f} s", flush=True)
    medians = {name: statistics.median(values) for name, values in times.items()}
    per_edge = {name: medians[name] / runs[name.split(",")[0]][1] * 1e9 for name in medians}
    for name in medians:
        print(f"{name:18s} {medians[name]:7.3f} s  {per_edge[name]:6.1f} ns per edge")
    print(f"per edge, large / small: {per_edge['large'] / per_edge['small']:.2f}x; large, "
          f"rows the loss reads / every row: {medians['large'] / medians['large, every row']:.2f}x")


if __name__ == "__main__":
    main()

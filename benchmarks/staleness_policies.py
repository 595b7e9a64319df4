"""Evidence for ``--staleness`` and vertex-cut execution: accuracy, halo bytes, epoch time.

Run under mpirun (one launch covers every case)::

    mpirun -n 4 python benchmarks/staleness_policies.py --datasets cora citeseer tolokers \
        --out benchmarks/results/staleness_4ranks.json

For each dataset x execution (metis edge cut, libra vertex cut) x network (real; ``--slow``:
the simulated slow network of :mod:`gnnscale.graph.staleness_netsim`, latency + bandwidth on
every halo alltoallv) x policy: final test metric, best validation metric and the test metric
there, epochs to reach exact's best validation metric (null if never), mean epoch time (after
epoch 1), halo bytes per epoch summed over ranks, replication (local rows / owned rows).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch

from gnnscale.comm import init
from gnnscale.data import load_dataset
from gnnscale.engine import LocalProblem, Trainer
from gnnscale.engine.vertex_cut_problem import vertex_cut_problem
from gnnscale.graph.staleness import make_policy
from gnnscale.nn import GNN
from partitioning import make_partitioner

POLICIES = ("exact", "pipelined", "pipelined:0.9", "delayed:2", "delayed:4", "local")


def load(name: str, root: str):
    """A dataset by name, or ``rmat-<scale>``: the seeded R-MAT workload of
    benchmarks/engine_vs_dgl.py (128 random features, 16 classes)."""
    if name.startswith("rmat-"):
        return load_dataset("rmat", scale=int(name[5:]), num_features=128, num_classes=16,
                            seed=0)
    return load_dataset(name, root=root)


def build(data, partitioner, comm, seed):
    params = {"balance": ("nodes", "edges")} if partitioner == "metis" else {}
    part = make_partitioner(partitioner, num_parts=comm.size, seed=seed, **params).fit(data)
    if part.kind == "vertex_cut":
        return vertex_cut_problem(data, part.node_parts, part.edge_parts, comm)
    return LocalProblem.from_graph_data(data, part.node_parts, comm)


def run(problem, data, comm, spec, epochs, metric, seed, slow, hidden):
    graph = problem.graph
    plan = graph.halo_plan
    plan.configure(simulate_network=tuple(slow) if slow else None)
    graph.staleness = make_policy(spec)
    torch.manual_seed(seed)
    model = GNN("gcn", data.num_features, hidden, data.num_classes, dropout=0.5)
    trainer = Trainer(model, problem, comm, lr=0.01, seed=seed, metrics=("acc", metric))
    comm.barrier()
    start = time.perf_counter()
    records = trainer.fit(epochs)
    total = time.perf_counter() - start
    if graph.staleness is not None:
        graph.staleness.close()
    graph.staleness = None
    plan.configure(simulate_network=None)
    bytes_per_epoch = comm.allreduce(torch.tensor([float(r.halo_bytes_sent) for r in records],
                                                  dtype=torch.float64)).numpy()
    times = comm.allreduce(torch.tensor([r.epoch_time_s for r in records], dtype=torch.float64),
                           op="max").numpy()
    val = np.array([r.metrics[f"val_{metric}"] for r in records])
    test = np.array([r.metrics[f"test_{metric}"] for r in records])
    best = int(np.argmax(val))
    return {"final_test": float(test[-1]), "best_val": float(val[best]),
            "test_at_best_val": float(test[best]), "val_curve": val.tolist(),
            "mean_epoch_time_s": float(times[1:].mean()), "total_time_s": total,
            "halo_bytes_per_epoch": float(bytes_per_epoch[1:].mean()),
            "halo_bytes_epoch1": float(bytes_per_epoch[0]),
            "max_age": int(max(r.staleness["max_age"] for r in records))}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--datasets", nargs="+", default=["cora", "citeseer", "tolokers"])
    parser.add_argument("--data-root", default=str(Path(__file__).resolve().parents[1] / "datasets"))
    parser.add_argument("--partitioners", nargs="+", default=["metis", "libra"])
    parser.add_argument("--policies", nargs="+", default=list(POLICIES))
    parser.add_argument("--epochs", type=int, default=200)
    parser.add_argument("--hidden", type=int, default=64, help="GCN hidden width")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--slow", nargs=2, type=float, default=None,
                        metavar=("LATENCY_S", "BANDWIDTH_BYTES_PER_S"),
                        help="also run every case on the simulated slow network")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    torch.set_num_threads(1)
    comm = init()
    results = []
    for dataset in args.datasets:
        data = load(dataset, args.data_root)
        metric = "auc" if data.num_classes == 2 else "acc"
        for partitioner in args.partitioners:
            problem = build(data, partitioner, comm, args.seed)
            local = comm.allreduce(torch.tensor([float(problem.graph.num_owned +
                                                       problem.graph.num_halo)]))
            replication = float(local[0]) / data.num_nodes
            for slow in ([None, args.slow] if args.slow else [None]):
                exact_best = None
                for spec in args.policies:
                    row = run(problem, data, comm, spec, args.epochs, metric, args.seed, slow,
                              args.hidden)
                    if spec == "exact":
                        exact_best = row["best_val"]
                    reach = [i + 1 for i, v in enumerate(row.pop("val_curve"))
                             if exact_best is not None and v >= exact_best]
                    row.update({"dataset": dataset, "partitioner": partitioner,
                                "policy": spec, "metric": metric, "ranks": comm.size,
                                "network": "real" if slow is None else
                                f"simulated latency {slow[0]}s bandwidth {slow[1]:.3g} B/s",
                                "replication": replication,
                                "epochs_to_exact_best_val": reach[0] if reach else None})
                    results.append(row)
                    if comm.rank == 0:
                        print(json.dumps({k: row[k] for k in (
                            "dataset", "partitioner", "network", "policy", "final_test",
                            "test_at_best_val", "epochs_to_exact_best_val", "mean_epoch_time_s",
                            "halo_bytes_per_epoch", "replication")}), flush=True)
    if comm.rank == 0:
        with open(args.out, "w") as fh:
            json.dump({"epochs": args.epochs,
                       "model": f"gcn hidden {args.hidden}, dropout 0.5, lr 0.01",
                       "results": results}, fh, indent=1)


if __name__ == "__main__":
    main()

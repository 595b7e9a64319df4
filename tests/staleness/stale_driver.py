"""Under mpirun: train Cora (GCN and SAGE) with every staleness policy; save per-epoch numbers.

Usage: mpirun -n P python stale_driver.py DATASETS_ROOT OUT.npz EPOCHS
"""

import sys

import numpy as np
import torch

from gnnscale.comm import init
from gnnscale.data import load_dataset
from gnnscale.engine import LocalProblem, Trainer
from gnnscale.graph.staleness import make_policy
from gnnscale.nn import GNN
from partitioning import make_partitioner

CASES = [("gcn", spec) for spec in ("exact", "pipelined", "pipelined:0.5", "delayed:3",
                                    "local")] + [("sage", "exact"), ("sage", "delayed:2")]


def main():
    datasets_root, out_path, epochs = sys.argv[1], sys.argv[2], int(sys.argv[3])
    comm = init()
    data = load_dataset("cora", root=datasets_root)
    parts = make_partitioner("metis", num_parts=comm.size, seed=0).fit(data).node_parts
    out = {}
    if True:
        for model_name, spec in CASES:
            problem = LocalProblem.from_graph_data(data, parts, comm)
            problem.graph.staleness = make_policy(spec)
            torch.manual_seed(0)
            model = GNN(model_name, data.num_features, 16, data.num_classes, dropout=0.5)
            trainer = Trainer(model, problem, comm, seed=1)
            records = trainer.fit(epochs)
            if problem.graph.staleness is not None:
                problem.graph.staleness.close()
            key = f"{model_name}/{spec}"
            out[f"{key}/loss"] = np.array([r.loss for r in records])
            out[f"{key}/test_acc"] = np.array([r.test_acc for r in records])
            out[f"{key}/val_acc"] = np.array([r.val_acc for r in records])
            out[f"{key}/max_age"] = np.array([r.staleness["max_age"] for r in records])
            total_bytes = comm.allreduce(torch.tensor([float(r.halo_bytes_sent)
                                                       for r in records], dtype=torch.float64))
            out[f"{key}/bytes"] = total_bytes.numpy()
    if comm.rank == 0:
        np.savez(out_path, **out)
    print(f"rank {comm.rank} done", flush=True)


if __name__ == "__main__":
    main()

"""Load, partition, train and predict from Python; the same file runs on 1 or N ranks.

    python examples/python_api.py                 # Cora from the repository's datasets/
    mpirun -n 4 python examples/python_api.py --dataset citeseer
"""

import argparse
from pathlib import Path

import numpy as np
import torch

from gnnscale.comm import init
from gnnscale.data import load_dataset
from gnnscale.engine import LocalProblem, Trainer, gather_predictions
from gnnscale.nn import GNN
from partitioning import make_partitioner

SHIPPED = Path(__file__).resolve().parents[1] / "datasets"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default="cora")
    parser.add_argument("--data-root", default=str(SHIPPED),
                        help="data root (default: the repository's datasets/)")
    parser.add_argument("--epochs", type=int, default=200)
    parser.add_argument("--halo-dtype", default="float32", choices=("float32", "bfloat16"),
                        help="dtype of halo rows on the wire (bfloat16 halves the bytes)")
    args = parser.parse_args()

    comm = init()                                   # MPI under mpirun, a world of one otherwise
    data = load_dataset(args.dataset, root=args.data_root)
    parts = make_partitioner("metis", num_parts=comm.size, seed=0).fit(data).node_parts
    problem = LocalProblem.from_graph_data(data, parts, comm)   # this rank's nodes and halo
    problem.graph.halo_plan.configure(message_dtype=getattr(torch, args.halo_dtype))

    torch.manual_seed(0)                            # the same initial weights on every rank
    model = GNN("gcn", data.num_features, 16, data.num_classes, num_layers=2, dropout=0.5)
    trainer = Trainer(model, problem, comm, lr=0.01, weight_decay=5e-4, seed=0)
    records = trainer.fit(args.epochs)

    predictions = gather_predictions(trainer)       # logits and classes of every node, rank 0
    if comm.rank == 0:
        logits, pred = predictions
        test = data.test_mask
        print(f"{comm.size} rank(s): final loss {records[-1].loss:.4f}, test accuracy "
              f"{records[-1].test_acc:.4f}, predicted {len(pred)} nodes, "
              f"recomputed test accuracy {np.mean(pred[test] == data.y[test]):.4f}")


if __name__ == "__main__":
    main()

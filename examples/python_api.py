"""Train and predict from Python with the command line's options; the same file runs on 1 or N
ranks.

    python examples/python_api.py --dataset cora --data-root datasets
    mpirun -n 4 python examples/python_api.py --dataset cora --epochs 100 --halo-dtype bfloat16

The options are `gnnscale train`'s own (model, optimisation, distribution); `build_trainer`
loads the graph, partitions it over the ranks (or reads a partition store with --partitions),
builds the model and the trainer exactly as `gnnscale train` does. What it does step by step
(load_dataset, make_partitioner, LocalProblem, GNN, Trainer) is in gnnscale/cli/build.py and
the README.
"""

import argparse
import sys

import numpy as np

from gnnscale.cli.arguments import add_training_arguments
from gnnscale.cli.build import build_trainer
from gnnscale.comm import init
from gnnscale.engine import gather_predictions
from gnnscale.errors import GnnscaleError
from partitioning import PartitionError


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_training_arguments(parser, default_dataset="cora")
    parser.add_argument("--metric", default=None, choices=("acc", "f1", "auc"),
                        help="metric that picks the best epoch (default: auc for binary "
                             "tasks, acc otherwise)")
    args = parser.parse_args()

    comm = init(args.backend)                       # MPI under mpirun, a world of one otherwise
    try:
        trainer, header, metric = build_trainer(args, comm)
    except (GnnscaleError, PartitionError) as exc:  # bad data or options: one line, exit 2
        if comm.rank == 0:
            print(f"{parser.prog}: error: {exc}", file=sys.stderr)
        return 2
    records = trainer.fit(args.epochs)

    predictions = gather_predictions(trainer)       # logits and classes of every node, rank 0
    labels = gather_test_labels(trainer)
    if comm.rank == 0:
        print(header)
        _, pred = predictions
        y, test = labels
        print(f"{comm.size} rank{'s' if comm.size > 1 else ''}: final loss "
              f"{records[-1].loss:.4f}, test_{metric} {records[-1].metrics[f'test_{metric}']:.4f}, "
              f"test accuracy {records[-1].test_acc:.4f}, predicted {len(pred)} nodes, "
              f"recomputed test accuracy {np.mean(pred[test] == y[test]):.4f}")
    return 0


def gather_test_labels(trainer):
    """(labels [N], test mask [N]) in global node order on rank 0, None elsewhere (collective)."""
    problem = trainer.problem
    pieces = trainer.comm.allgather_object((problem.graph.owned_nodes,
                                            problem.y.cpu().numpy(),
                                            problem.masks["test"].cpu().numpy()))
    if trainer.comm.rank != 0:
        return None
    num_nodes = sum(len(ids) for ids, _, _ in pieces)
    y, test = np.zeros(num_nodes, dtype=np.int64), np.zeros(num_nodes, dtype=bool)
    for ids, part_y, part_test in pieces:
        y[ids], test[ids] = part_y, part_test
    return y, test


if __name__ == "__main__":
    sys.exit(main())

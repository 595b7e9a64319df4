"""Under mpirun (or in-process with a one-rank communicator): a few Adam steps of Platonov et
al.'s ResidualGNN with each block; losses and the gathered eval-mode logits.

Usage: mpirun -n P python residual_driver.py DATASETS_ROOT OUT_DIR SIZES (see
exactness_cases.driver_main; the parts of each rank count by PARTITIONER_BY_SIZE)
"""

import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "engine"))

from exactness_cases import driver_main  # noqa: E402
from nn_cases import directed_graph  # noqa: E402

from gnnscale.engine import LocalProblem, Trainer  # noqa: E402
from gnnscale.nn import ResidualGNN  # noqa: E402
from partitioning import make_partitioner  # noqa: E402

STEPS, SEED, HIDDEN = 4, 3, 16
# name -> (block, norm, number of classes): two classes use the single-logit output
CASES = {"gcn": ("gcn", "layer", 2), "sage": ("sage", "layer", 4), "gat": ("gat", "layer", 2),
         "gcn-batch": ("gcn", "batch", 4), "gat-none": ("gat", None, 4)}
#: the partitioner of each rank count the distributed test covers
PARTITIONER_BY_SIZE = {2: "random", 4: "metis"}


def case_data(num_classes: int):
    data = directed_graph()
    if num_classes == 2:
        data.y = (data.y % 2).astype(np.int64)
        data.num_classes = 2
    return data


def run_cases(comm, partitioner: str) -> dict:
    results = {}
    for case, (block, norm, num_classes) in CASES.items():
        data = case_data(num_classes)
        parts = make_partitioner(partitioner, num_parts=comm.size, seed=SEED).fit(data).node_parts
        problem = LocalProblem.from_graph_data(data, parts, comm)
        torch.manual_seed(SEED)
        model = ResidualGNN(block, data.num_features, HIDDEN, num_classes, num_layers=2,
                            dropout=0.0, norm=norm, num_heads=4)
        trainer = Trainer(model, problem, comm, lr=0.01, weight_decay=0.0, seed=SEED)
        if norm == "batch":  # Adam magnifies rounding noise in a bias feeding a batch norm
            trainer.optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        losses = [trainer.evaluate(trainer.train_step()[0])[0] for _ in range(STEPS)]
        logits = trainer.predict().numpy()
        pieces = comm.allgather_object((problem.graph.owned_nodes, logits))
        full = np.zeros((data.num_nodes, logits.shape[1]), dtype=np.float32)
        for owned, part in pieces:
            full[owned] = part
        results[f"{case}/losses"], results[f"{case}/logits"] = np.asarray(losses), full
    return results


if __name__ == "__main__":
    driver_main(lambda comm, _: run_cases(comm, PARTITIONER_BY_SIZE[comm.size]))

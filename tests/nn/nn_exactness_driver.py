"""Under mpirun: train every nn exactness case for a few Adam steps; save logits and losses.

Usage: mpirun -n P python nn_exactness_driver.py DATASETS_ROOT OUT.npz
"""

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

from nn_cases import (CASES, DATASETS, LR, PARTITIONERS, SEED, STEPS, WEIGHT_DECAY,  # noqa: E402
                      case_key, initial_model, load_case_dataset, make_optimizer)

from gnnscale.comm import init  # noqa: E402
from gnnscale.engine import LocalProblem, Trainer  # noqa: E402
from partitioning import make_partitioner  # noqa: E402


def main() -> None:
    datasets_root, out_path = sys.argv[1], sys.argv[2]
    comm = init()
    results = {}
    for dataset in DATASETS:
        data = load_case_dataset(dataset, datasets_root)
        for partitioner in PARTITIONERS if comm.size > 1 else PARTITIONERS[:1]:
            node_parts = make_partitioner(partitioner, num_parts=comm.size,
                                          seed=SEED).fit(data).node_parts
            problem = LocalProblem.from_graph_data(data, node_parts, comm)
            for case, (case_dataset, _) in CASES.items():
                if case_dataset != dataset:
                    continue
                model = initial_model(case, data)
                trainer = Trainer(model, problem, comm, lr=LR, weight_decay=WEIGHT_DECAY,
                                  seed=SEED)
                trainer.optimizer = make_optimizer(case, model.parameters())
                losses = [trainer.evaluate(trainer.train_step()[0])[0] for _ in range(STEPS)]
                logits = trainer.predict().numpy()
                pieces = comm.allgather_object((problem.graph.owned_nodes, logits))
                full = np.zeros((data.num_nodes, logits.shape[1]), dtype=np.float32)
                for owned, part_logits in pieces:
                    full[owned] = part_logits
                results[f"{case_key(case, partitioner)}/logits"] = full
                results[f"{case_key(case, partitioner)}/losses"] = np.asarray(losses)
    if comm.rank == 0:
        np.savez(out_path, **results)
    print(f"rank {comm.rank} done", flush=True)


if __name__ == "__main__":
    main()

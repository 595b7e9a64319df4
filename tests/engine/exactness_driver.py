"""Under mpirun: train every exactness case for a few Adam steps and save logits and losses.

Usage: mpirun -n P python exactness_driver.py DATASETS_ROOT OUT.npz
"""

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

from exactness_cases import (DATASETS, LR, MODELS, PARTITIONER_PARAMS, PARTITIONERS, SEED,  # noqa: E402
                             STEPS, WEIGHT_DECAY, case_key, initial_model, load_case_dataset)

from gnnscale.comm import init  # noqa: E402
from gnnscale.engine import LocalProblem, Trainer, gather_predictions  # noqa: E402
from partitioning import make_partitioner  # noqa: E402


def main() -> None:
    datasets_root, out_path = sys.argv[1], sys.argv[2]
    comm = init()
    results = {}
    for dataset in DATASETS:
        data = load_case_dataset(dataset, datasets_root)
        for partitioner in PARTITIONERS:
            node_parts = make_partitioner(partitioner, num_parts=comm.size, seed=SEED,
                                          **PARTITIONER_PARAMS.get(partitioner, {})
                                          ).fit(data).node_parts
            problem = LocalProblem.from_graph_data(data, node_parts, comm)
            for model_name in MODELS:
                model = initial_model(model_name, data)
                trainer = Trainer(model, problem, comm, lr=LR, weight_decay=WEIGHT_DECAY,
                                  seed=SEED)
                losses = [trainer.evaluate(trainer.train_step()[0])[0] for _ in range(STEPS)]
                gathered = gather_predictions(trainer)  # (logits, classes) on rank 0
                key = case_key(dataset, partitioner, model_name)
                results[f"{key}/logits"] = gathered[0] if gathered else None
                results[f"{key}/losses"] = np.asarray(losses)
    if comm.rank == 0:
        np.savez(out_path, **results)
    print(f"rank {comm.rank} done", flush=True)


if __name__ == "__main__":
    main()

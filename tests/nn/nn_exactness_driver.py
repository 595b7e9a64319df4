"""Under mpirun: train every nn exactness case for a few Adam steps; save logits and losses.

Usage: mpirun -n P python nn_exactness_driver.py DATASETS_ROOT OUT_DIR SIZES (see
exactness_cases.driver_main)
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "engine"))

from exactness_cases import driver_main, partitioned_problems, train_and_gather  # noqa: E402
from nn_cases import (CASES, DATASETS, LR, PARTITIONERS, SEED, STEPS, WEIGHT_DECAY,  # noqa: E402
                      case_key, initial_model, load_case_dataset, make_optimizer)

from gnnscale.engine import Trainer  # noqa: E402


def run_cases(comm, datasets_root) -> dict:
    results = {}
    partitioners = PARTITIONERS if comm.size > 1 else PARTITIONERS[:1]
    for dataset, partitioner, data, problem in partitioned_problems(
            DATASETS, partitioners, load_case_dataset, datasets_root, comm, seed=SEED):
        for case, (case_dataset, _) in CASES.items():
            if case_dataset != dataset:
                continue
            model = initial_model(case, data)
            trainer = Trainer(model, problem, comm, lr=LR, weight_decay=WEIGHT_DECAY, seed=SEED)
            trainer.optimizer = make_optimizer(case, model.parameters())
            key = case_key(case, partitioner)
            results[f"{key}/losses"], results[f"{key}/logits"] = train_and_gather(trainer, STEPS)
    return results


if __name__ == "__main__":
    driver_main(run_cases)

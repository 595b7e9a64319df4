"""Under mpirun: train every exactness case for a few Adam steps and save logits and losses.

Usage: mpirun -n P python exactness_driver.py DATASETS_ROOT OUT_DIR SIZES (see
exactness_cases.driver_main)
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from exactness_cases import (DATASETS, LR, MODELS, PARTITIONERS, SEED, WEIGHT_DECAY,  # noqa: E402
                             case_key, driver_main, initial_model, load_case_dataset,
                             partitioned_problems, train_and_gather)

from gnnscale.engine import Trainer  # noqa: E402


def run_cases(comm, datasets_root) -> dict:
    results = {}
    for dataset, partitioner, data, problem in partitioned_problems(
            DATASETS, PARTITIONERS, load_case_dataset, datasets_root, comm):
        for model_name in MODELS:
            model = initial_model(model_name, data)
            trainer = Trainer(model, problem, comm, lr=LR, weight_decay=WEIGHT_DECAY, seed=SEED)
            key = case_key(dataset, partitioner, model_name)
            results[f"{key}/losses"], results[f"{key}/logits"] = train_and_gather(trainer)
    return results


if __name__ == "__main__":
    driver_main(run_cases)

"""Under mpirun: vertex-cut training cases; saves global losses, logits and exchange bytes.

Usage: mpirun -n P python vcut_driver.py DATASETS_ROOT OUT_DIR SIZES (see
exactness_cases.driver_main)
"""

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "engine"))

from exactness_cases import (LR, SEED, WEIGHT_DECAY, driver_main, initial_model,  # noqa: E402
                             load_case_dataset)

from gnnscale.engine import Trainer, gather_predictions  # noqa: E402
from gnnscale.engine.vertex_cut_problem import vertex_cut_problem  # noqa: E402
from gnnscale.graph.staleness import make_policy  # noqa: E402
from partitioning import make_partitioner  # noqa: E402

STEPS = 3
CASES = [("cora", "libra"), ("isolated", "libra"), ("cora", "hdrf")]
MODELS = ("gcn", "sage")
STALE = ("delayed:2", "local", "pipelined")


def run_case(problem, data, model_name, comm, staleness=None):
    problem.graph.staleness = make_policy(staleness)
    trainer = Trainer(initial_model(model_name, data), problem, comm, lr=LR,
                      weight_decay=WEIGHT_DECAY, seed=SEED)
    losses, sent = [], []
    for _ in range(STEPS):
        problem.graph.halo_plan.stats.reset()
        losses.append(trainer.train_step()[0])
        sent.append(problem.graph.halo_plan.stats.reset().halo_bytes_sent)
    gathered = gather_predictions(trainer)  # (logits, classes) on rank 0, None elsewhere
    if problem.graph.staleness is not None:
        problem.graph.staleness.close()
    losses = comm.allreduce(torch.tensor(losses, dtype=torch.float64)).numpy()
    sent = comm.allreduce(torch.tensor(sent, dtype=torch.float64)).numpy()
    return losses, gathered[0] if gathered else None, sent


def run_cases(comm, datasets_root) -> dict:
    results = {}
    for dataset, partitioner in CASES:
        data = load_case_dataset(dataset, datasets_root)
        part = make_partitioner(partitioner, num_parts=comm.size, seed=SEED).fit(data)
        problem = vertex_cut_problem(data, part.node_parts, part.edge_parts, comm)
        for model_name in MODELS:
            key = f"{dataset}-{partitioner}-{model_name}"
            results[f"{key}/losses"], results[f"{key}/logits"], results[f"{key}/bytes"] = \
                run_case(problem, data, model_name, comm)
        if dataset == "cora" and partitioner == "libra" and comm.size > 1:
            for spec in STALE:
                key = f"{dataset}-{partitioner}-gcn-{spec}"
                results[f"{key}/losses"], _, results[f"{key}/bytes"] = \
                    run_case(problem, data, "gcn", comm, spec)
            # every exchange waited for as soon as it is posted: nothing overlaps it
            problem.graph.halo_plan.configure(overlap=False)
            key = f"{dataset}-{partitioner}-gcn-waited"
            results[f"{key}/losses"], results[f"{key}/logits"], results[f"{key}/bytes"] = \
                run_case(problem, data, "gcn", comm)
            problem.graph.halo_plan.configure(overlap=True)
    return results


if __name__ == "__main__":
    driver_main(run_cases)

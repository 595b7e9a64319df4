"""What every recipe shares: the rank's problem, evaluation with a split's loss, summaries."""

from __future__ import annotations

import numpy as np
import torch
from torch.nn import functional as F

from partitioning import make_partitioner

from ..comm import Communicator
from ..engine import LocalProblem, evaluate_global


def row_normalise(x: np.ndarray) -> np.ndarray:
    """Each row divided by its sum; all-zero rows stay zero (``preprocess_features`` of the GCN
    and GAT reference code)."""
    sums = x.sum(axis=1, dtype=np.float64)
    inverse = np.divide(1.0, sums, out=np.zeros_like(sums), where=sums != 0)
    return (x * inverse[:, None]).astype(x.dtype)


def node_parts(data, comm: Communicator, seed: int = 0) -> np.ndarray:
    """METIS parts (one per rank): rank 0 partitions, every rank receives the assignment."""
    if comm.size == 1:
        return np.zeros(data.num_nodes, dtype=np.int64)
    if comm.rank == 0:
        parts = make_partitioner("metis", num_parts=comm.size, seed=seed).fit(data).node_parts
        parts = torch.from_numpy(parts.astype(np.int64))
    else:
        parts = torch.empty(data.num_nodes, dtype=torch.int64)
    return comm.broadcast(parts, root=0).numpy()


def local_problem(data, parts: np.ndarray, comm: Communicator) -> LocalProblem:
    """This rank's share of ``data`` under the assignment ``parts`` (collective)."""
    return LocalProblem.from_graph_data(data, parts, comm)


def evaluate_with_loss(trainer, split: str = "val") -> tuple[float, dict]:
    """One eval-mode forward: the mean cross-entropy over ``split`` (all ranks) and every
    ``{split}_{metric}`` of the trainer's metrics, with one allreduce (collective)."""
    problem = trainer.problem
    logits = trainer.predict()
    mask = problem.masks[split]
    local = F.cross_entropy(logits[mask], problem.y[mask], reduction="sum")
    total, metrics = evaluate_global(float(local), logits, problem.y, problem.masks,
                                     problem.num_classes, trainer.comm, trainer.metrics)
    return total / max(problem.global_counts[split], 1), metrics


def score_summary(scores) -> dict:
    """Mean, sample standard deviation (ddof 1) and count of per-run scores, in percent."""
    values = np.asarray(scores, dtype=np.float64) * 100.0
    std = float(values.std(ddof=1)) if values.size > 1 else float("nan")
    return {"runs": int(values.size), "mean": float(values.mean()), "std": std}

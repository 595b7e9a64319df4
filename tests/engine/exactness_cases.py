"""Cases shared by the exactness driver (under mpirun) and the one-process PyG reference."""

from __future__ import annotations

import numpy as np
import torch

from gnnscale.data import generate_sbm, load_dataset
from gnnscale.nn import GNN

STEPS = 5
LR, WEIGHT_DECAY, HIDDEN, SEED = 0.01, 5e-4, 16, 3
DATASETS = ("cora", "isolated")
PARTITIONERS = ("random", "block", "metis", "ldg", "fennel")  # vertex cuts: tests/vertex_cut
MODELS = ("gcn", "sage")


def load_case_dataset(name: str, datasets_root):
    """Cora from the shared folder, or a generated graph where 15% of the nodes are isolated."""
    if name == "cora":
        return load_dataset("cora", root=str(datasets_root))
    return generate_sbm(num_nodes=400, num_classes=4, avg_degree=6.0, num_features=24,
                        train_per_class=20, num_val=80, num_test=120, seed=11,
                        isolated_fraction=0.15)


def initial_model(model: str, data) -> GNN:
    """The model every rank (and the reference) starts from: same seed, same weights."""
    torch.manual_seed(SEED)
    return GNN(model, data.num_features, HIDDEN, data.num_classes, num_layers=2, dropout=0.0)


def case_key(dataset: str, partitioner: str, model: str) -> str:
    return f"{dataset}-{partitioner}-{model}"


def relative_error(actual: np.ndarray, expected: np.ndarray) -> float:
    """max |actual - expected| / max |expected|: error relative to the values' scale."""
    scale = max(float(np.abs(expected).max()), 1e-12)
    return float(np.abs(actual - expected).max()) / scale

"""Cases shared by the exactness driver (under mpirun) and the one-process PyG reference."""

from __future__ import annotations

import numpy as np
import torch
from torch.nn import functional as F
from torch_geometric.nn import GCNConv, SAGEConv

from gnnscale.data import generate_sbm, load_dataset
from gnnscale.nn import GNN

STEPS = 5
LR, WEIGHT_DECAY, HIDDEN, SEED = 0.01, 5e-4, 16, 3
DATASETS = ("cora", "isolated")
# Edge cuts; the vertex cuts have their own exactness test in tests/vertex_cut.
PARTITIONERS = ("random", "block", "metis", "kaminpar", "ldg", "fennel")
# Every rank partitions on its own, so each partitioner must give the same parts on every rank:
# KaMinPar does for a seed on one thread.
PARTITIONER_PARAMS = {"kaminpar": {"threads": 1}}
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


def pyg_reference(model_name: str, data, steps: int = STEPS) -> tuple[np.ndarray, np.ndarray]:
    """Train PyG's own layers on the whole graph from gnnscale's initial weights for ``steps``
    Adam steps; return (losses, logits after the last step)."""
    ours = initial_model(model_name, data)
    convs = []
    for layer in ours.layers:
        if model_name == "gcn":
            conv = GCNConv(layer.in_dim, layer.out_dim)
            conv.lin.weight.data.copy_(layer.lin.weight)
            conv.bias.data.copy_(layer.bias)
        else:
            conv = SAGEConv(layer.in_dim, layer.out_dim)
            conv.lin_l.weight.data.copy_(layer.lin_l.weight)
            conv.lin_l.bias.data.copy_(layer.lin_l.bias)
            conv.lin_r.weight.data.copy_(layer.lin_r.weight)
        convs.append(conv)
    pyg = data.to_pyg()

    def forward():
        return convs[1](F.relu(convs[0](pyg.x, pyg.edge_index)), pyg.edge_index)

    optimizer = torch.optim.Adam(torch.nn.ModuleList(convs).parameters(), lr=LR,
                                 weight_decay=WEIGHT_DECAY)
    losses = []
    for _ in range(steps):
        optimizer.zero_grad()
        loss = F.cross_entropy(forward()[pyg.train_mask], pyg.y[pyg.train_mask])
        loss.backward()
        optimizer.step()
        losses.append(float(loss.detach()))
    with torch.no_grad():
        return np.asarray(losses), forward().numpy()


# Both sides compute in float32 and sum in different orders (rows split across ranks, partial
# sums of vertex cuts, SAGE's two transforms in one GEMM); Adam's normalised step turns ~1e-7
# gradient differences into ~1e-5 weight differences within the 5 steps. A real fault (an edge
# lost or counted twice, a wrong normalisation) is off by 1e-3 or more.
TOLERANCE = 5e-5


def exactness_failures(saved, references: dict, cases,
                       tolerance: float = TOLERANCE) -> list[str]:
    """Compare saved ``{key}/losses`` and ``{key}/logits`` with ``references[(dataset, model)]``
    for every ``(dataset, partitioner, model)`` case; one line per case outside ``tolerance``."""
    failures = []
    for dataset, partitioner, model in cases:
        ref_losses, ref_logits = references[(dataset, model)]
        key = case_key(dataset, partitioner, model)
        loss_err = relative_error(saved[f"{key}/losses"], ref_losses)
        logit_err = relative_error(saved[f"{key}/logits"], ref_logits)
        if not (loss_err <= tolerance and logit_err <= tolerance):
            failures.append(f"{key}: loss err {loss_err:.2e}, logit err {logit_err:.2e}")
    return failures

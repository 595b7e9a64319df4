"""Distributed training equals one process on the whole graph with PyG's own layers.

For 1-4 ranks, every partitioner, GCN and SAGE, on Cora and on a graph with isolated nodes:
the losses of 5 Adam steps and the logits after them match PyG's GCNConv/SAGEConv trained on
the whole graph from the same initial weights, within 1e-5 relative.
"""

from pathlib import Path

import numpy as np
import pytest
import torch
from torch.nn import functional as F
from torch_geometric.nn import GCNConv, SAGEConv

from exactness_cases import (DATASETS, LR, MODELS, PARTITIONERS, STEPS, WEIGHT_DECAY, case_key,
                             initial_model, load_case_dataset, relative_error)
from mpi_launch import run_python_mpi

DRIVER = Path(__file__).with_name("exactness_driver.py")
TOLERANCE = 1e-5


def pyg_reference(model_name: str, data) -> tuple[np.ndarray, np.ndarray]:
    """Train PyG layers on the whole graph from gnnscale's initial weights; (losses, logits)."""
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
    modules = torch.nn.ModuleList(convs)
    pyg = data.to_pyg()
    train = pyg.train_mask

    def forward():
        h = F.relu(convs[0](pyg.x, pyg.edge_index))
        return convs[1](h, pyg.edge_index)

    optimizer = torch.optim.Adam(modules.parameters(), lr=LR, weight_decay=WEIGHT_DECAY)
    losses = []
    for _ in range(STEPS):
        optimizer.zero_grad()
        loss = F.cross_entropy(forward()[train], pyg.y[train])
        loss.backward()
        optimizer.step()
        losses.append(float(loss))
    with torch.no_grad():
        return np.asarray(losses), forward().numpy()


@pytest.fixture(scope="module")
def references(datasets_root):
    refs = {}
    for dataset in DATASETS:
        data = load_case_dataset(dataset, datasets_root)
        for model in MODELS:
            refs[(dataset, model)] = pyg_reference(model, data)
    return refs


@pytest.mark.parametrize("nprocs", [1, 2, 3, 4])
def test_distributed_training_equals_pyg_on_whole_graph(nprocs, references, datasets_root,
                                                        tmp_path):
    out = tmp_path / "results.npz"
    result = run_python_mpi(nprocs, DRIVER, [str(datasets_root), str(out)], timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    saved = np.load(out)
    failures = []
    for dataset in DATASETS:
        for partitioner in PARTITIONERS:
            for model in MODELS:
                ref_losses, ref_logits = references[(dataset, model)]
                key = case_key(dataset, partitioner, model)
                loss_err = relative_error(saved[f"{key}/losses"], ref_losses)
                logit_err = relative_error(saved[f"{key}/logits"], ref_logits)
                if not (loss_err <= TOLERANCE and logit_err <= TOLERANCE):
                    failures.append(f"{key}: loss err {loss_err:.2e}, logit err {logit_err:.2e}")
    assert not failures, "\n".join(failures)

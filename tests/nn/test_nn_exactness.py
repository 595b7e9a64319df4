"""Distributed GAT, GIN, SAGE-max, norms, residuals and wrapped PyG layers equal PyG on the
whole graph.

For 1-4 ranks (random and METIS partitions) every case in ``nn_cases.CASES`` trains a few Adam
steps (SGD where a batch norm follows a bias, see ``nn_cases.SGD_CASES``); the losses and the
eval-mode logits after them match the same model with PyG's own layers (and torch's BatchNorm1d
or PyG's LayerNorm) on the whole graph, from the same initial weights, within 1e-5 relative.
One mpirun launch per rank count runs every case.
"""

from pathlib import Path

import numpy as np
import pytest
import torch
from torch.nn import functional as F

from mpi_launch import run_python_mpi
from nn_cases import (CASES, DATASETS, PARTITIONERS, STEPS, case_key, initial_model,
                      load_case_dataset, make_optimizer, relative_error, whole_graph_reference)

DRIVER = Path(__file__).with_name("nn_exactness_driver.py")
TOLERANCE = 1e-5


def pyg_reference(case: str, data) -> tuple[np.ndarray, np.ndarray]:
    """Train the whole-graph PyG version of ``case``; (losses, eval-mode logits)."""
    pyg = data.to_pyg()
    model = whole_graph_reference(initial_model(case, data), pyg.edge_index)
    optimizer = make_optimizer(case, model.parameters())
    losses = []
    model.train()
    for _ in range(STEPS):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(pyg.x, None)[pyg.train_mask], pyg.y[pyg.train_mask])
        loss.backward()
        optimizer.step()
        losses.append(float(loss.detach()))
    model.eval()
    with torch.no_grad():
        return np.asarray(losses), model(pyg.x, None).numpy()


@pytest.fixture(scope="module")
def references(datasets_root):
    refs = {}
    for dataset in DATASETS:
        data = load_case_dataset(dataset, datasets_root)
        for case, (case_dataset, _) in CASES.items():
            if case_dataset == dataset:
                refs[case] = pyg_reference(case, data)
    return refs


@pytest.mark.parametrize("nprocs", [1, 2, 3, 4])
def test_nn_layers_distributed_equal_pyg_on_whole_graph(nprocs, references, datasets_root,
                                                        tmp_path):
    out = tmp_path / "results.npz"
    result = run_python_mpi(nprocs, DRIVER, [str(datasets_root), str(out)], timeout=600)  # generous: the machine is shared
    assert result.returncode == 0, result.stderr[-3000:]
    saved = np.load(out)
    failures, errors = [], []
    for case in CASES:
        for partitioner in PARTITIONERS if nprocs > 1 else PARTITIONERS[:1]:
            ref_losses, ref_logits = references[case]
            key = case_key(case, partitioner)
            loss_err = relative_error(saved[f"{key}/losses"], ref_losses)
            logit_err = relative_error(saved[f"{key}/logits"], ref_logits)
            errors.append((max(loss_err, logit_err), key))
            if not (loss_err <= TOLERANCE and logit_err <= TOLERANCE):
                failures.append(f"{key}: loss err {loss_err:.2e}, logit err {logit_err:.2e}")
    worst, worst_key = max(errors)
    print(f"{nprocs} ranks: largest relative error {worst:.2e} ({worst_key})")
    assert not failures, "\n".join(failures)

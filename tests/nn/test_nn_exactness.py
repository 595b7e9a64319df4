"""Distributed GAT, GIN, SAGE-max, norms, residuals and wrapped PyG layers equal PyG on the
whole graph.

For 1-4 ranks (random and METIS partitions) every case in ``nn_cases.CASES`` trains a few Adam
steps (SGD where a batch norm follows a bias, see ``nn_cases.SGD_CASES``); the losses and the
eval-mode logits after them match the same model with PyG's own layers (and torch's BatchNorm1d
or PyG's LayerNorm) on the whole graph, from the same initial weights, within 1e-5 relative.
One mpirun launch runs every case at every rank count (exactness_cases.driver_main).
"""

import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from torch.nn import functional as F

from nn_cases import (CASES, DATASETS, PARTITIONERS, STEPS, case_key, initial_model,
                      load_case_dataset, make_optimizer, whole_graph_reference)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "engine"))

from exactness_cases import SIZES, compare_with_references, saved_by_size  # noqa: E402

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


saved = saved_by_size(DRIVER)  # every rank count of SIZES, one launch


@pytest.mark.parametrize("nprocs", SIZES)
def test_nn_layers_distributed_equal_pyg_on_whole_graph(nprocs, references, saved):
    saved = saved[nprocs]
    expected = {case_key(case, partitioner): references[case] for case in CASES
                for partitioner in (PARTITIONERS if nprocs > 1 else PARTITIONERS[:1])}
    failures, errors = compare_with_references(saved, expected, TOLERANCE)
    worst, worst_key = max(errors)
    print(f"{nprocs} ranks: largest relative error {worst:.2e} ({worst_key})")
    assert not failures, "\n".join(failures)

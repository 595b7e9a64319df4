"""Distributed training equals one process on the whole graph with PyG's own layers.

For 1-4 ranks, every partitioner, GCN and SAGE, on Cora and on a graph with isolated nodes:
the losses of 5 Adam steps and the logits after them match PyG's GCNConv/SAGEConv trained on
the whole graph from the same initial weights, within 5e-5 relative (float32 summed in other
orders, amplified by Adam: see exactness_cases.TOLERANCE).
"""

from pathlib import Path

import numpy as np
import pytest

from exactness_cases import (DATASETS, MODELS, PARTITIONERS, exactness_failures,
                             load_case_dataset, pyg_reference)
from mpi_launch import run_python_mpi

DRIVER = Path(__file__).with_name("exactness_driver.py")


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
    cases = [(d, p, m) for d in DATASETS for p in PARTITIONERS for m in MODELS]
    failures = exactness_failures(saved, references, cases)
    assert not failures, "\n".join(failures)

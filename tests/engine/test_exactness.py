"""Distributed training equals one process on the whole graph with PyG's own layers.

For 1-4 ranks, every partitioner, GCN and SAGE, on Cora and on a graph with isolated nodes:
the losses of 5 Adam steps and the logits after them match PyG's GCNConv/SAGEConv trained on
the whole graph from the same initial weights, within 5e-5 relative (float32 summed in other
orders, amplified by Adam: see exactness_cases.TOLERANCE).
"""

from pathlib import Path

import pytest

from exactness_cases import (DATASETS, MODELS, PARTITIONERS, SIZES, exactness_failures,
                             load_case_dataset, pyg_reference, saved_by_size)

DRIVER = Path(__file__).with_name("exactness_driver.py")


@pytest.fixture(scope="module")
def references(datasets_root):
    refs = {}
    for dataset in DATASETS:
        data = load_case_dataset(dataset, datasets_root)
        for model in MODELS:
            refs[(dataset, model)] = pyg_reference(model, data)
    return refs


saved = saved_by_size(DRIVER)  # every rank count of SIZES, one launch


@pytest.mark.parametrize("nprocs", SIZES)
def test_distributed_training_equals_pyg_on_whole_graph(nprocs, references, saved):
    saved = saved[nprocs]
    cases = [(d, p, m) for d in DATASETS for p in PARTITIONERS for m in MODELS]
    failures = exactness_failures(saved, references, cases)
    assert not failures, "\n".join(failures)

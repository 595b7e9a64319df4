"""bf16 compute (autocast) in the trainer: transforms run in bf16 and training learns."""

import numpy as np
import pytest
import torch

from gnnscale.comm import SingleCommunicator
from gnnscale.data import load_dataset
from gnnscale.engine import LocalProblem, Trainer
from gnnscale.nn import GNN

pytestmark = pytest.mark.timeout(600)


def _train(data, compute_dtype, model="gcn", epochs=40, order="auto"):
    comm = SingleCommunicator()
    problem = LocalProblem.from_graph_data(data, np.zeros(data.num_nodes, np.int64), comm)
    torch.manual_seed(0)
    net = GNN(model, data.num_features, 32, data.num_classes, dropout=0.5, order=order)
    trainer = Trainer(net, problem, comm, seed=0, compute_dtype=compute_dtype)
    records = trainer.fit(epochs)
    return records, trainer


@pytest.mark.parametrize("model,order", [("gcn", "auto"), ("sage", "auto"),
                                         ("sage", "aggregate_first")])
def test_bf16_compute_tracks_float32_and_learns(datasets_root, model, order):
    data = load_dataset("cora", root=datasets_root)
    full, _ = _train(data, None, model, order=order)
    half, trainer = _train(data, torch.bfloat16, model, order=order)
    assert all(p.dtype == torch.float32 for p in trainer.model.parameters())
    assert trainer.predict().dtype == torch.float32
    # same start, same masks: the first losses agree to bf16's precision, and differ (the
    # transforms did run in bf16)
    assert half[0].loss == pytest.approx(full[0].loss, rel=2e-2)
    assert half[0].loss != full[0].loss
    best_full = max(r.val_acc for r in full)
    best_half = max(r.val_acc for r in half)
    assert best_half > 0.7 and best_half >= best_full - 0.03


def test_unsupported_compute_dtype_is_refused():
    data = load_dataset("sbm", num_nodes=60, num_features=4, num_classes=2, seed=0)
    comm = SingleCommunicator()
    problem = LocalProblem.from_graph_data(data, np.zeros(data.num_nodes, np.int64), comm)
    with pytest.raises(ValueError, match="compute_dtype"):
        Trainer(GNN("gcn", 4, 8, 2), problem, comm, compute_dtype=torch.float16)

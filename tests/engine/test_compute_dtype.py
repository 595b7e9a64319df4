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


@pytest.mark.parametrize("model,half_rows", [("gcn", True), ("sage", True),
                                             ("sage-max", False), ("gat", False)])
def test_bf16_autocast_hands_half_rows_to_layers_that_aggregate_them(model, half_rows):
    data = load_dataset("sbm", num_nodes=300, num_features=40, num_classes=3, seed=0)
    comm = SingleCommunicator()
    problem = LocalProblem.from_graph_data(data, np.zeros(data.num_nodes, np.int64), comm)
    torch.manual_seed(0)
    net = GNN(model, data.num_features, 48, data.num_classes, num_layers=3, dropout=0.5)
    seen = []
    for layer in net.layers:
        layer.register_forward_pre_hook(lambda _, args: seen.append(args[0].dtype))
    trainer = Trainer(net, problem, comm, seed=0, compute_dtype=torch.bfloat16)
    trainer.train_step()
    # the input dropout writes layer 1's rows, the fused ReLU + dropout those of layers 2 and
    # 3: in bf16 for layers that aggregate them at half width; other layers get the raw
    # features as they are (and later whatever their own layers' outputs are)
    assert seen == [torch.bfloat16] * 3 if half_rows else seen[0] == torch.float32
    # evaluation drops nothing: the raw features reach layer 1 as they are (float32), so
    # their aggregate is computed once and served from the cache the second time
    seen.clear()
    first, second = trainer.predict(), trainer.predict()
    assert seen[0] == seen[3] == torch.float32 and torch.equal(first, second)

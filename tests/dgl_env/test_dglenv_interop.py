"""DGL interop in the DGL environment: graphs in and out, and gnnscale's layers equal DGL's."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from gnnscale.comm import init
from gnnscale.data import from_dgl, generate_sbm, to_dgl
from gnnscale.engine import LocalProblem, Trainer
from gnnscale.errors import DataError
from gnnscale.nn import GNN

from dglenv_reference import LR, STEPS, WEIGHT_DECAY, dgl_train

FIELDS = ("indptr", "indices", "x", "y", "train_mask", "val_mask", "test_mask")


def test_round_trip_keeps_every_array():
    data = generate_sbm(num_nodes=300, seed=1, isolated_fraction=0.1)
    g = to_dgl(data)
    assert g.num_nodes() == data.num_nodes and g.num_edges() == data.num_edges
    assert g.ndata["feat"].dtype == torch.float32 and g.ndata["label"].dtype == torch.int64
    assert g.ndata["train_mask"].dtype == torch.bool
    back = from_dgl(g, name=data.name)
    for field in FIELDS:
        assert np.array_equal(getattr(back, field), getattr(data, field)), field
    assert back.num_classes == data.num_classes
    # DGL's own in-CSR (CSC of the adjacency) is gnnscale's CSR by destination.
    indptr, indices, _ = g.adj_tensors("csc")
    assert np.array_equal(indptr.numpy(), data.indptr)
    assert np.array_equal(np.sort(indices.numpy()), np.sort(data.indices))


def test_from_a_graph_built_in_dgl():
    import dgl

    g = dgl.rand_graph(50, 200, idtype=torch.int32)  # int32 ids, random edge order
    g.ndata["x"] = torch.randn(50, 3, dtype=torch.float64)
    g.ndata["y"] = torch.randint(0, 4, (50, 1))
    for i, key in enumerate(("train_mask", "val_mask", "test_mask")):
        g.ndata[key] = (torch.arange(50) % 3 == i).to(torch.uint8)
    data = from_dgl(g)
    src, dst = (t.numpy() for t in g.edges(order="eid"))
    order = np.argsort(dst, kind="stable")  # edge-id order within each destination
    assert np.array_equal(data.indices, src[order].astype(np.int64))
    counts = np.bincount(dst, minlength=50)
    assert np.array_equal(data.indptr, np.concatenate([[0], np.cumsum(counts)]))
    assert data.x.dtype == np.float32 and np.allclose(data.x, g.ndata["x"].numpy())
    assert np.array_equal(data.y, g.ndata["y"][:, 0].numpy())
    assert data.train_mask.sum() == 17 and data.train_mask.dtype == bool
    # Out again: the same edges as a multiset (CSR order), same node data.
    again = to_dgl(data)
    assert sorted(zip(*(t.tolist() for t in again.edges()))) == sorted(zip(src.tolist(),
                                                                        dst.tolist()))


def test_heterogeneous_and_incomplete_graphs_are_refused():
    import dgl

    hetero = dgl.heterograph({("user", "follows", "user"): ([0], [1]),
                              ("user", "buys", "item"): ([0], [0])})
    with pytest.raises(DataError, match="heterogeneous"):
        from_dgl(hetero)
    g = dgl.graph(([0, 1], [1, 2]))
    g.ndata["feat"] = torch.ones(3, 2)
    g.ndata["label"] = torch.tensor([0, 1, 1])
    with pytest.raises(DataError, match="train_mask"):
        from_dgl(g)


@pytest.mark.parametrize("model_name", ["gcn", "sage"])
def test_gnnscale_training_equals_dgl_layers(model_name):
    """gnnscale's GCN/SAGE trained in one process = DGL GraphConv/SAGEConv, same weights."""
    data = generate_sbm(num_nodes=400, seed=2, isolated_fraction=0.05)
    torch.manual_seed(0)
    model = GNN(model_name, data.num_features, 16, data.num_classes, dropout=0.0)
    ref_losses, ref_logits = dgl_train(model, to_dgl(data))
    comm = init("single")
    problem = LocalProblem.from_graph_data(data, np.zeros(data.num_nodes, np.int64), comm)
    trainer = Trainer(model, problem, comm, lr=LR, weight_decay=WEIGHT_DECAY)
    losses = [trainer.train_step()[0] for _ in range(STEPS)]
    np.testing.assert_allclose(losses, ref_losses, rtol=1e-5)
    np.testing.assert_allclose(trainer.predict().numpy(), ref_logits, rtol=1e-4, atol=1e-5)

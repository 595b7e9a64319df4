"""DGL interop. The round trip needs dgl (a separate torch<=2.2.1 environment) and skips here."""

import sys

import numpy as np
import pytest

from gnnscale.data import from_dgl, generate_sbm, to_dgl
from gnnscale.errors import DataError


def test_clear_error_when_dgl_is_missing(monkeypatch):
    monkeypatch.setitem(sys.modules, "dgl", None)  # makes `import dgl` raise ImportError
    with pytest.raises(DataError, match="needs the 'dgl' package"):
        to_dgl(generate_sbm(num_nodes=20))
    with pytest.raises(DataError, match="needs the 'dgl' package"):
        from_dgl(object())


def test_round_trip_through_dgl():
    pytest.importorskip("dgl")
    graph = generate_sbm(num_nodes=100, seed=1)
    dgl_graph = to_dgl(graph)
    assert dgl_graph.num_nodes() == 100 and dgl_graph.num_edges() == graph.num_edges
    assert set(dgl_graph.ndata.keys()) >= {"feat", "label", "train_mask", "val_mask",
                                            "test_mask"}
    back = from_dgl(dgl_graph, name=graph.name)
    for field in ("indptr", "indices", "x", "y", "train_mask", "val_mask", "test_mask"):
        assert np.array_equal(getattr(back, field), getattr(graph, field)), field


def test_from_dgl_multi_split_masks_and_missing_labels():
    dgl = pytest.importorskip("dgl")
    import torch

    g = dgl.graph((torch.tensor([0, 1]), torch.tensor([1, 2])), num_nodes=3)
    g.ndata["feat"] = torch.ones(3, 2)
    masks = torch.zeros(3, 2, dtype=torch.bool)
    masks[2, 1] = True
    g.ndata["train_mask"] = masks
    g.ndata["val_mask"] = torch.zeros(3, 2, dtype=torch.bool)
    g.ndata["test_mask"] = torch.zeros(3, 2, dtype=torch.bool)
    with pytest.raises(DataError, match="no node labels"):
        from_dgl(g)
    g.ndata["label"] = torch.tensor([0, 1, 1])
    assert from_dgl(g, split=1).train_mask.tolist() == [False, False, True]

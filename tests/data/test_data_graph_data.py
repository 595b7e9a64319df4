"""GraphData: CSR construction, edge_index round trips, validation errors, PyG conversion."""

import numpy as np
import pytest
import torch

from gnnscale.data import GraphData
from gnnscale.errors import DataError


def small_graph(**overrides) -> GraphData:
    # Edges 0->1, 2->1, 1->0, 0->2, 1->2 given out of destination order on purpose.
    edge_index = np.array([[1, 0, 2, 0, 1], [0, 1, 1, 2, 2]])
    edge_index = edge_index[:, [3, 1, 0, 4, 2]]
    args = dict(edge_index=edge_index, num_nodes=4, x=np.arange(8).reshape(4, 2),
                y=np.array([0, 1, 2, -1]), train_mask=[True, False, False, False],
                val_mask=[False, True, False, False], test_mask=[False, False, True, False])
    args.update(overrides)
    return GraphData.from_edge_index(**args)


def test_csr_by_destination_keeps_input_order_within_rows():
    g = small_graph()
    assert g.indptr.tolist() == [0, 1, 3, 5, 5]
    # Row 1 (destination 1) lists sources in input order: 0 then 2; row 2: 0 then 1.
    assert g.indices.tolist() == [1, 0, 2, 0, 1]
    assert g.indptr.dtype == np.int64 and g.indices.dtype == np.int64
    assert g.x.dtype == np.float32 and g.y.dtype == np.int64 and g.train_mask.dtype == bool
    assert (g.num_nodes, g.num_edges, g.num_features, g.num_classes) == (4, 5, 2, 3)
    g.validate()


def test_edge_index_round_trip_preserves_edges():
    g = small_graph()
    ei = g.edge_index()
    assert ei.shape == (2, 5) and ei.dtype == np.int64
    assert sorted(map(tuple, ei.T.tolist())) == [(0, 1), (0, 2), (1, 0), (1, 2), (2, 1)]
    again = GraphData.from_edge_index(ei, g.num_nodes, g.x, g.y, g.train_mask, g.val_mask,
                                      g.test_mask)
    assert np.array_equal(again.indptr, g.indptr) and np.array_equal(again.indices, g.indices)


def test_symmetrize_adds_reverse_edges_once():
    g = small_graph(edge_index=np.array([[0, 1, 0, 3, 3], [1, 0, 2, 3, 3]]), symmetrize=True)
    edges = set(map(tuple, g.edge_index().T.tolist()))
    assert edges == {(0, 1), (1, 0), (0, 2), (2, 0), (3, 3)}
    assert g.num_edges == 5


def test_num_classes_from_labels_and_explicit():
    assert small_graph().num_classes == 3
    assert small_graph(num_classes=5).num_classes == 5
    unlabeled = GraphData(np.zeros(2, np.int64), np.zeros(0, np.int64),
                          np.zeros((1, 1), np.float32), np.array([-1]), np.ones(1, bool),
                          np.zeros(1, bool), np.zeros(1, bool))
    assert unlabeled.num_classes == 0


def test_summary_is_one_line_with_counts():
    line = small_graph(name="toy").summary()
    assert "\n" not in line
    for part in ("toy", "4 nodes", "5 edges", "2 features", "3 classes", "1/1/1"):
        assert part in line


def _break(g: GraphData, field: str, value) -> GraphData:
    setattr(g, field, value)
    return g


@pytest.mark.parametrize("field, value, message", [
    ("indices", np.array([1, 0, 7, 0, 1]), "edge source id 7"),
    ("indices", np.array([1, 0, -2, 0, 1]), "edge source id -2"),
    ("indptr", np.array([0, 1, 3, 2, 5]), "indptr decreases"),
    ("indptr", np.array([0, 1, 3, 5, 6]), "end at len(indices)"),
    ("indices", np.array([1, 0, 2, 0, 1], dtype=np.int32), "indices has dtype int32"),
    ("x", np.zeros((4, 2)), "x has dtype float64"),
    ("x", np.zeros((3, 2), np.float32), "x must have shape"),
    ("x", np.array([[0, 1], [2, np.nan], [0, 0], [0, 0]], np.float32), "NaN or Inf values"),
    ("y", np.array([0, 1, 3, -1]), "label 3"),
    ("y", np.array([0, 1, -4, -1]), "label -4"),
    ("y", np.array([0, 1, 2]), "y must have shape"),
    ("train_mask", np.zeros(4, bool), "train_mask is empty"),
    ("val_mask", np.array([True, True, False, False]), "overlap"),
    ("test_mask", np.array([False, False, True, True]), "unlabeled"),
    ("val_mask", np.zeros(3, bool), "val_mask must have shape"),
    ("train_mask", [True, False, False, False], "must be a numpy array"),
])
def test_validate_names_field_and_value(field, value, message):
    g = _break(small_graph(), field, value)
    with pytest.raises(DataError, match=message.replace("(", r"\(").replace(")", r"\)")):
        g.validate()


def test_from_edge_index_rejects_bad_ids_and_shapes():
    with pytest.raises(DataError, match="node id 9 .* out of range"):
        small_graph(edge_index=np.array([[0, 9], [1, 1]]))
    with pytest.raises(DataError, match="shape"):
        small_graph(edge_index=np.array([0, 1, 2]))
    with pytest.raises(DataError, match="integers"):
        small_graph(edge_index=np.array([[0.5], [1.0]]))


def test_pyg_round_trip():
    g = small_graph(name="toy")
    data = g.to_pyg()
    assert data.num_nodes == 4 and data.edge_index.dtype == torch.int64
    assert torch.equal(data.x, torch.from_numpy(g.x)) and data.train_mask.dtype == torch.bool
    back = GraphData.from_pyg(data, name="toy")
    for field in ("indptr", "indices", "x", "y", "train_mask", "val_mask", "test_mask"):
        assert np.array_equal(getattr(back, field), getattr(g, field)), field
    assert back.name == "toy" and back.num_classes == g.num_classes


def test_from_pyg_takes_a_column_of_multi_split_masks_and_rejects_missing_fields():
    from torch_geometric.data import Data

    masks = torch.zeros(3, 2, dtype=torch.bool)
    masks[0, 1] = True
    other = torch.zeros(3, 2, dtype=torch.bool)
    data = Data(edge_index=torch.tensor([[0, 1], [1, 2]]), x=torch.ones(3, 1),
                y=torch.tensor([[0], [1], [0]]), train_mask=masks, val_mask=other,
                test_mask=other)
    g = GraphData.from_pyg(data, split=1)
    assert g.train_mask.tolist() == [True, False, False] and g.y.tolist() == [0, 1, 0]
    with pytest.raises(DataError, match="split 2"):
        GraphData.from_pyg(data, split=2)
    del data.y
    with pytest.raises(DataError, match="has no y"):
        GraphData.from_pyg(data)

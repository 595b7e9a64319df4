"""The PyG-style interchange npz (np.savez of a Data object's arrays)."""

import numpy as np
import pytest

from gnnscale.data import detect_format, generate_sbm, load_dataset
from gnnscale.data.pyg_npz import load_pyg_npz
from gnnscale.errors import DataError

FIELDS = ("indptr", "indices", "x", "y", "train_mask", "val_mask", "test_mask")


@pytest.fixture
def graph():
    return generate_sbm(num_nodes=80, num_classes=3, num_features=5, num_val=20, num_test=20,
                        seed=3)


def arrays_of(graph, **changes):
    """The arrays of ``graph.to_pyg()`` as ``.numpy()`` gives them (without importing torch)."""
    arrays = {"edge_index": graph.edge_index(), "x": graph.x, "y": graph.y,
              "train_mask": graph.train_mask, "val_mask": graph.val_mask,
              "test_mask": graph.test_mask}
    arrays.update(changes)
    return {k: v for k, v in arrays.items() if v is not None}


def save(tmp_path, graph, name="pyg.npz", **changes):
    path = tmp_path / name
    np.savez(path, **arrays_of(graph, **changes))
    return path


def test_round_trip_detection_and_optional_arrays(tmp_path, graph):
    path = save(tmp_path, graph, num_nodes=np.int64(graph.num_nodes),
                y=graph.y[:, None], edge_attr=np.ones(graph.num_edges))
    assert detect_format(path) == ("pyg", path)
    loaded = load_dataset(path)
    for field in FIELDS:
        assert np.array_equal(getattr(loaded, field), getattr(graph, field)), field
    assert loaded.name == "pyg" and loaded.num_classes == graph.num_classes
    assert load_dataset(tmp_path).summary() == loaded.summary()  # the folder holding it


def test_edges_are_symmetrized_unless_asked_not_to(tmp_path, graph):
    src, dst = graph.edge_index()
    once = np.stack([src[src < dst], dst[src < dst]])
    path = save(tmp_path, graph, edge_index=once)
    assert np.array_equal(load_pyg_npz(path).indices, graph.indices)  # both directions again
    directed = load_pyg_npz(path, symmetrize=False)
    assert directed.num_edges == once.shape[1]
    assert np.all(np.less(*directed.edge_index()))


def test_split_columns_drawn_splits_and_unlabelled_nodes(tmp_path, graph):
    n = graph.num_nodes
    other = np.roll(graph.train_mask, 1) & ~graph.val_mask & ~graph.test_mask
    path = save(tmp_path, graph, train_mask=np.stack([graph.train_mask, other], 1),
                val_mask=np.stack([graph.val_mask] * 2, 1),
                test_mask=np.stack([graph.test_mask] * 2, 1))
    assert np.array_equal(load_pyg_npz(path, split=1).train_mask, other)
    with pytest.raises(DataError, match="2 splits.*split=2 is out of range"):
        load_pyg_npz(path, split=2)
    y = graph.y.astype(np.float64)
    y[:10] = np.nan
    path = save(tmp_path, graph, name="nomasks.npz", y=y, train_mask=None, val_mask=None,
                test_mask=None)
    drawn = load_pyg_npz(path)
    assert np.all(drawn.y[:10] == -1)
    assert not (drawn.train_mask | drawn.val_mask | drawn.test_mask)[:10].any()
    assert drawn.train_mask.sum() == round(0.5 * (n - 10))
    assert not np.array_equal(load_pyg_npz(path, split=1).train_mask, drawn.train_mask)


@pytest.mark.parametrize("changes, message", [
    (dict(y=None), "lacks y needed by the PyG npz layout"),
    (dict(x=None, y=None, train_mask=None), "unknown layout"),  # edge_index alone: not PyG
    (dict(test_mask=None), "has train_mask, val_mask but not all"),
    (dict(edge_index=np.zeros((6, 2), np.int64)), r"\[2, E\].*transpose an \[E, 2\]"),
    (dict(edge_index=np.zeros((2, 3))), r"integer \[2, E\] array, got float64"),
    (dict(edge_index=np.array([[0, 1], [2, 80]])), "node id 80"),
    (dict(edge_index=np.array([[-1], [2]])), "node id -1"),
    (dict(x=np.ones(80)), r"x must be a numeric \[N, F\]"),
    (dict(x=np.array([["a"] * 2] * 80)), r"x must be a numeric"),
    (dict(y=np.zeros(79, np.int64)), "79 rows but the graph has 80"),
    (dict(y=np.zeros((80, 2), np.int64)), "2 label columns"),
    (dict(y=np.full(80, -3)), "found -3"),
    (dict(num_nodes=np.int64(81)), r"num_nodes \[81\] does not match x's 80 rows"),
    (dict(train_mask=np.ones(79, bool)), r"train_mask must have shape \[N=80\]"),
    (dict(train_mask=np.full(80, 2)), "train_mask must hold only 0/1"),
    (dict(val_mask=np.ones(80, bool)), "train_mask and val_mask overlap"),
    (dict(train_mask=np.zeros(80, bool)), "train_mask is empty"),
])
def test_bad_files(tmp_path, graph, changes, message):
    path = save(tmp_path, graph, **changes)
    with pytest.raises(DataError, match=message):
        load_dataset(path)


def test_unlabelled_node_in_a_mask_is_refused(tmp_path, graph):
    y = graph.y.copy()
    y[np.flatnonzero(graph.test_mask)[0]] = -1
    with pytest.raises(DataError, match="test_mask contains 1 unlabeled"):
        load_dataset(save(tmp_path, graph, y=y))

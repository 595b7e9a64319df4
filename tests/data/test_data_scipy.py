"""Scipy sparse adjacency npz with the .nodes.npz sidecar."""

import numpy as np
import pytest
import scipy.sparse as sp

from gnnscale.data import detect_format, generate_sbm, load_dataset, save_scipy
from gnnscale.data.scipy_io import load_scipy, sidecar_path
from gnnscale.errors import DataError


def test_round_trip_through_save_scipy(tmp_path):
    graph = generate_sbm(num_nodes=200, seed=4)
    path, nodes = save_scipy(graph, tmp_path / "g.npz")
    assert nodes == sidecar_path(path) == tmp_path / "g.nodes.npz"
    loaded = load_scipy(path)
    for field in ("indptr", "indices", "x", "y", "train_mask", "val_mask", "test_mask"):
        assert np.array_equal(getattr(loaded, field), getattr(graph, field)), field
    assert detect_format(path) == ("scipy", path)
    # A folder holding the adjacency and its sidecar is one dataset.
    assert load_dataset(tmp_path).summary() == loaded.summary()


def test_row_is_source_and_values_only_need_to_be_nonzero(tmp_path):
    matrix = sp.coo_matrix(([2.0, 5.0, 0.0, 1.0], ([0, 1, 2, 0], [1, 2, 0, 1])), shape=(3, 3))
    sp.save_npz(tmp_path / "a.npz", matrix)
    g = load_scipy(tmp_path / "a.npz")
    assert sorted(map(tuple, g.edge_index().T.tolist())) == [(0, 1), (1, 2)]
    assert g.num_features == 5 and g.num_classes == 4  # generated node data
    both = load_scipy(tmp_path / "a.npz", symmetrize=True)
    assert sorted(map(tuple, both.edge_index().T.tolist())) == [(0, 1), (1, 0), (1, 2), (2, 1)]


def test_sidecar_with_several_splits_and_without_masks(tmp_path):
    sp.save_npz(tmp_path / "b.npz", sp.csr_matrix(np.ones((4, 4)) - np.eye(4)))
    x, y = np.zeros((4, 2), np.float32), np.array([0, 1, 0, 1])
    splits = np.array([[1, 0, 0, 0], [0, 1, 0, 0]], bool)
    np.savez(tmp_path / "b.nodes.npz", x=x, y=y, train_mask=splits, val_mask=splits[::-1],
             test_mask=np.zeros((2, 4), bool))
    assert load_scipy(tmp_path / "b.npz", split=1).train_mask.tolist() == [False, True, False,
                                                                            False]
    with pytest.raises(DataError, match="holds 2 splits; split=2"):
        load_scipy(tmp_path / "b.npz", split=2)
    np.savez(tmp_path / "b.nodes.npz", x=x, y=np.array([0, 1, -1, 1]))
    g = load_scipy(tmp_path / "b.npz")
    assert g.train_mask.sum() == 2 and not (g.train_mask | g.val_mask | g.test_mask)[2]


@pytest.mark.parametrize("make, message", [
    (lambda d: sp.save_npz(d / "c.npz", sp.csr_matrix(np.ones((2, 3)))), "must be square"),
    (lambda d: (d / "c.npz").write_bytes(b"PK\x03\x04broken"), "not a readable"),
    (lambda d: np.savez(d / "c.nodes.npz", x=np.ones((3, 1))), "lacks 'y'"),
    (lambda d: np.savez(d / "c.nodes.npz", x=np.ones((2, 1)), y=np.zeros(2, int)), "N=3"),
    (lambda d: np.savez(d / "c.nodes.npz", x=np.ones((3, 1)), y=np.zeros(3, int),
                        train_mask=np.ones(3, bool)), "not all of"),
    (lambda d: np.savez(d / "c.nodes.npz", x=np.ones((3, 1)), y=np.zeros(3)), "integer"),
])
def test_malformed(tmp_path, make, message):
    sp.save_npz(tmp_path / "c.npz", sp.csr_matrix(np.eye(3)))
    make(tmp_path)
    with pytest.raises(DataError, match=message):
        load_scipy(tmp_path / "c.npz")

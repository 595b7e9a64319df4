"""Heterophilous-graphs npz loader: agreement with PyG on Tolokers/Minesweeper, splits, errors."""

import shutil

import numpy as np
import pytest

from gnnscale.data import load_dataset
from gnnscale.data.heterophilous import load_heterophilous
from gnnscale.errors import DataError


@pytest.mark.parametrize("name, pyg_name, nodes, edges", [
    ("minesweeper", "Minesweeper", 10_000, 78_804),
    ("tolokers", "Tolokers", 11_758, 1_038_000),
])
def test_matches_torch_geometric(datasets, tmp_path, name, pyg_name, nodes, edges):
    from torch_geometric.datasets import HeterophilousGraphDataset

    source = datasets / name / "raw" / f"{name}.npz"
    (tmp_path / name / "raw").mkdir(parents=True)
    shutil.copyfile(source, tmp_path / name / "raw" / f"{name}.npz")
    ref = HeterophilousGraphDataset(str(tmp_path), pyg_name)[0]
    for split in (0, 7):
        ours = load_heterophilous(source, split=split)
        assert (ours.num_nodes, ours.num_edges, ours.num_classes) == (nodes, edges, 2)
        assert np.array_equal(ours.x, ref.x.numpy()) and np.array_equal(ours.y, ref.y.numpy())
        for mask in ("train_mask", "val_mask", "test_mask"):
            assert np.array_equal(getattr(ours, mask), getattr(ref, mask)[:, split].numpy())
    ref_keys = np.sort(ref.edge_index[1].numpy() * nodes + ref.edge_index[0].numpy())
    src, dst = ours.edge_index()
    assert np.array_equal(np.sort(dst * nodes + src), ref_keys)


def test_by_name_case_insensitive_and_by_folder(datasets):
    a = load_dataset("Minesweeper", root=datasets, split=3)
    b = load_dataset(datasets / "minesweeper", split=3)
    c = load_dataset(datasets / "minesweeper" / "raw" / "minesweeper.npz", split=3)
    assert a.summary() == b.summary() == c.summary()
    assert np.array_equal(a.train_mask, c.train_mask)


def _write(path, **overrides):
    n = 6
    arrays = dict(node_features=np.ones((n, 3), np.float32), node_labels=np.arange(n) % 2,
                  edges=np.array([[0, 1], [1, 2], [2, 3], [4, 5]]),
                  train_masks=np.tile([True, True, False, False, False, False], (2, 1)),
                  val_masks=np.tile([False, False, True, True, False, False], (2, 1)),
                  test_masks=np.tile([False, False, False, False, True, True], (2, 1)))
    arrays.update(overrides)
    np.savez(path, **{k: v for k, v in arrays.items() if v is not None})
    return path


def test_symmetrises_once_listed_edges_and_can_keep_them_directed(tmp_path):
    path = _write(tmp_path / "toy.npz")
    g = load_heterophilous(path)
    assert g.num_edges == 8 and g.name == "toy"
    assert set(map(tuple, g.edge_index().T.tolist())) >= {(0, 1), (1, 0), (5, 4)}
    assert load_heterophilous(path, symmetrize=False).num_edges == 4


@pytest.mark.parametrize("overrides, message", [
    ({"edges": None}, "lacks edges"),
    ({"edges": np.array([[0, 1, 2]])}, r"\[E, 2\]"),
    ({"edges": np.array([[0, 9]])}, "node id 9"),
    ({"node_labels": np.arange(5)}, "do not match"),
    ({"train_masks": np.ones((2, 4), bool)}, "train_masks must have shape"),
])
def test_malformed_files(tmp_path, overrides, message):
    with pytest.raises(DataError, match=message):
        load_heterophilous(_write(tmp_path / "bad.npz", **overrides))


def test_split_out_of_range(tmp_path):
    with pytest.raises(DataError, match="has 2 splits; split=2"):
        load_heterophilous(_write(tmp_path / "toy.npz"), split=2)

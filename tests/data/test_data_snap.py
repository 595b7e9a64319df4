"""SNAP edge lists and the generated node data of structure-only graphs."""

import gzip

import numpy as np
import pytest

from gnnscale.data import load_dataset
from gnnscale.data.features import synthetic_node_data
from gnnscale.data.snap import load_snap, read_edge_list
from gnnscale.errors import DataError, UsageError


def test_facebook_counts_and_generated_data(datasets):
    path = datasets / "SNAP-facebook-combined" / "raw" / "facebook-combined.txt.gz"
    g = load_snap(path)
    assert (g.num_nodes, g.num_edges, g.num_classes, g.num_features) == (4039, 176_468, 4, 5)
    src, dst = g.edge_index()
    keys = set((dst * g.num_nodes + src).tolist())
    assert all(int(s) * g.num_nodes + int(d) in keys for s, d in zip(src[:2000], dst[:2000]))
    assert g.name == "facebook-combined"
    # Labels are homophilous communities covering every class; split is 50/25/25.
    assert np.mean(g.y[src] == g.y[dst]) > 0.6
    assert np.bincount(g.y).min() > 0.1 * g.num_nodes
    assert (g.train_mask.sum(), g.val_mask.sum(), g.test_mask.sum()) == (2020, 1010, 1009)
    # Column 4 is the standardised log-degree.
    degree = np.diff(g.indptr) + np.bincount(g.indices, minlength=g.num_nodes)
    assert np.corrcoef(g.x[:, 4], np.log1p(degree))[0, 1] > 0.999


def test_named_snap_datasets(datasets):
    g = load_dataset("ca-astroph", root=datasets, num_classes=3, num_features=8)
    assert g.num_nodes == 17_903 and g.num_classes == 3 and g.num_features == 8
    assert load_dataset("EMAIL-ENRON", root=datasets).num_nodes == 36_692


def _write_text(path, text):
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "wt") as handle:
        handle.write(text)
    return path


@pytest.mark.parametrize("suffix", [".txt", ".txt.gz"])
def test_plain_and_gzip_with_comments_directed_or_symmetrised(tmp_path, suffix):
    path = _write_text(tmp_path / f"toy{suffix}",
                       "# Directed graph\n# FromNodeId\tToNodeId\n0\t1\n1\t2\n2\t0\n2\t0\n3\t3\n")
    undirected = load_snap(path)
    assert undirected.num_nodes == 4 and undirected.num_edges == 6  # self loop and dup gone
    directed = load_snap(path, directed=True)
    assert sorted(map(tuple, directed.edge_index().T.tolist())) == [(0, 1), (1, 2), (2, 0)]
    assert load_dataset(path).num_edges == 6
    assert undirected.name == "toy"


def test_sparse_ids_are_relabelled_unless_asked_not_to(tmp_path):
    path = _write_text(tmp_path / "sparse.txt", "10 1000\n1000 20\n")
    assert load_snap(path).num_nodes == 3
    assert load_snap(path, relabel=False).num_nodes == 1001
    dense = _write_text(tmp_path / "dense.txt", "0 1\n3 2\n")
    assert load_snap(dense).num_nodes == 4


def test_extra_columns_are_ignored(tmp_path):
    path = _write_text(tmp_path / "weighted.txt", "0 1 0.5 1999\n1 2 0.25 2000\n")
    assert load_snap(path).num_edges == 4


@pytest.mark.parametrize("text, message", [
    ("0 1\n1 x\n", "not a readable edge list"),
    ("0\n", "not a readable edge list"),
    ("0 -1\n", "negative node id"),
    ("# nothing\n", "lists no edges"),
])
def test_bad_edge_lists(tmp_path, text, message):
    with pytest.raises(DataError, match=message):
        load_snap(_write_text(tmp_path / "bad.txt", text))


def test_missing_file_and_corrupt_gzip(tmp_path):
    with pytest.raises(DataError, match="does not exist"):
        read_edge_list(tmp_path / "absent.txt")
    (tmp_path / "broken.txt.gz").write_bytes(b"\x1f\x8b\x08\x00garbage")
    with pytest.raises(DataError, match="broken.txt.gz"):
        load_snap(tmp_path / "broken.txt.gz")


def test_synthetic_node_data_is_seeded_and_split_varies_only_masks():
    indptr = np.array([0, 1, 2, 3, 3])
    indices = np.array([1, 2, 0])
    a = synthetic_node_data(indptr, indices, num_classes=2, seed=1)
    b = synthetic_node_data(indptr, indices, num_classes=2, seed=1)
    c = synthetic_node_data(indptr, indices, num_classes=2, seed=1, split=1)
    for left, right in zip(a, b):
        assert np.array_equal(left, right)
    assert np.array_equal(a[0], c[0]) and np.array_equal(a[1], c[1])
    assert a[0].dtype == np.float32 and a[0].shape == (4, 3) and a[1].dtype == np.int64
    masks = np.stack(a[2:])
    assert masks.sum(axis=0).max() == 1
    with pytest.raises(UsageError, match="num_features"):
        synthetic_node_data(indptr, indices, num_classes=4, num_features=3)

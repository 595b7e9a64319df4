"""R-MAT generator (Graph500 parameters) and the in-place CSR key helpers it uses."""

import numpy as np
import pytest

from gnnscale.data import generate_rmat, load_dataset
from gnnscale.data import rmat as rmat_module
from gnnscale.data._csr import csr_from_sorted_keys, dedupe_sorted_in_place
from gnnscale.errors import UsageError


def test_symmetric_deduplicated_without_self_loops():
    g = generate_rmat(10, edge_factor=8, seed=1).validate()
    assert g.num_nodes == 1024 and g.name == "rmat-10"
    src, dst = g.edge_index()
    keys = dst * g.num_nodes + src
    assert np.unique(keys).size == keys.size
    assert np.array_equal(np.sort(keys), np.sort(src * g.num_nodes + dst))
    assert not np.any(src == dst)
    assert g.num_edges <= 2 * 8 * 1024


def test_skewed_degrees_and_seeded():
    g = generate_rmat(12, seed=0)
    degree = np.diff(g.indptr)
    assert degree.max() > 20 * degree.mean()
    assert (degree == 0).any()
    again = generate_rmat(12, seed=0)
    other = generate_rmat(12, seed=1)
    assert np.array_equal(g.indices, again.indices) and np.array_equal(g.x, again.x)
    assert not np.array_equal(g.indptr, other.indptr)


def test_chunking_does_not_change_the_graph(monkeypatch):
    whole = generate_rmat(9, edge_factor=4, seed=3)
    monkeypatch.setattr(rmat_module, "CHUNK_EDGES", 100)
    chunked = generate_rmat(9, edge_factor=4, seed=3)
    # Same distribution, different random stream: compare sizes, not identity.
    assert chunked.num_nodes == whole.num_nodes
    assert abs(chunked.num_edges - whole.num_edges) < 0.1 * whole.num_edges
    chunked.validate()


def test_node_data_and_split():
    g = generate_rmat(8, num_features=6, num_classes=3, split=0)
    assert g.x.shape == (256, 6) and g.num_classes == 3
    assert (g.train_mask.sum(), g.val_mask.sum(), g.test_mask.sum()) == (128, 64, 64)
    other = generate_rmat(8, num_features=6, num_classes=3, split=1)
    assert np.array_equal(g.indices, other.indices)
    assert not np.array_equal(g.train_mask, other.train_mask)


def test_bad_arguments():
    with pytest.raises(UsageError, match="scale"):
        generate_rmat(0)
    with pytest.raises(UsageError, match="a \\+ b \\+ c"):
        generate_rmat(4, a=0.6, b=0.3, c=0.3)


def test_load_dataset_rmat_defaults_and_num_nodes():
    assert load_dataset("rmat").num_nodes == 4096
    assert load_dataset("RMAT", num_nodes=1000, edge_factor=2).num_nodes == 1024
    assert load_dataset("rmat", scale=5).num_nodes == 32


@pytest.mark.parametrize("chunk", [1, 2, 3, 1000])
def test_dedupe_sorted_in_place_across_chunk_boundaries(chunk):
    keys = np.array([0, 0, 1, 1, 1, 2, 5, 5, 9], dtype=np.int64)
    assert dedupe_sorted_in_place(keys, chunk=chunk).tolist() == [0, 1, 2, 5, 9]
    assert dedupe_sorted_in_place(np.zeros(0, np.int64)).size == 0


def test_csr_from_sorted_keys():
    # Edges (src -> dst) 1->0, 2->0, 0->2 as keys dst * 3 + src, with a repeat.
    indptr, indices = csr_from_sorted_keys(np.array([1, 2, 2, 6], dtype=np.int64), 3,
                                           unique=False)
    assert indptr.tolist() == [0, 2, 2, 3] and indices.tolist() == [1, 2, 0]

"""The compiled CSR builders against plain numpy references on random edge lists."""

import numpy as np
import pytest

from partitioning import csr_ops
from partitioning.csr_ops import simple_csr_from_edges, transpose_csr


def reference_simple_csr(src, dst, num_nodes, symmetrize, remove_self_loops):
    if symmetrize:
        src, dst = np.concatenate([src, dst]), np.concatenate([dst, src])
    if remove_self_loops:
        keep = src != dst
        src, dst = src[keep], dst[keep]
    keys = np.unique(dst.astype(np.int64) * num_nodes + src)
    indptr = np.searchsorted(keys, np.arange(num_nodes + 1, dtype=np.int64) * num_nodes)
    return indptr, keys % max(num_nodes, 1)


@pytest.mark.parametrize("int32_scratch", [True, False])
@pytest.mark.parametrize("seed", range(40))
def test_simple_csr_from_edges_equals_a_sorted_unique_reference(seed, int32_scratch,
                                                                monkeypatch):
    # int64 scratch is what graphs of 2**31 nodes and more use
    if not int32_scratch:
        monkeypatch.setattr(csr_ops, "INT32_SCRATCH_MAX_NODES", 0)
    rng = np.random.default_rng(seed)
    num_nodes = int(rng.integers(1, 60))
    num_edges = int(rng.integers(0, 400))
    hub = rng.random() < 0.5  # a skewed graph: long rows with many repeats
    src = rng.integers(0, 3 if hub else num_nodes, num_edges) % num_nodes
    dst = rng.integers(0, num_nodes, num_edges)
    for symmetrize in (False, True):
        for loops in (False, True):
            got = simple_csr_from_edges(src, dst, num_nodes, symmetrize=symmetrize,
                                        remove_self_loops=loops)
            want = reference_simple_csr(src, dst, num_nodes, symmetrize, loops)
            np.testing.assert_array_equal(got[0], want[0])
            np.testing.assert_array_equal(got[1], want[1])
            assert got[0].dtype == got[1].dtype == np.int64


def test_simple_csr_from_int32_ids_and_no_edges():
    indptr, indices = simple_csr_from_edges(np.array([2, 0, 2], np.int32),
                                            np.array([1, 1, 1], np.int32), 3, symmetrize=True)
    assert indptr.tolist() == [0, 1, 3, 4] and indices.tolist() == [1, 0, 2, 1]
    indptr, indices = simple_csr_from_edges(np.empty(0, np.int64), np.empty(0, np.int64), 4,
                                            symmetrize=True)
    assert indptr.tolist() == [0] * 5 and indices.size == 0


def test_transpose_csr_lists_each_sources_destinations_with_edge_ids():
    rng = np.random.default_rng(1)
    indptr, indices = simple_csr_from_edges(rng.integers(0, 30, 200), rng.integers(0, 30, 200),
                                            30, symmetrize=False)
    out_indptr, out_dst, out_eid = transpose_csr(indptr, indices, 30)
    destinations = np.repeat(np.arange(30), np.diff(indptr))
    for u in range(30):
        row = slice(out_indptr[u], out_indptr[u + 1])
        np.testing.assert_array_equal(indices[out_eid[row]], u)
        np.testing.assert_array_equal(out_dst[row], destinations[out_eid[row]])
        assert np.all(np.diff(out_dst[row]) >= 0)

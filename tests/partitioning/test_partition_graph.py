import numpy as np
import pytest
import scipy.sparse as sp

from partitioning import CSRGraph, PartitionError, as_csr_graph
from partition_testutil import GraphWithMask, ring


def test_csr_layout_rows_are_destinations():
    g = CSRGraph.from_edge_index([0, 1, 2, 0], [1, 2, 0, 2], 4)
    assert g.num_nodes == 4 and g.num_edges == 4
    np.testing.assert_array_equal(g.indptr, [0, 1, 2, 4, 4])
    np.testing.assert_array_equal(g.indices, [2, 0, 1, 0])
    np.testing.assert_array_equal(g.in_degree(), [1, 1, 2, 0])
    np.testing.assert_array_equal(g.out_degree(), [2, 1, 1, 0])
    src, dst = g.edge_index()
    np.testing.assert_array_equal(src, [2, 0, 1, 0])
    np.testing.assert_array_equal(dst, [0, 1, 2, 2])
    assert g.indptr.dtype == np.int64 and g.indices.dtype == np.int64


def test_edge_index_options():
    src = [0, 0, 1, 2, 2]
    dst = [1, 1, 1, 0, 3]
    g = CSRGraph.from_edge_index(src, dst, 4, remove_duplicates=True, remove_self_loops=True)
    assert sorted(zip(*g.edge_index())) == [(0, 1), (2, 0), (2, 3)]
    s = CSRGraph.from_edge_index(src, dst, 4, symmetrize=True, remove_self_loops=True)
    assert sorted(zip(*s.edge_index())) == [(0, 1), (0, 2), (1, 0), (2, 0), (2, 3), (3, 2)]
    assert sorted(zip(*g.symmetrized().edge_index())) == sorted(zip(*s.edge_index()))


def test_scipy_round_trip_and_as_csr_graph():
    g = ring(6)
    m = g.to_scipy()
    assert m.shape == (6, 6) and m.nnz == 12
    assert m[1, 0] == 1  # edge 0 -> 1 is row 1 (destination), column 0 (source)
    back = CSRGraph.from_scipy(m)
    np.testing.assert_array_equal(back.indptr, g.indptr)
    np.testing.assert_array_equal(back.indices, g.indices)
    assert as_csr_graph(g) is g
    assert as_csr_graph(sp.coo_matrix(m)).num_edges == 12
    duck = as_csr_graph(GraphWithMask(g, np.zeros(6, bool)))
    assert duck.num_nodes == 6 and duck.num_edges == 12


def test_isolated_nodes_and_empty_edges():
    g = CSRGraph.from_edge_index([], [], 5)
    assert g.num_nodes == 5 and g.num_edges == 0
    np.testing.assert_array_equal(g.in_degree(), np.zeros(5))


@pytest.mark.parametrize("indptr, indices, match", [
    ([0, 2, 1, 2], [0, 1], "not monotone"),
    ([0, 1, 2], [0, 5], "out of range"),
    ([0, 1, 2], [0, -1], "negative node id -1"),
    ([0, 1, 3], [0, 1], "disagrees with len"),
    ([0, 1, 2], [0.5, 1.0], "non-integer"),
    ([0, 1, 2], ["a", "b"], "integer array"),
    ([], [], "indptr is empty"),
])
def test_bad_csr_is_refused(indptr, indices, match):
    with pytest.raises(PartitionError, match=match):
        CSRGraph(indptr, indices)


def test_bad_edge_lists_are_refused():
    with pytest.raises(PartitionError, match="node id 7 in dst"):
        CSRGraph.from_edge_index([0, 1], [1, 7], 3)
    with pytest.raises(PartitionError, match="negative node id -2 in src"):
        CSRGraph.from_edge_index([-2], [1], 3)
    with pytest.raises(PartitionError, match="differ in length"):
        CSRGraph.from_edge_index([0, 1], [1], 3)
    with pytest.raises(PartitionError, match="num_nodes must be an integer"):
        CSRGraph.from_edge_index([0], [1], 2.5)
    with pytest.raises(PartitionError, match="num_nodes=3 disagrees"):
        CSRGraph([0, 0], [], num_nodes=3)
    with pytest.raises(PartitionError, match="cannot read a graph from list"):
        as_csr_graph([1, 2])
    with pytest.raises(PartitionError, match="must be square"):
        CSRGraph.from_scipy(sp.csr_matrix((2, 3)))
    with pytest.raises(PartitionError):  # it is a ValueError too
        CSRGraph([0, 1], [3])
    assert issubclass(PartitionError, ValueError)


def test_undirected_simple_reuses_a_graph_that_already_is_one():
    import numpy as np

    from partitioning.graph import CSRGraph

    rng = np.random.default_rng(5)
    src, dst = rng.integers(0, 40, 300), rng.integers(0, 40, 300)
    directed = CSRGraph.from_edge_index(src, dst, 40)  # loops, duplicates, one direction
    simple = directed.undirected_simple()
    assert simple is not directed
    reference = CSRGraph.from_edge_index(src, dst, 40, symmetrize=True, remove_self_loops=True)
    np.testing.assert_array_equal(simple.indptr, reference.indptr)
    np.testing.assert_array_equal(simple.indices, reference.indices)
    assert simple.undirected_simple() is simple  # symmetric, sorted rows, no loops: no copy
    # the same edges with rows in another order are symmetrised again (same result)
    shuffled = simple.indices.copy()
    for v in range(40):
        lo, hi = simple.indptr[v], simple.indptr[v + 1]
        shuffled[lo:hi] = shuffled[lo:hi][::-1]
    again = CSRGraph(simple.indptr, shuffled).undirected_simple()
    np.testing.assert_array_equal(again.indices, simple.indices)

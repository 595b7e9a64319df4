"""Part views: every node owned once, halo plans consistent on both sides, CSR preserved."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from partitioning import CSRGraph
from partitioning.local_view import PartViewBuilder


def random_graph(rng, num_nodes, num_edges, self_loops=True):
    src = rng.integers(0, num_nodes, num_edges)
    dst = rng.integers(0, num_nodes, num_edges)
    if not self_loops:
        keep = src != dst
        src, dst = src[keep], dst[keep]
    return CSRGraph.from_edge_index(src, dst, num_nodes)


def check_views(graph, node_parts, num_parts):
    builder = PartViewBuilder(graph, node_parts, num_parts)
    views = [builder.view(p) for p in range(num_parts)]
    owned = np.concatenate([v.owned_nodes for v in views])
    assert np.array_equal(np.sort(owned), np.arange(graph.num_nodes))  # owned exactly once
    for v in views:
        local = v.local_nodes
        # the local CSR is exactly the global in-edges of the owned nodes, in order
        for row, node in enumerate(v.owned_nodes):
            expected = graph.indices[graph.indptr[node]:graph.indptr[node + 1]]
            got = local[v.indices[v.indptr[row]:v.indptr[row + 1]]]
            assert np.array_equal(got, expected)
        assert np.all(node_parts[v.halo_nodes] != v.part)
        assert np.array_equal(v.halo_owner, node_parts[v.halo_nodes])
        assert v.recv_counts.sum() == v.num_halo and v.recv_counts[v.part] == 0
        assert np.array_equal(v.in_degree, np.diff(graph.indptr)[local])
    # what q sends to p is exactly p's halo block from q, in the same order
    for p in range(num_parts):
        halo = views[p].halo_nodes
        offsets = np.concatenate([[0], np.cumsum(views[p].recv_counts)])
        for q in range(num_parts):
            sender = views[q]
            start = sender.send_counts[:p].sum()
            sent = sender.owned_nodes[sender.send_index[start:start + sender.send_counts[p]]]
            assert np.array_equal(sent, halo[offsets[q]:offsets[q + 1]])


def test_views_on_random_graph_with_self_loops_and_duplicates():
    rng = np.random.default_rng(0)
    graph = random_graph(rng, 200, 900)
    check_views(graph, rng.integers(0, 5, 200), 5)


def test_empty_parts_and_isolated_nodes():
    rng = np.random.default_rng(1)
    graph = random_graph(rng, 50, 40)
    node_parts = rng.integers(0, 3, 50)  # parts 3 and 4 own nothing
    check_views(graph, node_parts, 5)


def test_view_rejects_bad_part_and_shape():
    graph = random_graph(np.random.default_rng(2), 10, 20)
    with pytest.raises(ValueError, match="node_parts has shape"):
        PartViewBuilder(graph, np.zeros(9, np.int64))
    with pytest.raises(ValueError, match="part 3 out of range"):
        PartViewBuilder(graph, np.zeros(10, np.int64), 2).view(3)


@settings(max_examples=40, deadline=None)
@given(num_nodes=st.integers(1, 40), num_edges=st.integers(0, 120),
       num_parts=st.integers(1, 6), seed=st.integers(0, 2**31))
def test_views_property(num_nodes, num_edges, num_parts, seed):
    rng = np.random.default_rng(seed)
    graph = random_graph(rng, num_nodes, num_edges)
    check_views(graph, rng.integers(0, num_parts, num_nodes), num_parts)

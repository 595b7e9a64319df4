"""Property tests: any graph, any method, any part count -> every node owned exactly once."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from partitioning import PARTITIONERS, CSRGraph, make_partitioner, part_summary


@st.composite
def graphs(draw):
    n = draw(st.integers(1, 40))
    m = draw(st.integers(0, 120))
    src = draw(st.lists(st.integers(0, n - 1), min_size=m, max_size=m))
    dst = draw(st.lists(st.integers(0, n - 1), min_size=m, max_size=m))
    return CSRGraph.from_edge_index(src, dst, n)


@settings(max_examples=40, deadline=None)
@given(graph=graphs(), method=st.sampled_from(sorted(PARTITIONERS)), data=st.data())
def test_every_node_owned_exactly_once(graph, method, data):
    num_parts = data.draw(st.integers(1, graph.num_nodes))
    seed = data.draw(st.integers(0, 2**31))
    # KaMinPar is deterministic for a seed on one thread only (its parallel phases race).
    params = {"threads": 1} if method == "kaminpar" else {}
    part = make_partitioner(method, num_parts=num_parts, seed=seed, **params).fit(graph)
    assert part.node_parts.shape == (graph.num_nodes,)
    assert part.node_parts.min() >= 0 and part.node_parts.max() < num_parts
    if part.kind == "vertex_cut":
        assert part.edge_parts.shape == (graph.num_edges,)
    s = part_summary(graph, part)
    assert s["nodes"].sum() == graph.num_nodes
    assert s["edges"].sum() == graph.num_edges
    assert 1.0 <= s["replication_factor"] <= num_parts
    again = make_partitioner(method, num_parts=num_parts, seed=seed, **params).fit(graph)
    np.testing.assert_array_equal(part.node_parts, again.node_parts)

"""The arrays of a vertex-cut part: the same whether one part is built (a rank in memory) or all
are (the partition store), and exactly the edges, masters and mirrors the partition says."""

import numpy as np
import pytest

from partitioning import make_partitioner
from partitioning.vertex_cut.parts import VertexCutPartBuilder, vertex_cut_part
from partition_testutil import random_graph


@pytest.mark.parametrize("num_parts", [1, 3, 8])
def test_one_part_equals_the_builders_part_and_covers_the_partition(num_parts):
    g = random_graph(200, 1500, seed=3, isolated_fraction=0.1)
    part = make_partitioner("hdrf", num_parts=num_parts, seed=2).fit(g)
    builder = VertexCutPartBuilder(g, part.node_parts, part.edge_parts, num_parts)
    src, dst = g.edge_index()
    seen_edges = []
    for p in range(num_parts):
        alone = vertex_cut_part(g, part.node_parts, part.edge_parts, p)
        built = builder.part(p)
        assert set(alone) == set(built)
        for name in alone:
            assert alone[name].dtype == built[name].dtype
            np.testing.assert_array_equal(alone[name], built[name])
        owned, mirrors = built["owned_nodes"], built["mirror_nodes"]
        np.testing.assert_array_equal(owned, np.flatnonzero(part.node_parts == p))
        assert (part.node_parts[mirrors] != p).all()
        np.testing.assert_array_equal(built["mirror_owner"], part.node_parts[mirrors])
        # the local CSR is the part's edges, in local ids
        local = np.concatenate([owned, mirrors])
        rows = np.repeat(np.arange(local.size), np.diff(built["indptr"]))
        edges = built["edge_ids"]
        assert (part.edge_parts[edges] == p).all()
        np.testing.assert_array_equal(local[rows], dst[edges])
        np.testing.assert_array_equal(local[built["indices"]], src[edges])
        seen_edges.append(edges)
    np.testing.assert_array_equal(np.sort(np.concatenate(seen_edges)), np.arange(g.num_edges))


def test_a_part_out_of_range_is_refused():
    g = random_graph(20, 50, seed=1)
    part = make_partitioner("libra", num_parts=2, seed=0).fit(g)
    with pytest.raises(ValueError, match="part 2 out of range"):
        VertexCutPartBuilder(g, part.node_parts, part.edge_parts, 2).part(2)

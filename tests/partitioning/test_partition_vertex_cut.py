import numpy as np
import pytest

from partitioning import (CSRGraph, Partition, PartitionError, make_partitioner, part_summary,
                          replication_factor)
from partition_testutil import load_snap, random_graph, ring

VERTEX_CUT = ["libra", "hdrf"]


def random_edge_assignment(graph, num_parts, seed):
    """Baseline: every edge to a uniformly random part."""
    rng = np.random.default_rng(seed)
    return Partition(kind="vertex_cut", num_parts=num_parts, num_nodes=graph.num_nodes,
                     node_parts=rng.integers(0, num_parts, graph.num_nodes),
                     edge_parts=rng.integers(0, num_parts, graph.num_edges), method="random")


@pytest.mark.parametrize("name", VERTEX_CUT)
@pytest.mark.parametrize("num_parts", [1, 3, 70])
def test_every_edge_and_node_assigned(name, num_parts):
    g = random_graph(100, 400, seed=6, isolated_fraction=0.2)
    part = make_partitioner(name, num_parts=num_parts, seed=1).fit(g)
    assert part.kind == "vertex_cut"
    assert part.edge_parts.shape == (g.num_edges,) and part.edge_parts.dtype == np.int32
    assert part.node_parts.shape == (100,)
    assert 0 <= part.edge_parts.min() and part.edge_parts.max() < num_parts
    # a node's master is one of its replicas when it has edges
    presence = part.presence(g).toarray()
    src, dst = g.edge_index()
    for v in np.unique(np.concatenate([src, dst])):
        edge_parts_of_v = set(part.edge_parts[(src == v) | (dst == v)])
        assert part.node_parts[v] in edge_parts_of_v
        assert set(np.flatnonzero(presence[v])) == edge_parts_of_v


@pytest.mark.parametrize("name", VERTEX_CUT)
def test_master_is_the_part_with_most_edges(name):
    g = random_graph(200, 2000, seed=9, isolated_fraction=0.0)
    part = make_partitioner(name, num_parts=4, seed=0).fit(g)
    src, dst = g.edge_index()
    for v in range(0, 200, 7):
        counts = np.bincount(part.edge_parts[(src == v) | (dst == v)], minlength=4)
        if v in src or v in dst:
            assert part.node_parts[v] == int(np.argmax(counts))


@pytest.mark.parametrize("name", VERTEX_CUT)
def test_deterministic_for_a_seed(name):
    g = random_graph(300, 2000, seed=2)
    a = make_partitioner(name, num_parts=5, seed=3).fit(g)
    b = make_partitioner(name, num_parts=5, seed=3).fit(g)
    c = make_partitioner(name, num_parts=5, seed=4).fit(g)
    np.testing.assert_array_equal(a.edge_parts, b.edge_parts)
    np.testing.assert_array_equal(a.node_parts, b.node_parts)
    assert not np.array_equal(a.edge_parts, c.edge_parts)


@pytest.mark.parametrize("name", VERTEX_CUT)
def test_edges_balanced(name):
    g = random_graph(2000, 20000, seed=5)
    s = part_summary(g, make_partitioner(name, num_parts=8, seed=0).fit(g))
    assert s["balance_edges"] <= 1.05


def test_isolated_nodes_spread_over_parts():
    g = CSRGraph.from_edge_index([0], [1], 12)  # 10 isolated nodes
    part = make_partitioner("libra", num_parts=4, seed=0).fit(g)
    assert np.bincount(part.node_parts, minlength=4).max() <= 3


def test_more_parts_than_nodes_and_bad_params():
    with pytest.raises(PartitionError, match=r"num_parts=9 exceeds the number of nodes \(5\)"):
        make_partitioner("libra", num_parts=9).fit(ring(5))
    with pytest.raises(PartitionError, match="lam=0"):
        make_partitioner("hdrf", num_parts=2, lam=0)


@pytest.mark.parametrize("num_parts", [4, 32])
def test_replication_below_random_on_facebook(num_parts):
    g = load_snap("SNAP-facebook-combined", "facebook-combined.txt.gz")
    baseline = replication_factor(g, random_edge_assignment(g, num_parts, seed=0))
    for name in VERTEX_CUT:
        rf = replication_factor(g, make_partitioner(name, num_parts=num_parts, seed=0).fit(g))
        assert rf < 0.7 * baseline, (name, rf, baseline)


@pytest.mark.parametrize("name", VERTEX_CUT)
def test_balanced_masters_even_out_owned_nodes(name):
    g = load_snap("SNAP-facebook-combined", "facebook-combined.txt.gz")
    skewed = make_partitioner(name, num_parts=32, seed=0).fit(g)
    even = make_partitioner(name, num_parts=32, seed=0, master="balanced").fit(g)
    np.testing.assert_array_equal(skewed.edge_parts, even.edge_parts)  # same edges
    assert part_summary(g, even)["balance_nodes"] < 1.05
    assert part_summary(g, even)["balance_nodes"] < part_summary(g, skewed)["balance_nodes"]
    src, dst = g.edge_index()
    for v in range(0, g.num_nodes, 97):  # the master is still one of the node's replicas
        assert even.node_parts[v] in set(even.edge_parts[(src == v) | (dst == v)])
    with pytest.raises(PartitionError, match="master='nope'"):
        make_partitioner(name, num_parts=2, master="nope")

import numpy as np
import pytest

from partitioning import PartitionError, edge_cut, make_partitioner, part_summary
from partition_testutil import load_snap, random_graph, ring, two_cliques

STREAMING = ["ldg", "fennel"]


@pytest.mark.parametrize("name", STREAMING)
@pytest.mark.parametrize("num_parts", [1, 2, 5])
def test_every_node_owned_once_with_isolated_nodes(name, num_parts):
    g = random_graph(80, 300, seed=4, isolated_fraction=0.25)
    part = make_partitioner(name, num_parts=num_parts, seed=2).fit(g)
    assert part.kind == "edge_cut" and part.node_parts.shape == (80,)
    assert part.node_parts.min() >= 0 and part.node_parts.max() < num_parts
    assert part.part_sizes().sum() == 80


@pytest.mark.parametrize("name", STREAMING)
def test_deterministic_for_a_seed_and_seed_matters(name):
    g = random_graph(500, 3000, seed=1)
    a = make_partitioner(name, num_parts=4, seed=7).fit(g).node_parts
    b = make_partitioner(name, num_parts=4, seed=7).fit(g).node_parts
    c = make_partitioner(name, num_parts=4, seed=8).fit(g).node_parts
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


@pytest.mark.parametrize("name, bound", [("ldg", 1.0), ("fennel", 1.1)])
def test_capacity_bounds_part_sizes(name, bound):
    g = random_graph(1000, 8000, seed=3)
    sizes = make_partitioner(name, num_parts=7, seed=0).fit(g).part_sizes()
    assert sizes.max() <= np.ceil(bound * 1000 / 7)
    tight = make_partitioner(name, num_parts=7, seed=0, slack=1.0).fit(g).part_sizes()
    assert tight.max() - tight.min() <= 1


@pytest.mark.parametrize("name", STREAMING)
def test_cliques_land_together(name):
    g = two_cliques(8)
    part = make_partitioner(name, num_parts=2, seed=0, slack=1.0, passes=3).fit(g)
    assert edge_cut(g, part) == 2


def test_bad_streaming_parameters():
    with pytest.raises(PartitionError, match="slack=0.5"):
        make_partitioner("ldg", num_parts=2, slack=0.5)
    with pytest.raises(PartitionError, match="passes=0"):
        make_partitioner("fennel", num_parts=2, passes=0)
    with pytest.raises(PartitionError, match="gamma=1"):
        make_partitioner("fennel", num_parts=2, gamma=1)
    with pytest.raises(PartitionError, match="num_parts=6 exceeds"):
        make_partitioner("ldg", num_parts=6).fit(ring(5))


@pytest.mark.parametrize("num_parts", [4, 16])
def test_streaming_and_metis_beat_random_on_facebook(num_parts):
    g = load_snap("SNAP-facebook-combined", "facebook-combined.txt.gz")
    cut = {name: edge_cut(g, make_partitioner(name, num_parts=num_parts, seed=0).fit(g))
           for name in ["random", "metis", *STREAMING]}
    for name in ["metis", *STREAMING]:
        assert cut[name] < 0.6 * cut["random"], (name, cut)
    summary = part_summary(g, make_partitioner("fennel", num_parts=num_parts).fit(g))
    assert summary["balance_nodes"] <= 1.11

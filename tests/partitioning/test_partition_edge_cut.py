import subprocess
import sys

import numpy as np
import pytest

from partitioning import (PARTITIONERS, CSRGraph, Partition, PartitionError, edge_cut,
                          make_partitioner, part_summary)
from partition_testutil import GraphWithMask, load_snap, random_graph, ring, two_cliques

EDGE_CUT = ["random", "block", "metis"]


def test_import_needs_no_torch_or_gnnscale():
    code = ("import sys, partitioning; "
            "bad = [m for m in ('torch', 'mpi4py', 'gnnscale') if m in sys.modules]; "
            "sys.exit(1 if bad else 0)")
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


@pytest.mark.parametrize("name", EDGE_CUT)
@pytest.mark.parametrize("num_parts", [1, 3, 7])
def test_every_node_owned_once(name, num_parts):
    g = random_graph(60, 200, seed=1, isolated_fraction=0.2)
    part = make_partitioner(name, num_parts=num_parts, seed=3).fit(g)
    assert part.kind == "edge_cut" and part.edge_parts is None
    assert part.node_parts.shape == (60,) and part.node_parts.dtype == np.int32
    assert part.node_parts.min() >= 0 and part.node_parts.max() < num_parts
    assert part.method == name and part.params["num_parts"] == num_parts
    assert part.time_s >= 0 and part.peak_memory_bytes >= 0


@pytest.mark.parametrize("name", EDGE_CUT)
def test_deterministic_for_a_seed(name):
    g = random_graph(300, 1500, seed=2)
    a = make_partitioner(name, num_parts=4, seed=11).fit(g)
    b = make_partitioner(name, num_parts=4, seed=11).fit(g)
    np.testing.assert_array_equal(a.node_parts, b.node_parts)


def test_random_and_block_are_balanced():
    g = random_graph(103, 50, seed=0)
    for name in ("random", "block"):
        sizes = make_partitioner(name, num_parts=10, seed=0).fit(g).part_sizes()
        assert sizes.sum() == 103 and sizes.max() - sizes.min() <= 1
    np.testing.assert_array_equal(make_partitioner("block", num_parts=2).fit(ring(4)).node_parts,
                                  [0, 0, 1, 1])
    r0 = make_partitioner("random", num_parts=4, seed=0).fit(g).node_parts
    r1 = make_partitioner("random", num_parts=4, seed=1).fit(g).node_parts
    assert not np.array_equal(r0, r1)


def test_metis_cuts_two_cliques_at_the_bridge():
    g = two_cliques(6, isolated=3)
    part = make_partitioner("metis", num_parts=2, seed=0).fit(g)
    assert part.node_parts[0] != part.node_parts[6]
    assert len(set(part.node_parts[:6])) == 1 and len(set(part.node_parts[6:12])) == 1
    assert edge_cut(g, part) == 2


def test_metis_multi_constraint_balance():
    g = random_graph(2000, 12000, seed=5, isolated_fraction=0.05)
    train = np.zeros(2000, bool)
    train[:300] = True  # concentrated on low ids on purpose
    graph = GraphWithMask(g, train)
    part = make_partitioner("metis", num_parts=4, seed=0,
                            balance=("nodes", "edges", "train")).fit(graph)
    s = part_summary(graph, part)
    assert s["balance_nodes"] <= 1.06 and s["balance_train"] <= 1.06
    assert s["balance_edges"] <= 1.10
    assert s["train_nodes"].sum() == 300


def test_metis_train_balance_needs_a_mask():
    with pytest.raises(PartitionError, match="train_mask"):
        make_partitioner("metis", num_parts=2, balance=("train",)).fit(ring(10))


@pytest.mark.parametrize("kwargs, match", [
    ({"num_parts": 9}, r"num_parts=9 exceeds the number of nodes \(5\)"),
    ({"num_parts": 0}, "num_parts=0 must be at least 1"),
    ({"num_parts": -3}, "num_parts=-3 must be at least 1"),
    ({"num_parts": 2.5}, "num_parts must be an integer"),
    ({"num_parts": 2, "seed": -1}, "seed must be a non-negative integer"),
    ({"num_parts": 2, "bogus": 1}, "unknown parameter 'bogus'"),
])
@pytest.mark.parametrize("name", EDGE_CUT)
def test_bad_arguments_are_refused(name, kwargs, match):
    with pytest.raises(PartitionError, match=match):
        make_partitioner(name, **kwargs).fit(ring(5))


def test_empty_graph_and_unknown_name():
    with pytest.raises(PartitionError, match="empty"):
        make_partitioner("random", num_parts=1).fit(CSRGraph([0], []))
    with pytest.raises(PartitionError, match="unknown partitioner 'nope'.*metis"):
        make_partitioner("nope", num_parts=2)
    with pytest.raises(PartitionError, match="balance="):
        make_partitioner("metis", num_parts=2, balance=("cats",))
    assert set(EDGE_CUT) <= set(PARTITIONERS)


def test_save_load_round_trip(tmp_path):
    part = make_partitioner("random", num_parts=3, seed=4).fit(ring(12))
    part.save(tmp_path / "p.npz")
    back = Partition.load(tmp_path / "p.npz")
    np.testing.assert_array_equal(back.node_parts, part.node_parts)
    assert back.method == "random" and back.params == part.params and back.num_parts == 3
    with pytest.raises(PartitionError, match="does not exist"):
        Partition.load(tmp_path / "missing.npz")


def test_quality_on_snap_facebook():
    g = load_snap("SNAP-facebook-combined", "facebook-combined.txt.gz")
    assert g.num_nodes == 4039
    cuts = {name: edge_cut(g, make_partitioner(name, num_parts=8, seed=0).fit(g))
            for name in EDGE_CUT}
    assert cuts["metis"] < 0.25 * cuts["random"]
    assert cuts["random"] > 0.8 * g.num_edges  # about 7/8 of edges for random

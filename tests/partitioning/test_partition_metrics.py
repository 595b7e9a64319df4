import numpy as np

from partitioning import (CSRGraph, Partition, edge_cut, format_summary_table, halo_counts,
                          make_partitioner, part_summary, replication_factor)
from partition_testutil import GraphWithMask


def path_graph():
    # 0 -> 1 -> 2 -> 3 plus 3 -> 1, and node 4 isolated
    return CSRGraph.from_edge_index([0, 1, 2, 3], [1, 2, 3, 1], 5)


def test_edge_cut_halo_and_replication_by_hand():
    g = path_graph()
    part = Partition(kind="edge_cut", num_parts=2, num_nodes=5,
                     node_parts=np.array([0, 0, 1, 1, 1]))
    # cut edges: 1->2 (0 to 1) and 3->1 (1 to 0)
    assert edge_cut(g, part) == 2
    # part 0 needs node 3 (source of 3->1); part 1 needs node 1 (source of 1->2)
    np.testing.assert_array_equal(halo_counts(g, part), [1, 1])
    assert replication_factor(g, part) == (5 + 2) / 5
    np.testing.assert_array_equal(part.parts_of_node(g, 1), [0, 1])
    np.testing.assert_array_equal(part.parts_of_node(g, 4), [1])


def test_vertex_cut_metrics_by_hand():
    g = path_graph()  # CSR order: 0->1, 3->1, 1->2, 2->3
    part = Partition(kind="vertex_cut", num_parts=2, num_nodes=5,
                     node_parts=np.array([0, 0, 1, 1, 0]),
                     edge_parts=np.array([0, 1, 0, 1]))
    # node 1 in parts {0, 1}; node 3 in {1}; node 2 in {0 (edge 1->2), 1 (edge 2->3, master)}
    assert replication_factor(g, part) == (1 + 2 + 2 + 1 + 1) / 5
    np.testing.assert_array_equal(halo_counts(g, part), [1, 1])
    s = part_summary(g, part)
    np.testing.assert_array_equal(s["edges"], [2, 2])


def test_part_summary_fields_and_table():
    g = path_graph()
    mask = np.array([True, False, True, True, False])
    graph = GraphWithMask(g, mask)
    part = Partition(kind="edge_cut", num_parts=2, num_nodes=5,
                     node_parts=np.array([0, 0, 1, 1, 1]), method="manual")
    s = part_summary(graph, part, feature_bytes_per_row=16)
    np.testing.assert_array_equal(s["nodes"], [2, 3])
    np.testing.assert_array_equal(s["edges"], [2, 2])  # in-edges of 0,1 are 0->1, 3->1
    np.testing.assert_array_equal(s["halo_nodes"], [1, 1])
    np.testing.assert_array_equal(s["train_nodes"], [1, 2])
    assert s["edge_cut"] == 2 and s["edge_cut_fraction"] == 0.5
    assert s["balance_nodes"] == 3 / 2.5 and s["balance_train"] == 2 / 1.5
    assert s["halo_bytes_max"] == 16 and s["halo_bytes_mean"] == 16.0
    table = format_summary_table(s)
    assert "edge cut 2" in table and "replication factor 1.400" in table
    assert "halo per exchange" in table


def test_table_abbreviates_many_parts():
    g = CSRGraph.from_edge_index(np.arange(99), np.arange(1, 100), 100)
    part = make_partitioner("block", num_parts=40).fit(g)
    table = format_summary_table(part_summary(g, part), max_rows=8)
    assert "..." in table and table.count("\n") < 20

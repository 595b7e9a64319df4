"""The rows a vertex cut's ops run on (gnnscale/graph/vertex_cut.py) in its workload and in the
time model: masters for the transforms and the elementwise ops, every local row (masters and
mirrors) for the local product and the sums of its two pieces, the loss's rows for the last
layer's output."""

import sys
from pathlib import Path

import numpy as np
import pytest

from partitioning import CSRGraph
from partitioning.base import Partition
from partitioning.vertex_cut.parts import vertex_cut_part
from planning.cost_model import Cluster, CostModel, ModelSpec, Network, predict
from planning.workload import part_workload, workload_from_arrays

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "partitioning"))
from partition_testutil import GraphWithMask  # noqa: E402

ZERO = {"gamma_edge": 0.0, "gamma_flop": 0.0, "gamma_elem": 0.0, "gamma_gather": 0.0}


def costs(**compute) -> CostModel:
    return CostModel(compute={1: {**ZERO, **compute}}, shm_alpha=0.0, shm_beta=0.0,
                     layer_overhead_s=0.0)


def by_hand() -> tuple:
    """(graph, partition): masters 0, 1, 2 on part 0 and 3, 4 on part 1; part 0 holds the
    edges 0->1, 1->2, 3->1 (mirror 3), part 1 holds 2->3, 3->4, 4->0, 0->2 (mirrors 0, 2)."""
    edges = {(0, 1): 0, (1, 2): 0, (3, 1): 0, (2, 3): 1, (3, 4): 1, (4, 0): 1, (0, 2): 1}
    src, dst = np.array(list(edges)).T
    graph = CSRGraph.from_edge_index(src, dst, 5)
    csr_src, csr_dst = graph.edge_index()
    edge_parts = np.array([edges[(s, d)] for s, d in zip(csr_src, csr_dst)], dtype=np.int32)
    partition = Partition(kind="vertex_cut", num_parts=2, num_nodes=5,
                          node_parts=np.array([0, 0, 0, 1, 1], dtype=np.int32),
                          edge_parts=edge_parts, method="by-hand")
    return graph, partition


def test_a_vertex_cut_workload_counts_masters_mirrors_and_local_rows_by_hand():
    graph, partition = by_hand()
    data = GraphWithMask(graph, np.isin(np.arange(5), [1, 4]))
    w = part_workload(data, partition)
    np.testing.assert_array_equal(w["nodes"], [3, 2])  # masters
    np.testing.assert_array_equal(w["recv_rows"], [[0, 1], [2, 0]])  # mirrors by master part
    np.testing.assert_array_equal(w["nodes"] + w["recv_rows"].sum(1), [4, 4])  # local rows
    np.testing.assert_array_equal(w["inner_edges"], [3, 4])
    np.testing.assert_array_equal(w["boundary_edges"], [0, 0])
    # the last layer's output: the loss's rows, from an aggregation over every edge
    np.testing.assert_array_equal(w["computed_rows"], [[1, 1]])
    np.testing.assert_array_equal(w["computed_inner_edges"], [w["inner_edges"]])
    for p in range(2):  # the rows the engine's part holds (partitioning/vertex_cut/parts.py)
        part = vertex_cut_part(data, partition.node_parts, partition.edge_parts, p)
        assert part["owned_nodes"].size == w["nodes"][p]
        assert part["mirror_nodes"].size == w["recv_rows"][p].sum()
        np.testing.assert_array_equal(np.bincount(part["mirror_owner"], minlength=2),
                                      w["recv_rows"][p])
    assert "computed_rows" not in part_workload(graph, partition)  # no loss rows known


def two_parts(kind: str, mirrors: int) -> dict:
    """Two parts of 1000 masters (owned nodes) and 5000 edges, each with ``mirrors`` rows of
    the other; 400 training rows each."""
    return workload_from_arrays(kind, [1000, 1000], [5000, 5000], [0, 0],
                                [[0, mirrors], [mirrors, 0]], [400, 400])


SPEC = ModelSpec("gcn", (16, 8, 4), (1, 1), dropout=0.5)  # both layers transform first


@pytest.mark.parametrize("constant", ["gamma_flop", "gamma_edge"])
def test_transforms_and_the_local_product_do_not_grow_with_mirrors(constant):
    """The same masters and edges: the transforms (masters' rows) and the product (every edge,
    GCN's self loops at the masters) cost the same whatever the mirrors."""
    few, many = (predict(two_parts("vertex_cut", m), SPEC, Cluster(), costs(**{constant: 1e-9}))
                 for m in (100, 600))
    assert many["step_s"] == few["step_s"] and many["eval_s"] == few["eval_s"]
    if constant == "gamma_edge":  # every edge and self loop, 8 then 4 values wide
        assert few["forward_s"] == pytest.approx((5000 + 1000) * (8 + 4) * 1e-9)
    else:  # the masters' rows: 16 -> 8, 8 -> 4
        assert few["forward_s"] == pytest.approx(2 * 1000 * (16 * 8 + 8 * 4) * 1e-9)


def test_a_vertex_cuts_elementwise_work_is_on_its_masters_only():
    """Elementwise work: the input dropout, the outputs' bias, ReLU and dropout (masters; the
    last layer's bias on the loss's rows only where the workload knows them). The two pieces
    of the local product (from masters' and from mirrors' rows) are summed inside the kernel:
    more mirrors add no elementwise pass."""
    elem = 1e-9
    few, many = (predict(two_parts("vertex_cut", m), SPEC, Cluster(), costs(gamma_elem=elem))
                 for m in (100, 600))
    for key in ("forward_s", "backward_s", "eval_s"):
        assert many[key] == few[key]
    own = 1000 * 16 + 1000 * 8 * 2 + 1000 * 4  # input dropout, bias + ReLU/dropout, bias
    assert few["forward_s"] == pytest.approx(own * elem)
    narrowed = workload_from_arrays("vertex_cut", [1000, 1000], [5000, 5000], [0, 0],
                                    [[0, 100], [100, 0]], [400, 400],
                                    computed=([[400, 400]], [[5000, 5000]], [[0, 0]]))
    pred = predict(narrowed, SPEC, Cluster(), costs(gamma_elem=elem))
    # only the last layer's bias narrows to the loss's rows
    assert few["forward_s"] - pred["forward_s"] == pytest.approx(600 * 4 * elem)
    assert pred["eval_s"] == few["eval_s"]


def test_a_vertex_cuts_last_layer_transforms_the_loss_rows_of_an_aggregate_of_every_row():
    """Aggregating first (4 -> 8), the last layer aggregates every master over every edge and
    transforms the loss's rows selected from it; the layer below computes every master."""
    spec = ModelSpec("gcn", (16, 4, 8), (1, 1), dropout=0.5)
    work = workload_from_arrays("vertex_cut", [1000], [5000], [0], [[0]], [400],
                                computed=([[400]], [[5000]], [[0]]))
    flops = predict(work, spec, Cluster(), costs(gamma_flop=1e-11))
    assert flops["forward_s"] == pytest.approx(2 * (1000 * 16 * 4 + 400 * 4 * 8) * 1e-11)
    assert flops["eval_s"] == pytest.approx(2 * (1000 * 16 * 4 + 1000 * 4 * 8) * 1e-11)
    edges = predict(work, spec, Cluster(), costs(gamma_edge=1e-9))
    assert edges["forward_s"] == pytest.approx(2 * (5000 + 1000) * 4 * 1e-9)


def test_an_edge_cut_charges_no_sums_whatever_its_halo():
    """An edge cut adds its boundary product into the inner one's rows (no sums): its
    elementwise work is the masters' own, however many halo rows it receives."""
    few, many = (predict(two_parts("edge_cut", m), SPEC, Cluster(), costs(gamma_elem=1e-9))
                 for m in (100, 600))
    own = 1000 * 16 + 1000 * 8 * 2 + 1000 * 4
    assert few["forward_s"] == many["forward_s"] == pytest.approx(own * 1e-9)
    assert few["backward_s"] == many["backward_s"]


def test_a_vertex_cut_workload_splits_its_edges_into_the_four_blocks_by_hand():
    """Part 0 (masters 0-2): 0->1 and 1->2 master <- master, 3->1 master <- mirror. Part 1
    (masters 3, 4): 3->4 master <- master, 2->3 master <- mirror, 4->0 mirror <- master, 0->2
    mirror <- mirror."""
    w = part_workload(*by_hand())
    np.testing.assert_array_equal(w["vertex_cut_edges"], [[2, 1], [1, 1], [0, 1], [0, 1]])
    np.testing.assert_array_equal(w["vertex_cut_edges"].sum(0), w["inner_edges"])


@pytest.mark.parametrize("blocks", [[[1, 1]] * 3, [[1, 1], [1, 1], [1, 1], [1, 2]]])
def test_vertex_cut_edges_that_are_not_the_parts_edges_are_refused(blocks):
    """Three blocks, or four that do not add up to the parts' edges; or on an edge cut."""
    with pytest.raises(ValueError, match="vertex_cut_edges must be"):
        workload_from_arrays("vertex_cut", [10, 10], [4, 4], [0, 0], np.zeros((2, 2)),
                             vertex_cut_edges=blocks)
    with pytest.raises(ValueError, match="for a edge_cut"):
        workload_from_arrays("edge_cut", [10, 10], [4, 4], [0, 0], np.zeros((2, 2)),
                             vertex_cut_edges=[[1, 1]] * 4)


def with_blocks(blocks) -> dict:
    """Two parts of 1000 masters, 5000 edges and 300 mirrors each, the edges in ``blocks``
    (masters <- masters, <- mirrors; mirrors <- masters, <- mirrors), or none given."""
    return workload_from_arrays("vertex_cut", [1000, 1000], [5000, 5000], [0, 0],
                                [[0, 300], [300, 0]], [400, 400],
                                vertex_cut_edges=None if blocks is None
                                else np.repeat(np.asarray(blocks)[:, None], 2, axis=1))


def test_a_vertex_cuts_products_hide_its_exchanges_where_they_overlap_them():
    """The products of the owned rows run while the mirrors' rows travel, the masters <-
    mirrors one while the partial sums travel; the mirrors <- mirrors product between the two
    exchanges overlaps nothing. On a slow link: with every edge there (only the self loops
    overlapping), or without the blocks (nothing), the exchanges are exposed; with the edges
    where they overlap, they are hidden."""
    slow = Cluster(ranks_per_host=1, network=Network(1e-3, 1e9))
    model = costs(gamma_edge=1e-6)  # 1000 edges 4 wide: 4 ms, longer than an exchange
    none, unknown, overlapping = (predict(with_blocks(b), SPEC, slow, model) for b in
                                  ([0, 0, 0, 5000], None, [3000, 1000, 1000, 0]))
    assert unknown["exchange_exposed_s"] > none["exchange_exposed_s"] > 0.0
    assert overlapping["exchange_exposed_s"] == 0.0
    # the same products, the exchanges' time taken off the step
    assert none["step_s"] - overlapping["step_s"] == pytest.approx(
        none["exchange_exposed_s"], rel=1e-9)

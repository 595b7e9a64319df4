"""Rows a training step computes (planning.workload ``computed_*``) and the time model's use of
them: the last layer computes the loss's rows only, each layer below what the layer above
reads, evaluation every row."""

import sys
from pathlib import Path

import numpy as np
import pytest

from partitioning import CSRGraph
from partitioning.base import Partition
from planning.cost_model import Cluster, CostModel, ModelSpec, predict
from planning.workload import part_workload, workload_from_arrays

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "partitioning"))
from partition_testutil import GraphWithMask  # noqa: E402

ZERO = {"gamma_edge": 0.0, "gamma_flop": 0.0, "gamma_elem": 0.0, "gamma_gather": 0.0}


def costs(**compute) -> CostModel:
    return CostModel(compute={1: {**ZERO, **compute}}, shm_alpha=0.0, shm_beta=0.0,
                     layer_overhead_s=0.0)


def test_part_workload_counts_the_rows_and_edges_each_level_computes_by_hand():
    # part 0 owns 0, 1, 2 and part 1 owns 3, 4, 5; an edge (s, d): d aggregates s
    src = np.array([1, 2, 3, 5, 4, 0])
    dst = np.array([0, 1, 0, 4, 3, 5])
    graph = GraphWithMask(CSRGraph.from_edge_index(src, dst, 6),
                          np.isin(np.arange(6), [0, 4]))
    partition = Partition(kind="edge_cut", num_parts=2, num_nodes=6,
                          node_parts=np.array([0, 0, 0, 1, 1, 1]), method="by-hand")
    w = part_workload(graph, partition)
    # level 0, the loss's rows 0 and 4: edges 1->0 (inner), 3->0 (boundary), 5->4 (inner)
    # level 1: those, their owned in-neighbours 1 and 5, the rows sent to the other part 3
    # and 0: rows {0, 1} and {3, 4, 5}; level 2: every row
    np.testing.assert_array_equal(w["computed_rows"], [[1, 1], [2, 3], [3, 3]])
    np.testing.assert_array_equal(w["computed_inner_edges"], [[1, 1], [2, 2], [2, 2]])
    np.testing.assert_array_equal(w["computed_boundary_edges"], [[1, 0], [1, 1], [1, 1]])
    np.testing.assert_array_equal(w["computed_inner_edges"][-1], w["inner_edges"])
    np.testing.assert_array_equal(w["computed_boundary_edges"][-1], w["boundary_edges"])
    without_split = part_workload(CSRGraph.from_edge_index(src, dst, 6), partition)
    assert "computed_rows" not in without_split  # no loss rows known: every row computed


def narrowed(kind: str = "edge_cut") -> dict:
    """One part of 1000 rows, 5000 in-edges; the loss reads 500 rows (2000 edges), the layer
    below 800 rows (4000 edges)."""
    return workload_from_arrays(kind, [1000], [5000], [0], [[0]], [500],
                                computed=([[500], [800], [1000]], [[2000], [4000], [5000]],
                                          [[0], [0], [0]]))


def test_training_aggregates_only_the_edges_of_the_rows_it_computes_evaluation_every_row():
    spec = ModelSpec("gcn", (8, 4, 4), (1, 1), dropout=0.5)  # both layers transform first
    pred = predict(narrowed(), spec, Cluster(), costs(gamma_edge=1e-9))
    # GCN's self loops: one per row computed; 4-wide rows
    assert pred["forward_s"] == pytest.approx(((4000 + 800) + (2000 + 500)) * 4 * 1e-9)
    assert pred["eval_s"] == pytest.approx(2 * (5000 + 1000) * 4 * 1e-9)
    full = workload_from_arrays("edge_cut", [1000], [5000], [0], [[0]], [500])
    assert predict(full, spec, Cluster(), costs(gamma_edge=1e-9))["forward_s"] == \
        pytest.approx(pred["eval_s"])
    vertex = predict(narrowed("vertex_cut"), spec, Cluster(), costs(gamma_edge=1e-9))
    # a vertex cut aggregates every row over every edge (test_vertex_cut_rows.py)
    assert vertex["forward_s"] == pytest.approx(pred["eval_s"])


def test_a_layer_that_transforms_first_transforms_the_rows_its_input_holds():
    spec = ModelSpec("gcn", (8, 4, 4), (1, 1), dropout=0.5)
    pred = predict(narrowed(), spec, Cluster(), costs(gamma_flop=1e-11))
    # the first layer transforms every feature row, the second the 800 rows the first computed
    assert pred["forward_s"] == pytest.approx((2 * 1000 * 8 * 4 + 2 * 800 * 4 * 4) * 1e-11)
    sage = ModelSpec("sage", (8, 4, 4), (1, 1), dropout=0.5)
    pred = predict(narrowed(), sage, Cluster(), costs(gamma_flop=1e-11))
    # SAGE: the first layer's root transform on the 800 rows it computes only
    assert pred["forward_s"] == pytest.approx(
        (2 * (1000 + 800) * 8 * 4 + 2 * 2 * 800 * 4 * 4) * 1e-11)


def test_sage_selects_the_rows_its_root_transform_reads_in_training_only():
    """The root transform reads the rows a layer computes, selected from its input
    (index_select, nn/conv.py _select): out_rows x a values forward, their gradient added
    back (index_add) where the input needs one; evaluation passes every row, GCN has no root."""
    sage = ModelSpec("sage", (8, 4, 4), (1, 1), dropout=0.5)
    pred = predict(narrowed(), sage, Cluster(), costs(gamma_gather=1e-9))
    # layer 1 computes 800 rows of its 8-wide input, layer 2 the 500 loss rows of 4-wide ones
    assert pred["forward_s"] == pytest.approx((800 * 8 + 500 * 4) * 1e-9)
    assert pred["backward_s"] == pytest.approx(500 * 4 * 1e-9)  # the first input: no gradient
    assert pred["eval_s"] == pytest.approx(0.0)
    gcn = ModelSpec("gcn", (8, 4, 4), (1, 1), dropout=0.5)
    assert predict(narrowed(), gcn, Cluster(), costs(gamma_gather=1e-9))["step_s"] == 0.0
    full = workload_from_arrays("edge_cut", [1000], [5000], [0], [[0]], [500])
    assert predict(full, sage, Cluster(), costs(gamma_gather=1e-9))["step_s"] == 0.0


def test_a_first_layer_aggregating_features_through_dropout_aggregates_every_row():
    spec = ModelSpec("gcn", (4, 8, 2), (1, 1), dropout=0.5)  # 4 -> 8 aggregates first
    pred = predict(narrowed(), spec, Cluster(), costs(gamma_edge=1e-9))
    assert pred["forward_s"] == pytest.approx(((5000 + 1000) * 4 + (2000 + 500) * 2) * 1e-9)


def test_the_raw_features_dropout_runs_forward_only():
    """The first layer's input dropout passes over the N x a features once: they need no
    gradient, so backward repeats only the output's elementwise ops."""
    spec = ModelSpec("gcn", (128, 16), (1,), dropout=0.5)  # one layer, transform first
    work = workload_from_arrays("edge_cut", [1000], [0], [0], [[0]], [500])
    pred = predict(work, spec, Cluster(), costs(gamma_elem=1e-9))
    output = 1000 * 16 * 1e-9  # the last layer's bias
    assert pred["forward_s"] == pytest.approx(1000 * 128 * 1e-9 + output)
    assert pred["backward_s"] == pytest.approx(2 * output)


def test_every_allreduce_pays_the_fixed_cost_of_a_collective():
    """The gradient allreduce (one bucket here) and the evaluation's metric allreduce each
    take ``exchange_overhead_s`` like a halo exchange; one rank has none."""
    spec = ModelSpec("gcn", (4, 8), (1,), dropout=0.5)  # evaluation keeps the aggregate
    pair = workload_from_arrays("edge_cut", [100, 100], [0, 0], [10, 10], [[0, 10], [10, 0]],
                                [50, 50])
    fixed = CostModel.from_dict({**costs().to_dict(), "exchange_overhead_s": 1e-3})
    pred = predict(pair, spec, Cluster(), fixed)
    assert pred["collectives_step"] == 1
    assert pred["allreduce_exposed_s"] == pytest.approx(1e-3)  # after the whole backward
    assert pred["eval_s"] == pytest.approx(1e-3)  # no exchange, no compute: the allreduce
    one = workload_from_arrays("edge_cut", [200], [0], [0], [[0]], [100])
    alone = predict(one, spec, Cluster(), fixed)
    assert alone["eval_s"] == 0.0 and alone["allreduce_exposed_s"] == 0.0

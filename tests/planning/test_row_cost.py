"""The aggregation's cost per output row: a product's rows cost beside its non-zeros, so a
block of one or two non-zeros a row (a vertex cut's mirrors) costs more per non-zero than one
of ten; the calibration tells the term apart by degree, the model charges each product's
rows."""

import numpy as np
import pytest

from gnnscale.cli.calibrate import per_edge_value_and_row
from planning.cost_model import Cluster, CostModel, ModelSpec, Network, predict
from planning.workload import workload_from_arrays


def test_the_cost_per_row_is_told_apart_from_the_cost_per_edge_by_degree():
    rows = np.array([40_000, 10_000, 5_000, 40_000])
    degree = np.array([10, 20, 10, 2])
    widths = np.array([16, 64, 128, 16])
    nnz = rows * degree
    seconds = nnz * (2e-9 + widths * 3e-10) + rows * 6e-9
    per_nnz, per_value, per_row = per_edge_value_and_row(nnz, widths, rows, seconds)
    assert (per_nnz, per_value, per_row) == (pytest.approx(2e-9), pytest.approx(3e-10),
                                              pytest.approx(6e-9))
    # one degree throughout: no cost per row, the two terms per edge as before
    same = per_edge_value_and_row(nnz[:3] // degree[:3] * 10, widths[:3], rows[:3],
                                  seconds[:3])
    assert same[2] == 0.0 and same[1] > 0
    # rows that cost less where they are sparser (a noisy host) are never a negative constant
    noisy = seconds.copy()
    noisy[3] = 0.2 * noisy[3]
    assert per_edge_value_and_row(nnz, widths, rows, noisy)[2] == 0.0


def _costs(per_row: float) -> CostModel:
    compute = {"gamma_edge": 1e-10, "gamma_flop": 1e-12, "gamma_elem": 1e-10,
               "gamma_gather": 1e-10, "gamma_nnz": 1e-9, "gamma_row": per_row}
    return CostModel(compute={1: compute}, shm_alpha=0.0, shm_beta=0.0,
                     layer_overhead_s=0.0)


def _rank_work(workload, per_row: float) -> np.ndarray:
    spec = ModelSpec.build("gcn", 16, 16, 16, layers=2, dropout=0.0)
    cluster = Cluster(ranks_per_host=1, cores_per_rank=1, network=Network(0.0, 1e15))
    return predict(workload, spec, cluster, _costs(per_row))["rank_step_s"]


def test_each_product_of_a_vertex_cut_pays_for_the_rows_it_writes_or_adds_into():
    masters, mirrors = np.array([1000.0, 800.0]), np.array([300.0, 500.0])
    oo, om, mo, mm = (np.array([9000.0, 7000.0]), np.array([200.0, 900.0]),
                      np.array([450.0, 300.0]), np.array([100.0, 40.0]))
    recv = np.array([[0.0, 300.0], [500.0, 0.0]])
    work = workload_from_arrays("vertex_cut", masters, oo + om + mo + mm, [0.0, 0.0], recv,
                                vertex_cut_edges=np.stack([oo, om, mo, mm]))
    extra = _rank_work(work, 1e-9) - _rank_work(work, 0.0)
    # per layer: forward writes masters' and mirrors' rows (oo, mo) and adds into the rows
    # om and mm reach; backward writes them (oo, om transposed) and adds mo's and mm's
    per_layer = (2 * (masters + mirrors) + np.minimum(masters, om) + np.minimum(masters, mo)
                 + 2 * np.minimum(mirrors, mm))
    assert extra == pytest.approx(2 * per_layer * 1e-9, rel=1e-9)


def test_a_sparse_halo_block_costs_more_per_non_zero_than_a_dense_one():
    # the same non-zeros, on 4x the rows: the rows' cost tells the two apart
    def boundary(rows_per_edge: float):
        recv = np.array([[0.0, 4000.0 * rows_per_edge], [4000.0 * rows_per_edge, 0.0]])
        return workload_from_arrays("edge_cut", [20_000, 20_000], [100_000, 100_000],
                                    [4000, 4000], recv)
    assert _rank_work(boundary(1.0), 5e-9)[0] > _rank_work(boundary(0.25), 5e-9)[0]
    assert _rank_work(boundary(1.0), 0.0)[0] == pytest.approx(
        _rank_work(boundary(0.25), 0.0)[0], rel=0.02)  # recv rows change only the packing


def test_the_boundary_product_adds_into_the_rows_that_have_a_boundary_edge():
    """An edge cut's boundary block adds into the owned rows with a boundary in-edge: fewer
    than its edges where each such row has several (the workload's ``boundary_rows``), and
    without the count, as many as its edges, every row at most."""
    recv = np.array([[0.0, 3000.0], [3000.0, 0.0]])

    def work(**rows):
        return workload_from_arrays("edge_cut", [20_000, 20_000], [100_000, 100_000],
                                    [12_000, 12_000], recv, **rows)

    bounded = work()
    counted = work(boundary_rows=[3000, 2000])
    saved = _rank_work(bounded, 1e-9) - _rank_work(counted, 1e-9)
    # two layers' forward each add into 12,000 rows without the count, 3,000 and 2,000 with it
    assert saved == pytest.approx(2 * (12_000 - np.array([3000, 2000])) * 1e-9, rel=1e-9)
    assert _rank_work(counted, 0.0) == pytest.approx(_rank_work(bounded, 0.0))


def test_the_workload_counts_the_rows_with_a_boundary_edge_by_hand():
    from partitioning import make_partitioner
    from partitioning.graph import CSRGraph
    from planning.workload import part_workload

    # nodes 0-3 on part 0, 4-7 on part 1; part 0's node 1 has three in-edges from part 1,
    # node 2 one; part 1's node 5 has one from part 0 (undirected: each edge both ways)
    edges = [(0, 1), (1, 2), (2, 3), (4, 5), (5, 6), (6, 7), (1, 4), (1, 6), (1, 7), (2, 5)]
    src = np.array([a for a, b in edges] + [b for a, b in edges])
    dst = np.array([b for a, b in edges] + [a for a, b in edges])
    g = CSRGraph.from_edge_index(src, dst, num_nodes=8)
    w = part_workload(g, make_partitioner("block", num_parts=2).fit(g))
    np.testing.assert_array_equal(w["boundary_edges"], [4, 4])
    np.testing.assert_array_equal(w["boundary_rows"], [2, 4])  # {1, 2} and {4, 5, 6, 7}

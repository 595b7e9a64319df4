"""Rows narrower than 16 take a kernel of their own: the calibration fits its own line from
rows 4 and 8 wide, and the model charges narrow aggregations by it where it is calibrated
(benchmarks/narrow_aggregation.py: the wide rows' line over-charges rows 4-5 wide by a third
or more)."""

import numpy as np
import pytest

from gnnscale.cli.calibrate import knee_rate, narrow_line
from planning.cost_model import (SMALL_ROWS_BELOW, Cluster, CostModel, ModelSpec, Network,
                                 nnz_seconds, predict)
from partitioning.errors import PartitionError
from planning.workload import workload_from_arrays

WIDE = {"gamma_edge": 2e-10, "gamma_flop": 0.0, "gamma_elem": 0.0, "gamma_gather": 0.0,
        "gamma_nnz": 6e-9}


def test_the_narrow_line_is_fitted_after_the_rows_cost_and_never_falls_with_the_width():
    rows, nnz = np.array([40_000, 40_000]), np.array([400_000, 400_000])
    widths = np.array([4, 8])
    seconds = nnz * (4e-9 + widths * 1e-10) + rows * 5e-9
    assert narrow_line(nnz, widths, rows, seconds, 5e-9) == (pytest.approx(4e-9),
                                                             pytest.approx(1e-10))
    # beyond the cache the narrow widths cost alike, the wider a little less: flat
    falling = nnz * np.array([18e-9, 17e-9])
    assert narrow_line(nnz, widths, rows, falling, 0.0) == (pytest.approx(17.5e-9), 0.0)
    # one width: flat at its cost per non-zero
    assert narrow_line(nnz[:1], widths[1:], rows[:1], falling[1:], 0.0) == \
        (pytest.approx(17e-9), 0.0)


def test_narrow_rows_take_the_narrow_line_where_calibrated_and_the_wide_one_elsewhere():
    k = {**WIDE, "gamma_nnz_narrow": 3e-9, "gamma_edge_narrow": 1e-10}
    assert nnz_seconds(k, 5) == pytest.approx(3.5e-9)
    assert nnz_seconds(k, SMALL_ROWS_BELOW) == pytest.approx(6e-9 + 16 * 2e-10)
    assert nnz_seconds(WIDE, 5) == pytest.approx(7e-9)  # not calibrated: the wide line
    # the cache knee's rate beyond the cache follows the same line at its width (8)
    mem = {"gamma_edge_mem": 3e-10, "gamma_nnz_mem": 1.2e-8, "gamma_nnz_narrow_mem": 1.6e-8,
           "gamma_edge_narrow_mem": 0.0}
    assert knee_rate(mem) == pytest.approx(1.6e-8 / 8)
    assert knee_rate({"gamma_edge_mem": 3e-10}) == pytest.approx(3e-10)


def test_a_model_charges_a_narrow_graph_less_with_its_narrow_line():
    """A GCN on 5 raw features and 4 classes aggregates rows 4 wide: with the narrow line
    the step costs what that line gives per non-zero; a cost-model file without it predicts
    as before."""
    work = workload_from_arrays("edge_cut", [1000.0], [20_000.0], [0.0], [[0.0]], [500.0])
    spec = ModelSpec.build("gcn", 5, 16, 4, layers=2, dropout=0.0)
    cluster = Cluster(ranks_per_host=1, cores_per_rank=1, network=Network(0.0, 1e15))

    def step(extra):
        costs = CostModel(compute={1: {**WIDE, **extra}}, shm_alpha=0.0, shm_beta=0.0,
                          layer_overhead_s=0.0)
        return predict(work, spec, cluster, costs)["step_s"]

    wide, narrow = step({}), step({"gamma_nnz_narrow": 3e-9, "gamma_edge_narrow": 0.0})
    assert narrow < wide
    # layer 2 aggregates rows 4 wide forward and backward over the edges and self loops
    # (21,000); layer 1's aggregate of the raw features is kept (no input dropout)
    edges = 20_000 + 1000
    assert wide - narrow == pytest.approx(2 * edges * (6e-9 + 4 * 2e-10 - 3e-9), rel=1e-6)


def test_an_unknown_or_negative_narrow_constant_is_refused():
    with pytest.raises(PartitionError, match="gamma_edge_narrow"):
        CostModel(compute={1: {**WIDE, "gamma_edge_narrow": -1.0}}, shm_alpha=0.0,
                  shm_beta=0.0, layer_overhead_s=0.0)
    with pytest.raises(PartitionError, match="unknown constant"):
        CostModel(compute={1: {**WIDE, "gamma_nnz_thin": 1e-9}}, shm_alpha=0.0,
                  shm_beta=0.0, layer_overhead_s=0.0)

"""The model's outputs are calibrated per row and per logit: the training loss (cross-entropy
forward and backward) and the evaluation's metrics, each timed at several class counts in
turns. A fake timer plants their costs; the cost model charges what was planted."""

import numpy as np
import pytest

from gnnscale.cli import calibrate as cal
from gnnscale.cli import calibrate_outputs as outputs
from planning.cost_model import CostModel, ModelSpec, predict


def test_loss_and_metrics_are_fitted_per_row_and_per_logit():
    rows = outputs.OUTPUT_ROWS // 10
    planted = {"loss": [rows * (70e-9 + 3e-9 * c) for c in outputs.OUTPUT_CLASSES],
               "metrics": [rows * (90e-9 + 4e-9 * c) for c in outputs.OUTPUT_CLASSES]}
    ran = []

    def time_in_turns(calls, what=""):
        for call in calls:  # every output still runs once
            call()
        ran.append((what, len(calls)))
        return planted[what]
    got = outputs.output_constants(time_in_turns, cal.per_edge_and_value, scale=0.1)
    assert ran == [("loss", 3), ("metrics", 3)]
    assert got == {"gamma_loss_row": pytest.approx(70e-9), "gamma_loss_logit": pytest.approx(3e-9),
                   "gamma_eval_row": pytest.approx(90e-9), "gamma_eval_logit": pytest.approx(4e-9)}


def test_measured_on_this_host_the_constants_are_positive():
    got = outputs.output_constants(cal._interleaved_median_times, cal.per_edge_and_value,
                                   scale=0.05)
    assert set(got) == {"gamma_loss_row", "gamma_loss_logit", "gamma_eval_row",
                        "gamma_eval_logit"}
    assert all(np.isfinite(v) and v >= 0 for v in got.values())
    assert got["gamma_loss_row"] + got["gamma_loss_logit"] > 0


def _one_part(train_rows):
    return {"kind": "edge_cut", "num_parts": 1, "nodes": np.array([1000.0]),
            "inner_edges": np.array([5000.0]), "boundary_edges": np.array([0.0]),
            "recv_rows": np.zeros((1, 1)), "train_nodes": np.array([float(train_rows)])}


def test_the_model_charges_the_loss_and_metrics_per_row_and_logit():
    spec = ModelSpec.build("gcn", 8, 16, 4)
    base = {"gamma_edge": 1e-9, "gamma_flop": 1e-11, "gamma_elem": 1e-9, "gamma_gather": 1e-9}
    out = {"gamma_loss_row": 1e-6, "gamma_loss_logit": 1e-7, "gamma_eval_row": 2e-6,
           "gamma_eval_logit": 3e-7}
    without = predict(_one_part(200), spec, model=CostModel(compute={1: base}))
    calibrated = predict(_one_part(200), spec, model=CostModel(compute={1: {**base, **out}}))
    # 10 elementwise ops per logit where the outputs are not calibrated
    loss_gap = 200 * (1e-6 + 4e-7) - 200 * 4 * 10 * 1e-9
    eval_gap = 1000 * (2e-6 + 4 * 3e-7) - 1000 * 4 * 10 * 1e-9
    assert calibrated["step_s"] - without["step_s"] == pytest.approx(loss_gap)
    assert calibrated["eval_s"] - without["eval_s"] == pytest.approx(eval_gap)


def test_an_unknown_or_negative_output_constant_is_refused():
    from partitioning.errors import PartitionError
    base = {"gamma_edge": 1e-9, "gamma_flop": 1e-11, "gamma_elem": 1e-9, "gamma_gather": 1e-9}
    with pytest.raises(PartitionError, match="gamma_loss_row must be finite and >= 0"):
        CostModel(compute={1: {**base, "gamma_loss_row": -1.0}})
    with pytest.raises(PartitionError, match="unknown constant compute\\[1\\].gamma_loss_rows"):
        CostModel(compute={1: {**base, "gamma_loss_rows": 1.0}})

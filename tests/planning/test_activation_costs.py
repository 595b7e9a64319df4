"""Dropout and the activation between layers as the time model charges them: the dropout
kernel per value of the raw features (``gamma_dropout``), the fused ReLU-dropout-linear pass
per value of the activation forward and backward (``gamma_activation``,
``gamma_activation_back``) where the next layer transforms first, and files without them
predicting as before (the elementwise ops they replace)."""

import numpy as np
import pytest
import torch

from gnnscale.cli import calibrate
from gnnscale.cli.calibrate_activation import activation_constants
from planning.cost_model import Cluster, CostModel, ModelSpec, predict
from planning.workload import workload_from_arrays

ROWS, FEATURES, HIDDEN = 50_000, 128, 16
BASE = {"gamma_edge": 1e-10, "gamma_flop": 1e-12, "gamma_elem": 1e-10, "gamma_gather": 1e-9}


def _predict(extra: dict, name: str = "gcn", classes: int = 4, dropout: float = 0.5) -> dict:
    costs = CostModel(compute={1: {**BASE, **extra}}, layer_overhead_s=0.0)
    work = workload_from_arrays("edge_cut", [ROWS, ROWS], [400_000, 400_000], [0, 0],
                                [[0, 0], [0, 0]])
    spec = ModelSpec.build(name, FEATURES, HIDDEN, classes, layers=2, dropout=dropout)
    return predict(work, spec, Cluster(ranks_per_host=1, cores_per_rank=1), costs)


def test_files_without_the_constants_predict_as_the_elementwise_ops_they_replace():
    as_elems = {"gamma_dropout": 1e-10, "gamma_activation": 2e-10,
                "gamma_activation_back": 4e-10}
    for name in ("gcn", "sage", "gat"):
        assert _predict({}, name)["step_s"] == pytest.approx(_predict(as_elems, name)["step_s"])


def test_the_raw_features_dropout_costs_gamma_dropout_a_value_forward():
    slower = _predict({"gamma_dropout": 1.1e-9})
    base = _predict({})
    # forward only: the raw features need no gradient
    assert slower["forward_s"] - base["forward_s"] == pytest.approx(ROWS * FEATURES * 1e-9)
    assert slower["backward_s"] == pytest.approx(base["backward_s"])
    # evaluation draws no mask
    assert slower["eval_s"] == pytest.approx(base["eval_s"])
    # nor does training without dropout
    assert _predict({"gamma_dropout": 1.1e-9}, dropout=0.0)["step_s"] == \
        pytest.approx(_predict({}, dropout=0.0)["step_s"])


def test_the_fused_activation_costs_its_own_constants_forward_and_backward():
    base = _predict({})
    forward = _predict({"gamma_activation": 1.2e-9})
    backward = _predict({"gamma_activation_back": 4.4e-9})
    values = ROWS * HIDDEN  # the first layer's output, activated for the second
    assert forward["forward_s"] - base["forward_s"] == pytest.approx(values * 1.0e-9)
    assert backward["backward_s"] - base["backward_s"] == pytest.approx(values * 4.0e-9)


def test_an_aggregate_first_next_layer_takes_the_dropout_kernel_unfused():
    # 16 -> 64 classes: the second layer aggregates first, so ReLU and dropout run alone
    fused = {"gamma_activation": 5e-9, "gamma_activation_back": 9e-9}
    assert _predict(fused, classes=64)["step_s"] == pytest.approx(_predict({}, classes=64)
                                                                  ["step_s"])
    base, kernel = _predict({}, classes=64), _predict({"gamma_dropout": 1.1e-9}, classes=64)
    raw_and_hidden = ROWS * FEATURES + ROWS * HIDDEN
    assert kernel["forward_s"] - base["forward_s"] == pytest.approx(raw_and_hidden * 1e-9)
    # and GAT, whose layers take no fused pass
    assert _predict(fused, "gat")["step_s"] == pytest.approx(_predict({}, "gat")["step_s"])


def test_calibration_times_the_engine_s_passes_net_of_their_products():
    fit = calibrate._through_origin
    seen = []

    def timer(call, what=""):
        seen.append(what)
        call()
        return 1e-3

    got = activation_constants(timer, fit, [1 << 14, 1 << 15], "_mem", 0.0)
    assert set(got) == {"gamma_dropout_mem", "gamma_activation_mem",
                        "gamma_activation_back_mem"}
    assert seen == ["dropout_mem", "activation_mem", "activation backward_mem"] * 2
    # a fixed 1 ms a call: the least-squares line through the origin over the two sizes
    per_value = fit([1 << 14, 1 << 15], [1e-3, 1e-3])
    assert got["gamma_dropout_mem"] == pytest.approx(per_value)
    assert got["gamma_activation_back_mem"] == 0.0  # forward and both alike: nothing backward
    # a product slower than the whole pass leaves nothing for the pass, not a negative cost
    assert activation_constants(timer, fit, [1 << 14], "", 1.0)["gamma_activation"] == 0.0


def test_calibration_runs_the_engine_s_passes():
    torch.manual_seed(0)
    got = activation_constants(calibrate._median_time, calibrate._through_origin,
                               [1 << 16], "", 0.0)
    assert set(got) == {"gamma_dropout", "gamma_activation", "gamma_activation_back"}
    assert all(np.isfinite(v) and v >= 0 for v in got.values())

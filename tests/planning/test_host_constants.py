"""The shaped-link check's pooling of host constants and its resolved partitioner orders
(benchmarks/_host_constants.py), on hand-made cells."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from _host_constants import (median_tree, pool_sweeps, pooled_constants,  # noqa: E402
                             resolved_orders)


def cell(method, run, measured, predicted, constants=None):
    return {"dataset": "g", "model": "gcn", "network": "vc:1gbit", "halo_dtype": "float32",
            "method": method, "run": run, "measured_step_s": measured,
            "predicted_step_s": predicted,
            "in_job_cost_model": constants or {"compute": {"1": {"gamma_edge": 1.0}},
                                               "layer_overhead_s": 0.0, "bytes_per_value": 4}}


def test_median_tree_takes_every_number_and_keeps_the_rest():
    trees = [{"a": 1.0, "n": {"b": 10}, "s": "x"}, {"a": 3.0, "n": {"b": 30}, "s": "y"},
             {"a": 2.0, "n": {"b": 20}, "s": "z"}]
    assert median_tree(trees) == {"a": 2.0, "n": {"b": 20.0}, "s": "x"}


def test_pooled_constants_are_per_run_medians_over_jobs():
    cells = [cell("m", 0, 1, 1, {"layer_overhead_s": 1.0}),
             cell("m", 0, 1, 1, {"layer_overhead_s": 1.0}),  # the same job, another rate
             cell("r", 0, 1, 1, {"layer_overhead_s": 3.0}),
             cell("k", 0, 1, 1, {"layer_overhead_s": 8.0}),
             cell("m", 1, 1, 1, {"layer_overhead_s": 5.0})]
    pooled = pooled_constants(cells)
    assert pooled[0] == {"layer_overhead_s": 3.0}  # one value per job: 1, 3, 8
    assert pooled[1] == {"layer_overhead_s": 5.0}


def test_resolved_orders_keep_the_pairs_every_run_orders_alike():
    cells = [cell("a", 0, 1.0, 1.0), cell("a", 1, 1.0, 1.0),
             cell("b", 0, 2.0, 3.0), cell("b", 1, 2.2, 3.0),   # slower than a in both runs
             cell("c", 0, 2.1, 0.5), cell("c", 1, 2.1, 0.5)]   # b and c swap between runs
    (group,) = resolved_orders(cells, ("dataset", "network"), "predicted_step_s")
    assert group["pairs"] == 3 and group["runs"] == 2
    resolved = {(p["faster"], p["slower"]): p["predicted_alike"] for p in group["resolved"]}
    assert resolved == {("a", "b"): True, ("a", "c"): False}  # c is predicted fastest
    assert group["alike"] == 1


def test_one_run_resolves_nothing():
    cells = [cell("a", 0, 1.0, 1.0), cell("b", 0, 2.0, 2.0)]
    (group,) = resolved_orders(cells, ("dataset",), "predicted_step_s")
    assert group["resolved"] == [] and group["pairs"] == 1


def test_pooled_sweeps_resolve_only_the_pairs_every_run_of_each_orders_alike():
    monday = [cell("a", 0, 1.0, 1.0), cell("a", 1, 1.0, 1.0),
              cell("b", 0, 2.0, 3.0), cell("b", 1, 2.0, 3.0),  # b slower than a on both days
              cell("c", 0, 1.5, 0.5), cell("c", 1, 1.6, 0.5)]  # c slower than a on monday
    tuesday = [cell("a", 0, 1.0, 1.0), cell("a", 1, 1.0, 1.0),
               cell("b", 0, 2.0, 3.0), cell("b", 1, 2.0, 3.0),
               cell("c", 0, 0.9, 0.5), cell("c", 1, 0.8, 0.5)]  # ... and faster on tuesday
    pooled = pool_sweeps([monday, tuesday])
    assert sorted({(c["sweep"], c["run"]) for c in pooled}) == [(0, 0), (0, 1), (1, 2), (1, 3)]
    assert [c["measured_step_s"] for c in pooled] == \
        [c["measured_step_s"] for c in monday + tuesday]
    (alone,) = resolved_orders(monday, ("dataset",), "predicted_step_s")
    assert {(p["faster"], p["slower"]) for p in alone["resolved"]} == \
        {("a", "b"), ("a", "c"), ("c", "b")}
    (group,) = resolved_orders(pooled, ("dataset",), "predicted_step_s")
    assert group["runs"] == 4
    assert {(p["faster"], p["slower"]) for p in group["resolved"]} == {("a", "b"), ("c", "b")}

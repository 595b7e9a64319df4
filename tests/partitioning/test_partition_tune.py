import json

import numpy as np
import pytest

from partitioning import PartitionError, make_partitioner, part_summary
from partitioning.cost_model import CostModel, epoch_terms
from partitioning.tune import format_sweep_table, plot_sweep, recommend, sweep, write_json
from partition_testutil import random_graph, two_cliques


def hand_summary(kind="edge_cut"):
    return {"kind": kind, "num_parts": 2, "nodes": [10, 20], "edges": [100, 50],
            "halo_nodes": [5, 0], "halo_peers": [1, 0]}


def test_epoch_terms_by_hand():
    t = epoch_terms(hand_summary(), dims=[8, 4, 2], backward_factor=2.0, num_weights=100)
    # aggregation: 3 passes x edges x (8 + 4)
    np.testing.assert_allclose(t["agg_work"], [3 * 100 * 12, 3 * 50 * 12])
    # dense: 3 x 2 x nodes x (8*4 + 4*2)
    np.testing.assert_allclose(t["flops"], [3 * 2 * 10 * 40, 3 * 2 * 20 * 40])
    # exchanges: forward widths 8, 4; backward width 4 -> 3 messages, 16 values per halo row
    np.testing.assert_allclose(t["messages"], [3, 0])
    np.testing.assert_allclose(t["bytes"], [5 * 16 * 4, 0])
    assert t["allreduce_messages"] == 2 and t["allreduce_bytes"] == 400
    vc = epoch_terms(hand_summary("vertex_cut"), dims=[8, 4, 2])
    np.testing.assert_allclose(vc["bytes"], [2 * 5 * 16 * 4, 0])


def test_predict_takes_the_slowest_part():
    model = CostModel(alpha=1.0, beta=0.0, gamma_edge=1.0, gamma_flop=0.0, backward_factor=0.0)
    pred = model.predict(hand_summary(), dims=[1, 1])
    # part 0: 100 edges + 1 message; part 1: 50 edges; allreduce: 2 messages
    assert pred["compute_s"] == 100 and pred["halo_s"] == 1 and pred["allreduce_s"] == 2
    assert pred["epoch_s"] == 103
    with pytest.raises(PartitionError, match="dims"):
        model.predict(hand_summary(), dims=[4])


def test_fit_recovers_constants():
    truth = CostModel(alpha=3e-6, beta=4e-10, gamma_edge=2e-9, gamma_flop=7e-11)
    rng = np.random.default_rng(0)
    rows = []
    for _ in range(30):
        w = {"agg_work": rng.uniform(1e6, 1e8), "flops": rng.uniform(1e7, 1e9),
             "messages": rng.uniform(1, 100), "bytes": rng.uniform(1e5, 1e8)}
        seconds = (truth.gamma_edge * w["agg_work"] + truth.gamma_flop * w["flops"]
                   + truth.alpha * w["messages"] + truth.beta * w["bytes"])
        rows.append({**w, "seconds": seconds})
    fitted = CostModel.fit(rows)
    for name in ("alpha", "beta", "gamma_edge", "gamma_flop"):
        assert getattr(fitted, name) == pytest.approx(getattr(truth, name), rel=1e-3)
    only_edges = CostModel.fit([{"agg_work": 1e6, "seconds": 1e-3}])
    assert only_edges.gamma_edge == pytest.approx(1e-9) and only_edges.alpha == CostModel().alpha
    assert CostModel.from_dict(fitted.to_dict()) == fitted
    with pytest.raises(PartitionError, match="at least one"):
        CostModel.fit([])


def test_sweep_recommend_and_outputs(tmp_path):
    g = two_cliques(20, isolated=4)
    progress = []
    rows = sweep(g, ["random", "metis", "libra"], [2, 4], dims=[16, 8, 2], seed=0,
                 progress=lambda done, total, label: progress.append((done, total)))
    assert len(rows) == 6 and progress[-1] == (6, 6)
    assert {r["method"] for r in rows} == {"random", "metis", "libra"}
    best2 = recommend(rows, parts=2)
    assert best2["parts"] == 2
    metis2 = next(r for r in rows if r["method"] == "metis" and r["parts"] == 2)
    random2 = next(r for r in rows if r["method"] == "random" and r["parts"] == 2)
    assert metis2["halo_bytes_max"] < random2["halo_bytes_max"]
    result = write_json(tmp_path / "tune.json", rows, CostModel(), extra={"dataset": "toy"})
    on_disk = json.loads((tmp_path / "tune.json").read_text())
    assert on_disk["recommended"] == result["recommended"] and on_disk["dataset"] == "toy"
    assert set(on_disk["best_per_parts"]) == {"2", "4"}
    plot_sweep(rows, tmp_path / "tune.png")
    assert (tmp_path / "tune.png").read_bytes()[:4] == b"\x89PNG"
    table = format_sweep_table(rows)
    assert "metis" in table and "epoch s" in table


def test_sweep_refuses_bad_input():
    g = random_graph(10, 20, seed=0)
    with pytest.raises(PartitionError, match="num_parts=11 exceeds"):
        sweep(g, ["random"], [2, 11], dims=[4, 2])
    with pytest.raises(PartitionError, match="unknown partitioner"):
        sweep(g, ["nope"], [2], dims=[4, 2])


def test_prediction_follows_halo_volume():
    g = random_graph(400, 3000, seed=1)
    model = CostModel(beta=1e-6)  # communication-dominated
    s_metis = part_summary(g, make_partitioner("metis", num_parts=4).fit(g), 64)
    s_random = part_summary(g, make_partitioner("random", num_parts=4).fit(g), 64)
    assert model.predict(s_metis, [16, 2])["halo_s"] < model.predict(s_random, [16, 2])["halo_s"]

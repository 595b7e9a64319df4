"""benchmarks/exchange_share.py: the local exchanges, the turns, and what it compares."""

import sys
from pathlib import Path

import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from exchange_share import (LocalExchanges, measured_shares, predicted_shares,  # noqa: E402
                            table, turns)


@pytest.fixture
def switch():
    from gnnscale.graph.halo import HaloPlan

    real = HaloPlan.post
    yield LocalExchanges()
    HaloPlan.post = real


def test_local_exchanges_return_zeros_of_the_rows_received_at_once(switch):
    rows = torch.ones(5, 3, dtype=torch.float32)
    work = switch.received(rows, [0, 4, 2])
    assert work.test() and work.is_completed()
    halo = work.wait()
    assert halo.shape == (6, 3) and halo.dtype == torch.float32 and not halo.any()
    assert switch.received(rows, [6, 0]).wait() is halo  # kept: no step allocates them


def test_the_switch_routes_posts_to_the_real_exchange_unless_local(switch):
    from gnnscale.graph.halo import HaloPlan

    calls = []
    switch.real = lambda plan, rows, s, r, gradient=False: calls.append((plan, gradient)) or "sent"
    assert HaloPlan.post("plan", torch.ones(2, 2), [2], [3], gradient=True) == "sent"
    assert calls == [("plan", True)]
    switch.local = True
    assert HaloPlan.post("plan", torch.ones(2, 2), [2], [3]).wait().shape == (3, 2)
    assert len(calls) == 1


def test_every_partition_trains_both_ways_once_a_round_in_rotating_order():
    order = turns(["metis", "random"], 3)
    assert len(order) == 12
    for r in range(3):
        assert sorted(order[4 * r:4 * r + 4]) == sorted(
            [(m, w) for m in ("metis", "random") for w in ("exchanged", "local")])
    assert order[0] != order[4] != order[8]


def test_the_slowest_ranks_step_is_the_partitions_each_way():
    rows = [{"method": "metis", "way": w, "rank": r, "step_s": s}
            for w, r, s in [("exchanged", 0, 5.0), ("exchanged", 1, 6.0),
                            ("local", 0, 4.0), ("local", 1, 3.0)]]
    assert measured_shares(rows) == {"metis": (6.0, 4.0)}


def test_the_model_without_exchanges_predicts_less_and_the_table_shows_both():
    from gnnscale.data import load_dataset
    from partitioning import make_partitioner
    from planning.cost_model import CostModel
    from planning.workload import part_workload

    data = load_dataset("sbm", num_nodes=600, seed=0)
    partition = make_partitioner("random", num_parts=2, seed=0).fit(data)
    job = {"constants": {**CostModel().to_dict(), "exchange_overhead_s": 2e-4,
                         "exchange_byte_s": 1e-9},
           "workloads": {"random": part_workload(data, partition)},
           "features": data.num_features, "classes": data.num_classes}
    with_exchanges, local = predicted_shares(job, {"latency_s": 5e-5, "bandwidth_Bps": 1e9},
                                             "gcn")["random"]
    assert 0 < local < with_exchanges
    text = table([{"rate": "10gbit", "measured": {"random": (0.009, 0.007)},
                   "predicted": {"random": (with_exchanges, local)}}])
    assert "random" in text and f"{2.0:6.2f}" in text
    assert np.isfinite(with_exchanges)

"""Ranks per host and threads per rank as the planner's choice (planning.placement,
planning.tune.choose), and what it refuses; `gnnscale tune --cores` in
test_partition_tune_cli.py."""

import pytest

from partitioning.errors import PartitionError
from planning.cost_model import CostModel, ModelSpec, Network
from planning.halo_wire import HaloOptions
from planning.placement import placements
from planning.tune import choose, explain_choice, predicted
from planning.workload import workload_from_arrays


def test_a_job_runs_one_rank_per_host_socket_or_core():
    got = [(p.name, p.ranks, p.ranks_per_host, p.threads_per_rank, p.hosts)
           for p in placements(256, 32, sockets=2)]
    assert got == [("host", 8, 1, 32, 8), ("socket", 16, 2, 16, 8), ("core", 256, 32, 1, 8)]
    # 16 cores of one host: one socket's worth, so per host and per socket are one choice
    assert [(p.name, p.ranks, p.threads_per_rank) for p in placements(16, 32, sockets=2)] == \
        [("host", 1, 16), ("core", 16, 1)]
    assert placements(256, 32, 2)[0].cluster(None).cores_per_rank == 32


@pytest.mark.parametrize("args, message", [
    ((48, 32, 2), "48 cores are not whole hosts of 32 cores"),
    ((64, 32, 3), "32 cores per host do not split into 3 sockets"),
    ((0, 32, 2), "cores must be a positive integer, got 0"),
])
def test_placements_the_planner_cannot_model_are_refused(args, message):
    with pytest.raises(PartitionError, match=message):
        placements(*args)
    with pytest.raises(PartitionError, match="unknown placement 'rack'"):
        placements(64, 32, 2, names=("host", "rack"))


def _rows():
    """Two placements of 64 cores on 32-core hosts over a slow link: per host (2 ranks x 32
    threads, few halo rows) and per core (64 ranks x 1 thread, each with its own halo rows,
    many of them the same remote rows)."""
    spec = ModelSpec.build("gcn", in_dim=64, hidden=64, classes=8, layers=2, dropout=0.0)
    costs = CostModel(compute={1: {"gamma_edge": 1e-9, "gamma_flop": 5e-11,
                                   "gamma_elem": 1e-9, "gamma_gather": 3e-9}})
    network = Network(2e-6, 1e9 / 8)
    rows = []
    for place in placements(64, 32, sockets=2, names=("host", "core")):
        p = place.ranks
        n = 64000 // p  # each rank's halo: a quarter of its rows per host, 62% per core
        halo = n * (0.25 if place.name == "host" else 0.62)
        recv = [[0 if i == j else halo / (p - 1) for j in range(p)] for i in range(p)]
        work = workload_from_arrays("edge_cut", [n] * p, [n * 10] * p, [halo * 2] * p, recv,
                                    train_nodes=[n // 2] * p)
        for halo_opts in (HaloOptions("float32"), HaloOptions("int8"),
                          HaloOptions("float32", "pipelined")):
            rows.append({"method": "metis", "parts": p, "partition_time_s": 0.0,
                         "placement": place.name, "placement_label": place.label,
                         **predicted(work, spec, place.cluster(network), costs, halo_opts)})
    return rows


def test_the_planner_picks_the_placement_and_says_why():
    rows = _rows()
    best = choose(rows)
    assert best["placement"] == "host" and best["parts"] == 2
    fastest = min(rows, key=lambda r: r["predicted_epoch_s"])
    assert best["predicted_epoch_s"] <= fastest["predicted_epoch_s"] * 1.1
    why = explain_choice(best, rows)
    assert why.startswith("metis x 2, per host (2 x 32), ")
    assert "per core (64 x 1) at best" in why


def test_the_most_exact_configuration_within_ten_percent_wins():
    rows = [{"method": "m", "parts": 4, "partition_time_s": 0.0, "predicted_epoch_s": t,
             "halo_dtype": d, "staleness": s}
            for t, d, s in ((1.00, "int2", "local"), (1.03, "int8", "exact"),
                            (1.05, "bfloat16", "exact"), (1.08, "float32", "pipelined"),
                            (1.20, "float32", "exact"))]
    # bfloat16/exact and float32/pipelined are one place from exact float32, int8/exact two:
    # the faster of the first two; exact float32 is beyond 10%
    assert (choose(rows)["halo_dtype"], choose(rows)["staleness"]) == ("bfloat16", "exact")
    assert choose(rows, margin=0.25)["halo_dtype"] == "float32"
    assert choose(rows, margin=0.0)["staleness"] == "local"

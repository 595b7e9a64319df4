"""The time model (planning.cost_model), workloads and the tune sweep, without torch."""

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from partitioning import PartitionError, make_partitioner
from planning.cost_model import (ACTIVATION_ELEMS, NARROW_KEYS, Cluster, CostModel,
                                 ModelSpec, Network, allreduce_time, predict)
from planning.tune import (explain, format_sweep_table, plot_sweep, recommend, runners_up,
                           sweep, write_json)
from planning.workload import part_workload, workload_from_arrays

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "partitioning"))
from partition_testutil import random_graph, two_cliques  # noqa: E402

ONLY_COMM = {"gamma_edge": 0.0, "gamma_flop": 0.0, "gamma_elem": 0.0, "gamma_gather": 0.0}


def two_parts(halo=(100, 50)):
    """Part 0 receives halo[0] rows from part 1, part 1 receives halo[1] rows from part 0."""
    return workload_from_arrays("edge_cut", [1000, 1000], [4000, 4000], [300, 300],
                                [[0, halo[0]], [halo[1], 0]], [500, 500])


def model(**compute):
    return CostModel(compute={1: {**ONLY_COMM, **compute}}, shm_alpha=0.0, shm_beta=0.0,
                     layer_overhead_s=0.0)


def test_workload_counts_inner_boundary_and_halo_by_hand():
    g = two_cliques(4)
    part = make_partitioner("block", num_parts=2).fit(g)
    w = part_workload(g, part)
    assert w["inner_edges"].sum() + w["boundary_edges"].sum() == g.num_edges
    assert np.all(np.diag(w["recv_rows"]) == 0)
    src, dst = g.edge_index()
    owner = part.node_parts
    cut = owner[src] != owner[dst]
    np.testing.assert_array_equal(w["boundary_edges"], np.bincount(owner[dst[cut]],
                                                                   minlength=2))
    for p in range(2):  # distinct foreign sources of edges into p
        assert w["recv_rows"][p].sum() == np.unique(src[cut & (owner[dst] == p)]).size


def test_exchange_on_a_simulated_network_is_latency_plus_sent_bytes():
    spec = ModelSpec("gcn", (4, 8), (1,), dropout=0.5)  # input dropout: aggregated every step
    net = Network(latency_s=1e-3, bandwidth_Bps=1e6)
    cluster = Cluster(network=net, simulated=True)
    pred = predict(two_parts(), spec, cluster, model())
    # one layer, width min(4, 8) = 4 -> 16 B per row; rank 0 sends 50 rows, rank 1 sends 100;
    # the first layer aggregates raw features: no backward exchange
    assert pred["forward_s"] == pytest.approx(1e-3 + 100 * 16 / 1e6)
    assert pred["backward_s"] == 0.0
    # transform first (8 -> 4): the aggregated rows need a gradient, returned by an exchange
    back = predict(two_parts(), ModelSpec("gcn", (8, 4), (1,), dropout=0.0), cluster, model())
    assert back["backward_s"] == pytest.approx(back["forward_s"])


def test_the_rows_a_rank_sends_are_gathered_forward_and_summed_back_backward():
    gather = 1e-6
    work = two_parts(halo=(100, 50))  # rank 0 sends 50 rows, rank 1 sends 100
    # aggregating raw features (4 -> 8): only the forward gathers the sent rows
    first = predict(work, ModelSpec("gcn", (4, 8), (1,), dropout=0.5), None,
                    model(gamma_gather=gather))
    assert first["rank_step_s"] == pytest.approx([gather * 50 * 4, gather * 100 * 4])
    # transform first (8 -> 4): backward adds the gradients of the sent rows into owned rows
    both = predict(work, ModelSpec("gcn", (8, 4), (1,), dropout=0.0), None,
                   model(gamma_gather=gather))
    assert both["rank_step_s"] == pytest.approx([2 * gather * 50 * 4, 2 * gather * 100 * 4])
    # a vertex cut packs masters for mirrors and sums the partial sums back: twice per pass
    vertex = {**work, "kind": "vertex_cut"}
    assert predict(vertex, ModelSpec("gcn", (4, 8), (1,), dropout=0.5), None,
                   model(gamma_gather=gather))["rank_step_s"] == pytest.approx(
        [2 * gather * 50 * 4, 2 * gather * 100 * 4])


def test_the_raw_features_aggregate_is_kept_so_evaluation_exchanges_no_first_layer_halo():
    """A first layer that aggregates the raw features (4 -> 8) finds their aggregate kept
    (RankGraph's cache of constant inputs): evaluation, and training without input dropout,
    only transform it; training with input dropout aggregates, and exchanges, every step."""
    net = Cluster(network=Network(latency_s=1e-3, bandwidth_Bps=1e6), ranks_per_host=1)
    costs = model(gamma_edge=1e-7, gamma_flop=1e-9)
    dense = 1e-9 * 2 * 1000 * 4 * 8  # the transform of rank 0's 1,000 rows
    dropped = predict(two_parts(), ModelSpec("gcn", (4, 8), (1,), dropout=0.5), net, costs)
    assert dropped["eval_s"] == pytest.approx(dense + allreduce_time(64, 2, net, costs))
    assert dropped["forward_s"] > 1e-3 and dropped["exchanges_step"] == 1
    # rank 0 sends 50 rows of 4 values, rank 1 100: per step, 16 B a row
    assert dropped["halo_bytes_step"] == pytest.approx([50 * 16, 100 * 16])
    assert dropped["exchange_s"] == pytest.approx(1e-3 + 100 * 16 / 1e6)
    kept = predict(two_parts(), ModelSpec("gcn", (4, 8), (1,), dropout=0.0), net, costs)
    assert kept["forward_s"] == pytest.approx(dense) and kept["exchanges_step"] == 0
    assert kept["exchange_s"] == 0.0
    # equal widths transform first, as the layers' "auto" order: the aggregated rows need a
    # gradient, so backward exchanges too, and evaluation exchanges as training does
    square = predict(two_parts(), ModelSpec("gcn", (8, 8), (1,), dropout=0.0), net, costs)
    assert square["exchanges_step"] == 2 and square["eval_s"] > 1e-3


def test_gat_scores_the_edges_from_owned_sources_while_its_exchange_travels():
    spec = ModelSpec("gat", (4, 8), (1,), dropout=0.0)
    costs = model(gamma_gather=1e-7)
    owned = 1e-7 * 8 * 3 * (4000 + 1000)  # per edge: 3 gathers of 8 values; edges + self loops

    def exposed(latency):
        cluster = Cluster(network=Network(latency_s=latency, bandwidth_Bps=1e15), simulated=True)
        return predict(two_parts(), spec, cluster, costs)["exchange_exposed_s"]
    assert exposed(1e-3) == 0.0  # hidden behind the owned edges, forward and backward
    # forward waits for what the owned edges leave; backward works through them twice
    assert exposed(0.02) == pytest.approx(0.02 - owned)


def test_shared_memory_copying_is_work_the_inner_aggregation_does_not_hide():
    spec = ModelSpec("gcn", (8, 16), (1,), dropout=0.5)  # aggregates 8-wide dropped-out rows
    costs = CostModel(compute={1: {**ONLY_COMM, "gamma_edge": 1e-7}}, shm_alpha=0.0,
                      shm_beta=1e-9, layer_overhead_s=0.0)
    pred = predict(two_parts(halo=(100, 50)), spec, None, costs)
    inner, boundary = 1e-7 * (4000 + 1000) * 8, 1e-7 * 300 * 8
    copies = [1e-9 * 32 * 100, 1e-9 * 32 * 100]  # 32 B rows, max(received, sent) per rank
    assert pred["rank_step_s"] == pytest.approx([c + inner + boundary for c in copies])


def test_overlap_hides_the_exchange_up_to_the_inner_aggregation():
    spec = ModelSpec("gcn", (8, 16), (1,), dropout=0.5)  # aggregates 8-wide dropped-out rows
    work = two_parts()
    net = Network(latency_s=1e-4, bandwidth_Bps=1e12)
    fast = predict(work, spec, Cluster(network=net, ranks_per_host=1), model(gamma_edge=1e-7))
    inner = 1e-7 * (4000 + 1000) * 8  # inner edges + GCN self loops, width 8
    boundary = 1e-7 * 300 * 8
    assert inner > 1e-4
    assert fast["forward_s"] == pytest.approx(inner + boundary, rel=1e-6)
    assert fast["exchange_exposed_s"] == 0.0
    slow_net = Network(latency_s=1e-2, bandwidth_Bps=1e12)
    slow = predict(work, spec, Cluster(network=slow_net, ranks_per_host=1),
                   model(gamma_edge=1e-7))
    assert slow["forward_s"] == pytest.approx(1e-2 + boundary, rel=1e-3)
    assert slow["bound"] == "communication" and fast["bound"] == "compute"


def test_ranks_on_one_host_use_shared_memory_and_share_the_link():
    spec = ModelSpec("gcn", (8, 4), (1,), dropout=0.0)
    net = Network(latency_s=1e-3, bandwidth_Bps=1e6)
    shm = CostModel(compute={1: ONLY_COMM}, shm_alpha=1e-6, shm_beta=0.0, layer_overhead_s=0)
    same_host = predict(two_parts(), spec, Cluster(network=net, ranks_per_host=2), shm)
    assert same_host["forward_s"] == pytest.approx(1e-6)  # one peer, shared memory only
    apart = predict(two_parts(), spec, Cluster(network=net, ranks_per_host=1), shm)
    # one peer on another host: one latency, the busiest link moves max(in, out) = 100 rows
    assert apart["forward_s"] == pytest.approx(1e-3 + 1600 / 1e6)
    # four ranks, two per host: each host link carries both of its ranks' remote rows
    four = workload_from_arrays("edge_cut", [10] * 4, [0] * 4, [0] * 4,
                                [[0, 0, 10, 0], [0, 0, 0, 10], [10, 0, 0, 0], [0, 10, 0, 0]])
    paired = predict(four, spec, Cluster(network=net, ranks_per_host=2), shm)
    assert paired["forward_s"] == pytest.approx(1e-3 + 2 * 10 * 16 / 1e6)
    # three peers on other hosts: three latencies
    spread = workload_from_arrays("edge_cut", [10] * 4, [0] * 4, [0] * 4,
                                  np.ones((4, 4)) - np.eye(4))
    alone = predict(spread, spec, Cluster(network=net, ranks_per_host=1), shm)
    assert alone["forward_s"] == pytest.approx(3 * 1e-3 + 3 * 16 / 1e6)


def test_hierarchical_allreduce():
    net = Network(latency_s=1e-5, bandwidth_Bps=1e9)
    shm = CostModel(shm_alpha=1e-7, shm_beta=1e-11)
    flat = allreduce_time(1e6, 8, Cluster(network=net, ranks_per_host=1), shm)
    assert flat == pytest.approx(2 * 7 * 1e-5 + 2 * 7 / 8 * 1e6 / 1e9)
    hier = allreduce_time(1e6, 8, Cluster(network=net, ranks_per_host=4), shm)
    assert hier == pytest.approx(2 * 3 * 1e-7 + 2 * 3 / 4 * 1e6 * 1e-11
                                 + 2 * 1e-5 + 1e6 / 1e9)
    assert allreduce_time(1e6, 1, Cluster(), shm) == 0.0


def test_gradient_allreduce_overlaps_backward():
    spec = ModelSpec.build("gcn", 64, 256, 64, layers=3)
    work = two_parts()
    net = Network(latency_s=0.0, bandwidth_Bps=1e7)
    costs = CostModel(compute={1: {**ONLY_COMM, "gamma_flop": 1e-8}}, shm_alpha=0,
                      shm_beta=0, layer_overhead_s=0)
    pred = predict(work, spec, Cluster(network=net, ranks_per_host=1), costs)
    total = sum(allreduce_time(4.0 * w, 2, Cluster(network=net, ranks_per_host=1), costs)
                for w in spec.layer_weights())
    assert 0 < pred["allreduce_exposed_s"] < total  # part of it hidden behind backward


def test_slowest_rank_sets_each_layer_and_shared_cores_spread_the_work():
    spec = ModelSpec("gcn", (8, 4), (1,), dropout=0.0)
    work = workload_from_arrays("edge_cut", [100, 100], [1000, 10], [0, 0], np.zeros((2, 2)))
    costs = model(gamma_edge=1e-6)
    alone = predict(work, spec, Cluster(), costs)
    assert alone["forward_s"] == pytest.approx(1e-6 * 1100 * 4)
    assert alone["slowest_rank"] == 0 and alone["imbalance"] > 1.5
    # 2 ranks on 1 core: the busy rank gets the core while the idle one waits, so the layer
    # takes both ranks' work one after the other, not twice the busy rank's
    crowded = predict(work, spec, Cluster(cores_per_rank=1, host_cores=1), costs)
    assert crowded["forward_s"] == pytest.approx(1e-6 * (1100 + 110) * 4)
    even = workload_from_arrays("edge_cut", [100, 100], [1000, 1000], [0, 0], np.zeros((2, 2)))
    assert predict(even, spec, Cluster(cores_per_rank=1, host_cores=1), costs)["forward_s"] \
        == pytest.approx(2 * predict(even, spec, Cluster(), costs)["forward_s"])
    two_hosts = Cluster(ranks_per_host=1, cores_per_rank=1, host_cores=1,
                        network=Network(latency_s=0.0, bandwidth_Bps=1e12))
    assert predict(work, spec, two_hosts, costs)["forward_s"] == pytest.approx(
        alone["forward_s"])  # a host each: no sharing


def test_cost_model_file_round_trip_and_refusals(tmp_path):
    costs = CostModel(compute={1: {"gamma_edge": 2e-9, "gamma_flop": 1e-10, "gamma_elem": 1e-9,
                                   "gamma_gather": 3e-9},
                               4: {"gamma_edge": 6e-10, "gamma_flop": 3e-11,
                                   "gamma_elem": 3e-10, "gamma_gather": 1e-9}})
    path = tmp_path / "c.json"
    costs.save(path)
    assert CostModel.load(path) == costs
    assert costs.constants_for(4)["gamma_edge"] == 6e-10
    assert costs.constants_for(8)["gamma_edge"] == pytest.approx(3e-10)  # ideal beyond 4
    # 2 threads: the largest calibrated count below (1), scaled by 1/2; without constants
    # beyond the cache, those are the cached ones (and dense transforms stream for free)
    halved = costs.constants_for(2)
    assert halved == {**{k: v / 2 for k, v in costs.compute[1].items()}, "gamma_byte": 0.0,
                      "gamma_nnz": 0.0, "gamma_nnz_mem": 0.0,  # files without the per-edge term
                      "gamma_row": 0.0, "gamma_row_mem": 0.0,  # nor the per-row one
                      **{k: 0.0 for k in NARROW_KEYS},  # nor the small rows' line
                      **{f"{k}_mem": costs.compute[1][k] / 2
                         for k in ("gamma_edge", "gamma_elem", "gamma_gather")},
                      # nor the dropout and activation ones: the elementwise ops they replace
                      **{f"{k}{suffix}": elems * costs.compute[1]["gamma_elem"] / 2
                         for k, elems in ACTIVATION_ELEMS.items() for suffix in ("", "_mem")}}
    values = costs.to_dict()
    values["compute"]["1"]["gamma_egde_mem"] = 1e-9
    with pytest.raises(PartitionError, match=r"unknown constant compute\[1\].gamma_egde_mem"):
        CostModel.from_dict(values)
    values = costs.to_dict()
    del values["cache_bytes"]  # files from before the cache model still load
    assert CostModel.from_dict(values).cache_bytes == 0.0
    values = costs.to_dict()
    del values["shm_beta"]
    with pytest.raises(PartitionError, match="missing constant 'shm_beta'"):
        CostModel.from_dict(values)
    values = costs.to_dict()
    values["compute"]["1"]["gamma_flop"] = -1.0
    with pytest.raises(PartitionError, match=r"compute\[1\].gamma_flop must be finite and >= 0"):
        CostModel.from_dict(values)
    values = costs.to_dict()
    del values["compute"]["4"]["gamma_edge"]
    with pytest.raises(PartitionError, match=r"compute\[4\].gamma_edge is missing"):
        CostModel.from_dict(values)
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(PartitionError, match="cannot read JSON"):
        CostModel.load(tmp_path / "bad.json")
    with pytest.raises(PartitionError, match="network needs"):
        Network(latency_s=1e-6, bandwidth_Bps=0)


def test_model_spec_widths_and_weights():
    gat = ModelSpec.build("gat", 10, 8, 3, layers=2, heads=4, out_heads=1)
    assert gat.widths == (10, 32, 3) and gat.heads == (4, 1)
    assert gat.layer_weights() == [10 * 32 + 2 * 32 + 32, 32 * 3 + 2 * 3 + 3]
    sage = ModelSpec.build("sage", 10, 8, 3)
    assert sage.layer_weights() == [2 * 10 * 8 + 8, 2 * 8 * 3 + 3]
    with pytest.raises(PartitionError, match="unknown model"):
        ModelSpec.build("gin", 10, 8, 3)


def test_sweep_recommend_explain_and_outputs(tmp_path):
    g = two_cliques(20, isolated=4)
    progress = []
    spec = ModelSpec.build("gcn", 16, 8, 2)
    rows = sweep(g, ["random", "metis", "libra"], [2, 4], spec, seed=0,
                 progress=lambda done, total, label: progress.append((done, total)))
    assert len(rows) == 6 and progress[-1] == (6, 6)
    best2 = recommend(rows, parts=2)
    assert best2["parts"] == 2
    metis2 = next(r for r in rows if r["method"] == "metis" and r["parts"] == 2)
    random2 = next(r for r in rows if r["method"] == "random" and r["parts"] == 2)
    assert metis2["halo_bytes_max"] < random2["halo_bytes_max"]
    best = recommend(rows)
    close = runners_up(rows, best)
    assert all(r["predicted_epoch_s"] <= 1.1 * best["predicted_epoch_s"] for r in close)
    assert best not in close
    assert "-bound" in explain(best) and "halo per exchange" in explain(best)
    result = write_json(tmp_path / "tune.json", rows, CostModel(), extra={"dataset": "toy"})
    on_disk = json.loads((tmp_path / "tune.json").read_text())
    assert on_disk["recommended"] == result["recommended"] and on_disk["dataset"] == "toy"
    assert on_disk["why"] == explain(best)
    plot_sweep(rows, tmp_path / "tune.png")
    assert (tmp_path / "tune.png").read_bytes()[:4] == b"\x89PNG"
    assert "step ms" in format_sweep_table(rows)


def test_sweep_refuses_bad_input():
    g = random_graph(10, 20, seed=0)
    spec = ModelSpec.build("gcn", 4, 4, 2)
    with pytest.raises(PartitionError, match="num_parts=11 exceeds"):
        sweep(g, ["random"], [2, 11], spec)
    with pytest.raises(PartitionError, match="unknown partitioner"):
        sweep(g, ["nope"], [2], spec)


def test_a_slow_network_prefers_the_smaller_halo():
    g = random_graph(400, 3000, seed=1)
    spec = ModelSpec.build("gcn", 64, 16, 2)
    cluster = Cluster(network=Network(50e-6, 10e9 / 8), ranks_per_host=1)
    rows = sweep(g, ["random", "metis"], [8], spec, cluster=cluster)
    by_method = {r["method"]: r for r in rows}
    assert by_method["metis"]["predicted_exchange_exposed_s"] \
        < by_method["random"]["predicted_exchange_exposed_s"]


def test_constants_move_from_cached_to_memory_as_the_working_set_leaves_the_cache():
    """An aggregation gathers 4 w (N + halo) bytes: within the rank's share of the cache it
    costs the cached constant, from four times that share the memory one, linear between;
    ranks on one host share its cache."""
    spec = ModelSpec("gcn", (4, 8), (1,), dropout=0.5)  # one layer aggregating 4-wide rows
    work = workload_from_arrays("edge_cut", [1000], [5000], [0], [[0]], [500])
    rows_bytes = 4 * 4 * 1000  # 16 kB gathered; the self loops add N edges

    def forward(cache, edge_mem=3e-9):
        costs = CostModel(compute={1: {**ONLY_COMM, "gamma_edge": 1e-9,
                                       "gamma_edge_mem": edge_mem}},
                          shm_alpha=0.0, shm_beta=0.0, layer_overhead_s=0.0, cache_bytes=cache)
        return predict(work, spec, Cluster(), costs)["forward_s"]

    cached, beyond = 6000 * 4 * 1e-9, 6000 * 4 * 3e-9
    assert forward(0.0) == pytest.approx(cached)  # no cache model: the cached constant
    assert forward(rows_bytes) == pytest.approx(cached)
    assert forward(rows_bytes / 4) == pytest.approx(beyond)
    assert forward(rows_bytes / 2) == pytest.approx(cached + (beyond - cached) / 3)  # S = 2 C
    assert forward(rows_bytes, edge_mem=1e-9) == pytest.approx(cached)
    pair = workload_from_arrays("edge_cut", [1000, 1000], [5000, 5000], [0, 0],
                                [[0, 0], [0, 0]], [500, 500])
    costs = CostModel(compute={1: {**ONLY_COMM, "gamma_edge": 1e-9, "gamma_edge_mem": 3e-9}},
                      shm_alpha=0.0, shm_beta=0.0, layer_overhead_s=0.0, cache_bytes=rows_bytes)
    apart = predict(pair, spec, Cluster(ranks_per_host=1), costs)["forward_s"]
    together = predict(pair, spec, Cluster(ranks_per_host=2), costs)["forward_s"]
    assert apart == pytest.approx(cached)
    assert together == pytest.approx(cached + (beyond - cached) / 3)  # each has half the cache
    assert forward(rows_bytes, edge_mem=1e-9) == pytest.approx(cached)


def test_a_skinny_transform_beyond_the_cache_costs_the_bytes_it_streams():
    spec = ModelSpec("gcn", (128, 16), (1,), dropout=0.0)
    n = 100_000
    work = workload_from_arrays("edge_cut", [n], [0], [0], [[0]], [n // 2])
    compute = {**ONLY_COMM, "gamma_flop": 1e-11, "gamma_byte": 1e-10}
    moved = 4.0 * n * (128 + 16)

    def forward(cache):
        costs = CostModel(compute={1: compute}, shm_alpha=0.0, shm_beta=0.0,
                          layer_overhead_s=0.0, cache_bytes=cache)
        return predict(work, spec, Cluster(), costs)["forward_s"]

    assert forward(moved) == pytest.approx(1e-11 * 2 * n * 128 * 16)  # fits: its flops
    assert forward(moved / 4) == pytest.approx(1e-10 * moved)  # streams: its bytes


def test_each_byte_exchanged_costs_the_rank_work_while_it_travels():
    """``exchange_byte_s`` per byte a rank sends and receives is its own work while the
    exchange travels: it lengthens the step where compute hides the whole exchange, costs
    nothing where the rank waits for the exchange anyway, and one rank exchanges nothing."""
    spec = ModelSpec("gcn", (8, 4), (1,), dropout=0.0)  # transform first: 2 exchanges a step
    net = Cluster(network=Network(latency_s=0.0, bandwidth_Bps=1e15), ranks_per_host=1)
    busy = {"compute": {"1": {**ONLY_COMM, "gamma_edge": 1e-6}}}  # 20 ms inner aggregation
    costs = CostModel.from_dict({**model().to_dict(), **busy})
    per_byte = CostModel.from_dict({**costs.to_dict(), "exchange_byte_s": 1e-9})
    base, charged = (predict(two_parts(), spec, net, c) for c in (costs, per_byte))
    assert base["exchange_exposed_s"] == charged["exchange_exposed_s"] == 0.0
    # rows 4 wide (16 B); each rank sends 50 or 100 rows and receives the other: 150 rows
    # an exchange, forward and backward
    assert charged["forward_s"] - base["forward_s"] == pytest.approx(1e-9 * 16 * 150)
    assert charged["step_s"] - base["step_s"] == pytest.approx(2 * 1e-9 * 16 * 150)
    # a link so slow that the exchange outlasts the aggregation and its work: the rank
    # waits for the rows anyway, and the work is done in that wait
    slow = Cluster(network=Network(latency_s=0.0, bandwidth_Bps=1e4), ranks_per_host=1)
    waiting, worked = (predict(two_parts(), spec, slow, c) for c in (costs, per_byte))
    assert waiting["exchange_exposed_s"] > 0.1
    assert worked["step_s"] == pytest.approx(waiting["step_s"])
    one = workload_from_arrays("edge_cut", [1000], [4000], [0], [[0]], [500])
    assert predict(one, spec, Cluster(), per_byte)["step_s"] == \
        predict(one, spec, Cluster(), costs)["step_s"]
    assert CostModel.from_dict({k: v for k, v in costs.to_dict().items()
                                if k != "exchange_byte_s"}).exchange_byte_s == 0.0


def test_each_exchange_costs_its_fixed_overhead_as_work_at_its_post():
    """``exchange_overhead_s`` is the rank's own work at every exchange it takes part in
    (posting and completing it take the rank's thread), not time the exchange travels, so
    compute does not hide it; one rank exchanges nothing."""
    spec = ModelSpec("gcn", (8, 4), (1,), dropout=0.0)  # transform first: 2 exchanges a step
    net = Cluster(network=Network(latency_s=0.0, bandwidth_Bps=1e15), ranks_per_host=1)
    costs = CostModel.from_dict({**model().to_dict(), "exchange_overhead_s": 1e-3})
    pred = predict(two_parts(), spec, net, costs)
    assert pred["exchanges_step"] == 2 and pred["exchange_s"] == pytest.approx(0.0, abs=1e-9)
    # and the gradient allreduce after backward, a collective too
    assert pred["step_s"] == pytest.approx(2e-3 + 1e-3) and pred["exchange_exposed_s"] == \
        pytest.approx(0.0, abs=1e-9) and pred["allreduce_exposed_s"] == pytest.approx(1e-3)
    hidden = predict(two_parts(), spec, net, CostModel.from_dict(
        {**costs.to_dict(), "compute": {"1": {**ONLY_COMM, "gamma_edge": 1e-6}}}))
    inner = 1e-6 * (4000 + 1000) * 4  # inner edges + self loops at width 4: 20 ms
    assert hidden["exchange_exposed_s"] == 0.0 and hidden["forward_s"] == pytest.approx(
        1e-3 + inner + 1e-6 * 300 * 4)  # the post's fixed cost is not hidden
    one = workload_from_arrays("edge_cut", [1000], [4000], [0], [[0]], [500])
    assert predict(one, spec, Cluster(), costs)["step_s"] == 0.0
    assert CostModel.from_dict({k: v for k, v in costs.to_dict().items()
                                if k != "exchange_overhead_s"}).exchange_overhead_s == 0.0


def test_balanced_ranks_pay_for_their_jitter_where_they_meet_an_uneven_pair_hardly():
    """``noise_s`` (a rank's busy-time variance per second of work) makes ranks that meet wait
    for the latest one's jitter: two equal parts' step grows by about ``sqrt(noise T / pi)``
    (the later of two), a pair whose larger part is far ahead grows much less; one rank
    meets nobody; files without it load as 0."""
    spec = ModelSpec("gcn", (8, 4), (1,), dropout=0.0)
    net = Cluster(network=Network(latency_s=0.0, bandwidth_Bps=1e15), ranks_per_host=1)
    quiet = CostModel.from_dict({**model().to_dict(),
                                 "compute": {"1": {**ONLY_COMM, "gamma_edge": 1e-6}}})
    noisy = CostModel.from_dict({**quiet.to_dict(), "noise_s": 1e-4})
    assert noisy.to_dict()["noise_s"] == 1e-4
    uneven = workload_from_arrays("edge_cut", [1000, 2000], [4000, 12000], [300, 300],
                                  [[0, 100], [50, 0]], [500, 1000])
    grown = {}
    for name, work in (("even", two_parts()), ("uneven", uneven)):
        base, jittered = (predict(work, spec, net, c)["step_s"] for c in (quiet, noisy))
        grown[name] = jittered - base
        if name == "even":
            assert grown[name] == pytest.approx(np.sqrt(1e-4 * base / np.pi), rel=0.05)
    assert 0 <= grown["uneven"] < 0.1 * grown["even"]
    one = workload_from_arrays("edge_cut", [1000], [4000], [0], [[0]], [500])
    assert predict(one, spec, Cluster(), noisy)["step_s"] == \
        pytest.approx(predict(one, spec, Cluster(), quiet)["step_s"], rel=0.01)
    assert CostModel.from_dict({k: v for k, v in noisy.to_dict().items()
                                if k != "noise_s"}).noise_s == 0.0
    with pytest.raises(PartitionError, match="noise_s must be finite and >= 0"):
        CostModel.from_dict({**noisy.to_dict(), "noise_s": -1.0})

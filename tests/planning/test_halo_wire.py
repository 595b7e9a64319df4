"""The halo dtype and the staleness policy as choices of the time model: bytes on the wire to the
byte, and the step's time moving the right way (planning.halo_wire, planning.cost_model)."""

import numpy as np
import pytest

from partitioning import make_partitioner
from partitioning.errors import PartitionError
from planning.cost_model import Cluster, CostModel, ModelSpec, Network, predict
from planning.halo_wire import HaloOptions, Staleness, row_bytes
from planning.workload import host_sharing, workload_from_arrays

# 2-layer GCN 100 -> 64 -> 10: layer 1 transforms first and exchanges 64 values a row (forward
# and, its aggregation needing a gradient, backward); layer 2 exchanges 10 (both ways)
SPEC = ModelSpec.build("gcn", in_dim=100, hidden=64, classes=10, layers=2, dropout=0.0)


def two_ranks(rows=30, nodes=1000, inner=20000, boundary=2000):
    """Two ranks on two hosts, each receiving ``rows`` halo rows from the other."""
    return workload_from_arrays("edge_cut", [nodes, nodes], [inner, inner],
                                [boundary, boundary], [[0, rows], [rows, 0]],
                                train_nodes=[nodes // 2] * 2)


def slow_link(gbit=0.1):
    return Cluster(ranks_per_host=1, network=Network(50e-6, gbit * 1e9 / 8))


@pytest.mark.parametrize("dtype,per_step,widest_row", [
    ("float32", 2 * 30 * 64 * 4 + 2 * 30 * 10 * 4, 64 * 4),
    ("bfloat16", 2 * 30 * 64 * 2 + 2 * 30 * 10 * 2, 64 * 2),
    ("int8", 2 * 30 * (64 + 8) + 2 * 30 * (10 + 8), 64 + 8),
    ("int4", 2 * 30 * (32 + 8) + 2 * 30 * (5 + 8), 32 + 8),
    ("int2", 2 * 30 * (16 + 8) + 2 * 30 * (3 + 8), 16 + 8),
])
def test_each_dtype_sends_its_rows_bytes_scale_and_offset_included(dtype, per_step, widest_row):
    pred = predict(two_ranks(), SPEC, slow_link(), halo=HaloOptions(dtype))
    assert pred["exchanges_step"] == 4
    assert pred["halo_bytes_step"].tolist() == [per_step, per_step]
    assert pred["halo_bytes"].tolist() == [30 * widest_row] * 2


def test_row_bytes_pack_codes_and_add_eight_bytes_of_scale_and_offset():
    assert [row_bytes(d, 100) for d in ("float32", "bfloat16", "int8", "int4", "int2")] == \
        [400, 200, 108, 58, 33]
    assert row_bytes("int2", 1) == 9 and row_bytes("int4", 3) == 10


def test_narrower_rows_shorten_the_step_on_a_slow_link_but_cost_coding_in_memory():
    work = two_ranks(rows=3000)
    steps = {d: predict(work, SPEC, slow_link(), halo=HaloOptions(d))["step_s"]
             for d in ("float32", "bfloat16", "int8", "int4", "int2")}
    assert steps["float32"] > steps["bfloat16"] > steps["int8"] > steps["int4"] > steps["int2"]
    # every rank on one host (shared memory at 5 GB/s): coding costs more than the bytes save
    local = {d: predict(work, SPEC, Cluster(), halo=HaloOptions(d))["step_s"]
             for d in ("float32", "int8")}
    assert local["int8"] > local["float32"]
    free = {d: predict(work, SPEC, Cluster(), halo=HaloOptions(d, coding={d: (0.0, 0.0)}))
            ["step_s"] for d in ("float32", "int8")}
    assert free["int8"] <= free["float32"]


def test_staleness_hides_or_skips_the_exchange():
    work = two_ranks(rows=3000)
    cluster = slow_link()

    def run(policy, dtype="float32"):
        return predict(work, SPEC, cluster, halo=HaloOptions(dtype, policy))

    exact, piped, delayed, local = (run(p) for p in ("exact", "pipelined", "delayed:4", "local"))
    assert exact["exchange_exposed_s"] > 0
    # pipelined sends every row but waits for none: the step is compute or the link, whichever
    # is longer; delayed:4 sends a quarter of the rows, local none
    assert piped["step_s"] < exact["step_s"]
    assert piped["halo_bytes_step"][0] == exact["halo_bytes_step"][0]
    assert piped["step_s"] >= piped["exchange_s"] - 1e-12
    assert delayed["halo_bytes_step"][0] == exact["halo_bytes_step"][0] / 4
    assert delayed["step_s"] <= piped["step_s"]
    assert local["halo_bytes_step"].tolist() == [0, 0] and local["exchange_s"] == 0
    assert local["exchange_exposed_s"] == 0 and local["step_s"] <= delayed["step_s"]
    # evaluation always exchanges exactly
    assert piped["eval_s"] == exact["eval_s"] == local["eval_s"]
    # combined: int8 rows, a quarter of them per step
    assert run("delayed:4", "int8")["halo_bytes_step"][0] == \
        (2 * 3000 * 72 + 2 * 3000 * 18) / 4


def test_a_stale_step_is_no_shorter_than_its_exchanges_take_to_travel():
    work = two_ranks(rows=200000, inner=100, boundary=100)  # a tiny compute, a huge halo
    piped = predict(work, SPEC, slow_link(), halo=HaloOptions("float32", "pipelined"))
    travel = 2 * 200000 * (64 + 10) * 4 / (0.1e9 / 8)
    assert piped["step_s"] >= travel
    assert piped["bound"] == "communication" and piped["exchange_exposed_s"] > 0


@pytest.mark.parametrize("text", ["pipelined:1.5", "delayed", "delayed:0", "delayed:x",
                                  "exact:2", "sometimes", "local:1"])
def test_staleness_the_model_cannot_read_is_refused_in_one_line(text):
    with pytest.raises(PartitionError, match="unknown staleness") as err:
        Staleness.parse(text)
    assert "\n" not in str(err.value) and repr(text) in str(err.value)


def test_staleness_specs_round_trip_and_unknown_dtypes_are_refused():
    for text in ("exact", "pipelined", "pipelined:0.9", "delayed:3", "local"):
        assert Staleness.parse(text).spec == text
    with pytest.raises(PartitionError, match="unknown halo dtype 'int3'"):
        HaloOptions("int3")
    with pytest.raises(PartitionError, match="coding cost"):
        HaloOptions("int8", coding={"int8": (-1.0, 0.0)})


def test_host_sharing_counts_rows_the_ranks_of_a_host_fetch_more_than_once():
    # a star: node 0 (part 0, host 0) feeds every other node, one per part; parts 2, 3 share
    # host 1 and both fetch node 0: one of their two fetches is saved by a per-host fetch
    import scipy.sparse as sp

    src = np.array([0, 0, 0])
    dst = np.array([1, 2, 3])
    adj = sp.csr_matrix((np.ones(6), (np.r_[dst, src], np.r_[src, dst])), shape=(4, 4))
    part = make_partitioner("block", num_parts=4).fit(adj)
    assert part.node_parts.tolist() == [0, 1, 2, 3]
    shared = host_sharing(adj, part, ranks_per_host=2)
    assert shared["fetched_rows"].tolist() == [2, 2]  # host 0: nodes 2, 3; host 1: node 0 twice
    assert shared["unique_rows"].tolist() == [2, 1]
    assert shared["sent_rows"].tolist() == [2, 2]
    assert shared["unique_sent_rows"].tolist() == [1, 2]

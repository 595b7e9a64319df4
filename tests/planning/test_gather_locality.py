"""The aggregation's cost per non-zero: a term per edge beside the one per value (narrow rows
cost mostly per edge), and the share of a part's reads that its most-read rows take, which
decides how many of them hit the cache (power-law hubs) — the workload's ``gather_share``."""

import numpy as np
import pytest

from gnnscale.cli.calibrate import per_edge_and_value
from planning.cache_knee import lru_hit_share
from planning.cost_model import Cluster, CostModel, ModelSpec, predict
from planning.workload import gather_share, workload_from_arrays


def test_gather_share_counts_each_parts_most_read_rows_by_hand():
    # part 0 reads row 0 three times and row 1 once; part 1 reads rows 2-5 once each
    reader = np.array([0, 0, 0, 0, 1, 1, 1, 1])
    src = np.array([0, 0, 0, 1, 2, 3, 4, 5])
    share = gather_share(reader, src, num_nodes=6, num_parts=2)
    assert share.tolist() == [[0.75, 1.0, 1.0], [0.25, 0.5, 1.0]]
    assert gather_share(np.array([0]), np.array([3]), 6, 2).tolist() == [[1.0, 1.0],
                                                                          [1.0, 1.0]]


def test_an_lru_cache_serves_uniform_reads_in_proportion_and_skewed_ones_below_the_top_rows():
    uniform = 2.0 ** np.arange(13) / 4096  # 4,096 rows read alike
    assert lru_hit_share(uniform, 1024) == pytest.approx([0.25], rel=1e-6)
    # half the reads on one row, the rest spread over 4,095: the hub always hits, the rest
    # as uniform reads do in a cache one row smaller (what holding the most-read rows gives)
    hub = np.concatenate([[0.5], 0.5 + 0.5 * (2.0 ** np.arange(1, 13) - 1) / 4095])
    assert lru_hit_share(hub, 1024) == pytest.approx([0.5 + 0.5 * 1023 / 4095], rel=1e-6)
    # reads falling off as 1 / rank (Zipf): rarely read rows pass through the cache and
    # push hotter ones out, so it serves less than holding the 1,024 most-read rows would
    counts = np.cumsum(1.0 / np.arange(1, 4097))
    zipf = counts[2 ** np.arange(13) - 1] / counts[-1]
    hits = lru_hit_share(np.stack([zipf, uniform]), 1024)
    assert hits[1] < hits[0] < np.interp(10, np.arange(13), zipf)
    assert lru_hit_share(uniform, 4096).tolist() == [1.0]  # every row read fits
    assert np.all(np.diff([lru_hit_share(zipf, r)[0] for r in (1, 10, 100, 1000, 4000)]) > 0)


def _two_parts(share) -> dict:
    return workload_from_arrays("edge_cut", [50_000, 50_000], [400_000, 400_000], [0, 0],
                                np.zeros((2, 2)), gather_share=share)


def _step(workload, cache: float) -> float:
    compute = {"gamma_edge": 1e-10, "gamma_flop": 1e-12, "gamma_elem": 1e-10,
               "gamma_gather": 1e-9, "gamma_nnz": 5e-9, "gamma_edge_mem": 3e-10,
               "gamma_nnz_mem": 2e-8}
    costs = CostModel(compute={1: compute}, layer_overhead_s=0.0, cache_bytes=cache)
    spec = ModelSpec.build("gcn", 16, 16, 4, layers=2)
    return predict(workload, spec, Cluster(ranks_per_host=1, cores_per_rank=1), costs)["step_s"]


def test_reads_crowding_onto_hubs_hit_the_cache_where_spread_reads_miss():
    levels = 17  # rows up to 2**16
    hubs = np.minimum(1.0, 0.5 + 0.05 * np.arange(levels))  # 2**0 rows take half the reads
    spread = np.minimum(1.0, 2.0 ** np.arange(levels) / 50_000)  # each row read alike
    small_cache = 64 * 1024  # 1,024 rows of 16 float32 values
    assert _step(_two_parts(np.tile(hubs, (2, 1))), small_cache) < \
        0.7 * _step(_two_parts(np.tile(spread, (2, 1))), small_cache)
    # every row fits a large cache: the reads' spread does not matter
    big_cache = 1 << 30
    assert _step(_two_parts(np.tile(hubs, (2, 1))), big_cache) == pytest.approx(
        _step(_two_parts(np.tile(spread, (2, 1))), big_cache))


def test_a_workload_without_gather_share_is_predicted_as_before_it():
    with_share = _two_parts(np.ones((2, 3)))
    without = {k: v for k, v in with_share.items() if k != "gather_share"}
    assert _step(without, 0.0) == _step(with_share, 0.0)  # no cache model: cached constants


def test_the_per_edge_and_per_value_constants_are_told_apart_by_width():
    nnz = np.array([400_000, 200_000, 100_000])
    widths = np.array([16, 64, 128])
    seconds = nnz * (5e-9 + widths * 7e-11)
    per_nnz, per_value = per_edge_and_value(nnz, widths, seconds)
    assert per_nnz == pytest.approx(5e-9) and per_value == pytest.approx(7e-11)
    assert per_edge_and_value([1000, 2000], [32, 32], [32e-7, 64e-7]) == (0.0, pytest.approx(1e-10))
    # a cost that falls with width (a noisy host) is never a negative constant: all per value
    per_nnz, per_value = per_edge_and_value([1000, 1000], [8, 64], [2e-6, 1e-6])
    assert per_nnz == 0.0 and per_value == pytest.approx(
        (8e3 * 2e-6 + 64e3 * 1e-6) / (8e3 ** 2 + 64e3 ** 2))

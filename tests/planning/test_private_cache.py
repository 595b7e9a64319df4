"""The cache each op counts on: the aggregation's gathers the knee fitted to their rate (rows
they read again within one product), every other op (streaming arrays an earlier op wrote) at
most the cache a core has to itself, its L2 (``private_cache_bytes``)."""

import pytest

from gnnscale.cli import calibrate
from partitioning.errors import PartitionError
from planning.cost_model import Cluster, CostModel, ModelSpec, predict, stream_cache
from planning.workload import workload_from_arrays

KNEE = 64 << 20  # every array of the workload below fits: 50,000 rows of 16 values, 3.2 MB
L2 = 512 << 10


def _step(compute: dict, cache: float, private: float) -> float:
    costs = CostModel(compute={1: compute}, layer_overhead_s=0.0, cache_bytes=cache,
                      private_cache_bytes=private)
    work = workload_from_arrays("edge_cut", [50_000, 50_000], [400_000, 400_000], [0, 0],
                                [[0, 0], [0, 0]])
    spec = ModelSpec.build("gcn", 16, 16, 4, layers=2)
    return predict(work, spec, Cluster(ranks_per_host=1, cores_per_rank=1), costs)["step_s"]


BASE = {"gamma_edge": 1e-10, "gamma_flop": 1e-12, "gamma_elem": 1e-10, "gamma_gather": 1e-9,
        "gamma_nnz": 5e-9, "gamma_nnz_mem": 5e-8}


def test_gathers_keep_the_knee_when_the_core_s_own_cache_is_smaller():
    # streaming ops cost the same in and beyond the cache: only the gathers feel it
    same = {**BASE, "gamma_elem_mem": 1e-10, "gamma_gather_mem": 1e-9}
    at_knee = _step(same, KNEE, 0.0)
    assert _step(same, KNEE, L2) == pytest.approx(at_knee)
    assert _step(same, L2, 0.0) > 2 * at_knee  # the gathers beyond a cache the size of L2


def test_streaming_ops_count_on_the_core_s_own_cache_only():
    # the gathers cost the same in and beyond the cache: only the streaming ops feel it
    streaming = {**BASE, "gamma_nnz_mem": 5e-9, "gamma_elem_mem": 1e-9,
                 "gamma_gather_mem": 1e-8}
    unknown = _step(streaming, KNEE, 0.0)
    own = _step(streaming, KNEE, L2)
    assert own > 1.2 * unknown
    assert own == pytest.approx(_step(streaming, L2, 0.0))  # as if the whole cache were L2
    assert _step(streaming, KNEE, 1 << 30) == pytest.approx(unknown)  # an L2 beyond the knee


def test_stream_cache_is_the_share_at_most_the_cores_own_caches():
    costs = CostModel(cache_bytes=KNEE, private_cache_bytes=L2)
    assert stream_cache(costs, 8 << 20) == L2
    assert stream_cache(costs, 8 << 20, cores_per_rank=4) == 4 * L2
    assert stream_cache(costs, 256 << 10) == 256 << 10
    assert stream_cache(CostModel(cache_bytes=KNEE), 8 << 20) == 8 << 20  # unknown: the share


def test_a_cost_model_keeps_the_private_cache_and_old_files_load_without_it():
    costs = CostModel(cache_bytes=KNEE, private_cache_bytes=L2)
    values = costs.to_dict()
    assert CostModel.from_dict(values).private_cache_bytes == L2
    del values["private_cache_bytes"]
    assert CostModel.from_dict(values).private_cache_bytes == 0.0
    with pytest.raises(PartitionError, match="private_cache_bytes must be finite and >= 0"):
        CostModel(private_cache_bytes=-1.0)


def _cache(folder, index: int, level: int, kind: str, size: str) -> None:
    entry = folder / f"index{index}"
    entry.mkdir()
    for name, text in (("level", str(level)), ("type", kind), ("size", size)):
        (entry / name).write_text(text + "\n")


def test_the_private_cache_is_the_largest_below_the_last_level(tmp_path, monkeypatch):
    monkeypatch.setattr(calibrate, "SYSFS_CACHES", tmp_path)
    assert calibrate.private_cache_bytes() == 0  # nothing to read
    assert calibrate.last_level_cache_bytes() == 32 << 20
    _cache(tmp_path, 0, 1, "Data", "32K")
    _cache(tmp_path, 1, 1, "Instruction", "64K")
    assert calibrate.private_cache_bytes() == 0  # one level: no cache below the last
    _cache(tmp_path, 2, 2, "Unified", "512K")
    _cache(tmp_path, 3, 3, "Unified", "32768K")
    assert calibrate.private_cache_bytes() == 512 << 10
    assert calibrate.last_level_cache_bytes() == 32 << 20

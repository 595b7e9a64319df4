"""``gnnscale train --profile``: the per-rank breakdown, and ``--simulate-network``."""

import json

import pytest

from mpi_launch import gnnscale_cli

pytestmark = pytest.mark.timeout(600)


def _train(tmp_path, datasets_root, name, extra):
    out = tmp_path / f"{name}.jsonl"
    result = gnnscale_cli(2, ["train", "--dataset", "cora", "--data-root", str(datasets_root),
                              "--epochs", "3", "--hidden", "32", "--profile", "--no-progress",
                              "--metrics-out", str(out), *extra])
    assert result.returncode == 0, result.stderr
    records = [json.loads(line) for line in out.read_text().splitlines()]
    return result, records[:-1], records[-1]


def test_profile_reports_every_part_per_rank_and_the_simulation_only_delays(tmp_path,
                                                                           datasets_root):
    result, epochs, summary = _train(tmp_path, datasets_root, "real", [])
    assert "profile (per rank" in result.stdout and "overlap fraction" in result.stdout
    assert [r["rank"] for r in summary["per_rank"]] == [0, 1]
    for rank in summary["per_rank"]:
        for key in ("compute_s", "halo_comm_s", "halo_exposed_s", "grad_comm_s",
                    "grad_allreduce_s", "halo_bytes_per_epoch", "peak_rss_mb"):
            assert rank[key] >= 0, key
        assert rank["grad_comm_s"] > 0  # the weight gradients went through the allreduce
        assert 0.0 <= rank["overlap_fraction"] <= 1.0
        assert rank["halo_bytes_per_epoch"] > 0 and rank["peak_rss_mb"] > 10
    # 20 ms latency per exchange; 4 exchanges per training step (2 layers, forward and
    # backward); an exchange completes at max(real completion, post + simulated delay)
    _, slow_epochs, slow = _train(tmp_path, datasets_root, "slow", ["--simulate-network",
                                                                    "20000,1"])
    for rank in slow["per_rank"]:
        assert rank["halo_comm_s"] >= 4 * 15e-3
    assert [r["loss"] for r in slow_epochs] == [r["loss"] for r in epochs]

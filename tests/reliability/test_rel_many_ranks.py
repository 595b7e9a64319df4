"""32 ranks, oversubscribed on a 2-core machine, train a small graph to the one-process result.

The ranks far outnumber the cores, so every collective waits on ranks the scheduler has not run
yet: a test of the waits (no lost wake-ups, no timeouts that are too short) more than of speed.
Each rank owns ~6 of the 200 nodes and has many halo peers (random partition).
"""

import json

import pytest

from gnnscale.cli.main import main as gnnscale_main
from mpi_launch import gnnscale_cli

pytestmark = pytest.mark.timeout(900)
RANKS = 32


def losses(path):
    return [r["loss"] for r in map(json.loads, path.read_text().splitlines())
            if not r.get("summary")]


def test_32_oversubscribed_ranks_match_one_process(tmp_path):
    args = ["train", "--dataset", "sbm", "--num-nodes", "200", "--epochs", "3", "--dropout", "0",
            "--partitioner", "random", "--no-progress", "--threads", "1"]
    assert gnnscale_main([*args, "--backend", "single",
                          "--metrics-out", str(tmp_path / "one.jsonl")]) == 0
    result = gnnscale_cli(RANKS, [*args, "--backend", "mpi",
                                  "--metrics-out", str(tmp_path / "many.jsonl")],
                          timeout=800, env={"GNNSCALE_COMM_TIMEOUT": "600"})
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"{RANKS} ranks" in result.stdout
    summary = json.loads((tmp_path / "many.jsonl").read_text().splitlines()[-1])
    assert summary["ranks"] == RANKS and len(summary["per_rank"]) == RANKS
    assert sum(r["owned"] for r in summary["per_rank"]) == 200
    one, many = losses(tmp_path / "one.jsonl"), losses(tmp_path / "many.jsonl")
    assert len(many) == 3
    assert many == pytest.approx(one, rel=1e-5)

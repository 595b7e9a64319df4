"""Training from a partition store equals training with in-memory partitioning."""

import json
import shutil

import pytest

from mpi_launch import gnnscale_cli, gnnscale_cli_batch

pytestmark = pytest.mark.timeout(600)


def epoch_records(path, keys=("loss",)):
    """Per-epoch ``keys`` of a ``--metrics-out`` file (the summary line left out)."""
    records = [json.loads(line) for line in path.read_text().splitlines()]
    return [{key: r[key] for key in keys} for r in records if "summary" not in r]


def losses(path):
    return [r["loss"] for r in epoch_records(path)]


def partition_cora(datasets_root, store, method, parts):
    """``gnnscale partition`` of Cora into ``parts`` with ``method`` (the default seed)."""
    made = gnnscale_cli(None, ["partition", "--dataset", "cora", "--data-root",
                               str(datasets_root), "--method", method, "--parts", str(parts),
                               "--out", str(store)])
    assert made.returncode == 0, made.stderr
    return store


def test_store_training_matches_in_memory(tmp_path, datasets_root):
    store = partition_cora(datasets_root, tmp_path / "store", "metis", 3)
    # a copy with a truncated part, trained last in the same launch: the runs before it read
    # the intact store, and a truncated file is found by reading it, whatever they left behind
    damaged = shutil.copytree(store, tmp_path / "damaged")
    (damaged / "part-00001.npz").write_bytes(b"truncated")
    common = ["--epochs", "4", "--dropout", "0", "--no-progress", "--model", "sage"]
    from_store, in_memory, broken = gnnscale_cli_batch(3, [
        ["train", "--partitions", store, *common, "--metrics-out", tmp_path / "a.jsonl"],
        ["train", "--dataset", "cora", "--data-root", datasets_root, "--partitioner", "metis",
         *common, "--metrics-out", tmp_path / "b.jsonl"],
        ["train", "--partitions", damaged, "--epochs", "2"]])
    assert from_store.returncode == 0, from_store.stderr
    assert in_memory.returncode == 0, in_memory.stderr
    assert losses(tmp_path / "a.jsonl") == pytest.approx(losses(tmp_path / "b.jsonl"), rel=1e-6)

    wrong = gnnscale_cli(2, ["train", "--partitions", str(store), "--epochs", "2"])
    assert wrong.returncode == 2 and "Traceback" not in wrong.stderr
    assert "has 3 parts but 2 ranks were started" in wrong.stderr

    assert broken.returncode == 2 and "Traceback" not in broken.stderr
    assert "part-00001.npz" in broken.stderr

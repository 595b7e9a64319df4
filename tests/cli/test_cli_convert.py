"""``gnnscale convert`` end to end: the folder trains, partitions and checks like its source."""

import json
import os

import numpy as np
import pytest

from mpi_launch import concurrently, gnnscale_cli, gnnscale_cli_batch
from test_cli_train import (PROFILE_IMPORTS, assert_no_torch, assert_one_line_error,
                            without_import_profile)

pytestmark = pytest.mark.timeout(900)

SOURCE = ["--dataset", "rmat", "--dataset-option", "scale=9", "--dataset-option",
          "num_features=8"]
TRAIN = ["--epochs", "4", "--dropout", "0", "--hidden", "8", "--no-progress"]


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    folder = tmp_path_factory.mktemp("conv") / "deep" / "rmat9"  # parents are created
    result = gnnscale_cli(None, ["convert", *SOURCE, "--out", str(folder)])
    assert result.returncode == 0, result.stderr
    assert "peak memory" in result.stdout and f"--dataset {folder}" in result.stdout
    return folder


def losses(path):
    return np.array([r["loss"] for r in map(json.loads, path.read_text().splitlines())
                     if "summary" not in r])


def train(nprocs, runs, env=None) -> list[np.ndarray]:
    """Each ``(dataset_args, metrics_file)`` of ``runs`` trained, one after the other in one
    launch of ``nprocs`` ranks; the losses of each."""
    results = gnnscale_cli_batch(nprocs, [["train", *dataset_args, *TRAIN, "--metrics-out", out]
                                          for dataset_args, out in runs], env=env)
    for result in results:
        assert result.returncode == 0, result.stderr
    return [losses(out) for _, out in runs]


def test_info_checks_every_checksum(converted):
    result = gnnscale_cli(None, ["info", str(converted)])
    assert result.returncode == 0, result.stderr
    assert "every sha256 checked" in result.stdout and "512 nodes" in result.stdout


def test_training_on_the_folder_equals_training_on_its_source(converted, tmp_path):
    one, folder = train(None, [(SOURCE, tmp_path / "a.jsonl"),
                               (["--dataset", converted], tmp_path / "b.jsonl")])
    np.testing.assert_array_equal(folder, one)
    # three ranks: the mapped folder and the source (loaded once per host into a temporary
    # folder that is gone after the run) give the same run, and both match one process
    scratch = tmp_path / "tmpdir"
    scratch.mkdir()
    from_source, mapped = train(3, [(SOURCE, tmp_path / "d.jsonl"),
                                    (["--dataset", converted], tmp_path / "c.jsonl")],
                                env={"TMPDIR": str(scratch)})
    np.testing.assert_array_equal(mapped, from_source)
    np.testing.assert_allclose(mapped, one, rtol=5e-5)
    assert [name for name in os.listdir(scratch) if name.startswith("gnnscale")] == []


def test_partition_from_the_folder_then_train(converted, tmp_path):
    store = tmp_path / "store"
    result = gnnscale_cli(None, ["partition", "--dataset", str(converted), "--parts", "3",
                                 "--out", str(store)])
    assert result.returncode == 0, result.stderr
    assert "done in" in result.stdout and "peak memory" in result.stdout
    stored, mapped = train(3, [(["--partitions", store], tmp_path / "e.jsonl"),
                               (["--dataset", converted], tmp_path / "f.jsonl")])
    np.testing.assert_array_equal(stored, mapped)


def test_bad_input_is_one_line(converted, tmp_path):
    damaged = tmp_path / "damaged"
    exists, missing, too_many, copied = concurrently(
        lambda: gnnscale_cli(None, ["convert", *SOURCE, "--out", str(converted)]),
        lambda: gnnscale_cli(None, ["convert", "--dataset", "/no/such/graph", "--out",
                                    str(tmp_path / "x")], env=PROFILE_IMPORTS),
        lambda: gnnscale_cli(None, ["partition", "--dataset", str(converted), "--parts", "600",
                                    "--out", str(tmp_path / "s")]),
        lambda: gnnscale_cli(None, ["convert", "--dataset", str(converted), "--out",
                                    str(damaged)]))
    assert_one_line_error(exists, str(converted), "already exists")
    assert_no_torch(missing)  # refused before anything heavy loads
    assert_one_line_error(without_import_profile(missing), "/no/such/graph")
    assert not (tmp_path / "x").exists()
    assert_one_line_error(too_many, "600")
    assert copied.returncode == 0, copied.stderr
    with open(damaged / "indptr.npy", "r+b") as fh:
        fh.truncate(64)
    one, two, info = concurrently(
        *(lambda n=nprocs: gnnscale_cli(n, ["train", "--dataset", str(damaged), *TRAIN])
          for nprocs in (None, 2)),
        lambda: gnnscale_cli(None, ["info", str(damaged)]))
    for result in (one, two):
        assert_one_line_error(result, "indptr.npy", "truncated")
    assert_one_line_error(info, "indptr.npy")

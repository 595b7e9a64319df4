"""``gnnscale datasets list|download`` and ``--download`` / the not-found hint of train,
partition and tune, against a local HTTP mirror on 127.0.0.1 (never the internet)."""

import json
import sys

import pytest

from http_mirror import MirrorServer, mirror_of_shipped
from mpi_launch import gnnscale_cli, mpi_env, run_command
from test_cli_train import assert_one_line_error

pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def mirror(tmp_path_factory):
    with MirrorServer(mirror_of_shipped(tmp_path_factory.mktemp("mirror"))) as server:
        yield server


def offline(extra=None) -> dict:
    """Environment for the CLI: downloads go to a closed local port unless a test says where."""
    env = {"GNNSCALE_DOWNLOAD_BASE_URL": "http://127.0.0.1:9", **(extra or {})}
    return env


def test_list_shows_every_source_and_where_each_dataset_is(tmp_path, mirror):
    result = gnnscale_cli(None, ["datasets", "list", "--data-root", str(tmp_path)],
                          env=offline())
    assert result.returncode == 0, result.stderr
    rows = {line.split()[0]: line for line in result.stdout.splitlines()[1:]}
    assert {"cora", "pubmed", "tolokers", "email-enron", "ogbn-arxiv",
            "ogbn-papers100M"} <= set(rows)
    assert "[shipped: " in rows["cora"] and "[not downloaded]" in rows["pubmed"]
    fetched = gnnscale_cli(None, ["datasets", "download", "citeseer", "--data-root",
                                  str(tmp_path), "--base-url", mirror.url], env=offline())
    assert fetched.returncode == 0, fetched.stderr
    assert f"citeseer: installed in {tmp_path / 'CiteSeer'}" in fetched.stdout
    assert "ind.citeseer.allx" in fetched.stderr and "100%" in fetched.stderr  # progress bars
    listed = gnnscale_cli(None, ["datasets", "list", "--data-root", str(tmp_path), "--json"])
    status = {row["name"]: row["status"] for row in json.loads(listed.stdout)}
    assert status["citeseer"] == f"on disk: {tmp_path / 'CiteSeer' / 'raw'}"


def test_download_checks_every_name_before_fetching(tmp_path, mirror):
    result = gnnscale_cli(None, ["datasets", "download", "cora", "coraa", "--data-root",
                                 str(tmp_path), "--base-url", mirror.url], env=offline())
    assert_one_line_error(result, "no downloadable dataset named 'coraa'")
    assert not (tmp_path / "Cora").exists()


def test_interrupted_download_is_one_line_and_the_rerun_resumes(tmp_path, mirror):
    mirror.fail("heterophilous/tolokers.npz", "truncate", at=400_000)
    argv = ["datasets", "download", "tolokers", "--data-root", str(tmp_path), "--no-progress"]
    first = gnnscale_cli(None, argv, env=offline({"GNNSCALE_DOWNLOAD_BASE_URL": mirror.url}))
    assert_one_line_error(first, "stopped after 400,000 of 1,329,769 bytes", "resume")
    second = gnnscale_cli(None, argv, env=offline({"GNNSCALE_DOWNLOAD_BASE_URL": mirror.url}))
    assert second.returncode == 0, second.stderr
    assert mirror.requests[-1] == ("heterophilous/tolokers.npz", "bytes=400000-")


@pytest.mark.parametrize("command", [
    ["train", "--epochs", "1"],
    ["partition", "--parts", "2", "--out", "OUT"],
    ["tune", "--parts", "2", "--out", "OUT"],
])
def test_missing_registered_dataset_says_how_to_download_it(tmp_path, command):
    argv = [a.replace("OUT", str(tmp_path / "out")) for a in command]
    result = gnnscale_cli(None, [*argv, "--dataset", "pubmed", "--data-root", str(tmp_path)],
                          env=offline())
    assert_one_line_error(result, "dataset 'pubmed' not found under data root",
                          f"gnnscale datasets download pubmed --data-root {tmp_path}",
                          "--download")


def test_train_with_download_fetches_then_trains(tmp_path, mirror):
    result = gnnscale_cli(None, ["train", "--dataset", "cora", "--data-root", str(tmp_path),
                                 "--download", "--epochs", "2", "--no-progress"],
                          env=offline({"GNNSCALE_DOWNLOAD_BASE_URL": mirror.url}))
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "Cora" / "raw" / "ind.cora.graph").is_file()
    assert "2708" in result.stdout


def test_partition_with_download_on_two_ranks_fetches_once(tmp_path, mirror):
    served = len(mirror.requests)
    result = gnnscale_cli(2, ["partition", "--dataset", "minesweeper", "--data-root",
                              str(tmp_path / "data"), "--download", "--parts", "2", "--out",
                              str(tmp_path / "parts")],
                          env=offline({"GNNSCALE_DOWNLOAD_BASE_URL": mirror.url}))
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "data" / "minesweeper" / "raw" / "minesweeper.npz").is_file()
    assert mirror.requests[served:] == [("heterophilous/minesweeper.npz", None)]


def test_named_dataset_falls_back_to_the_shipped_copy_only_without_data_root(tmp_path):
    env = mpi_env(offline())
    env.pop("GNNSCALE_DATA_ROOT", None)
    cli = [sys.executable, "-m", "gnnscale", "train", "--dataset", "cora", "--epochs", "1",
           "--no-progress"]
    shipped = run_command(cli, 300, env=env, cwd=tmp_path)  # ./data does not exist here
    assert shipped.returncode == 0, shipped.stderr
    explicit = run_command([*cli, "--data-root", str(tmp_path)], 300, env=env, cwd=tmp_path)
    assert_one_line_error(explicit, f"not found under data root {tmp_path}")

"""What a user meets on the command line: option errors before any data is loaded, what
``--resume`` says when there is nothing to resume, outputs whose folders do not exist yet,
``--version``, help text, the default metric of binary tasks, ``GNNSCALE_MAX_EPOCHS``."""

import json
import re

import pytest

from mpi_launch import gnnscale_cli, gnnscale_cli_batch, gnnscale_cli_many
from test_cli_train import (PROFILE_IMPORTS, assert_no_torch, assert_one_line_error,
                            assert_one_line_errors, without_import_profile)

pytestmark = pytest.mark.timeout(600)

SMALL = ["--dataset", "sbm", "--num-nodes", "300", "--threads", "1"]
MISSING = ["--dataset", "/no/such/dataset"]  # loading it would fail naming the path

EARLY_ERRORS = [
    (["--checkpoint-every", "2"], ["--checkpoint-every 2 needs --checkpoint-dir"]),
    (["--resume"], ["--resume needs --checkpoint-dir"]),
    (["--partitions", "/no/store", "--balance", "nodes,edges"], ["--balance does not apply"]),
    (["--partitioner", "ldg", "--balance", "nodes"], ["--balance applies to --partitioner", "not 'ldg'"]),
]


@pytest.mark.parametrize("nprocs", [None, 2])
def test_option_errors_come_before_the_dataset_is_loaded(nprocs):
    profiled = nprocs is None  # one process lists its imports (see test_cli_train)
    results = gnnscale_cli_many(nprocs, [["train", *MISSING, *extra]
                                         for extra, _ in EARLY_ERRORS], timeout=120,
                                env=PROFILE_IMPORTS if profiled else None)
    results_shown = [without_import_profile(r) for r in results]
    assert_one_line_errors(EARLY_ERRORS, results_shown)
    for result in results_shown:  # the data was never touched
        assert "/no/such/dataset" not in result.stderr, result.args
    if profiled:  # nor torch loaded
        for result in results:
            assert_no_torch(result)


def test_resume_with_no_checkpoint_says_so_and_starts_at_epoch_one(tmp_path):
    folder = tmp_path / "ck_typo"
    result = gnnscale_cli(None, ["train", *SMALL, "--epochs", "2", "--checkpoint-dir",
                                 str(folder), "--resume"])
    assert result.returncode == 0, result.stderr
    assert f"no checkpoint found in {folder}; starting at epoch 1" in result.stdout
    assert "epoch    1 " in result.stdout and (folder / "latest.pt").is_file()


def test_every_output_creates_its_folders(tmp_path, datasets_root):
    out = tmp_path / "new"
    result, plot, tune = gnnscale_cli_batch(None, [
        ["train", "--dataset", "cora", "--data-root", datasets_root, "--epochs", "2",
         "--metrics-out", out / "m" / "m.jsonl", "--checkpoint-dir", out / "c" / "ck",
         "--plot", out / "p" / "t.png", "--predictions-out", out / "q" / "pred.npz"],
        ["plot", out / "m" / "m.jsonl", "--out", out / "r" / "s" / "m.png"],
        ["tune", *SMALL[:4], "--methods", "metis,random", "--parts", "2,4",
         "--out", out / "t" / "u" / "sweep"]])
    assert result.returncode == 0, result.stderr
    for path in ("m/m.jsonl", "c/ck/latest.pt", "p/t.png", "q/pred.npz"):
        assert (out / path).is_file(), path
    assert plot.returncode == 0 and (out / "r" / "s" / "m.png").is_file(), plot.stderr
    assert tune.returncode == 0, tune.stderr
    assert (out / "t" / "u" / "sweep.json").is_file() and (out / "t" / "u" / "sweep.png").is_file()


def test_version_and_help_text():
    commands = ("train", "partition", "tune", "info", "plot", "convert")
    version, *helps = gnnscale_cli_many(None, [["--version"], *([c, "--help"] for c in commands)])
    assert version.returncode == 0 and re.fullmatch(r"gnnscale \S+\n", version.stdout)
    for command, result in zip(commands, helps, strict=True):
        text = result.stdout
        assert "(default: None)" not in text, command
        options = re.split(r"\n  (?=-)", text)  # one chunk per option's help
        for chunk in options:
            assert chunk.count("default:") <= 1, chunk  # the default said once


def test_header_and_errors_read_well(tmp_path, datasets_root):
    one, missing = gnnscale_cli_many(None, [
        ["train", *SMALL, "--epochs", "1"],
        ["train", "--dataset", "cora", "--data-root", str(tmp_path), "--epochs", "1"]],
        env=PROFILE_IMPORTS)
    assert ", 1 rank" in one.stdout and "1 ranks" not in one.stdout
    assert_no_torch(missing)  # a named dataset that is not there: refused before torch loads
    missing = without_import_profile(missing)
    assert_one_line_error(missing, "not found under data root", "--data-root")
    assert "root=" not in missing.stderr  # Python's argument is not the command line's


def test_binary_tasks_pick_the_best_epoch_by_roc_auc_and_say_so(datasets_root):
    args = ["train", "--dataset", "minesweeper", "--data-root", str(datasets_root), "--epochs",
            "3", "--threads", "1"]
    default, chosen = gnnscale_cli_many(None, [args, [*args, "--metric", "acc"]])
    assert default.returncode == 0, default.stderr
    head = default.stdout.splitlines()[:4]
    assert any("picked by validation ROC AUC" in line for line in head), head
    assert "best val_auc" in default.stdout and "val_auc" in default.stdout.split("epoch    1")[1]
    assert "ROC AUC" not in chosen.stdout and "best val_acc" in chosen.stdout


def test_max_epochs_variable_caps_every_run(tmp_path):
    metrics = tmp_path / "m.jsonl"
    capped = gnnscale_cli(None, ["train", *SMALL, "--epochs", "50", "--metrics-out",
                                 str(metrics)], env={"GNNSCALE_MAX_EPOCHS": "2"})
    assert capped.returncode == 0, capped.stderr
    assert "GNNSCALE_MAX_EPOCHS=2: training 2 of the 50 epochs asked for" in capped.stdout
    assert [json.loads(line).get("epoch") for line in metrics.read_text().splitlines()][:-1] \
        == [1, 2]
    bad = gnnscale_cli(None, ["train", *SMALL], env={"GNNSCALE_MAX_EPOCHS": "many"})
    assert_one_line_error(bad, "GNNSCALE_MAX_EPOCHS='many'")

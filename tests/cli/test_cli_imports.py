"""Commands that need no torch never load it (it costs seconds of CPU): the parser, ``--help``,
the argument and output checks, and the commands that only read and write files
(docs/architecture.md, "Layers and what each may import")."""

import json

import pytest

from mpi_launch import gnnscale_cli, gnnscale_cli_many
from test_cli_plots import a_run
from test_cli_train import PROFILE_IMPORTS, assert_no_torch, imported, without_import_profile

pytestmark = pytest.mark.timeout(600)


def run_profiled(args_list: list[list[str]]) -> list:
    """Each command of ``args_list`` run as ``python -m gnnscale ARGS``, its imports listed
    on stderr (``-X importtime``)."""
    return gnnscale_cli_many(None, args_list, env=PROFILE_IMPORTS)


def test_help_argument_errors_and_output_checks_load_no_torch(tmp_path):
    commands = {  # arguments -> (exit code, a word of what it prints)
        ("--help",): (0, "usage: gnnscale"),
        ("train", "--help"): (0, "--staleness"),
        ("train", "--epochs", "-3"): (2, "--epochs"),
        ("train", "--checkpoint-every", "3"): (2, "--checkpoint-dir"),  # the command's check
        ("train", "--metrics-out", str(tmp_path)): (2, "--metrics-out"),  # the output check
        ("train", "--dataset", "nosuchname"): (2, "nosuchname"),  # the dataset check
        ("tune", "--calibrate", "--dataset", "/no/such/dataset", "--out", str(tmp_path / "t")):
            (2, "/no/such/dataset"),  # the calibration would load torch
        ("datasets", "list"): (0, "cora"),
        ("partition", "--help"): (0, "--parts"),
    }
    results = run_profiled([list(args) for args in commands])
    for (args, (code, word)), result in zip(commands.items(), results):
        assert result.returncode == code, (args, result.stderr[-2000:])
        shown = result.stdout + without_import_profile(result).stderr
        assert word in shown, (args, shown)
        assert_no_torch(result)


def test_partition_info_and_plot_load_no_torch(tmp_path):
    store, metrics = tmp_path / "store", tmp_path / "m.jsonl"
    metrics.write_text("".join(json.dumps(record) + "\n" for record in a_run()))
    partition, plot = run_profiled([
        ["partition", "--dataset", "cora", "--parts", "2", "--out", str(store)],
        ["plot", str(metrics), "--out", str(tmp_path / "m.png")]])
    assert partition.returncode == 0 and plot.returncode == 0, (partition.stderr[-2000:],
                                                                 plot.stderr[-2000:])
    assert (tmp_path / "m.png").is_file()
    info, = run_profiled([["info", str(store)]])
    assert info.returncode == 0 and "edge cut" in info.stdout, info.stderr[-2000:]
    for result in (partition, plot, info):
        assert_no_torch(result)


def test_a_command_that_trains_does_load_torch(tmp_path):
    """The check above can see torch: ``train`` imports it (in its ``run``)."""
    result = gnnscale_cli(None, ["train", "--dataset", "cora", "--epochs", "1", "--no-progress",
                                 "--threads", "1"], env=PROFILE_IMPORTS)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "torch" in imported(result)

"""``gnnscale train`` end to end: help, metrics file, and one-line errors on bad input."""

import json
import re
import shutil
import subprocess

import pytest

from mpi_launch import gnnscale_cli, gnnscale_cli_many

pytestmark = pytest.mark.timeout(600)

#: the environment under which a command lists every module it imports on stderr
PROFILE_IMPORTS = {"PYTHONPROFILEIMPORTTIME": "1"}
IMPORT_LINE = re.compile(r"^import time:\s+\d+ \|\s+\d+ \|( *)(\S+)$", re.M)


def imported(result) -> set:
    """The modules a command run with :data:`PROFILE_IMPORTS` imported."""
    return {match.group(2) for match in IMPORT_LINE.finditer(result.stderr)}


def assert_no_torch(result) -> None:
    modules = imported(result)
    assert "gnnscale.cli.main" in modules, result.stderr[-2000:]  # the profile is there
    assert "torch" not in modules, f"{result.args[3:]} imported torch"


def without_import_profile(result) -> subprocess.CompletedProcess:
    """``result`` with the import profile taken out of its stderr (whose lines name modules
    such as ``gnnscale.errors``)."""
    stderr = "".join(line for line in result.stderr.splitlines(keepends=True)
                     if not line.startswith("import time:"))
    return subprocess.CompletedProcess(result.args, result.returncode, result.stdout, stderr)


def assert_one_line_error(result, *fragments):
    """Exit code 2, no traceback, and our error line exactly once naming every fragment."""
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr, result.stderr
    lines = [line for line in result.stderr.splitlines() if "error" in line and "gnnscale" in line]
    assert len(lines) == 1, result.stderr
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])


def assert_one_line_errors(cases, results):
    """:func:`assert_one_line_error` for each ``(extra, fragments)`` case and its launch's
    result; one failure names every case that failed."""
    failures = []
    for (extra, fragments), result in zip(cases, results, strict=True):
        try:
            assert_one_line_error(result, *fragments)
        except AssertionError as exc:
            failures.append(f"{' '.join(extra)}: {exc!r}")
    assert not failures, "\n".join(failures)


def test_help_lists_every_option_with_its_default():
    top, result = gnnscale_cli_many(None, [["--help"], ["train", "--help"]])
    assert top.returncode == 0 and "train" in top.stdout
    assert result.returncode == 0
    for option, default in [("--epochs", "200"), ("--hidden", "16"), ("--lr", "0.01"),
                            ("--weight-decay", "0.0005"), ("--partitioner", "metis"),
                            ("--model", "gcn"), ("--dropout", "0.5"), ("--layers", "2")]:
        assert option in result.stdout
        assert f"(default: {default})" in result.stdout.replace("\n", " "), option


@pytest.mark.parametrize("gemm", ["auto", "torch"])
def test_metrics_file_has_one_line_per_epoch_and_a_summary(tmp_path, datasets_root, gemm):
    out = tmp_path / "m.jsonl"
    result = gnnscale_cli(None, ["train", "--dataset", "cora", "--data-root", str(datasets_root),
                                 "--epochs", "3", "--metrics-out", str(out), "--no-progress"],
                          env={"GNNSCALE_GEMM": gemm})
    assert result.returncode == 0, result.stderr
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["epoch"] for r in records[:3]] == [1, 2, 3]
    for record in records[:3]:
        assert {"epoch", "loss", "train_acc", "val_acc", "test_acc", "epoch_time_s"} <= set(record)
    assert records[3]["summary"] is True and records[3]["epochs"] == 3
    # the summary names the dense products the run used (gnnscale.nn.gemm's choice here)
    from gnnscale.nn import gemm as gemm_module

    try:
        expected = "onednn" if gemm_module.set_backend(gemm) else "torch"
    finally:
        gemm_module.set_backend(None)
    assert records[3]["dense_products"] == expected
    assert "where an epoch's time went" in result.stdout


BAD_ARGS = [
    (["--model", "gat9"], ["--model", "gat9"]),
    (["--partitioner", "magic"], ["--partitioner", "magic"]),
    (["--epochs", "0"], ["--epochs", "0"]),
    (["--epochs", "-3"], ["--epochs", "-3"]),
    (["--dataset", "/no/such/dataset"], ["/no/such/dataset"]),
    (["--dataset", "nosuchname"], ["nosuchname"]),
    (["--epoch", "3"], ["--epoch"]),  # prefixes are not expanded: a typo is an error
]


@pytest.mark.parametrize("nprocs", [None, 2])
def test_bad_arguments_fail_with_one_line_on_every_rank(nprocs):
    # one process lists its imports (the ranks' lists would interleave on mpirun's stderr)
    profiled = nprocs is None
    results = gnnscale_cli_many(nprocs, [["train", "--epochs", "2", *extra]
                                         for extra, _ in BAD_ARGS], timeout=120,
                                env=PROFILE_IMPORTS if profiled else None)
    assert_one_line_errors(BAD_ARGS, [without_import_profile(r) for r in results])
    if profiled:  # every one refused before torch loads, the unknown dataset's too
        for result in results:
            assert_no_torch(result)


def test_planetoid_folder_with_a_missing_file(tmp_path, datasets_root):
    folder = tmp_path / "Cora"
    shutil.copytree(datasets_root / "Cora", folder)
    (folder / "raw" / "ind.cora.tx").unlink()
    result = gnnscale_cli(2, ["train", "--dataset", str(folder), "--epochs", "2"], timeout=120)
    assert_one_line_error(result, "ind.cora.tx")


def test_more_ranks_than_nodes(tmp_path):
    edges = tmp_path / "tiny.txt"
    edges.write_text("# three nodes\n0\t1\n1\t2\n")
    result = gnnscale_cli(4, ["train", "--dataset", str(edges), "--epochs", "2"], timeout=120)
    assert_one_line_error(result, "4 ranks", "3 nodes")

"""Bad input wherever it enters: one clear line naming the problem and the value, exit code 2,
no traceback, no hang.

Most cases run ``gnnscale train`` in this process (``gnnscale.cli.main.main``: the same entry
point, parser and error handling as the console script, without paying a Python start-up per
case). A few run under ``mpirun`` to show every rank stops with code 2: a bad file on 2 ranks,
more ranks than nodes or parts, ``--backend single`` under a 2-rank launcher, and mismatched
package versions across ranks.

Unreadable files: the tests run as root, for whom ``chmod 000`` changes nothing, so that case
drops the effective uid to ``nobody`` (``os.seteuid``) around the call and restores it after.
"""

import bz2
import gzip
import os
from pathlib import Path

import numpy as np
import pytest

from gnnscale.cli import env_check
from gnnscale.cli.main import main as gnnscale_main
from mpi_launch import gnnscale_cli, run_python_mpi

pytestmark = pytest.mark.timeout(300)

N = 12  # nodes of the small graphs written below


def graph_arrays(**changes):
    """A valid heterophilous-graphs npz content (a ring of N nodes, 2 classes), then changes."""
    rng = np.random.default_rng(0)
    ring = np.arange(N)
    arrays = {"node_features": rng.normal(size=(N, 4)).astype(np.float32),
              "node_labels": (ring % 2).astype(np.int64),
              "edges": np.stack([ring, (ring + 1) % N], axis=1).astype(np.int64),
              "train_masks": (ring < 6)[None, :], "val_masks": ((ring >= 6) & (ring < 9))[None, :],
              "test_masks": (ring >= 9)[None, :]}
    for key, value in changes.items():
        if callable(value):
            value = value(arrays[key].copy())
        arrays[key] = value
    return arrays


def set_item(index, value):
    def change(array):
        array[index] = value
        return array
    return change


GRAPH_CASES = {  # name: (changes to the arrays, fragments the error line must hold)
    "edge id out of range": (dict(edges=set_item((3, 1), N + 5)), ["17", "out of range"]),
    "negative edge id": (dict(edges=set_item((2, 0), -4)), ["-4", "out of range"]),
    "float edge ids": (dict(edges=lambda e: e.astype(np.float64)), ["edges", "float64"]),
    "string features": (dict(node_features=np.full((N, 4), "a")), ["x must hold numbers", "<U1"]),
    "fewer labels than nodes": (dict(node_labels=lambda y: y[:-1]), ["(12, 4)", "(11,)"]),
    "mask of wrong length": (dict(val_masks=np.ones((1, N + 1), bool)), ["val_masks", "13"]),
    "edges of wrong shape": (dict(edges=np.zeros((5, 3), np.int64)), ["edges", "(5, 3)"]),
    "NaN feature": (dict(node_features=set_item((4, 2), np.nan)), ["NaN or Inf", "row 4"]),
    "Inf feature": (dict(node_features=set_item((7, 0), np.inf)), ["NaN or Inf", "row 7"]),
    "label below -1": (dict(node_labels=set_item(5, -3)), ["label -3", "outside"]),
    "empty train mask": (dict(train_masks=np.zeros((1, N), bool)), ["train_mask is empty"]),
    "unlabeled training node": (dict(node_labels=set_item(1, -1)), ["train_mask", "unlabeled"]),
    "overlapping splits": (dict(val_masks=np.ones((1, N), bool)), ["overlap"]),
}


def write_npz(path, arrays):
    np.savez(path, **arrays)
    return path


def run_in_process(argv, capsys):
    """``gnnscale <argv>`` in this process: (exit code, stdout, stderr)."""
    try:
        code = gnnscale_main(argv)
    except SystemExit as exc:  # argparse errors exit from inside the parser
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_line(code, err, fragments, where=""):
    assert code == 2, (where, code, err)
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, (where, err)
    for fragment in fragments:
        assert fragment in lines[0], (where, fragment, lines[0])


TRAIN = ["train", "--epochs", "1", "--no-progress", "--backend", "single"]


@pytest.mark.parametrize("case", sorted(GRAPH_CASES))
def test_bad_graph_arrays(case, tmp_path, capsys):
    changes, fragments = GRAPH_CASES[case]
    path = write_npz(tmp_path / "graph.npz", graph_arrays(**changes))
    code, _, err = run_in_process([*TRAIN, "--dataset", str(path)], capsys)
    assert_one_line(code, err, fragments, case)


def test_the_valid_graph_trains(tmp_path, capsys):
    path = write_npz(tmp_path / "graph.npz", graph_arrays())
    code, out, err = run_in_process([*TRAIN, "--dataset", str(path)], capsys)
    assert code == 0, err
    assert "done: 1 epochs" in out


def _files(tmp: Path) -> dict:
    """name -> (path to pass as --dataset, fragments of the expected error line)."""
    good = write_npz(tmp / "good.npz", graph_arrays())
    blob = good.read_bytes()
    cases = {"missing file": (tmp / "absent.npz", ["absent.npz", "no such file"]),
             "missing folder": (tmp / "nowhere", ["nowhere", "no such file"])}
    (tmp / "text.npz").write_text("node_features,edges\n1,2\n")
    cases["text named .npz"] = (tmp / "text.npz", ["text.npz", "not a readable .npz"])
    (tmp / "truncated.npz").write_bytes(blob[: len(blob) // 2])
    cases["truncated npz"] = (tmp / "truncated.npz", ["truncated.npz"])
    (tmp / "gzipped.npz").write_bytes(gzip.compress(blob))
    cases["gzip named .npz"] = (tmp / "gzipped.npz", ["gzipped.npz", "not a readable .npz"])
    (tmp / "edges.csv").write_text("0,1\n1,2\n")
    cases["unknown extension"] = (tmp / "edges.csv", ["edges.csv", "cannot tell the format"])
    (tmp / "plain.txt.gz").write_text("0 1\n1 2\n")
    cases["plain text named .gz"] = (tmp / "plain.txt.gz", ["plain.txt.gz"])
    (tmp / "bzip.txt.gz").write_bytes(bz2.compress(b"0 1\n1 2\n"))
    cases["bzip2 named .gz"] = (tmp / "bzip.txt.gz", ["bzip.txt.gz"])
    edges = np.random.default_rng(2).integers(0, 10**6, size=(5000, 2))
    packed = gzip.compress("\n".join(f"{a} {b}" for a, b in edges).encode())
    (tmp / "cut.txt.gz").write_bytes(packed[: len(packed) // 2])
    cases["truncated gzip"] = (tmp / "cut.txt.gz", ["cut.txt.gz"])
    (tmp / "words.txt").write_text("alice bob\nbob carol\n")
    cases["edge list of words"] = (tmp / "words.txt", ["words.txt"])
    (tmp / "random.npz").write_bytes(np.random.default_rng(1).bytes(4096))
    cases["random bytes"] = (tmp / "random.npz", ["random.npz"])
    empty = tmp / "empty"
    empty.mkdir()
    cases["empty folder"] = (empty, ["empty", "no dataset"])
    return cases


FILE_CASES = ["missing file", "missing folder", "text named .npz", "truncated npz",
              "gzip named .npz", "unknown extension", "plain text named .gz", "bzip2 named .gz",
              "truncated gzip", "edge list of words", "random bytes", "empty folder"]


@pytest.mark.parametrize("case", FILE_CASES)
def test_bad_files(case, tmp_path, capsys):
    path, fragments = _files(tmp_path)[case]
    code, _, err = run_in_process([*TRAIN, "--dataset", str(path)], capsys)
    assert_one_line(code, err, fragments, case)


@pytest.mark.parametrize("locked", ["file", "folder"])
def test_unreadable_file(locked, tmp_path, capsys):
    folder = tmp_path / "inner"
    folder.mkdir()
    path = write_npz(folder / "locked.npz", graph_arrays())
    # as root first, so every module is imported (nobody cannot read this Python's stdlib)
    assert run_in_process([*TRAIN, "--dataset", str(path)], capsys)[0] == 0
    for parent in (tmp_path, *tmp_path.parents):
        if parent.stat().st_mode & 0o001 == 0:
            parent.chmod(parent.stat().st_mode | 0o001)  # pytest's own folders are 0700
    (path if locked == "file" else folder).chmod(0)
    as_root = os.geteuid() == 0
    if as_root:
        os.setegid(65534)  # root reads anything; "nobody" cannot read a mode-000 file
        os.seteuid(65534)
    try:
        code, _, err = run_in_process([*TRAIN, "--dataset", str(path)], capsys)
    finally:
        if as_root:
            os.seteuid(0)
            os.setegid(0)
        folder.chmod(0o755)
    what = "cannot be read" if locked == "file" else "cannot be reached"
    assert_one_line(code, err, ["locked.npz", what, "Permission denied"], locked)


ARG_CASES = {  # extra arguments: fragments of the error line
    "unknown option": (["--epochz", "3"], ["unrecognized arguments", "--epochz"]),
    "unknown model": (["--model", "gat9"], ["--model", "gat9"]),
    "unknown partitioner": (["--partitioner", "magic"], ["--partitioner", "magic"]),
    "unknown backend": (["--backend", "nccl"], ["--backend", "nccl"]),
    "unknown dataset name": (["--dataset", "nosuchname"], ["nosuchname"]),
    "zero epochs": (["--epochs", "0"], ["--epochs", "0"]),
    "negative hidden": (["--hidden", "-4"], ["--hidden", "-4"]),
    "word for hidden": (["--hidden", "wide"], ["--hidden", "wide"]),
    "negative lr": (["--lr", "-0.1"], ["--lr", "-0.1"]),
    "NaN lr": (["--lr", "nan"], ["--lr", "nan"]),
    "dropout 1.5": (["--dropout", "1.5"], ["--dropout", "1.5"]),
    "zero layers": (["--layers", "0"], ["--layers", "0"]),
    "zero nodes": (["--num-nodes", "0"], ["--num-nodes", "0"]),
    "checkpoint every 0": (["--checkpoint-every", "0"], ["--checkpoint-every", "0"]),
    "resume without dir": (["--resume"], ["--resume", "--checkpoint-dir"]),
    "split out of range": (["--split", "7"], ["split=7", "1 splits"]),
    "missing partition store": (["--partitions", "/no/store"], ["/no/store"]),
    "auc on 4 classes": (["--metric", "auc", "--dataset", "sbm"], ["--metric auc", "4 classes"]),
    "simulated network word": (["--simulate-network", "50,fast"],
                               ["--simulate-network", "50,fast"]),
    "simulated network zero bandwidth": (["--simulate-network", "50,0"], ["50,0"]),
    "balance for ldg": (["--partitioner", "ldg", "--balance", "nodes"], ["--balance", "ldg"]),
    "balance target unknown": (["--balance", "nodes,wheels"], ["wheels"]),
    "bf16 spelled wrong": (["--compute-dtype", "bf16"], ["--compute-dtype", "bf16"]),
}


@pytest.mark.parametrize("case", sorted(ARG_CASES))
def test_bad_arguments(case, tmp_path, capsys):
    extra, fragments = ARG_CASES[case]
    dataset = [] if "--dataset" in extra else \
        ["--dataset", str(write_npz(tmp_path / "g.npz", graph_arrays()))]
    code, _, err = run_in_process([*TRAIN, *dataset, *extra], capsys)
    assert_one_line(code, err, fragments, case)


def partition_store(tmp_path, capsys, parts: int):
    """A random partition store of the small test graph, written by ``gnnscale partition``."""
    data = write_npz(tmp_path / "g.npz", graph_arrays())
    store = tmp_path / "store"
    code, _, err = run_in_process(["partition", "--dataset", str(data), "--parts", str(parts),
                                   "--method", "random", "--out", str(store)], capsys)
    assert code == 0, err
    return store


def test_damaged_partition_store_is_refused_naming_the_file(tmp_path, capsys):
    store = partition_store(tmp_path, capsys, parts=1)
    victim = max((p for p in store.rglob("*") if p.is_file() and p.name != "manifest.json"),
                 key=lambda p: p.stat().st_size)
    victim.write_bytes(victim.read_bytes()[:-7])
    code, _, err = run_in_process([*TRAIN, "--partitions", str(store)], capsys)
    assert_one_line(code, err, [victim.name], "truncated store file")


# -- under mpirun: every rank stops with code 2 ----------------------------------------------
VERSION_DRIVER = Path(__file__).with_name("rel_version_driver.py")


def assert_every_rank_exit_2(result, fragments):
    err = result.stderr
    assert result.returncode == 2, (result.returncode, result.stdout, err)
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.startswith("gnnscale")]
    assert lines, err
    for line in lines:
        for fragment in fragments:
            assert fragment in line, (fragment, line)


def test_bad_file_on_two_ranks(tmp_path):
    path = write_npz(tmp_path / "nan.npz", graph_arrays(node_features=set_item((4, 2), np.nan)))
    result = gnnscale_cli(2, [*TRAIN[:-2], "--dataset", str(path)], timeout=180)
    assert_every_rank_exit_2(result, ["NaN or Inf", "row 4"])
    ours = [line for line in result.stderr.splitlines() if line.startswith("gnnscale")]
    assert len(ours) == 1, result.stderr  # every rank agrees: rank 0 alone says it


def test_more_ranks_than_nodes_or_parts(tmp_path, capsys):
    store = partition_store(tmp_path, capsys, parts=2)
    result = gnnscale_cli(3, [*TRAIN[:-2], "--partitions", str(store)], timeout=180)
    assert_every_rank_exit_2(result, ["2 parts", "3"])
    tiny = write_npz(tmp_path / "tiny.npz", {
        "node_features": np.ones((2, 3), np.float32), "node_labels": np.array([0, 1]),
        "edges": np.array([[0, 1]]), "train_masks": np.array([[True, False]]),
        "val_masks": np.array([[False, True]]), "test_masks": np.array([[False, False]])})
    result = gnnscale_cli(3, [*TRAIN[:-2], "--dataset", str(tiny)], timeout=180)
    assert_every_rank_exit_2(result, ["3 ranks", "only 2 nodes"])


def test_single_backend_under_a_two_rank_launcher(tmp_path):
    path = write_npz(tmp_path / "g.npz", graph_arrays())
    result = gnnscale_cli(2, [*TRAIN, "--dataset", str(path)], timeout=180)
    assert_every_rank_exit_2(result, ["backend 'single'", "2 ranks"])


@pytest.mark.parametrize("backend", ["mpi"])
def test_mismatched_package_versions_across_ranks(tmp_path, backend):
    path = write_npz(tmp_path / "g.npz", graph_arrays())
    result = run_python_mpi(2, VERSION_DRIVER, ["train", *TRAIN[1:-1], backend, "--dataset",
                                                str(path)], timeout=180)
    assert_every_rank_exit_2(result, ["package versions differ", "torch", "0.0.0-other",
                                      "rank 1"])
    # the line names rank 0's real torch (this environment's) and rank 1's other one
    real = env_check.package_versions()["torch"]
    assert real != "absent"
    assert_every_rank_exit_2(result, [f"torch {real} on rank 0 but 0.0.0-other on rank 1"])

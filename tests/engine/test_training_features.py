"""Metrics, early stopping, checkpoints and resume, predictions, plots.

The runs share launches where that cannot make a check pass (docs/test-suite.md, "How the
suite keeps its time down"): the one-process runs are one batch (:func:`one_process`), the
2-rank runs made before a resume are another (:func:`two_ranks`), each resumed run has a
launch of its own, and the --eval-every reference and the resumes that must be refused run in
this process (``gnnscale.cli.main.main``), the reference apart from the run it is compared with.
"""

import json
import shutil
import subprocess
from itertools import product

import numpy as np
import pytest
import torch

from gnnscale.cli.main import main
from gnnscale.comm import SingleCommunicator
from gnnscale.engine import CheckpointError, evaluate_global, read_checkpoint, roc_auc
from gnnscale.engine.checkpoint import FORMAT_VERSION
from mpi_launch import gnnscale_cli, gnnscale_cli_batch

pytestmark = pytest.mark.timeout(600)

PREDICTIONS = ["--epochs", "3", "--dropout", "0", "--no-progress"]
EVAL_EVERY_BASE = ["--dropout", "0.5", "--no-progress", "--epochs", "7"]
#: the runs stopped and resumed on 2 ranks: name -> (options, stop after epoch, epochs)
RESUMED = {
    "dropout": (["--dropout", "0.5", "--no-progress", "--checkpoint-every", "4"], 8, 12),
    "int2": (["--halo-dtype", "int2", "--no-progress", "--checkpoint-every", "4", "--profile"],
             4, 10),
}


def cora(datasets_root) -> list:
    return ["train", "--dataset", "cora", "--data-root", str(datasets_root)]


def early_stopped(metrics, *options) -> list:
    """Cora at lr 0.2, at most 200 epochs, with ``options`` (after ``train`` and the data)."""
    return ["--epochs", "200", "--lr", "0.2", "--no-progress", "--metrics-out", metrics,
            *options]


@pytest.fixture(scope="module")
def one_process(tmp_path_factory, datasets_root):
    """Every one-process run of this file but those in the test's own process (the --eval-every
    reference, the resumes that must be refused), in one launch: (their folder, {name:
    result}). No two of them are compared with each other. The --eval-every run goes first, in
    a fresh interpreter as in a launch of its own."""
    folder = tmp_path_factory.mktemp("one_process")
    (folder / "bad.jsonl").write_text("{not json\n")
    (folder / "bad.png").touch()  # an output that exists: the refusal still names the line
    data = cora(datasets_root)
    runs = {
        "eval every 3": [*data, *EVAL_EVERY_BASE, "--eval-every", "3", "--plot",
                         folder / "third.png", "--metrics-out", folder / "third.jsonl"],
        "early stop": [*data, *early_stopped(folder / "m.jsonl", "--early-stop", "3",
                                             "--metric", "f1")],
        "plot": ["plot", folder / "m.jsonl", "--out", folder / "m.png"],
        "plot bad file": ["plot", folder / "bad.jsonl"],
        "early stop every 2": [*data, *early_stopped(folder / "m2.jsonl", "--early-stop", "4",
                                                     "--eval-every", "2")],
        "eval every 0": [*data, "--eval-every", "0"],
        "predictions": [*data, *PREDICTIONS, "--predictions-out", folder / "one.npz"],
        "checkpoint": [*data, "--epochs", "2", "--no-progress", "--checkpoint-dir",
                       folder / "ckpt"],
    }
    return folder, dict(zip(runs, gnnscale_cli_batch(None, list(runs.values()))))


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory, datasets_root, one_process):
    """Every 2-rank run of this file but the resumed ones, in one launch: (their folder,
    {name: result}). The predictions go first, gathered then per part, as in a launch of their
    own. For each run of :data:`RESUMED`: its first part to the stop into ``NAME/b/`` and
    ``NAME/b.jsonl``, then the run straight to the end into ``NAME/a/`` and ``NAME/a.jsonl``.
    The resumed part has a launch of its own (:func:`resume`) and is compared with the straight
    run: state left in this launch could change a run from its start, not make the straight
    run break at the stop as a faulty resume would. Last, the one-process checkpoint resumed on
    2 ranks (a copy of it), which must be refused."""
    folder = tmp_path_factory.mktemp("two_ranks")
    data = cora(datasets_root)
    runs = {
        "gathered": [*data, *PREDICTIONS, "--predictions-out", folder / "two.npz"],
        "per part": [*data, *PREDICTIONS, "--predictions-out", folder / "parts",
                     "--predictions-layout", "per-part"],
    }
    for name, (options, stop, epochs) in RESUMED.items():
        for part, side, last in (("first part", "b", stop), ("straight", "a", epochs)):
            runs[f"{name} {part}"] = [*data, *options, "--epochs", last, "--checkpoint-dir",
                                      folder / name / side, "--metrics-out",
                                      folder / name / f"{side}.jsonl"]
    shutil.copytree(one_process[0] / "ckpt", folder / "one-process-ckpt")
    runs["one-process checkpoint"] = [*data, "--epochs", "3", "--checkpoint-dir",
                                      folder / "one-process-ckpt", "--resume"]
    return folder, dict(zip(runs, gnnscale_cli_batch(2, list(runs.values()))))


def resume(two_ranks, datasets_root, name):
    """Resume :data:`RESUMED`'s run ``name`` to its end on 2 ranks, in a launch of its own;
    its folder."""
    folder, results = two_ranks
    options, _, epochs = RESUMED[name]
    for part in ("first part", "straight"):
        assert results[f"{name} {part}"].returncode == 0, results[f"{name} {part}"].stderr
    resumed = gnnscale_cli(2, [*cora(datasets_root), *options, "--epochs", str(epochs),
                               "--checkpoint-dir", str(folder / name / "b"), "--resume",
                               "--metrics-out", str(folder / name / "b.jsonl")])
    assert resumed.returncode == 0, resumed.stderr
    assert "resumed from" in resumed.stdout
    return folder / name


def in_process(capsys, args) -> subprocess.CompletedProcess:
    """``gnnscale ARGS`` in this process, with one OpenMP thread as a launch gets it
    (``mpi_env``); torch's thread count and random state are put back after."""
    threads = torch.get_num_threads()
    with pytest.MonkeyPatch.context() as patch, torch.random.fork_rng():
        patch.setenv("OMP_NUM_THREADS", "1")
        code = main([str(a) for a in args])
    torch.set_num_threads(threads)
    out, err = capsys.readouterr()
    return subprocess.CompletedProcess(args, code, out, err)


def test_roc_auc_matches_the_pairwise_definition():
    rng = np.random.default_rng(0)
    scores = np.round(rng.random(300), 2)  # ties on purpose
    labels = rng.random(300) < 0.3
    pos, neg = scores[labels], scores[~labels]
    pairwise = np.mean([(p > n) + 0.5 * (p == n) for p, n in product(pos, neg)])
    assert roc_auc(scores, labels) == pytest.approx(pairwise, abs=1e-12)
    assert np.isnan(roc_auc(scores, np.zeros(300, bool)))


def test_macro_f1_and_accuracy_match_brute_force():
    rng = np.random.default_rng(1)
    logits = torch.from_numpy(rng.standard_normal((200, 4)))
    y = torch.from_numpy(rng.integers(0, 4, 200))
    masks = {s: torch.from_numpy(rng.random(200) < 0.5) for s in ("train", "val", "test")}
    _, got = evaluate_global(0.0, logits, y, masks, 4, SingleCommunicator(), ("acc", "f1"))
    pred = logits.argmax(1).numpy()
    for split, mask in masks.items():
        p, t = pred[mask.numpy()], y.numpy()[mask.numpy()]
        f1s = []
        for c in range(4):
            tp, fp, fn = np.sum((p == c) & (t == c)), np.sum((p == c) & (t != c)), \
                np.sum((p != c) & (t == c))
            if tp + fp + fn:
                f1s.append(2 * tp / (2 * tp + fp + fn))
        assert got[f"{split}_f1"] == pytest.approx(np.mean(f1s))
        assert got[f"{split}_acc"] == pytest.approx(np.mean(p == t))


def epoch_losses(path):
    return {r["epoch"]: r["loss"] for r in map(json.loads, path.read_text().splitlines())
            if not r.get("summary")}


def assert_rank_count_refused(result, written: str, started: str):
    assert result.returncode == 2, result.stderr
    assert f"written by {written};" in result.stderr, result.stderr
    assert f"({started} started)" in result.stderr, result.stderr
    assert "latest.pt" in result.stderr and "Traceback" not in result.stderr


def test_resume_continues_to_exactly_the_same_losses(two_ranks, datasets_root, capsys):
    folder = resume(two_ranks, datasets_root, "dropout")
    assert epoch_losses(folder / "b.jsonl") == epoch_losses(folder / "a.jsonl")  # exact

    # a checkpoint refuses another number of ranks, naming the file: the one of 2 ranks on
    # 1 process (here), the one of 1 process on 2 ranks (in the 2-rank launch)
    options, _, epochs = RESUMED["dropout"]
    fewer = in_process(capsys, [*cora(datasets_root), *options, "--epochs", epochs,
                                "--checkpoint-dir", folder / "b", "--resume"])
    assert_rank_count_refused(fewer, "2 ranks", "1 rank")
    assert_rank_count_refused(two_ranks[1]["one-process checkpoint"], "1 rank", "2 ranks")


def test_a_resumed_quantized_run_rounds_as_the_run_without_a_stop(two_ranks, datasets_root):
    """int2 halos are rounded stochastically, keyed by a count of the plan's quantized
    exchanges: the checkpoint carries the count, so the resumed epochs draw the same rounding
    (a count started again from 0 gives other losses from epoch 5 on). --profile's probes
    post exchanges outside training and leave the count as it was."""
    folder = resume(two_ranks, datasets_root, "int2")
    losses = epoch_losses(folder / "a.jsonl")
    assert sorted(losses) == list(range(1, 11))
    assert epoch_losses(folder / "b.jsonl") == losses  # exact
    state = read_checkpoint(folder / "b" / "latest.pt")
    counts = [rng["quantized_exchanges"] for rng in state["rng_per_rank"]]
    assert counts[0] > 0 and counts == [counts[0]] * 2


def test_damaged_checkpoints_are_refused(one_process, tmp_path, datasets_root, capsys):
    made = one_process[1]["checkpoint"]
    assert made.returncode == 0, made.stderr
    shutil.copytree(one_process[0] / "ckpt", tmp_path / "ckpt")
    path = tmp_path / "ckpt" / "latest.pt"
    good = path.read_bytes()
    assert read_checkpoint(path)["epoch"] == 2
    path.write_bytes(good[:-100])
    with pytest.raises(CheckpointError, match="truncated or altered"):
        read_checkpoint(path)
    path.write_bytes(good[:-1] + bytes([good[-1] ^ 1]))
    with pytest.raises(CheckpointError, match="truncated or altered"):
        read_checkpoint(path)
    version = f'"format_version": {FORMAT_VERSION}'.encode()
    path.write_bytes(good.replace(version, b'"format_version": 9', 1))
    with pytest.raises(CheckpointError, match="format version 9"):
        read_checkpoint(path)
    path.write_bytes(b"not a checkpoint at all")
    with pytest.raises(CheckpointError, match="not a gnnscale checkpoint"):
        read_checkpoint(path)
    resumed = in_process(capsys, [*cora(datasets_root), "--epochs", "3", "--checkpoint-dir",
                                  tmp_path / "ckpt", "--resume"])
    assert resumed.returncode == 2 and "latest.pt" in resumed.stderr
    assert "Traceback" not in resumed.stderr


def test_predictions_gathered_per_part_and_one_process_agree(one_process, two_ranks):
    one = one_process[1]["predictions"]
    gathered, per_part = two_ranks[1]["gathered"], two_ranks[1]["per part"]
    for result in (one, gathered, per_part):
        assert result.returncode == 0, result.stderr
    a, b = np.load(one_process[0] / "one.npz"), np.load(two_ranks[0] / "two.npz")
    assert a["logits"].shape == (2708, 7)
    np.testing.assert_allclose(b["logits"], a["logits"], rtol=1e-4, atol=1e-5)
    parts = [np.load(two_ranks[0] / "parts" / f"part-{r:05d}.npz") for r in range(2)]
    ids = np.concatenate([p["node_ids"] for p in parts])
    assert np.array_equal(np.sort(ids), np.arange(2708))
    logits = np.concatenate([p["logits"] for p in parts])
    np.testing.assert_array_equal(logits, b["logits"][ids])


def early_stopped_records(one_process, name, metrics) -> list[dict]:
    """The records of ``one_process``'s early-stopped run ``name``, from ``metrics``."""
    result = one_process[1][name]
    assert result.returncode == 0, result.stderr
    return [json.loads(line) for line in (one_process[0] / metrics).read_text().splitlines()]


def test_early_stopping_and_plot(one_process):
    records = early_stopped_records(one_process, "early stop", "m.jsonl")
    summary = records[-1]
    assert summary["summary"] and summary["epochs"] < 200
    assert summary["epochs"] - summary["best_epoch"] == 3  # stopped after 3 epochs without gain
    assert "val_f1" in records[0]["metrics"]
    plotted = one_process[1]["plot"]
    assert plotted.returncode == 0, plotted.stderr
    assert (one_process[0] / "m.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    bad = one_process[1]["plot bad file"]
    assert bad.returncode == 2 and "line 1 is not JSON" in bad.stderr


def test_eval_every_leaves_training_alone_and_evaluates_every_nth_epoch_and_the_last(
        one_process, tmp_path, datasets_root, capsys):
    folder, result = one_process[0], one_process[1]["eval every 3"]
    third, every = folder / "third.jsonl", tmp_path / "every.jsonl"
    # the reference, in this process: the run it is compared with had a fresh interpreter
    reference_run = in_process(capsys, [*cora(datasets_root), *EVAL_EVERY_BASE,
                                        "--metrics-out", every])
    for run in (reference_run, result):
        assert run.returncode == 0, run.stderr
    assert "(not evaluated)" in result.stdout
    assert epoch_losses(third) == epoch_losses(every)  # bit for bit: training is unchanged
    records = [json.loads(line) for line in third.read_text().splitlines()]
    reference = {r["epoch"]: r for r in map(json.loads, every.read_text().splitlines())
                 if not r.get("summary")}
    epochs, summary = records[:-1], records[-1]
    assert [r["epoch"] for r in epochs if r["metrics"]] == [3, 6, 7]
    for record in epochs:
        if record["metrics"]:
            assert record["metrics"] == reference[record["epoch"]]["metrics"]
        else:
            assert record["val_acc"] is None and record["test_acc"] is None
    assert summary["best_epoch"] in (3, 6, 7)
    assert summary["test_acc_at_best_val"] == reference[summary["best_epoch"]]["test_acc"]
    assert (folder / "third.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_early_stopping_is_checked_at_evaluations(one_process):
    summary = early_stopped_records(one_process, "early stop every 2", "m2.jsonl")[-1]
    assert summary["epochs"] < 200 and summary["epochs"] % 2 == 0
    assert summary["epochs"] - summary["best_epoch"] == 4
    bad = one_process[1]["eval every 0"]
    assert bad.returncode == 2 and "--eval-every" in bad.stderr

"""Metrics, early stopping, checkpoints and resume, predictions, plots."""

import json
from itertools import product

import numpy as np
import pytest
import torch

from gnnscale.comm import SingleCommunicator
from gnnscale.engine import CheckpointError, evaluate_global, read_checkpoint, roc_auc
from gnnscale.engine.checkpoint import FORMAT_VERSION
from mpi_launch import gnnscale_cli, gnnscale_cli_batch

pytestmark = pytest.mark.timeout(600)


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


def straight_and_resumed(tmp_path, base, stop: int, epochs: int):
    """On 2 ranks: ``base`` run straight to ``epochs`` into ``a/`` and ``a.jsonl``, and run to
    ``stop`` then resumed to ``epochs`` into ``b/`` and ``b.jsonl``. The first part and the
    straight run share a launch; the resumed run has one of its own."""
    first, straight = gnnscale_cli_batch(2, [
        [*base, "--epochs", stop, "--checkpoint-dir", tmp_path / "b",
         "--metrics-out", tmp_path / "b.jsonl"],
        [*base, "--epochs", epochs, "--checkpoint-dir", tmp_path / "a",
         "--metrics-out", tmp_path / "a.jsonl"]])
    assert first.returncode == 0, first.stderr
    assert straight.returncode == 0, straight.stderr
    resumed = gnnscale_cli(2, [*base, "--epochs", str(epochs), "--checkpoint-dir",
                               str(tmp_path / "b"), "--resume", "--metrics-out",
                               str(tmp_path / "b.jsonl")])
    assert resumed.returncode == 0, resumed.stderr
    assert "resumed from" in resumed.stdout


def test_resume_continues_to_exactly_the_same_losses(tmp_path, datasets_root):
    base = ["train", "--dataset", "cora", "--data-root", str(datasets_root), "--dropout", "0.5",
            "--no-progress", "--checkpoint-every", "4"]
    straight_and_resumed(tmp_path, base, stop=8, epochs=12)
    assert epoch_losses(tmp_path / "b.jsonl") == epoch_losses(tmp_path / "a.jsonl")  # exact

    # the checkpoint of 2 ranks refuses 3, naming the file
    wrong = gnnscale_cli(3, [*base, "--epochs", "12", "--checkpoint-dir", str(tmp_path / "b"),
                             "--resume"])
    assert wrong.returncode == 2 and "written by 2 ranks" in wrong.stderr
    assert "latest.pt" in wrong.stderr and "Traceback" not in wrong.stderr


def test_a_resumed_quantized_run_rounds_as_the_run_without_a_stop(tmp_path, datasets_root):
    """int2 halos are rounded stochastically, keyed by a count of the plan's quantized
    exchanges: the checkpoint carries the count, so the resumed epochs draw the same rounding
    (a count started again from 0 gives other losses from epoch 5 on). --profile's probes
    post exchanges outside training and leave the count as it was."""
    base = ["train", "--dataset", "cora", "--data-root", str(datasets_root), "--halo-dtype",
            "int2", "--no-progress", "--checkpoint-every", "4", "--profile"]
    straight_and_resumed(tmp_path, base, stop=4, epochs=10)
    losses = epoch_losses(tmp_path / "a.jsonl")
    assert sorted(losses) == list(range(1, 11))
    assert epoch_losses(tmp_path / "b.jsonl") == losses  # exact
    state = read_checkpoint(tmp_path / "b" / "latest.pt")
    counts = [rng["quantized_exchanges"] for rng in state["rng_per_rank"]]
    assert counts[0] > 0 and counts == [counts[0]] * 2


def test_damaged_checkpoints_are_refused(tmp_path, datasets_root):
    made = gnnscale_cli(None, ["train", "--dataset", "cora", "--data-root", str(datasets_root),
                               "--epochs", "2", "--no-progress", "--checkpoint-dir",
                               str(tmp_path)])
    assert made.returncode == 0, made.stderr
    path = tmp_path / "latest.pt"
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
    resumed = gnnscale_cli(None, ["train", "--dataset", "cora", "--data-root",
                                  str(datasets_root), "--epochs", "3", "--checkpoint-dir",
                                  str(tmp_path), "--resume"])
    assert resumed.returncode == 2 and "latest.pt" in resumed.stderr
    assert "Traceback" not in resumed.stderr


def test_predictions_gathered_per_part_and_one_process_agree(tmp_path, datasets_root):
    common = ["train", "--dataset", "cora", "--data-root", str(datasets_root), "--epochs", "3",
              "--dropout", "0", "--no-progress"]
    one = gnnscale_cli(None, [*common, "--predictions-out", str(tmp_path / "one.npz")])
    gathered, per_part = gnnscale_cli_batch(2, [
        [*common, "--predictions-out", tmp_path / "two.npz"],
        [*common, "--predictions-out", tmp_path / "parts", "--predictions-layout", "per-part"]])
    for result in (one, gathered, per_part):
        assert result.returncode == 0, result.stderr
    a, b = np.load(tmp_path / "one.npz"), np.load(tmp_path / "two.npz")
    assert a["logits"].shape == (2708, 7)
    np.testing.assert_allclose(b["logits"], a["logits"], rtol=1e-4, atol=1e-5)
    parts = [np.load(tmp_path / "parts" / f"part-{r:05d}.npz") for r in range(2)]
    ids = np.concatenate([p["node_ids"] for p in parts])
    assert np.array_equal(np.sort(ids), np.arange(2708))
    logits = np.concatenate([p["logits"] for p in parts])
    np.testing.assert_array_equal(logits, b["logits"][ids])


def early_stopped_cora_run(metrics, datasets_root, *options) -> list[dict]:
    """One process on Cora at lr 0.2, at most 200 epochs, with ``options``; its records."""
    result = gnnscale_cli(None, ["train", "--dataset", "cora", "--data-root",
                                 str(datasets_root), "--epochs", "200", "--lr", "0.2",
                                 "--no-progress", "--metrics-out", str(metrics), *options])
    assert result.returncode == 0, result.stderr
    return [json.loads(line) for line in metrics.read_text().splitlines()]


def test_early_stopping_and_plot(tmp_path, datasets_root):
    metrics = tmp_path / "m.jsonl"
    records = early_stopped_cora_run(metrics, datasets_root, "--early-stop", "3",
                                     "--metric", "f1")
    summary = records[-1]
    assert summary["summary"] and summary["epochs"] < 200
    assert summary["epochs"] - summary["best_epoch"] == 3  # stopped after 3 epochs without gain
    assert "val_f1" in records[0]["metrics"]
    png = tmp_path / "m.png"
    plotted = gnnscale_cli(None, ["plot", str(metrics), "--out", str(png)])
    assert plotted.returncode == 0, plotted.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    metrics.write_text("{not json\n")
    bad = gnnscale_cli(None, ["plot", str(metrics)])
    assert bad.returncode == 2 and "line 1 is not JSON" in bad.stderr


def test_eval_every_leaves_training_alone_and_evaluates_every_nth_epoch_and_the_last(
        tmp_path, datasets_root):
    base = ["train", "--dataset", "cora", "--data-root", str(datasets_root), "--dropout", "0.5",
            "--no-progress", "--epochs", "7"]
    every, third = tmp_path / "every.jsonl", tmp_path / "third.jsonl"
    png = tmp_path / "third.png"
    for path, extra in ((every, []), (third, ["--eval-every", "3", "--plot", str(png)])):
        result = gnnscale_cli(None, [*base, *extra, "--metrics-out", str(path)])
        assert result.returncode == 0, result.stderr
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
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_early_stopping_is_checked_at_evaluations(tmp_path, datasets_root):
    summary = early_stopped_cora_run(tmp_path / "m.jsonl", datasets_root, "--early-stop", "4",
                                     "--eval-every", "2")[-1]
    assert summary["epochs"] < 200 and summary["epochs"] % 2 == 0
    assert summary["epochs"] - summary["best_epoch"] == 4
    bad = gnnscale_cli(None, ["train", "--dataset", "cora", "--data-root", str(datasets_root),
                              "--eval-every", "0"])
    assert bad.returncode == 2 and "--eval-every" in bad.stderr

"""A run SIGKILLed between two checkpoints and resumed ends with the same records as a run that
was never interrupted: the metrics file holds one line per epoch (the epochs redone after the
resume replace the ones written before the kill), every loss and metric equal bit for bit, and
the summary (best epoch, its metrics, final metrics) equal; on 1 process and on 4 ranks.

Cora, GCN, 30 epochs, checkpoints every 7 epochs. The reference run picks the checkpoint: the
first one at or after its best validation epoch; the job is killed once the metrics file shows a
few epochs past it and resumed to the end. The best epoch then lies before the resumed epochs, so
a summary that only saw the resumed epochs would differ.

On 1 process the reference runs in the test's own process (no start-up to pay); the killed run
and the resumed one are launches of their own, so nothing the reference leaves here reaches the
runs it is compared with.
"""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from gnnscale.cli.main import main as gnnscale_main
from mpi_launch import mpirun_path, run_command
from rel_kill import run_and_kill

pytestmark = pytest.mark.timeout(900)

DRIVER = Path(__file__).with_name("rel_fault_driver.py")
EPOCHS, EVERY = 30, 7
SUMMARY_KEYS = ("epochs", "best_epoch", "best_val_acc", "test_acc_at_best_val", "best_metrics",
                "final_loss", "final_val_acc", "final_test_acc", "final_metrics", "monitor")


def launch(nprocs, words):
    """``words`` on one process, or under ``mpirun -n nprocs``."""
    return words if nprocs == 1 else [mpirun_path(), "-n", str(nprocs), "--oversubscribe", *words]


def train_args(folder, datasets_root, extra=()):
    return ["--dataset", "cora", "--data-root", str(datasets_root), "--epochs", str(EPOCHS),
            "--threads", "1", "--checkpoint-dir", str(folder / "ckpt"), "--checkpoint-every",
            str(EVERY), "--metrics-out", str(folder / "metrics.jsonl"), *extra]


def reference_run(nprocs, folder, datasets_root, capsys):
    """The run never interrupted, into ``folder``: on 1 process in this one, on more under
    mpirun."""
    args = ["train", *train_args(folder, datasets_root)]
    if nprocs > 1:
        return run_command(launch(nprocs, [sys.executable, "-m", "gnnscale", *args]),
                           timeout=400)
    import torch

    threads = torch.get_num_threads()
    with torch.random.fork_rng():  # train seeds torch: this process's state is put back
        code = gnnscale_main(args)
    torch.set_num_threads(threads)  # which --threads 1 set
    captured = capsys.readouterr()
    return subprocess.CompletedProcess(args, code, captured.out, captured.err)


def read_records(path):
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    return [r for r in rows if not r.get("summary")], [r for r in rows if r.get("summary")]


def best_line(stdout):
    return re.search(r"^best .*", stdout, flags=re.MULTILINE).group(0).split(";")[0]


@pytest.mark.parametrize("nprocs", [1, 4])
def test_kill_between_checkpoints_then_resume_gives_the_uninterrupted_records(
        tmp_path, datasets_root, nprocs, capsys):
    ref = tmp_path / "ref"
    reference = reference_run(nprocs, ref, datasets_root, capsys)
    assert reference.returncode == 0, reference.stderr[-3000:]
    ref_epochs, ref_summary = read_records(ref / "metrics.jsonl")
    assert [r["epoch"] for r in ref_epochs] == list(range(1, EPOCHS + 1))
    checkpoint = -(-ref_summary[0]["best_epoch"] // EVERY) * EVERY  # first one at or after
    assert checkpoint + 1 < EPOCHS, ref_summary[0]["best_epoch"]
    kill_after = min(checkpoint + 3, EPOCHS - 1)

    for attempt in range(3):  # a kill that lands after the window (loaded host): again
        run = tmp_path / f"run{attempt}"
        # epochs of about 10 ms: each slowed by 0.1 s, so the kill lands in its window
        driver = [sys.executable, str(DRIVER), "--pid-dir", str(run / "pids"),
                  "--step-delay", "0.1", "--"]
        killed, _ = run_and_kill(launch(nprocs, [*driver, *train_args(run, datasets_root)]),
                                 run / "pids", run / "metrics.jsonl", victim=nprocs - 1,
                                 after_epoch=kill_after, timeout=400)
        before, _ = read_records(run / "metrics.jsonl")
        killed_after = before[-1]["epoch"]
        if killed.returncode != 0 and killed_after < min(checkpoint + EVERY, EPOCHS):
            break
    assert killed.returncode != 0
    assert kill_after <= killed_after < min(checkpoint + EVERY, EPOCHS)  # between checkpoints

    resumed = run_command(launch(nprocs, [sys.executable, "-m", "gnnscale", "train",
                                          *train_args(run, datasets_root, ["--resume"])]),
                          timeout=400)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"resumed from {run / 'ckpt'} after epoch {checkpoint}" in resumed.stdout
    epochs, summaries = read_records(run / "metrics.jsonl")
    assert [r["epoch"] for r in epochs] == list(range(1, EPOCHS + 1))  # no epoch twice
    for mine, theirs in zip(epochs, ref_epochs):
        assert (mine["loss"], mine["metrics"]) == (theirs["loss"], theirs["metrics"]), mine
    assert len(summaries) == 1
    for key in SUMMARY_KEYS:
        assert summaries[0][key] == ref_summary[0][key], key
    assert best_line(resumed.stdout) == best_line(reference.stdout)

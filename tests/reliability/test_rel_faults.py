"""Faults under a real ``mpirun``: a rank raising or SIGKILLed mid-epoch ends the whole job fast,
the output names the rank and its error, and resuming from the last checkpoint continues to
exactly the losses of an uninterrupted run.

One chain per backend (mpi, torch), each on a 2-rank job of a generated graph:

1. an uninterrupted reference run;
2. the same run, with rank 1 raising in the middle of epoch 7 (after its forward pass, while its
   peer waits in a halo exchange): checkpoints every 3 epochs leave epoch 6 behind;
3. ``--resume`` from there, and one rank is SIGKILLed once the metrics show epoch 12 or later;
4. ``--resume`` again, to the end.

Every loss written by steps 2-4 must equal the reference's for that epoch, bit for bit.
"""

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mpi_launch import REPO_ROOT, mpi_env, mpirun_path, run_mpi, still_alive_after
from rel_kill import FAIL_FAST_S, last_epoch, run_and_kill

pytestmark = pytest.mark.timeout(400)

DRIVER = Path(__file__).with_name("rel_fault_driver.py")
EPOCHS = 30


def train_args(backend, tmp_path, metrics_name, extra=()):
    return ["--dataset", "sbm", "--num-nodes", "300", "--epochs", str(EPOCHS), "--backend",
            backend, "--no-progress", "--threads", "1", "--checkpoint-dir",
            str(tmp_path / "ckpt"), "--checkpoint-every", "3", "--metrics-out",
            str(tmp_path / metrics_name), *extra]


def driver_cmd(pid_dir, args, raise_at=None):
    cmd = [sys.executable, str(DRIVER), "--pid-dir", str(pid_dir)]
    if raise_at:
        cmd += ["--raise-at", raise_at]
    return [mpirun_path(), "-n", "2", "--oversubscribe", *cmd, "--", *args]


def losses(path):
    """(epoch, loss) of every per-epoch line, in file order."""
    return [(r["epoch"], r["loss"]) for r in map(json.loads, path.read_text().splitlines())
            if not r.get("summary")]


def assert_all_gone(pid_dir, settle_s=5.0):
    """Every rank of the job has ended, allowing ``settle_s`` for a SIGKILLed one to be torn
    down once ``mpirun`` has returned."""
    pids = [int(f.read_text()) for f in pid_dir.glob("rank-*.pid")]
    left = still_alive_after(pids, settle_s)
    assert not left, f"ranks of pids {left} still alive {settle_s} s after mpirun returned"


@pytest.mark.parametrize("backend,victim", [("mpi", 1), ("torch", 0)])
def test_raise_and_kill_mid_epoch_then_resume_exactly(tmp_path, backend, victim):
    # 1. the reference runs beside steps 2 and 3 (on a loaded 2-core box that halves the wait)
    ref_dir = tmp_path / "ref"
    reference = subprocess.Popen(
        [mpirun_path(), "-n", "2", "--oversubscribe", sys.executable, "-m", "gnnscale", "train",
         *train_args(backend, ref_dir, "ref.jsonl")], stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, env=mpi_env(), cwd=REPO_ROOT, start_new_session=True)

    try:
        # 2. rank 1 raises in the middle of epoch 7
        metrics = tmp_path / "run.jsonl"
        raised = subprocess.run(driver_cmd(tmp_path / "pids-raise",
                                           train_args(backend, tmp_path, "run.jsonl"), "1:7"),
                                capture_output=True, text=True, env=mpi_env(), cwd=REPO_ROOT,
                                timeout=240)
        output = raised.stdout + raised.stderr
        assert raised.returncode != 0, output
        assert "gnnscale: rank 1 failed" in output, output
        assert "RuntimeError: injected fault in epoch 7" in output, output
        assert "rank 1" in output and "abort" in output, output  # mpirun names the rank too
        assert_all_gone(tmp_path / "pids-raise")
        assert last_epoch(metrics) == 6
        elapsed = time.time() - float((tmp_path / "pids-raise" / "fault-time").read_text())
        assert elapsed < FAIL_FAST_S, f"job took {elapsed:.1f} s to end after the fault"
        print(f"{backend}: rank 1 raised in epoch 7; job over {elapsed:.2f} s later")

        # 3. resume from epoch 6, then SIGKILL one rank once epoch 12 is done
        resume = train_args(backend, tmp_path, "run.jsonl", ["--resume"])
        killed, elapsed = run_and_kill(driver_cmd(tmp_path / "pids-kill", resume),
                                       tmp_path / "pids-kill", metrics, victim, after_epoch=12)
        output = killed.stdout + killed.stderr
        assert killed.returncode != 0, output
        assert "resumed from" in output and "after epoch 6" in output, output
        assert f"rank {victim} with PID" in output and "signal 9" in output, output
        assert elapsed < FAIL_FAST_S, f"job took {elapsed:.1f} s to end after the kill"
        print(f"{backend}: rank {victim} SIGKILLed; job over {elapsed:.2f} s later")
        assert_all_gone(tmp_path / "pids-kill")
        killed_after = last_epoch(metrics)
        assert 12 <= killed_after < EPOCHS
    except BaseException:
        if reference.poll() is None:
            os.killpg(reference.pid, signal.SIGKILL)
            reference.communicate()
        raise

    try:
        ref_out, ref_err = reference.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        os.killpg(reference.pid, signal.SIGKILL)
        raise
    assert reference.returncode == 0, ref_err
    expected = dict(losses(ref_dir / "ref.jsonl"))
    assert sorted(expected) == list(range(1, EPOCHS + 1))

    # 4. resume again from the last checkpoint before the kill, to the end
    finished = run_mpi(2, [sys.executable, "-m", "gnnscale", "train", *resume], timeout=240)
    assert finished.returncode == 0, finished.stderr
    found = re.search(r"resumed from .* after epoch (\d+)", finished.stdout)
    assert found, finished.stdout
    resumed_from = int(found.group(1))  # the kill may land before or after a checkpoint
    assert resumed_from % 3 == 0 and killed_after - 3 <= resumed_from <= killed_after
    seen = losses(metrics)
    assert [epoch for epoch, _ in seen] == sorted(expected)  # redone epochs replace, once each
    for epoch, loss in seen:
        assert loss == expected[epoch], (epoch, loss, expected[epoch])

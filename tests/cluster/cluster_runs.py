"""Runs across the virtual cluster's hosts, and what the cross-host tests compare."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from mpi_launch import DATASETS_ROOT, mpi_env


def cross_host(cluster, ranks_per_host: int, argv: list[str], timeout: float = 300,
               env: dict | None = None, **kwargs) -> subprocess.CompletedProcess:
    """``mpirun`` from node0 across both hosts, ``ranks_per_host`` ranks each."""
    environment = mpi_env(env)
    command = cluster.mpirun_argv(ranks_per_host, env=environment) + argv
    return cluster.run("node0", command, timeout=timeout, env=environment, **kwargs)


def gnnscale_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "gnnscale", *args]


def cora_args(*extra: str) -> list[str]:
    return ["train", "--dataset", "cora", "--data-root", str(DATASETS_ROOT), "--no-progress",
            *extra]


def metrics_losses(path: Path) -> list[float]:
    """The per-epoch losses of a ``--metrics-out`` file."""
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    return [row["loss"] for row in rows if "epoch" in row and "loss" in row]


def assert_close(actual, expected, tolerance: float = 5e-5) -> None:
    """Equal within ``tolerance`` relative to the values' scale (the suite's exactness bound)."""
    import numpy as np

    actual, expected = np.asarray(actual, dtype=float), np.asarray(expected, dtype=float)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    scale = max(float(np.abs(expected).max()), 1e-12)
    error = float(np.abs(actual - expected).max()) / scale
    assert error <= tolerance, f"relative error {error:.2e} > {tolerance:.0e}"


def fault_mid_training(cluster, tmp_path: Path, fault, env: dict | None = None,
                       bound_s: float = 60) -> tuple[float, int, str, Path]:
    """Train Cora across both hosts (2 ranks each) with a checkpoint every 2 epochs; once the
    first checkpoint is on disk call ``fault()``; return (seconds from the fault to the end of
    the job, its exit code, its output, the checkpoint folder). Fails if the job outlives
    ``bound_s``.
    Whatever the fault left running is killed, and the links are brought back up."""
    import time

    checkpoints = tmp_path / "checkpoints"
    log = tmp_path / "fault.log"
    environment = mpi_env(env)
    argv = cluster.mpirun_argv(2, env=environment) + gnnscale_argv(*cora_args(
        "--epochs", "100000", "--log-every", "100000", "--checkpoint-dir", str(checkpoints),
        "--checkpoint-every", "2"))
    with log.open("w") as out:
        job = cluster.popen("node0", argv, env=environment, stdout=out, stderr=out)
        try:
            deadline = time.monotonic() + 180
            while not (checkpoints / "latest.pt").exists():
                assert job.poll() is None, log.read_text()[-3000:]
                assert time.monotonic() < deadline, "no checkpoint within 180 s"
                time.sleep(0.1)
            fault()
            start = time.monotonic()
            try:
                job.wait(timeout=bound_s)
            except subprocess.TimeoutExpired:
                raise AssertionError(f"the job outlived the fault by {bound_s} s:\n"
                                     f"{log.read_text()[-3000:]}") from None
            ended = time.monotonic() - start
        finally:
            if job.poll() is None:
                job.kill()
                job.wait()
            for host in cluster.hosts:
                cluster.link_up(host.name)
            cluster.kill_jobs()
    return ended, job.returncode, log.read_text(), checkpoints


def kill_on(cluster, host: str, word: bytes, first_only: bool = False) -> int:
    """SIGKILL the processes on ``host`` whose command line holds ``word``; how many."""
    import os
    import signal

    killed = 0
    for pid in cluster.processes(host):
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if word in command:
            os.kill(pid, signal.SIGKILL)
            killed += 1
            if first_only:
                break
    return killed

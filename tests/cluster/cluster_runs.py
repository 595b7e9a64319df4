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

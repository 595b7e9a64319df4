"""Shared test fixtures: where the real datasets are, and how to launch mpirun."""

from __future__ import annotations

from pathlib import Path

import pytest

from mpi_launch import DATASETS_ROOT


@pytest.fixture(scope="session")
def datasets_root() -> Path:
    """``../shared/datasets`` beside the repository; tests needing it skip when it is absent."""
    if not (DATASETS_ROOT / "Cora").is_dir():
        pytest.skip(f"shared datasets not found at {DATASETS_ROOT}")
    return DATASETS_ROOT

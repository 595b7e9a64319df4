"""Shared test fixtures: where the real datasets are, and how to launch mpirun."""

from __future__ import annotations

from pathlib import Path

import pytest

from mpi_launch import DATASETS_ROOT


@pytest.fixture(scope="session")
def datasets_root() -> Path:
    """The repository's ``datasets/`` folder (real Cora, CiteSeer, Tolokers, Minesweeper, SNAP)."""
    return DATASETS_ROOT

"""Fixtures for the data tests: the real datasets the repository ships, and writable copies."""

import shutil
from pathlib import Path

import pytest

from mpi_launch import DATASETS_ROOT


@pytest.fixture
def datasets() -> Path:
    """The repository's ``datasets/`` folder (treat as read-only: copy before writing)."""
    return DATASETS_ROOT


@pytest.fixture
def planetoid_copy(datasets, tmp_path):
    """Copy Planetoid raw files into tmp_path/<Name>/raw (writable, as PyG wants)."""

    def copy(name: str) -> Path:
        source = datasets / name / "raw"
        target = tmp_path / name / "raw"
        target.mkdir(parents=True)
        for file in source.iterdir():
            shutil.copyfile(file, target / file.name)
        return tmp_path / name

    return copy

"""Shared fixtures for the data tests: where the read-only real datasets live."""

import shutil
from pathlib import Path

import pytest

DATASETS = Path(__file__).resolve().parents[2].parent / "shared" / "datasets"


@pytest.fixture
def datasets() -> Path:
    """The shared read-only dataset folder; skips the test when it is absent."""
    if not DATASETS.is_dir():
        pytest.skip(f"real datasets not found at {DATASETS}")
    return DATASETS


@pytest.fixture
def planetoid_copy(datasets, tmp_path):
    """Copy Planetoid raw files into tmp_path/<Name>/raw (writable, as PyG wants)."""

    def copy(name: str) -> Path:
        source = datasets / name / "raw"
        if not source.is_dir():
            pytest.skip(f"{source} not found")
        target = tmp_path / name / "raw"
        target.mkdir(parents=True)
        for file in source.iterdir():
            shutil.copyfile(file, target / file.name)
        return tmp_path / name

    return copy

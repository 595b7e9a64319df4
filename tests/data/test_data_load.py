"""load_dataset dispatch: names, data roots, layout recognition and its errors."""

import numpy as np
import pytest

from gnnscale.data import DATASET_NAMES, detect_format, generate_sbm, load_dataset, save_scipy
from gnnscale.errors import DataError


def test_known_names_include_the_contract_ones():
    for name in ("cora", "citeseer", "tolokers", "minesweeper", "sbm", "rmat"):
        assert name in DATASET_NAMES


def test_root_from_environment_and_default(datasets, monkeypatch, tmp_path):
    monkeypatch.setenv("GNNSCALE_DATA_ROOT", str(datasets))
    assert load_dataset("cora").num_nodes == 2708
    monkeypatch.delenv("GNNSCALE_DATA_ROOT")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(DataError, match="not found under data root data"):
        load_dataset("cora")
    (tmp_path / "data").symlink_to(datasets)
    assert load_dataset("CiteSeer").num_nodes == 3327


def test_unknown_name_lists_known_names():
    with pytest.raises(DataError, match="unknown dataset 'pubmedd'.*cora, .*sbm, rmat"):
        load_dataset("pubmedd")


def test_relative_name_under_root(tmp_path):
    save_scipy(generate_sbm(num_nodes=50), tmp_path / "mine.npz")
    assert load_dataset("mine.npz", root=tmp_path).num_nodes == 50


def test_unknown_option_names_the_loader(datasets):
    with pytest.raises(DataError, match="'colour' is not understood by the planetoid loader"):
        load_dataset("cora", root=datasets, colour="red")


def test_detects_every_shared_layout(datasets):
    expected = {
        datasets / "Cora": "planetoid",
        datasets / "Cora" / "raw" / "ind.cora.graph": "planetoid",
        datasets / "tolokers": "heterophilous",
        datasets / "SNAP-facebook-combined": "snap",
    }
    for path, kind in expected.items():
        assert detect_format(path)[0] == kind, path


def test_ambiguous_and_empty_folders(datasets, tmp_path):
    with pytest.raises(DataError, match="several datasets"):
        detect_format(datasets / "SNAP-email-enron")
    with pytest.raises(DataError, match="several datasets"):
        detect_format(datasets)
    with pytest.raises(DataError, match="no dataset in a known layout"):
        detect_format(tmp_path)


def test_unrecognised_files(tmp_path):
    np.savez(tmp_path / "other.npz", weights=np.ones(3))
    with pytest.raises(DataError, match="unknown layout.*weights"):
        load_dataset(tmp_path / "other.npz")
    (tmp_path / "notes.md").write_text("hello")
    with pytest.raises(DataError, match="cannot tell the format"):
        load_dataset(tmp_path / "notes.md")
    (tmp_path / "fake.npz").write_text("not a zip")
    with pytest.raises(DataError, match="not a readable .npz"):
        load_dataset(tmp_path / "fake.npz")

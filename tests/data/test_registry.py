"""The dataset registry: official URLs, digests of the shipped copies, layouts the loaders read."""

import hashlib

import pytest

from gnnscale.data.load import find_dataset
from gnnscale.data.registry import (BASE_URL_ENV, REGISTRY, SOURCES, entry_for, how_to_get,
                                    registered, shipped_root)
from gnnscale.errors import DataError


@pytest.fixture(autouse=True)
def publisher_urls(monkeypatch):
    monkeypatch.delenv(BASE_URL_ENV, raising=False)


def test_urls_are_the_ones_pyg_and_ogb_use():
    from torch_geometric.datasets import HeterophilousGraphDataset, Planetoid

    assert REGISTRY["cora"].url(REGISTRY["cora"].files[0]) == f"{Planetoid.url}/ind.cora.x"
    tolokers = REGISTRY["tolokers"]
    assert tolokers.url(tolokers.files[0]) == f"{HeterophilousGraphDataset.url}/tolokers.npz"
    papers = REGISTRY["ogbn-papers100M"]  # the ogb package's master.csv
    assert papers.url(papers.files[0]) == \
        "https://snap.stanford.edu/ogb/data/nodeproppred/papers100M-bin.zip"
    assert REGISTRY["email-enron"].url(REGISTRY["email-enron"].files[0]) == \
        "https://snap.stanford.edu/data/email-Enron.txt.gz"
    for entry in REGISTRY.values():
        for file in entry.files:
            assert entry.url(file).startswith(SOURCES[entry.source] + "/")


def test_base_url_override(monkeypatch):
    cora = REGISTRY["cora"]
    assert cora.url(cora.files[1], "http://mirror/x/") == "http://mirror/x/planetoid/ind.cora.tx"
    monkeypatch.setenv(BASE_URL_ENV, "http://127.0.0.1:8000")
    assert cora.url(cora.files[0]) == "http://127.0.0.1:8000/planetoid/ind.cora.x"


def test_known_digests_match_the_shipped_copies():
    root = shipped_root()
    assert root is not None
    checked = 0
    for entry in REGISTRY.values():
        for file in entry.files:
            if file.sha256 is not None and entry.tar_member is None:  # not a package's archive
                data = (root / file.target).read_bytes()
                assert hashlib.sha256(data).hexdigest() == file.sha256, file.target
                checked += 1
    assert checked == 18  # Cora and CiteSeer (8 files each), Tolokers, Minesweeper


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_installed_files_are_where_load_dataset_looks(tmp_path, name):
    entry = REGISTRY[name]
    if entry.archive_folder is not None:
        (tmp_path / entry.installs / "raw").mkdir(parents=True)
    elif entry.tar_member is not None:
        (tmp_path / entry.tar_member.target).parent.mkdir(parents=True)
        (tmp_path / entry.tar_member.target).write_bytes(b"")
    else:
        for file in entry.files:
            (tmp_path / file.target).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / file.target).write_bytes(b"")
    found = find_dataset(name, tmp_path)
    assert found is not None and (found == tmp_path / entry.installs or
                                  tmp_path / entry.installs in found.parents)


def test_names_are_case_and_separator_insensitive():
    assert registered("CORA") is REGISTRY["cora"]
    assert registered("roman-empire") is REGISTRY["roman_empire"]
    assert registered("OGBN_PAPERS100M") is REGISTRY["ogbn-papers100M"]
    assert registered("sbm") is None
    with pytest.raises(DataError, match="no downloadable dataset named 'nope' \\(known: cora, "):
        entry_for("nope")


def test_how_to_get_names_the_command():
    assert how_to_get("PubMed", "data").startswith(
        "download it with `gnnscale datasets download pubmed --data-root data`")
    assert "GNNSCALE_DATA_ROOT" in how_to_get("unregistered-name", "data")

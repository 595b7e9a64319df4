"""Downloads from a local HTTP mirror on 127.0.0.1: install, resume, checksums, stopped servers.

The mirror serves the repository's shipped datasets (and small OGB archives written here) under
the registry's URL paths; no test reaches the internet (``GNNSCALE_DOWNLOAD_BASE_URL`` points at
a closed local port unless a test passes its mirror's URL).
"""

import hashlib
import shutil
import threading
from pathlib import Path

import numpy as np
import pytest

from gnnscale.data import generate_sbm, load_dataset
from gnnscale.data.download import STAGING, download_dataset, make_folder
from gnnscale.data.registry import BASE_URL_ENV
from gnnscale.errors import DataError

from data_ogb_layout import write_ogb, write_ogb_binary
from http_mirror import MirrorServer, mirror_of_shipped

TOLOKERS_BYTES = 1_329_769


@pytest.fixture(autouse=True)
def no_internet(monkeypatch):
    monkeypatch.setenv(BASE_URL_ENV, "http://127.0.0.1:9")  # discard port: refused at once


@pytest.fixture(scope="module")
def ogb_graph():
    return generate_sbm(num_nodes=150, num_classes=3, num_features=4, num_val=30, num_test=40,
                        seed=5)


@pytest.fixture(scope="module")
def mirror_folder(tmp_path_factory, ogb_graph):
    folder = mirror_of_shipped(tmp_path_factory.mktemp("mirror"))
    build = tmp_path_factory.mktemp("ogb-build")
    write_ogb(build / "arxiv", ogb_graph)
    write_ogb_binary(build / "papers100M-bin", ogb_graph)
    (folder / "ogb").mkdir()
    for name in ("arxiv", "papers100M-bin"):
        shutil.make_archive(str(folder / "ogb" / name), "zip", root_dir=build, base_dir=name)
    return folder


@pytest.fixture
def mirror(mirror_folder):
    with MirrorServer(mirror_folder) as server:
        yield server


def sha256(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def leftovers(root):
    """Files a download left in its staging folder."""
    staging = root / STAGING
    return sorted(str(p.relative_to(staging)) for p in staging.rglob("*")
                  if p.is_file() and not p.name.endswith(".lock")) if staging.is_dir() else []


def test_cora_is_installed_as_the_shipped_copy_and_not_fetched_twice(tmp_path, mirror, datasets):
    root = tmp_path / "root"
    folder = download_dataset("Cora", root, base_url=mirror.url, progress=False)
    assert folder == root / "Cora"
    for shipped in (datasets / "Cora" / "raw").iterdir():
        assert sha256(folder / "raw" / shipped.name) == sha256(shipped)
    ours, reference = load_dataset("cora", root=root), load_dataset("cora", root=datasets)
    assert np.array_equal(ours.x, reference.x) and np.array_equal(ours.indices, reference.indices)
    assert leftovers(root) == []
    served = len(mirror.requests)
    assert download_dataset("cora", root, base_url=mirror.url) == folder
    assert len(mirror.requests) == served  # installed: no network at all
    assert not (root / STAGING / "cora").exists()


@pytest.mark.parametrize("name", ["citeseer", "tolokers", "minesweeper", "email-enron",
                                  "facebook-combined"])
def test_shipped_datasets_download_into_the_loaders_layout(tmp_path, mirror, datasets, name):
    download_dataset(name, tmp_path, base_url=mirror.url, progress=False)
    assert load_dataset(name, root=tmp_path).summary() == \
        load_dataset(name, root=datasets).summary()


def test_truncated_transfer_keeps_the_part_and_resumes_with_range(tmp_path, mirror):
    mirror.fail("heterophilous/tolokers.npz", "truncate", at=500_000)
    with pytest.raises(DataError, match=f"stopped after 500,000 of {TOLOKERS_BYTES:,} bytes.*"
                                        "run the same command again to resume"):
        download_dataset("tolokers", tmp_path, base_url=mirror.url, progress=False)
    assert leftovers(tmp_path) == ["tolokers/tolokers/raw/tolokers.npz.part"]
    with pytest.raises(DataError, match="not found under data root"):
        load_dataset("tolokers", root=tmp_path)  # nothing looks installed
    download_dataset("tolokers", tmp_path, base_url=mirror.url, progress=False)
    assert mirror.requests[-1] == ("heterophilous/tolokers.npz", "bytes=500000-")
    assert load_dataset("tolokers", root=tmp_path).num_nodes == 11_758
    assert leftovers(tmp_path) == []


def test_silent_server_times_out_and_the_rerun_fetches_only_what_is_missing(tmp_path, mirror):
    mirror.fail("planetoid/ind.cora.allx", "stall", at=100_000)
    with pytest.raises(DataError, match="stopped after 100,000 of 257,305 bytes"):
        download_dataset("cora", tmp_path, base_url=mirror.url, progress=False, timeout=1)
    assert not (tmp_path / "Cora").exists()
    before = [path for path, _ in mirror.requests]
    download_dataset("cora", tmp_path, base_url=mirror.url, progress=False)
    after = mirror.requests[len(before):]
    assert ("planetoid/ind.cora.allx", "bytes=100000-") in after
    assert "planetoid/ind.cora.x" not in [path for path, _ in after]  # finished before the stall
    assert load_dataset("cora", root=tmp_path).num_nodes == 2708


def test_server_that_stops_mid_transfer_then_another_mirror_finishes(tmp_path, mirror_folder):
    with MirrorServer(mirror_folder) as first:
        first.fail("snap/email-Enron.txt.gz", "truncate", at=300_000)
        with pytest.raises(DataError, match="stopped after 300,000 of"):
            download_dataset("email-enron", tmp_path, base_url=first.url, progress=False)
        url = first.url
    with pytest.raises(DataError, match="cannot reach http://127.0.0.1"):
        download_dataset("email-enron", tmp_path, base_url=url, progress=False)
    assert not (tmp_path / "SNAP-email-enron").exists()
    with MirrorServer(mirror_folder) as second:
        download_dataset("email-enron", tmp_path, base_url=second.url, progress=False)
        assert second.requests == [("snap/email-Enron.txt.gz", "bytes=300000-")]
    assert load_dataset("email-enron", root=tmp_path).num_nodes == 36_692


def test_wrong_checksum_removes_the_file_and_installs_nothing(tmp_path, mirror_folder):
    bad = shutil.copytree(mirror_folder, tmp_path / "bad-mirror")
    graph_file = bad / "planetoid" / "ind.cora.graph"
    content = bytearray(graph_file.read_bytes())
    content[100] ^= 0xFF
    graph_file.write_bytes(bytes(content))
    root = tmp_path / "root"
    with MirrorServer(bad) as server:
        with pytest.raises(DataError, match="ind.cora.graph: SHA-256 [0-9a-f]{64} does not match "
                                            "the expected 58f13302.*was removed"):
            download_dataset("cora", root, base_url=server.url, progress=False)
    assert not (root / "Cora").exists()
    assert not any(name.startswith("cora/Cora/raw/ind.cora.graph") for name in leftovers(root))
    with MirrorServer(mirror_folder) as server:
        download_dataset("cora", root, base_url=server.url, progress=False)
    assert load_dataset("cora", root=root).num_nodes == 2708


def test_server_ignoring_range_restarts_the_file(tmp_path, mirror):
    mirror.fail("heterophilous/minesweeper.npz", "truncate", at=50_000)
    with pytest.raises(DataError, match="stopped after 50,000"):
        download_dataset("minesweeper", tmp_path, base_url=mirror.url, progress=False)
    mirror.fail("heterophilous/minesweeper.npz", "ignore_range")
    download_dataset("minesweeper", tmp_path, base_url=mirror.url, progress=False)
    assert sha256(tmp_path / "minesweeper" / "raw" / "minesweeper.npz") == \
        "e664c8dacf1e8ac466c2c09ed4b237bd2c5541f47a6eae9c6092cb87f16412b3"


def test_complete_and_overlong_part_files(tmp_path, mirror, datasets):
    part = tmp_path / STAGING / "tolokers" / "tolokers" / "raw" / "tolokers.npz.part"
    part.parent.mkdir(parents=True)
    shutil.copyfile(datasets / "tolokers" / "raw" / "tolokers.npz", part)  # finished, not renamed
    download_dataset("tolokers", tmp_path, base_url=mirror.url, progress=False)
    assert mirror.requests == [("heterophilous/tolokers.npz", f"bytes={TOLOKERS_BYTES}-")]
    assert load_dataset("tolokers", root=tmp_path).num_nodes == 11_758

    other = tmp_path / "other"
    part = other / STAGING / "minesweeper" / "minesweeper" / "raw" / "minesweeper.npz.part"
    part.parent.mkdir(parents=True)
    part.write_bytes(b"x" * 200_000)  # longer than the file: 416, then from the start
    download_dataset("minesweeper", other, base_url=mirror.url, progress=False)
    assert load_dataset("minesweeper", root=other).num_nodes == 10_000


def test_ogb_zip_is_extracted_into_the_folder_the_loader_reads(tmp_path, mirror, ogb_graph):
    folder = download_dataset("ogbn-arxiv", tmp_path, base_url=mirror.url, progress=False)
    assert folder == tmp_path / "ogbn_arxiv" and (folder / "raw" / "edge.csv.gz").is_file()
    loaded = load_dataset("ogbn-arxiv", root=tmp_path)
    for field in ("indptr", "indices", "y", "train_mask", "val_mask", "test_mask"):
        assert np.array_equal(getattr(loaded, field), getattr(ogb_graph, field)), field
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ogbn_arxiv"]  # no staging left
    assert leftovers(tmp_path) == []  # the archive is removed once extracted


def test_papers100m_binary_layout_loads_like_the_csv_layout(tmp_path, mirror, ogb_graph):
    download_dataset("ogbn-papers100M", tmp_path, base_url=mirror.url, progress=False)
    loaded = load_dataset("OGBN-PAPERS100M", root=tmp_path)
    for field in ("indptr", "indices", "y", "train_mask", "val_mask", "test_mask"):
        assert np.array_equal(getattr(loaded, field), getattr(ogb_graph, field)), field
    assert np.allclose(loaded.x, ogb_graph.x)


def test_a_bad_archive_is_removed_and_nothing_installed(tmp_path, mirror_folder):
    bad = shutil.copytree(mirror_folder, tmp_path / "bad-mirror")
    (bad / "ogb" / "arxiv.zip").write_bytes(b"not a zip archive at all")
    root = tmp_path / "root"
    with MirrorServer(bad) as server:
        with pytest.raises(DataError, match="arxiv.zip is not a valid zip archive"):
            download_dataset("ogbn-arxiv", root, base_url=server.url, progress=False)
    assert not (root / "ogbn_arxiv").exists() and leftovers(root) == []


def test_http_errors_and_unknown_names(tmp_path, mirror_folder):
    empty = tmp_path / "empty-mirror"
    empty.mkdir()
    with MirrorServer(empty) as server:
        with pytest.raises(DataError, match=r"/planetoid/ind.pubmed.x: HTTP 404"):
            download_dataset("pubmed", tmp_path / "root", base_url=server.url, progress=False)
    with pytest.raises(DataError, match="no downloadable dataset named 'coraa' .*cora, citeseer"):
        download_dataset("coraa", tmp_path)
    with pytest.raises(DataError, match="cannot reach http://127.0.0.1:9/planetoid/ind.cora.x"):
        download_dataset("cora", tmp_path / "root", progress=False)  # the environment's base URL
    assert not (tmp_path / "root" / "PubMed").exists()


def test_base_url_from_the_environment(tmp_path, mirror, monkeypatch):
    monkeypatch.setenv(BASE_URL_ENV, mirror.url + "/")
    download_dataset("facebook-combined", tmp_path, progress=False)
    assert mirror.requests == [("snap/facebook_combined.txt.gz", None)]


def test_a_folder_another_download_removes_while_it_is_made_is_made_again(tmp_path,
                                                                          monkeypatch):
    # Path.mkdir(exist_ok=True) raises FileExistsError when the folder existed at os.mkdir but
    # was gone when it checked: a finished download removes the empty staging folder
    real, raised = Path.mkdir, []

    def racing_mkdir(self, *args, **kwargs):
        if not raised:
            raised.append(self)
            raise FileExistsError(17, "File exists")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Path, "mkdir", racing_mkdir)
    make_folder(tmp_path / "a" / "b")
    assert raised == [tmp_path / "a" / "b"] and (tmp_path / "a" / "b").is_dir()
    (tmp_path / "file").write_text("")
    with pytest.raises(FileExistsError):
        make_folder(tmp_path / "file")


def test_concurrent_downloads_of_one_dataset_fetch_each_file_once(tmp_path, mirror):
    results, errors = [], []

    def worker():
        try:
            results.append(download_dataset("citeseer", tmp_path, base_url=mirror.url,
                                            progress=False))
        except Exception as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == [] and results == [tmp_path / "CiteSeer"] * 3
    assert len(mirror.requests) == 8 and len(set(mirror.requests)) == 8


def test_a_failed_download_leaves_nothing_behind(tmp_path, mirror_folder):
    empty = tmp_path / "empty-mirror"
    empty.mkdir()
    root = tmp_path / "new" / "root"
    with MirrorServer(empty) as server:
        with pytest.raises(DataError, match="HTTP 404"):
            download_dataset("cora", root, base_url=server.url, progress=False)
    assert not (tmp_path / "new").exists()  # no staging folder, no lock file, no root
    existing = tmp_path / "data"
    existing.mkdir()
    with pytest.raises(DataError, match="cannot reach"):
        download_dataset("cora", existing, progress=False)
    assert list(existing.iterdir()) == []


def test_a_finished_download_leaves_no_staging_or_lock(tmp_path, mirror):
    download_dataset("facebook-combined", tmp_path, base_url=mirror.url, progress=False)
    assert not (tmp_path / STAGING).exists()

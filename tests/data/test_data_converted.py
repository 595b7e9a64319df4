"""The converted (memory-mapped) graph folder: round trip, detection, damage, atomic writes."""

import errno
import json
import os

import numpy as np
import pytest

from gnnscale.data import load_dataset
from gnnscale.data import converted as conv
from gnnscale.errors import DataError
from partitioning.local_view import out_degree_and_self_loops


@pytest.fixture(scope="module")
def graph():
    return load_dataset("rmat", scale=9, num_features=6, num_classes=3, seed=1)


@pytest.fixture()
def folder(tmp_path, graph):
    conv.write_converted(graph, tmp_path / "g", source="rmat")
    return tmp_path / "g"


def test_round_trip_is_memory_mapped_and_equal(folder, graph):
    data = load_dataset(str(folder))  # recognised from the manifest
    assert data.name == graph.name and data.num_classes == graph.num_classes
    for field in ("indptr", "indices", "x", "y", "train_mask", "val_mask", "test_mask"):
        array = getattr(data, field)
        assert isinstance(array, np.memmap), field  # rows stay on disk until read
        assert not array.flags.writeable
        np.testing.assert_array_equal(array, getattr(graph, field))
    out_degree, self_loops = out_degree_and_self_loops(graph.indptr, graph.indices,
                                                       graph.num_nodes)
    np.testing.assert_array_equal(data.node_stats["out_degree"], out_degree)
    np.testing.assert_array_equal(data.node_stats["self_loops"], self_loops)
    assert data.mapped_from == folder
    data.validate()
    manifest = conv.verify_converted(folder)
    assert manifest["num_edges"] == graph.num_edges
    assert sorted(os.listdir(folder.parent)) == ["g"]  # no temporary folder left


def test_converting_a_converted_folder_copies_it(folder, tmp_path):
    again = conv.write_converted(conv.open_converted(folder), tmp_path / "again")
    first = json.loads((folder / "manifest.json").read_text())
    assert {k: v["sha256"] for k, v in again["files"].items()} == \
        {k: v["sha256"] for k, v in first["files"].items()}


def test_parents_are_created_and_existing_targets_refused(graph, tmp_path, folder):
    conv.write_converted(graph, tmp_path / "a" / "b" / "g")
    assert conv.is_converted(tmp_path / "a" / "b" / "g")
    with pytest.raises(DataError, match="already exists"):
        conv.write_converted(graph, folder)
    conv.write_converted(graph, folder, overwrite=True)
    (tmp_path / "other").mkdir()
    with pytest.raises(DataError, match="not a converted graph"):
        conv.write_converted(graph, tmp_path / "other", overwrite=True)


def test_truncated_file_is_named(folder):
    with open(folder / "indices.npy", "r+b") as fh:
        fh.truncate(100)
    with pytest.raises(DataError, match=r"indices\.npy has 100 bytes.*truncated"):
        conv.open_converted(folder)


def test_altered_byte_fails_the_checksum_naming_the_file(folder):
    size = (folder / "x.npy").stat().st_size
    with open(folder / "x.npy", "r+b") as fh:
        fh.seek(size - 3)
        fh.write(b"\x7f")
    conv.open_converted(folder)  # size and header still agree: opening is cheap
    with pytest.raises(DataError, match=r"x\.npy fails its sha256"):
        conv.verify_converted(folder)


def test_foreign_version_and_foreign_header_are_refused(folder):
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["format_version"] = 99
    (folder / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(DataError, match="format_version 99.*gnnscale convert"):
        load_dataset(str(folder))
    manifest["format_version"] = conv.FORMAT_VERSION
    (folder / "manifest.json").write_text(json.dumps(manifest))
    y = np.load(folder / "y.npy")
    np.save(folder / "y.npy", y.astype(np.int32))  # same count, other dtype: a foreign file
    manifest["files"]["y"]["bytes"] = (folder / "y.npy").stat().st_size
    (folder / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(DataError, match=r"y\.npy holds int32"):
        conv.open_converted(folder)


def test_missing_file_and_other_split(folder):
    with pytest.raises(DataError, match="split=1 does not exist"):
        load_dataset(str(folder), split=1)
    os.remove(folder / "test_mask.npy")
    with pytest.raises(DataError, match=r"test_mask\.npy is missing"):
        conv.open_converted(folder)


def test_partition_store_given_as_dataset_says_what_to_do(tmp_path):
    (tmp_path / "store").mkdir()
    (tmp_path / "store" / "manifest.json").write_text(
        json.dumps({"format": "gnnscale-partition-store"}))
    with pytest.raises(DataError, match="partition store.*--partitions"):
        load_dataset(str(tmp_path / "store"))


def test_full_disk_leaves_nothing(graph, tmp_path, monkeypatch):
    import partitioning.atomic_files as atomic

    real = atomic.write_npy

    def failing(path, array, **kwargs):
        if path.name == "x.npy":
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        return real(path, array, **kwargs)

    monkeypatch.setattr(atomic, "write_npy", failing)
    with pytest.raises(DataError, match="No space left on device"):
        conv.write_converted(graph, tmp_path / "g")
    assert os.listdir(tmp_path) == []

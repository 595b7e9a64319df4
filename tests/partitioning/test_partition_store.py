import json
import os

import numpy as np
import pytest

from partitioning import PartitionError, make_partitioner
from partitioning import store as store_mod
from partitioning.store import (part_file_name, read_manifest, read_part, validate_store,
                                write_store)
from partition_testutil import random_graph


@pytest.fixture()
def graph_and_data():
    g = random_graph(120, 600, seed=3, isolated_fraction=0.1)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((120, 5)).astype(np.float32)
    y = rng.integers(0, 3, 120)
    masks = {"train": rng.random(120) < 0.3, "val": rng.random(120) < 0.2}
    return g, x, y, masks


def global_edges(g):
    src, dst = g.edge_index()
    return sorted(zip(src.tolist(), dst.tolist()))


def test_edge_cut_round_trip(tmp_path, graph_and_data):
    g, x, y, masks = graph_and_data
    part = make_partitioner("metis", num_parts=4, seed=0).fit(g)
    manifest = write_store(tmp_path / "store", g, part, x=x, y=y, masks=masks,
                           extra_meta={"dataset": "toy"})
    assert manifest["format_version"] == store_mod.FORMAT_VERSION
    assert manifest["data"]["x"] == {"dtype": "float32", "row_shape": [5]}
    edges = []
    for p in range(4):
        arrays = read_part(tmp_path / "store", p, expected_num_parts=4)
        owned = arrays["owned_nodes"]
        np.testing.assert_array_equal(part.node_parts[owned], p)
        np.testing.assert_array_equal(arrays["x"], x[owned])
        np.testing.assert_array_equal(arrays["y"], y[owned])
        np.testing.assert_array_equal(arrays["mask_train"], masks["train"][owned])
        local = np.concatenate([owned, arrays["halo_nodes"]])
        rows = np.repeat(owned, np.diff(arrays["indptr"]))
        edges += list(zip(local[arrays["indices"]].tolist(), rows.tolist()))
    assert sorted(edges) == global_edges(g)
    summary = validate_store(tmp_path / "store")
    assert summary["ok"] and summary["num_parts"] == 4 and summary["method"] == "metis"
    assert summary["extra"] == {"dataset": "toy"}
    assert sorted(os.listdir(tmp_path)) == ["store"]  # no temporary folder left


def test_vertex_cut_round_trip(tmp_path, graph_and_data):
    g, x, y, masks = graph_and_data
    part = make_partitioner("libra", num_parts=3, seed=0).fit(g)
    write_store(tmp_path / "vc", g, part, x=x, y=y, masks=masks)
    edges = []
    for p in range(3):
        arrays = read_part(tmp_path / "vc", p)
        local = np.concatenate([arrays["owned_nodes"], arrays["mirror_nodes"]])
        np.testing.assert_array_equal(arrays["x"], x[local])
        np.testing.assert_array_equal(part.edge_parts[arrays["edge_ids"]], p)
        rows = np.repeat(local, np.diff(arrays["indptr"]))
        edges += list(zip(local[arrays["indices"]].tolist(), rows.tolist()))
    assert sorted(edges) == global_edges(g)
    assert validate_store(tmp_path / "vc")["kind"] == "vertex_cut"


def test_damaged_files_are_refused_naming_the_file(tmp_path, graph_and_data):
    g, x, y, masks = graph_and_data
    part = make_partitioner("random", num_parts=3, seed=0).fit(g)
    store = tmp_path / "s"
    write_store(store, g, part, x=x)
    target = store / part_file_name(1)
    data = bytearray(target.read_bytes())
    data[len(data) // 2] ^= 0xFF
    target.write_bytes(bytes(data))
    read_part(store, 0)  # other parts are still readable: only the part's own file is checked
    with pytest.raises(PartitionError, match="part-00001.npz fails its sha256"):
        read_part(store, 1)
    with pytest.raises(PartitionError, match="part-00001.npz"):
        validate_store(store)
    target.write_bytes(bytes(data[:100]))
    with pytest.raises(PartitionError, match="part-00001.npz has 100 bytes.*truncated"):
        read_part(store, 1)
    target.unlink()
    with pytest.raises(PartitionError, match="part-00001.npz is missing"):
        read_part(store, 1)


def test_wrong_rank_count_version_and_missing_store(tmp_path, graph_and_data):
    g = graph_and_data[0]
    store = tmp_path / "s"
    write_store(store, g, make_partitioner("block", num_parts=2).fit(g))
    with pytest.raises(PartitionError, match="has 2 parts but 4 ranks"):
        read_part(store, 0, expected_num_parts=4)
    with pytest.raises(PartitionError, match="part 2 is out of range"):
        read_part(store, 2)
    manifest = json.loads((store / "manifest.json").read_text())
    manifest["format_version"] = 99
    (store / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(PartitionError, match="manifest.json has format_version 99"):
        read_manifest(store)
    (store / "manifest.json").write_text("{not json")
    with pytest.raises(PartitionError, match="manifest.json is unreadable"):
        read_part(store, 0)
    with pytest.raises(PartitionError, match="does not exist"):
        read_manifest(tmp_path / "nowhere")


def test_bad_targets_are_refused_and_nothing_written(tmp_path, graph_and_data, monkeypatch):
    g = graph_and_data[0]
    part = make_partitioner("random", num_parts=2).fit(g)
    with pytest.raises(PartitionError, match="parent folder .*missing.* does not exist"):
        write_store(tmp_path / "missing" / "out", g, part)
    write_store(tmp_path / "out", g, part)
    with pytest.raises(PartitionError, match="already exists"):
        write_store(tmp_path / "out", g, part)
    (tmp_path / "plain").mkdir()
    with pytest.raises(PartitionError, match="not a partition store"):
        write_store(tmp_path / "plain", g, part, overwrite=True)
    with pytest.raises(PartitionError, match="x has shape"):
        write_store(tmp_path / "bad", g, part, x=np.zeros((3, 2)))
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda path, mode: False if str(path) == str(tmp_path)
                        else real_access(path, mode))
    with pytest.raises(PartitionError, match="is not writable"):
        write_store(tmp_path / "new", g, part)
    assert sorted(os.listdir(tmp_path)) == ["out", "plain"]


def test_failure_midway_leaves_nothing(tmp_path, graph_and_data, monkeypatch):
    g, x, _, _ = graph_and_data
    part = make_partitioner("random", num_parts=4).fit(g)
    calls = []
    real_savez = np.savez

    def failing_savez(fh, **arrays):
        calls.append(1)
        if len(calls) == 3:
            raise OSError(28, "No space left on device")
        return real_savez(fh, **arrays)

    monkeypatch.setattr(np, "savez", failing_savez)
    with pytest.raises(PartitionError, match="No space left on device"):
        write_store(tmp_path / "out", g, part, x=x)
    assert os.listdir(tmp_path) == []


def test_overwrite_replaces_atomically(tmp_path, graph_and_data):
    g = graph_and_data[0]
    write_store(tmp_path / "out", g, make_partitioner("random", num_parts=2).fit(g))
    write_store(tmp_path / "out", g, make_partitioner("block", num_parts=3).fit(g),
                overwrite=True)
    assert read_manifest(tmp_path / "out")["partition"]["num_parts"] == 3
    assert os.listdir(tmp_path) == ["out"]


@pytest.mark.parametrize("num_parts", [1, 5])
def test_memory_mapped_graph_store_equals_in_memory_store(tmp_path, num_parts):
    """A converted (memory-mapped) graph is grouped by part through spill files; its store
    holds exactly the arrays of the store written from the graph in memory."""
    from gnnscale.data import load_dataset
    from gnnscale.data.converted import open_converted, write_converted

    data = load_dataset("rmat", scale=9, num_features=4, num_classes=3, seed=2)
    write_converted(data, tmp_path / "graph")
    mapped = open_converted(tmp_path / "graph")
    part = make_partitioner("random", num_parts=num_parts, seed=1).fit(data)
    masks = {"train": data.train_mask}
    write_store(tmp_path / "a", data, part, x=data.x, y=data.y, masks=masks)
    write_store(tmp_path / "b", mapped, part, x=mapped.x, y=mapped.y,
                masks={"train": mapped.train_mask})
    for p in range(num_parts):
        a, b = read_part(tmp_path / "a", p), read_part(tmp_path / "b", p)
        assert a.keys() == b.keys()
        for name in a:
            np.testing.assert_array_equal(a[name], b[name], err_msg=name)
    assert sorted(os.listdir(tmp_path)) == ["a", "b", "graph"]  # spill files are gone

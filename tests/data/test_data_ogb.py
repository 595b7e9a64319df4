"""OGB node-property folders: a small folder written in the ``ogb`` package's on-disk layout."""

import shutil

import numpy as np
import pytest

from gnnscale.data import detect_format, generate_sbm, load_dataset
from gnnscale.data.ogb import load_ogb
from gnnscale.errors import DataError

from data_ogb_layout import write_csv_gz as _csv
from data_ogb_layout import write_ogb


@pytest.fixture
def graph():
    return generate_sbm(num_nodes=120, num_classes=3, num_features=4, num_val=30, num_test=40,
                        seed=2)


def test_round_trip_matches_the_graph_it_was_written_from(tmp_path, graph):
    folder = write_ogb(tmp_path / "ogbn_toy", graph)
    loaded = load_ogb(folder)
    assert loaded.name == "ogbn-toy"
    for field in ("indptr", "indices", "y", "train_mask", "val_mask", "test_mask"):
        assert np.array_equal(getattr(loaded, field), getattr(graph, field)), field
    assert np.array_equal(loaded.x, graph.x)
    assert detect_format(folder) == ("ogb", folder)
    assert load_dataset(folder).summary() == loaded.summary()
    # The dataset root above the folder works too (one dataset inside).
    assert load_dataset(tmp_path).summary() == loaded.summary()


def test_directed_option_keeps_listed_edges(tmp_path, graph):
    loaded = load_ogb(write_ogb(tmp_path / "d", graph), symmetrize=False)
    assert loaded.num_edges == graph.num_edges // 2
    src, dst = loaded.edge_index()
    assert np.all(src < dst)


def test_several_schemes_need_a_choice(tmp_path, graph):
    folder = write_ogb(tmp_path / "multi", graph, schemes=("random", "time"))
    with pytest.raises(DataError, match=r"several split schemes \(random, time\)"):
        load_ogb(folder)
    assert load_ogb(folder, scheme="random").train_mask.sum() == graph.train_mask.sum()
    assert load_dataset(folder, scheme="time").num_nodes == graph.num_nodes
    with pytest.raises(DataError, match="no split scheme 'species'"):
        load_ogb(folder, scheme="species")
    with pytest.raises(DataError, match="one split per scheme"):
        load_ogb(folder, scheme="time", split=1)


def test_unlabeled_nodes_and_missing_features(tmp_path, graph):
    labels = [str(v) for v in graph.y]
    unlabeled = np.flatnonzero(~(graph.train_mask | graph.val_mask | graph.test_mask))[:5]
    for i in unlabeled:
        labels[i] = "nan"
    folder = write_ogb(tmp_path / "u", graph, labels=labels)
    loaded = load_ogb(folder)
    assert np.all(loaded.y[unlabeled] == -1) and loaded.num_classes == 3
    (folder / "raw" / "node-feat.csv.gz").unlink()
    generated = load_ogb(folder)
    assert generated.num_features == 4 and generated.x.dtype == np.float32


@pytest.mark.parametrize("damage, message", [
    (lambda f: (f / "split" / "time" / "valid.csv.gz").unlink(), "missing valid.csv.gz"),
    (lambda f: shutil.rmtree(f / "split"), "no split"),
    (lambda f: (f / "raw" / "node-label.csv.gz").unlink(), "no raw/node-label"),
    (lambda f: _csv(f / "raw" / "node-label.csv.gz", np.ones((120, 2)), "%d"), "multi-label"),
    (lambda f: _csv(f / "raw" / "node-label.csv.gz", np.ones(119), "%d"), "119 rows"),
    (lambda f: (_csv(f / "raw" / "edge.csv.gz", [[0, 500]], "%d"),
                _csv(f / "raw" / "num-edge-list.csv.gz", [1], "%d")), "node id 500"),
    (lambda f: _csv(f / "raw" / "edge.csv.gz", [[0, 5]], "%d"), "has 1 edges but .*says"),
    (lambda f: _csv(f / "split" / "time" / "test.csv.gz", [999], "%d"), "node 999"),
    (lambda f: _csv(f / "raw" / "node-feat.csv.gz", np.ones((3, 4)), "%d"), "3 rows"),
    (lambda f: (f / "raw" / "edge.csv.gz").write_bytes(b"\x1f\x8bxx"), "edge.csv.gz"),
])
def test_damaged_folders(tmp_path, graph, damage, message):
    folder = write_ogb(tmp_path / "bad", graph)
    damage(folder)
    with pytest.raises(DataError, match=message):
        load_ogb(folder)


def test_a_failed_edge_file_stops_the_feature_parse_running_beside_it(tmp_path, monkeypatch):
    """The feature table parses in a background thread while the edges load; an edge error is
    reported as such, the feature parse stops at its next window, and no thread is left."""
    import threading
    import time

    from gnnscale.data import csv_table, numeric_csv

    monkeypatch.setattr(numeric_csv, "WINDOW_BYTES", 1 << 10)  # many windows: a cancel point each
    big = generate_sbm(num_nodes=3000, num_classes=3, num_features=16, seed=4)
    folder = write_ogb(tmp_path / "big", big)
    _csv(folder / "raw" / "edge.csv.gz", [[0, 5], [1, "x"]], "%s")
    batches = []
    real_kernel = numeric_csv.parse_floats

    def slow_kernel(buf, end, out, row, columns, slow):  # 5 ms a window: the table about 2 s
        if columns == 16:
            batches.append(end)
            time.sleep(0.005)
        return real_kernel(buf, end, out, row, columns, slow)

    monkeypatch.setattr(numeric_csv, "parse_floats", slow_kernel)
    csv_table.read_csv_table(folder / "raw" / "node-feat.csv.gz", np.float32)
    whole = len(batches)
    batches.clear()
    with pytest.raises(DataError, match="edge.csv.gz"):
        load_ogb(folder)
    assert not [t for t in threading.enumerate() if t.name == "gnnscale-read"]
    assert whole > 100 and len(batches) < whole // 2, (len(batches), whole)

def test_cancelled_read_raises_cancelled(tmp_path):
    import threading

    from gnnscale.data.background import Cancelled
    from gnnscale.data.csv_table import read_csv_table

    _csv(tmp_path / "t.csv.gz", np.ones((10, 3)), "%d")
    event = threading.Event()
    assert read_csv_table(tmp_path / "t.csv.gz", np.float32, cancel=event).shape == (10, 3)
    event.set()
    with pytest.raises(Cancelled):
        read_csv_table(tmp_path / "t.csv.gz", np.float32, cancel=event)


@pytest.mark.parametrize("available, overlapped", [(None, True), ("1000", False)])
def test_features_parse_beside_the_edges_only_when_memory_allows(tmp_path, graph, monkeypatch,
                                                                 available, overlapped):
    """With little memory available the feature table is read after the CSR is built (lower
    peak), in the caller's thread; either way the result is the same."""
    import threading

    from gnnscale.data import ogb
    from gnnscale.host_memory import AVAILABLE_ENV

    if available is not None:
        monkeypatch.setenv(AVAILABLE_ENV, available)
    threads = {}
    real = ogb.read_csv_table

    def recording(path, *args, **kwargs):
        threads[path.name] = threading.current_thread().name
        return real(path, *args, **kwargs)

    monkeypatch.setattr(ogb, "read_csv_table", recording)
    loaded = load_ogb(write_ogb(tmp_path / "m", graph))
    assert np.array_equal(loaded.x, graph.x) and np.array_equal(loaded.indices, graph.indices)
    assert (threads["node-feat.csv.gz"] == "gnnscale-read") == overlapped, threads
    assert threads["edge.csv.gz"] == threading.current_thread().name

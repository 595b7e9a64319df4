"""OGB's binary node-property layout (papers100M-bin): small graphs written exactly that way."""

import shutil
import zipfile

import numpy as np
import pytest

from gnnscale.data import detect_format, generate_sbm, load_dataset
from gnnscale.data import npz_stream
from gnnscale.data.ogb import load_ogb
from gnnscale.data.ogb_binary import load_ogb_binary
from gnnscale.errors import DataError

from data_ogb_layout import write_csv_gz, write_ogb, write_ogb_binary

FIELDS = ("indptr", "indices", "x", "y", "train_mask", "val_mask", "test_mask")


@pytest.fixture
def graph():
    return generate_sbm(num_nodes=150, num_classes=4, num_features=6, num_val=30, num_test=40,
                        seed=5)


def _unlabelled_labels(graph, count=7):
    """Float labels with NaN on ``count`` nodes outside every split; those nodes' ids."""
    labels = graph.y.astype(np.float64)
    outside = np.flatnonzero(~(graph.train_mask | graph.val_mask | graph.test_mask))[:count]
    labels[outside] = np.nan
    return labels, outside


def test_round_trip_and_detection(tmp_path, graph):
    folder = write_ogb_binary(tmp_path / "papers100M-bin", graph)
    loaded = load_ogb_binary(folder)
    for field in FIELDS:
        assert np.array_equal(getattr(loaded, field), getattr(graph, field)), field
    assert loaded.name == "papers100M-bin" and loaded.x.dtype == np.float32
    assert detect_format(folder) == ("ogb_binary", folder)
    assert load_dataset(folder).summary() == loaded.summary()
    assert load_dataset(tmp_path).summary() == loaded.summary()  # the root above it


def test_same_graph_as_the_csv_layout(tmp_path, graph):
    labels, _ = _unlabelled_labels(graph)
    binary = load_ogb_binary(write_ogb_binary(tmp_path / "b", graph, labels=labels))
    text = load_ogb(write_ogb(tmp_path / "c", graph,
                              labels=["nan" if np.isnan(v) else str(int(v)) for v in labels]))
    for field in FIELDS:
        assert np.array_equal(getattr(binary, field), getattr(text, field)), field


def test_nan_labels_are_unlabelled_and_never_in_a_mask(tmp_path, graph):
    labels, outside = _unlabelled_labels(graph)
    loaded = load_ogb_binary(write_ogb_binary(tmp_path / "u", graph, labels=labels))
    assert np.all(loaded.y[outside] == -1) and loaded.num_classes == 4
    labelled = np.ones(graph.num_nodes, dtype=bool)
    labelled[outside] = False
    assert np.array_equal(loaded.y[labelled], graph.y[labelled])
    for mask in (loaded.train_mask, loaded.val_mask, loaded.test_mask):
        assert not mask[outside].any()
    # A split that lists an unlabelled node is refused, naming the split file.
    labels[np.flatnonzero(graph.train_mask)[0]] = np.nan
    folder = write_ogb_binary(tmp_path / "bad", graph, labels=labels)
    with pytest.raises(DataError, match=r"train.csv.gz lists 1 unlabelled node"):
        load_ogb_binary(folder)


def test_float16_features_are_converted_in_chunks(tmp_path, graph, monkeypatch):
    monkeypatch.setattr(npz_stream, "CHUNK_BYTES", 64)  # 32 float16 values per chunk
    loaded = load_ogb_binary(write_ogb_binary(tmp_path / "h", graph, feat_dtype=np.float16))
    assert loaded.x.dtype == np.float32
    assert np.array_equal(loaded.x, graph.x.astype(np.float16).astype(np.float32))


def test_directed_option_and_scheme_choice(tmp_path, graph):
    folder = write_ogb_binary(tmp_path / "d", graph)
    write_ogb_binary(folder, graph, split="random")
    with pytest.raises(DataError, match="several split schemes"):
        load_ogb_binary(folder)
    loaded = load_ogb_binary(folder, scheme="time", symmetrize=False)
    assert loaded.num_edges == graph.num_edges // 2
    src, dst = loaded.edge_index()
    assert np.all(src < dst)
    assert load_dataset(folder, scheme="random").num_edges == graph.num_edges


def _rewrite(folder, **changes):
    """Rewrite raw/data.npz with some arrays replaced (None removes one)."""
    path = folder / "raw" / "data.npz"
    with np.load(path) as old:
        arrays = {k: old[k] for k in old.files}
    arrays.update(changes)
    np.savez_compressed(path, **{k: v for k, v in arrays.items() if v is not None})


def _corrupt_member_data(folder):
    """Flip bytes inside node_feat's stored data: the zip CRC check must catch it."""
    path = folder / "raw" / "data.npz"
    np.savez(path.with_name("plain.npz"), **dict(np.load(path)))
    path.unlink()
    plain = path.with_name("plain.npz")
    with zipfile.ZipFile(plain) as archive:
        info = archive.getinfo("node_feat.npy")
    data = bytearray(plain.read_bytes())
    data[info.header_offset + 200] ^= 0xFF
    path.write_bytes(bytes(data))
    plain.unlink()


@pytest.mark.parametrize("damage, message", [
    (lambda f: _rewrite(f, num_edges_list=None), "lacks num_edges_list"),
    (lambda f: _rewrite(f, num_nodes_list=np.array([100, 50])), "single graph"),
    (lambda f: _rewrite(f, num_edges_list=np.array([3])), "edge_index has .* edges but "
                                                          "num_edges_list says 3"),
    (lambda f: _rewrite(f, edge_index=np.zeros((5, 2), np.int64),
                        num_edges_list=np.array([2])), r"integer \[2, E\]"),
    (lambda f: _rewrite(f, edge_index=np.zeros((2, 4)), num_edges_list=np.array([4])),
     r"integer \[2, E\].*float64"),
    (lambda f: _rewrite(f, edge_index=np.array([[0], [150]]), num_edges_list=np.array([1])),
     "node id 150"),
    (lambda f: _rewrite(f, node_feat=np.ones((149, 6), np.float32)), r"node_feat must be .*149"),
    (lambda f: _rewrite(f, node_feat=np.array(["a"] * 150)), "node_feat.*numbers"),
    (lambda f: (f / "raw" / "node-label.npz").unlink(), "no raw/node-label.npz"),
    (lambda f: np.savez_compressed(f / "raw" / "node-label.npz", node_label=np.ones((149, 1))),
     "149 rows"),
    (lambda f: np.savez_compressed(f / "raw" / "node-label.npz", node_label=np.full(150, 0.5)),
     "integer class ids or nan; found 0.5"),
    (lambda f: np.savez_compressed(f / "raw" / "node-label.npz", labels=np.ones(150)),
     "no array 'node_label'"),
    (lambda f: (f / "raw" / "data.npz").write_bytes((f / "raw" / "data.npz").read_bytes()[:900]),
     "data.npz"),
    (lambda f: (f / "raw" / "data.npz").write_bytes(b"not a zip"), "not a readable .npz"),
    (_corrupt_member_data, "node_feat.*(unreadable|CRC|Bad)"),
    (lambda f: write_csv_gz(f / "split" / "time" / "valid.csv.gz", [150], "%d"), "node 150"),
    (lambda f: shutil.rmtree(f / "split" / "time"), "no split"),
    (lambda f: ((f / "raw" / "data.npz").rename(f / "raw" / "edge_index_dict.npz")),
     "heterogeneous"),
])
def test_damaged_folders(tmp_path, graph, damage, message):
    folder = write_ogb_binary(tmp_path / "bad", graph)
    damage(folder)
    with pytest.raises(DataError, match=message):
        load_dataset(folder)


def test_an_edge_error_cancels_the_feature_read_beside_it(tmp_path, graph, monkeypatch):
    """node_feat inflates in a background thread while the edges load; an edge error stops
    it (the read sees its cancel event and raises Cancelled) and leaves no thread behind."""
    import threading

    from gnnscale.data import ogb_binary
    from gnnscale.data.background import Cancelled

    folder = write_ogb_binary(tmp_path / "e", graph)
    bad = np.array([[0, 1], [1, graph.num_nodes + 5]], dtype=np.int64)
    _rewrite(folder, edge_index=bad, num_edges_list=np.array([2]))
    seen = {}
    real = npz_stream.read_npz_array

    def feature_read_waiting_for_cancel(path, key, dtype=None, **kwargs):
        if key == "node_feat":
            seen["cancelled"] = kwargs["cancel"].wait(timeout=10)
            try:
                return real(path, key, dtype, **kwargs)
            except Cancelled:
                seen["raised"] = True
                raise
        return real(path, key, dtype, **kwargs)

    monkeypatch.setattr(ogb_binary, "read_npz_array", feature_read_waiting_for_cancel)
    with pytest.raises(DataError, match=f"edge_index.*node id {graph.num_nodes + 5}"):
        load_ogb_binary(folder)
    assert seen == {"cancelled": True, "raised": True}
    assert not [t for t in threading.enumerate() if t.name == "gnnscale-read"]


def test_npy_headers_are_parsed_one_thread_at_a_time(tmp_path, monkeypatch):
    """numpy parses headers with ast.literal_eval, which CPython 3.11 cannot run in two threads
    at once (a background feature read beside the edge read); the parse is serialised."""
    import threading
    import time

    np.savez(tmp_path / "a.npz", x=np.zeros((3, 2), np.float32))
    inside, overlaps = [0], []
    real = np.lib.format.read_array_header_1_0

    def slow_header(member, *args, **kwargs):
        inside[0] += 1
        overlaps.append(inside[0])
        time.sleep(0.05)
        try:
            return real(member, *args, **kwargs)
        finally:
            inside[0] -= 1

    monkeypatch.setattr(np.lib.format, "read_array_header_1_0", slow_header)
    read = npz_stream.npz_array_header
    threads = [threading.Thread(target=read, args=(tmp_path / "a.npz", "x"))
               for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(overlaps) == 4 and max(overlaps) == 1

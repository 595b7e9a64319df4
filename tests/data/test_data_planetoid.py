"""Planetoid raw loader: exact agreement with PyG, errors, and the restricted unpickler."""

import os
import pickle
import shutil

import numpy as np
import pytest

from gnnscale.data import load_dataset
from gnnscale.data.planetoid import load_planetoid
from gnnscale.data.safe_pickle import safe_load, safe_loads
from gnnscale.errors import DataError


@pytest.mark.parametrize("name, counts", [("Cora", (2708, 10556, 1433, 7, 140)),
                                          ("CiteSeer", (3327, 9104, 3703, 6, 120))])
def test_matches_torch_geometric_planetoid(planetoid_copy, name, counts):
    from torch_geometric.datasets import Planetoid
    from torch_geometric.utils import is_undirected

    folder = planetoid_copy(name)
    ours = load_planetoid(folder)
    ref = Planetoid(str(folder.parent), name)[0]
    assert (ours.num_nodes, ours.num_edges, ours.num_features, ours.num_classes,
            int(ours.train_mask.sum())) == counts
    assert np.array_equal(ours.x, ref.x.numpy())
    assert np.array_equal(ours.y, ref.y.numpy())
    for mask in ("train_mask", "val_mask", "test_mask"):
        assert np.array_equal(getattr(ours, mask), getattr(ref, mask).numpy()), mask
    ei = ours.edge_index()
    assert ei.shape == tuple(ref.edge_index.shape)
    assert set(map(tuple, ei.T.tolist())) == set(map(tuple, ref.edge_index.numpy().T.tolist()))
    assert is_undirected(ref.edge_index) and int(ours.val_mask.sum()) == 500
    assert int(ours.test_mask.sum()) == 1000


def test_loads_by_name_and_by_path_from_shared_folder(datasets):
    by_name = load_dataset("CORA", root=datasets)
    by_path = load_dataset(datasets / "Cora")
    by_raw = load_dataset(datasets / "Cora" / "raw")
    assert by_name.summary() == by_path.summary() == by_raw.summary()
    assert by_name.name == "Cora"


def test_missing_folder_and_missing_file(planetoid_copy, tmp_path):
    with pytest.raises(DataError, match="does not exist"):
        load_planetoid(tmp_path / "nowhere")
    folder = planetoid_copy("Cora")
    os.remove(folder / "raw" / "ind.cora.tx")
    with pytest.raises(DataError, match=r"is missing ind\.cora\.tx"):
        load_planetoid(folder)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(DataError, match="no ind.<name>.graph"):
        load_planetoid(empty)


def test_only_public_split(planetoid_copy):
    with pytest.raises(DataError, match="only the public split"):
        load_planetoid(planetoid_copy("Cora"), split=1)


class _Evil:
    def __reduce__(self):
        return (os.system, ("echo pwned",))


def test_restricted_unpickler_refuses_code(tmp_path, planetoid_copy):
    with pytest.raises(DataError, match="refusing to load (posix|os|nt).system"):
        safe_loads(pickle.dumps(_Evil(), protocol=2))
    with pytest.raises(DataError, match="refusing to load builtins.eval"):
        safe_loads(b"\x80\x02cbuiltins\neval\nX\x01\x00\x00\x001\x85R.")
    with pytest.raises(DataError, match="object arrays are not allowed"):
        safe_loads(pickle.dumps(np.array([1, "a"], dtype=object), protocol=2))
    # A Planetoid folder whose graph pickle asks for os.system is refused, naming the file.
    folder = planetoid_copy("Cora")
    (folder / "raw" / "ind.cora.graph").write_bytes(pickle.dumps(_Evil(), protocol=2))
    with pytest.raises(DataError, match=r"ind\.cora\.graph.*refusing"):
        load_planetoid(folder)


def test_restricted_unpickler_reads_plain_data():
    value = {"a": [1, 2, 3], "b": np.arange(5, dtype=np.int32)}
    out = safe_loads(pickle.dumps(value, protocol=2))
    assert out["a"] == [1, 2, 3] and np.array_equal(out["b"], np.arange(5))


def test_corrupt_and_truncated_pickles(datasets, tmp_path):
    data = (datasets / "Cora" / "raw" / "ind.cora.allx").read_bytes()
    for cut in (0, 1, 100, len(data) // 2, len(data) - 1):
        with pytest.raises(DataError, match="ind.cora.allx"):
            (tmp_path / "ind.cora.allx").write_bytes(data[:cut])
            safe_load(tmp_path / "ind.cora.allx")
    with pytest.raises(DataError, match="cannot read"):
        safe_load(tmp_path / "absent")


def test_bad_test_index(planetoid_copy):
    folder = planetoid_copy("Cora")
    (folder / "raw" / "ind.cora.test.index").write_text("12\nnot-a-number\n")
    with pytest.raises(DataError, match="test.index"):
        load_planetoid(folder)
    shutil.rmtree(folder)


@pytest.mark.parametrize("protocol", [2, 4, 5])
def test_restricted_unpickler_reads_arrays_of_every_protocol(protocol):
    import scipy.sparse as sp

    matrix = sp.random(5, 4, density=0.5, format="csr", random_state=0, dtype=np.float32)
    out = safe_loads(pickle.dumps([np.eye(3), matrix], protocol=protocol))
    assert np.array_equal(out[0], np.eye(3))
    assert np.array_equal(out[1].toarray() if sp.issparse(out[1]) else out[1], matrix.toarray())


def test_corrupt_memo_index_is_refused_before_allocating():
    # EMPTY_LIST, LONG_BINPUT 2**31-1, STOP: CPython would size its memo table to 2**31 slots.
    with pytest.raises(DataError, match="memo slot 2147483647"):
        safe_loads(b"\x80\x02]r\xff\xff\xff\x7f.")

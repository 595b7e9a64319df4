"""Training from a vertex-cut partition store equals in-memory vertex-cut training.

`gnnscale partition --method libra` (or hdrf) writes the store; `gnnscale train --partitions DIR`
on it must give, epoch for epoch, exactly the losses, accuracies, halo bytes and staleness record
of `gnnscale train --partitioner libra` with the same seed (both build identical parts), on 1-3
ranks and under the staleness policies.
"""

import numpy as np
import pytest

from mpi_launch import gnnscale_cli
from test_store_training import epoch_records, partition_cora

from gnnscale.engine.vertex_cut_problem import vertex_cut_store_view
from gnnscale.errors import UsageError

pytestmark = pytest.mark.timeout(600)

KEYS = ("epoch", "loss", "train_acc", "val_acc", "test_acc", "halo_bytes_sent", "staleness")


@pytest.fixture(scope="module")
def vertex_cut_stores(tmp_path_factory, datasets_root):
    """``(method, parts) -> store`` of Cora, each written once by `gnnscale partition`."""
    stores = {}

    def get(method, parts):
        if (method, parts) not in stores:
            out = tmp_path_factory.mktemp(method) / f"cora-{parts}"
            stores[method, parts] = partition_cora(datasets_root, out, method, parts)
        return stores[method, parts]
    return get


@pytest.mark.parametrize("nprocs,method,model,staleness", [
    (1, "libra", "gcn", "exact"), (2, "libra", "sage", "exact"), (3, "libra", "gcn", "exact"),
    (2, "libra", "gcn", "delayed:2"), (3, "libra", "gcn", "pipelined"),
    (2, "hdrf", "gcn", "local")])
def test_vertex_cut_store_training_matches_in_memory(nprocs, method, model, staleness,
                                                     vertex_cut_stores, datasets_root, tmp_path):
    store = vertex_cut_stores(method, nprocs)
    common = ["--epochs", "4", "--dropout", "0", "--no-progress", "--model", model,
              "--staleness", staleness]
    from_store = gnnscale_cli(nprocs, ["train", "--partitions", str(store), *common,
                                       "--metrics-out", str(tmp_path / "store.jsonl")])
    assert from_store.returncode == 0, from_store.stderr
    assert nprocs == 1 or f"partition {method}" in from_store.stdout
    in_memory = gnnscale_cli(nprocs, ["train", "--dataset", "cora", "--data-root",
                                      str(datasets_root), "--partitioner", method, *common,
                                      "--metrics-out", str(tmp_path / "memory.jsonl")])
    assert in_memory.returncode == 0, in_memory.stderr
    got = epoch_records(tmp_path / "store.jsonl", KEYS)
    assert len(got) == 4
    assert got == epoch_records(tmp_path / "memory.jsonl", KEYS)
    if nprocs > 1:
        assert got[0]["halo_bytes_sent"] > 0  # the parts really exchange mirrors
    if staleness == "delayed:2":
        assert got[1]["halo_bytes_sent"] < got[0]["halo_bytes_sent"]
    if staleness == "local":
        assert all(r["halo_bytes_sent"] == 0 for r in got[1:])


def test_vertex_cut_store_with_wrong_number_of_ranks(vertex_cut_stores):
    store = vertex_cut_stores("libra", 3)
    wrong = gnnscale_cli(2, ["train", "--partitions", str(store), "--epochs", "2",
                             "--no-progress"])
    assert wrong.returncode == 2 and "Traceback" not in wrong.stderr
    errors = [line for line in wrong.stderr.splitlines() if "error" in line]
    assert errors == [f"gnnscale: error: store {store} has 3 parts but 2 ranks were started; "
                      f"run with 3 ranks or re-partition"], wrong.stderr

def _part_arrays(num_owned=3, num_mirrors=2, x_rows=None):
    num_local = num_owned + num_mirrors
    return {"owned_nodes": np.arange(num_owned), "mirror_nodes": np.arange(10, 10 + num_mirrors),
            "mirror_owner": np.ones(num_mirrors, np.int32),
            "indptr": np.zeros(num_local + 1, np.int64), "indices": np.zeros(0, np.int64),
            "edge_ids": np.zeros(0, np.int64),
            "x": np.arange(4 * (x_rows or num_local), dtype=np.float32).reshape(-1, 4),
            "y": np.zeros(num_owned, np.int64),
            **{f"mask_{s}": np.ones(num_owned, bool) for s in ("train", "val", "test")}}


def test_vertex_cut_store_view_keeps_masters_rows_of_x():
    arrays = _part_arrays()
    view, x = vertex_cut_store_view(arrays, "part-00000.npz")
    assert sorted(view) == ["indices", "indptr", "mirror_nodes", "mirror_owner", "owned_nodes"]
    np.testing.assert_array_equal(x, arrays["x"][:3])
    masters_only = _part_arrays(x_rows=3)
    assert vertex_cut_store_view(masters_only, "p")[1] is masters_only["x"]


@pytest.mark.parametrize("damage,message", [
    (lambda a: a.pop("mirror_owner"), "lacks the vertex-cut arrays mirror_owner"),
    (lambda a: a.update(x=a["x"][:4]), "x has shape (4, 4), expected 5"),
    (lambda a: a.update(indptr=a["indptr"][:-1]), "indptr"),
    (lambda a: a.update(y=a["y"][:1]), "y has shape (1,) for 3 masters")])
def test_vertex_cut_store_view_refuses_bad_parts(damage, message):
    arrays = _part_arrays()
    damage(arrays)
    with pytest.raises(UsageError, match="part-00001.npz") as raised:
        vertex_cut_store_view(arrays, "store/part-00001.npz")
    assert message in str(raised.value) and "\n" not in str(raised.value)

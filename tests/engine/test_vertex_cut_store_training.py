"""Training from a vertex-cut partition store equals in-memory vertex-cut training.

`gnnscale partition --method libra` (or hdrf) writes the store; `gnnscale train --partitions DIR`
on it must give, epoch for epoch, exactly the losses, accuracies, halo bytes and staleness record
of `gnnscale train --partitioner libra` with the same seed (both build identical parts), on 1-3
ranks and under the staleness policies.
"""

import numpy as np
import pytest

from mpi_launch import gnnscale_cli_batch
from test_store_training import epoch_records

from gnnscale.engine.vertex_cut_problem import vertex_cut_store_view
from gnnscale.errors import UsageError

pytestmark = pytest.mark.timeout(600)

KEYS = ("epoch", "loss", "train_acc", "val_acc", "test_acc", "halo_bytes_sent", "staleness")


CASES = [(1, "libra", "gcn", "exact"), (2, "libra", "sage", "exact"), (3, "libra", "gcn", "exact"),
         (2, "libra", "gcn", "delayed:2"), (3, "libra", "gcn", "pipelined"),
         (2, "hdrf", "gcn", "local")]


@pytest.fixture(scope="module")
def runs(tmp_path_factory, datasets_root):
    """Every case trained from its store and in memory: ``(case, "store"|"memory") -> (result,
    metrics file)``, ``(method, parts) -> store``, and ``"wrong"``: the 3-part libra store
    trained on 2 ranks. One launch per rank count and source, so each comparison is between
    two processes; the in-memory launch runs its cases in the opposite order, so that state one
    command left behind could not make both sides agree. The stores are written by `gnnscale
    partition`. The wrong run ends the 2-rank store launch: it leaves nothing behind for a
    comparison, and nothing the runs before it left could write its error line (an error
    every rank finds alike, so all of them return it and the launch goes on)."""
    root = tmp_path_factory.mktemp("vertex-cut")
    stores = {(method, nprocs): root / f"cora-{method}-{nprocs}" for nprocs, method, *_ in CASES}
    made = gnnscale_cli_batch(None, [
        ["partition", "--dataset", "cora", "--data-root", datasets_root, "--method", method,
         "--parts", parts, "--out", store] for (method, parts), store in stores.items()])
    assert all(m.returncode == 0 for m in made), made[0].stderr
    runs = dict(stores)
    for nprocs in sorted({case[0] for case in CASES}):
        for source in ("store", "memory"):
            cases = [case for case in CASES if case[0] == nprocs][::1 if source == "store" else -1]
            args_list, files = [], []
            for case in cases:
                _, method, model, staleness = case
                files.append(root / f"{source}-{'-'.join(map(str, case))}.jsonl")
                data = (["--partitions", stores[method, nprocs]] if source == "store" else
                        ["--dataset", "cora", "--data-root", datasets_root,
                         "--partitioner", method])
                args_list.append(["train", *data, "--epochs", "4", "--dropout", "0",
                                  "--no-progress", "--model", model, "--staleness", staleness,
                                  "--metrics-out", files[-1]])
            wrong = (nprocs, source) == (2, "store")
            if wrong:
                args_list.append(["train", "--partitions", stores["libra", 3], "--epochs", "2",
                                  "--no-progress"])
            done = gnnscale_cli_batch(nprocs, args_list)
            for case, result, path in zip(cases, done, files):
                runs[case, source] = result, path
            if wrong:
                runs["wrong"] = done[-1]
    return runs


@pytest.mark.parametrize("case", CASES, ids=lambda case: "-".join(map(str, case)))
def test_vertex_cut_store_training_matches_in_memory(case, runs):
    nprocs, method, _, staleness = case
    from_store, store_metrics = runs[case, "store"]
    assert from_store.returncode == 0, from_store.stderr
    assert nprocs == 1 or f"partition {method}" in from_store.stdout
    in_memory, memory_metrics = runs[case, "memory"]
    assert in_memory.returncode == 0, in_memory.stderr
    got = epoch_records(store_metrics, KEYS)
    assert len(got) == 4
    assert got == epoch_records(memory_metrics, KEYS)
    if nprocs > 1:
        assert got[0]["halo_bytes_sent"] > 0  # the parts really exchange mirrors
    if staleness == "delayed:2":
        assert got[1]["halo_bytes_sent"] < got[0]["halo_bytes_sent"]
    if staleness == "local":
        assert all(r["halo_bytes_sent"] == 0 for r in got[1:])


def test_vertex_cut_store_with_wrong_number_of_ranks(runs):
    store, wrong = runs["libra", 3], runs["wrong"]
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

"""KaMinPar edge cut: the ParHIP file it reads, partitions, balance, bad input, temporary files,
and the CLI commands (``partition``, ``tune``, ``train`` under mpirun) with ``kaminpar``."""

import errno
import json
import math
import os

import numpy as np
import pytest
import scipy.sparse as sp

kaminpar = pytest.importorskip("kaminpar")

from partition_testutil import GraphWithMask, load_snap, random_graph, two_cliques  # noqa: E402
from partitioning import (CSRGraph, PartitionError, edge_cut, halo_counts,  # noqa: E402
                          make_partitioner, part_summary)
from partitioning.edge_cut import kaminpar as kaminpar_module  # noqa: E402
from partitioning.edge_cut.parhip import read_parhip, write_parhip  # noqa: E402


def messy_graph(n: int = 500, m: int = 3000, seed: int = 0) -> CSRGraph:
    """Directed graph with self loops, repeated edges and isolated nodes at the end."""
    rng = np.random.default_rng(seed)
    src = rng.integers(0, n - 40, m)
    dst = rng.integers(0, n - 40, m)
    loops = np.arange(0, 50)
    src = np.concatenate([src, src[:200], loops])  # 200 repeats, 50 self loops
    dst = np.concatenate([dst, dst[:200], loops])
    return CSRGraph.from_edge_index(src, dst, n)


def undirected_simple(graph: CSRGraph) -> sp.csr_matrix:
    """Reference: boolean symmetric adjacency without the diagonal."""
    a = graph.to_scipy()
    s = ((a + a.T) > 0).astype(np.int8).tolil()
    s.setdiag(0)
    s = s.tocsr()
    s.eliminate_zeros()
    return s


# --- the ParHIP file ---------------------------------------------------------------------


@pytest.mark.parametrize("block_entries", [1, 7, 1 << 22])
def test_parhip_file_holds_the_undirected_simple_graph(tmp_path, block_entries):
    g = messy_graph()
    path = tmp_path / "g.parhip"
    m = write_parhip(path, g, block_entries=block_entries)
    indptr, neighbours, weights = read_parhip(path)
    ref = undirected_simple(g)
    got = sp.csr_matrix((np.ones(m), np.asarray(neighbours, dtype=np.int64), indptr),
                        shape=ref.shape)
    assert weights is None and m == ref.nnz and got.max() == 1  # no repeats
    assert (got != ref).nnz == 0
    assert path.stat().st_size == 24 + (g.num_nodes + 1) * 8 + m * 4
    header = np.fromfile(path, dtype=np.uint64, count=3)
    assert header.tolist() == [0b101011, g.num_nodes, m]  # no weights, 32-bit ids


def test_kaminpar_reads_the_file_and_its_node_weights(tmp_path):
    g = messy_graph(200, 800, seed=4)
    weights = np.arange(g.num_nodes, dtype=np.int64) % 5 + 1
    path = tmp_path / "w.parhip"
    write_parhip(path, g, weights)
    kgraph = kaminpar.load_graph(str(path), kaminpar.GraphFileFormat.PARHIP)
    ref = undirected_simple(g)
    assert (kgraph.n(), kgraph.m()) == (g.num_nodes, ref.nnz) and kgraph.is_node_weighted()
    for u in (0, 7, 150, g.num_nodes - 1):
        assert sorted(v for v, _ in kgraph.neighbors(u)) == sorted(ref[u].indices.tolist())
        assert kgraph.node_weight(u) == weights[u]
    assert read_parhip(path)[2].tolist() == weights.tolist()


def test_parhip_refuses_bad_weights(tmp_path):
    g = two_cliques(3)
    with pytest.raises(PartitionError, match="node weights must lie in"):
        write_parhip(tmp_path / "x", g, -np.ones(g.num_nodes, dtype=np.int64))
    with pytest.raises(PartitionError, match="node_weights has shape"):
        write_parhip(tmp_path / "x", g, np.ones(2, dtype=np.int64))


def test_memory_mapped_input(tmp_path):
    g = messy_graph()
    np.save(tmp_path / "indptr.npy", g.indptr)
    np.save(tmp_path / "indices.npy", g.indices.astype(np.int32))
    mapped = CSRGraph(np.load(tmp_path / "indptr.npy", mmap_mode="r"),
                      np.load(tmp_path / "indices.npy", mmap_mode="r"))
    a = make_partitioner("kaminpar", num_parts=4, seed=1, threads=1).fit(mapped)
    b = make_partitioner("kaminpar", num_parts=4, seed=1, threads=1).fit(g)
    np.testing.assert_array_equal(a.node_parts, b.node_parts)


# --- partitions ----------------------------------------------------------------------------


@pytest.mark.parametrize("num_parts", [2, 3, 16, 64])
@pytest.mark.parametrize("preset", ["default", "largek", "fast", "terapart"])
def test_valid_and_balanced_partition(num_parts, preset):
    g = messy_graph()
    part = make_partitioner("kaminpar", num_parts=num_parts, seed=2, preset=preset,
                            imbalance=0.05).fit(g)
    assert part.kind == "edge_cut" and part.edge_parts is None and part.method == "kaminpar"
    assert part.node_parts.shape == (g.num_nodes,) and part.node_parts.dtype == np.int32
    assert part.node_parts.min() >= 0 and part.node_parts.max() < num_parts
    assert part.params == {"num_parts": num_parts, "seed": 2, "preset": preset,
                           "imbalance": 0.05, "balance": ["nodes"], "threads": None,
                           "compress": None, "tmp_dir": None}
    limit = 1.05 * math.ceil(g.num_nodes / num_parts)
    assert part.part_sizes().max() <= limit


def test_deterministic_for_a_seed_on_one_thread():
    g = random_graph(3000, 15000, seed=2)
    runs = [make_partitioner("kaminpar", num_parts=8, seed=s, threads=1).fit(g).node_parts
            for s in (11, 11, 12)]
    np.testing.assert_array_equal(runs[0], runs[1])
    assert not np.array_equal(runs[0], runs[2])


def test_cuts_two_cliques_at_the_bridge():
    g = two_cliques(6, isolated=3)
    part = make_partitioner("kaminpar", num_parts=2, seed=0, threads=1).fit(g)
    assert len(set(part.node_parts[:6])) == 1 and len(set(part.node_parts[6:12])) == 1
    assert part.node_parts[0] != part.node_parts[6]
    assert edge_cut(g, part) == 2


def test_one_part_and_isolated_only_graphs():
    g = messy_graph()
    assert not make_partitioner("kaminpar", num_parts=1).fit(g).node_parts.any()
    empty = CSRGraph(np.zeros(51, dtype=np.int64), [])
    part = make_partitioner("kaminpar", num_parts=5, seed=0).fit(empty)
    assert part.part_sizes().tolist() == [10] * 5
    loops_only = CSRGraph.from_edge_index(np.arange(20), np.arange(20), 20)
    assert make_partitioner("kaminpar", num_parts=4).fit(loops_only).part_sizes().max() <= 5


def test_multi_target_balance():
    g = random_graph(2000, 12000, seed=5, isolated_fraction=0.05)
    train = np.zeros(2000, bool)
    train[:300] = True  # concentrated on low ids on purpose
    graph = GraphWithMask(g, train)
    part = make_partitioner("kaminpar", num_parts=4, seed=0, threads=1,
                            balance=("nodes", "edges", "train")).fit(graph)
    s = part_summary(graph, part)
    assert s["balance_nodes"] <= 1.06 and s["balance_train"] <= 1.06
    assert s["balance_edges"] <= 1.10
    edges_only = make_partitioner("kaminpar", num_parts=4, seed=0, balance="edges").fit(g)
    assert part_summary(g, edges_only)["balance_edges"] <= 1.06
    with pytest.raises(PartitionError, match="train_mask"):
        make_partitioner("kaminpar", num_parts=2, balance=("train",)).fit(g)


def test_quality_on_snap_facebook_matches_metis():
    g = load_snap("SNAP-facebook-combined", "facebook-combined.txt.gz")
    kmp = make_partitioner("kaminpar", num_parts=8, seed=0, preset="default").fit(g)
    metis = make_partitioner("metis", num_parts=8, seed=0).fit(g)
    assert edge_cut(g, kmp) <= 1.15 * edge_cut(g, metis)
    assert halo_counts(g, kmp).sum() <= 1.15 * halo_counts(g, metis).sum()


# --- bad input and temporary files ---------------------------------------------------------


@pytest.mark.parametrize("kwargs, match", [
    ({"num_parts": 501}, r"num_parts=501 exceeds the number of nodes \(500\)"),
    ({"num_parts": 0}, "num_parts=0 must be at least 1"),
    ({"num_parts": 2, "preset": "turbo"}, "preset='turbo' is not a KaMinPar preset; choose "
                                          "one of: .*largek"),
    ({"num_parts": 2, "imbalance": 0}, r"imbalance=0 must be a number in \(0, 10\)"),
    ({"num_parts": 2, "imbalance": True}, "imbalance=True must be a number"),
    ({"num_parts": 2, "threads": 0}, "threads=0 must be a positive integer or None"),
    ({"num_parts": 2, "threads": 1.5}, "threads=1.5 must be a positive integer"),
    ({"num_parts": 2, "compress": "yes"}, "compress='yes' must be True, False or None"),
    ({"num_parts": 2, "preset": "terapart", "compress": False}, "needs a compressed graph"),
    ({"num_parts": 2, "tmp_dir": "/no/such/folder"}, "tmp_dir='/no/such/folder' is not an"),
    ({"num_parts": 2, "balance": ("cats",)}, "balance=.*cats"),
    ({"num_parts": 2, "recursive": True}, "unknown parameter 'recursive'"),
])
def test_bad_parameters_are_refused_in_one_line(kwargs, match):
    with pytest.raises(PartitionError, match=match) as exc:
        make_partitioner("kaminpar", **kwargs).fit(messy_graph())
    assert "\n" not in str(exc.value)


def test_temporary_files_removed_after_success_and_failure(tmp_path, monkeypatch):
    work = tmp_path / "work"
    work.mkdir()
    g = messy_graph()
    seen = []
    real_write = kaminpar_module.write_parhip

    def spy_write(path, *args, **kwargs):
        seen.append(path)
        return real_write(path, *args, **kwargs)

    monkeypatch.setattr(kaminpar_module, "write_parhip", spy_write)
    make_partitioner("kaminpar", num_parts=4, tmp_dir=str(work)).fit(g)
    make_partitioner("kaminpar", num_parts=4, tmp_dir=work, balance=("nodes", "edges")).fit(g)
    assert len(seen) == 2 and os.listdir(work) == []

    class Exploding:
        def __init__(self, *args):
            pass

        def compute_partition(self, *args):
            assert any(work.iterdir())  # the file exists while KaMinPar runs
            raise MemoryError("std::bad_alloc")

    monkeypatch.setattr(kaminpar, "KaMinPar", Exploding)
    with pytest.raises(MemoryError):
        make_partitioner("kaminpar", num_parts=4, tmp_dir=work).fit(g)
    assert os.listdir(work) == []


def test_full_disk_is_one_line_and_leaves_nothing(tmp_path, monkeypatch):
    work = tmp_path / "work"
    work.mkdir()

    def full_disk(path, *args, **kwargs):
        path.write_bytes(b"partial")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(kaminpar_module, "write_parhip", full_disk)
    with pytest.raises(PartitionError, match="cannot write the temporary ParHIP file in "
                                             ".*No space left on device") as exc:
        make_partitioner("kaminpar", num_parts=4, tmp_dir=work).fit(messy_graph())
    assert "\n" not in str(exc.value) and os.listdir(work) == []


# --- the CLI -------------------------------------------------------------------------------

SBM = ["--dataset", "sbm", "--num-nodes", "300"]


def test_cli_partition_with_kaminpar(tmp_path, capsys):
    main = pytest.importorskip("gnnscale.cli.main").main
    from partitioning.store import read_part

    out = tmp_path / "store"
    assert main(["partition", *SBM, "--method", "kaminpar", "--parts", "4", "--balance",
                 "nodes,edges", "--param", "preset=default", "--param", "threads=1",
                 "--out", str(out)]) == 0
    assert "edge cut" in capsys.readouterr().out
    owned = np.concatenate([read_part(out, p, expected_num_parts=4)["owned_nodes"]
                            for p in range(4)])
    assert np.array_equal(np.sort(owned), np.arange(300))
    assert main(["info", str(out), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["method"] == "kaminpar" and summary["params"]["preset"] == "default"
    assert summary["params"]["balance"] == ["nodes", "edges"]


@pytest.mark.parametrize("argv, message", [
    (["--method", "kaminpar", "--param", "preset=turbo"], "preset='turbo' is not a KaMinPar"),
    (["--method", "ldg", "--balance", "nodes"],
     "--balance applies to --method kaminpar or metis, not 'ldg'"),
])
def test_cli_partition_refuses_in_one_line(tmp_path, capsys, argv, message):
    main = pytest.importorskip("gnnscale.cli.main").main
    assert main(["partition", *SBM, "--parts", "2", *argv, "--out", str(tmp_path / "s")]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1
    assert os.listdir(tmp_path) == []


def test_cli_tune_with_kaminpar(tmp_path, capsys):
    main = pytest.importorskip("gnnscale.cli.main").main
    prefix = tmp_path / "tune"
    assert main(["tune", *SBM, "--methods", "kaminpar,metis", "--parts", "2,8",
                 "--out", str(prefix), "--no-plot", "--no-progress"]) == 0
    rows = json.loads(prefix.with_suffix(".json").read_text())["rows"]
    assert sorted((r["method"], r["parts"]) for r in rows) == [
        ("kaminpar", 2), ("kaminpar", 8), ("metis", 2), ("metis", 8)]


def test_cli_train_with_kaminpar_on_two_ranks():
    pytest.importorskip("torch")
    from mpi_launch import gnnscale_cli

    result = gnnscale_cli(2, ["train", *SBM, "--partitioner", "kaminpar", "--balance",
                              "nodes,edges", "--epochs", "3", "--no-progress"], timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "kaminpar" in result.stdout
    bad = gnnscale_cli(None, ["train", *SBM, "--partitioner", "fennel", "--balance", "nodes",
                              "--epochs", "1"], timeout=120)
    assert bad.returncode == 2
    assert "--balance applies to --partitioner kaminpar or metis, not 'fennel'" in bad.stderr

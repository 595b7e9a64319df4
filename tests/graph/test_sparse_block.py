"""SparseBlock's compact storage and the rank graph's cache of constant-input aggregates."""

import gc
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from gnnscale.comm.single import SingleCommunicator
from gnnscale.data import generate_sbm
from gnnscale.graph import LocalGraph
from gnnscale.graph import sparse as sparse_module
from gnnscale.graph.rank_graph import off_heap_copy
from gnnscale.graph.sparse import SparseBlock
from partitioning.local_view import build_part_view


def _matrix(rows=300, cols=200, seed=0):
    return sp.random(rows, cols, density=0.05, format="csr", random_state=seed,
                     dtype=np.float64)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_block_keeps_int32_indices_and_values_in_its_dtype(dtype):
    matrix = _matrix()
    block = SparseBlock(matrix, dtype)
    for part in (block._forward, block._transpose):
        assert part.indices.dtype == np.int32 and part.indptr.dtype == np.int64
        assert list(part.values) == [np.float64 if dtype == torch.float64 else np.float32]
    per_nnz = 4 + (8 if dtype == torch.float64 else 4)
    assert block.nbytes == 2 * per_nnz * matrix.nnz + 8 * (sum(matrix.shape) + 2)
    x = torch.randn(200, 7, dtype=dtype)
    y = torch.randn(300, 7, dtype=dtype)
    tol = 1e-12 if dtype == torch.float64 else 1e-5
    np.testing.assert_allclose(block.matmul(x).numpy(), matrix @ x.numpy(), rtol=tol, atol=tol)
    np.testing.assert_allclose(block.matmul_transposed(y).numpy(), matrix.T @ y.numpy(),
                               rtol=tol, atol=tol)


def test_block_casts_values_for_another_dtype_once(monkeypatch):
    matrix = _matrix()
    block = SparseBlock(matrix, torch.float32)
    x = torch.randn(200, 3, dtype=torch.float64)
    out = block.matmul(x)
    assert out.dtype == torch.float64
    np.testing.assert_allclose(out.numpy(), matrix.astype(np.float32).astype(np.float64)
                               @ x.numpy(), rtol=1e-12)
    assert set(block._forward.values) == {np.float32, np.float64}


def test_wide_matrices_keep_int64_indices(monkeypatch):
    monkeypatch.setattr(sparse_module, "INT32_COLUMNS", 100)
    matrix = _matrix()
    block = SparseBlock(matrix, torch.float32)  # 200 and 300 columns, both above 100
    assert block._forward.indices.dtype == block._transpose.indices.dtype == np.int64
    x = torch.randn(200, 4)
    np.testing.assert_allclose(block.matmul(x).numpy(), matrix @ x.numpy(), rtol=1e-5,
                               atol=1e-5)


def test_torch_kernel_reads_the_same_arrays():
    matrix = _matrix()
    block = SparseBlock(matrix, torch.float32)
    x = torch.randn(200, 5)
    compiled = block.matmul(x)
    sparse_module.set_cpu_kernel("torch")
    try:
        through_torch = block.matmul(x)
    finally:
        sparse_module.set_cpu_kernel("compiled")
    torch.testing.assert_close(through_torch, compiled, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kernel,dtype", [("compiled", torch.float32),
                                          ("compiled", torch.bfloat16),
                                          ("torch", torch.float32)])
@pytest.mark.parametrize("orientation", ["matmul", "matmul_transposed"])
def test_product_added_into_a_tensor_in_place(kernel, dtype, orientation):
    """``A @ x`` into a [rows, F] tensor, ``A.T @ y`` into a [cols, F] one (the vertex cut's
    backward sums its blocks' products so): the sum, bit for bit; an empty block leaves the
    tensor as it is."""
    rows, cols = (300, 200) if orientation == "matmul" else (200, 300)
    block = SparseBlock(_matrix(), torch.float32)
    product = getattr(block, orientation)
    x, base = torch.randn(cols, 6).to(dtype), torch.randn(rows, 6).to(dtype)
    sparse_module.set_cpu_kernel(kernel)
    try:
        expected = base + product(x)
        target = base.clone()
        assert product(x, add_to=target) is target
    finally:
        sparse_module.set_cpu_kernel("compiled")
    assert torch.equal(target, expected)  # the sum, bit for bit
    empty = getattr(SparseBlock(sp.csr_matrix((300, 200)), torch.float32), orientation)
    assert empty(x, add_to=target) is target and torch.equal(target, expected)


def _one_rank_graph():
    data = generate_sbm(num_nodes=200, num_features=6, avg_degree=4.0, seed=1)
    view = build_part_view(data, np.zeros(data.num_nodes, dtype=np.int64), 0, num_parts=1)
    return LocalGraph(view, SingleCommunicator()), torch.from_numpy(data.x)


def test_constant_input_aggregate_is_reused_while_the_input_lives():
    graph, x = _one_rank_graph()
    first = graph.aggregate(x, "gcn")
    again = graph.aggregate(x, "gcn")  # same tensor, same version: served, moved off the heap
    assert torch.equal(again, first) and _mapping_of(again.data_ptr()) != "[heap]"
    assert graph.aggregate(x, "gcn") is again
    x.mul_(2.0)  # a new version is aggregated again
    second = graph.aggregate(x, "gcn")
    assert second is not first
    torch.testing.assert_close(second, 2.0 * first)


def test_raw_features_stay_cached_across_a_step_that_aggregates_a_dropped_out_copy():
    graph, x = _one_rank_graph()
    with torch.no_grad():  # evaluation
        raw = graph.aggregate(x, "gcn")
    for _ in range(3):  # training steps: a new dropped-out input each
        dropped = torch.nn.functional.dropout(x, 0.5)
        assert graph.aggregate(dropped, "gcn") is not raw
        del dropped
        with torch.no_grad():
            assert graph.aggregate(x, "gcn") is raw  # the next evaluation: not aggregated again
    # beyond the slots the oldest goes: two live inputs aggregated after it
    a, b = x + 1.0, x + 2.0
    graph.aggregate(a, "gcn")
    graph.aggregate(b, "gcn")
    assert graph.aggregate(x, "gcn") is not raw
    assert graph._constant_cache.count("gcn") == graph.CONSTANT_SLOTS


def _mapping_of(address: int) -> str | None:
    """The pathname column of the /proc/self/maps line holding ``address`` ('' if none)."""
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split()
            lo, hi = (int(v, 16) for v in fields[0].split("-"))
            if lo <= address < hi:
                return fields[5] if len(fields) > 5 else ""
    return None


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="needs /proc/self/maps")
def test_an_aggregate_kept_for_evaluation_lives_outside_the_heap():
    graph, x = _one_rank_graph()
    with torch.no_grad():
        kept = graph.aggregate(x, "gcn")
    expected = graph.aggregate(x.clone(), "gcn")
    torch.testing.assert_close(kept, expected, rtol=0, atol=0)
    assert _mapping_of(kept.data_ptr()) not in (None, "[heap]")
    assert off_heap_copy(torch.empty(0, 3)).shape == (0, 3)


def test_cache_does_not_keep_a_dead_input_or_its_aggregate():
    graph, x = _one_rank_graph()
    dropped = torch.nn.functional.dropout(x, 0.5)  # new every step, no gradient
    out = graph.aggregate(dropped, "gcn")
    assert "gcn" in graph._constant_cache
    del dropped
    gc.collect()
    assert "gcn" not in graph._constant_cache  # neither the input nor `out` is held
    assert out.shape == x.shape


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_a_block_of_some_rows_equals_those_rows_of_the_matrix(dtype):
    matrix = _matrix(rows=400, cols=150, seed=3)
    block = SparseBlock(matrix, dtype)
    rows = np.array([399, 0, 17, 17, 250, 3], dtype=np.int64)  # any order, repeats allowed
    part = block.take_rows(rows)
    assert part.shape == (rows.size, 150) and part.nnz == matrix[rows].nnz
    dense = torch.randn(150, 5, dtype=dtype)
    want = torch.from_numpy(matrix[rows].astype(np.float32 if dtype == torch.float32
                                                else np.float64).toarray()) @ dense
    torch.testing.assert_close(part.matmul(dense), want)
    back = torch.randn(rows.size, 5, dtype=dtype)
    torch.testing.assert_close(part.matmul_transposed(back),
                               want.new_tensor(matrix[rows].toarray()).t() @ back)
    assert block.take_rows(np.zeros(0, np.int64)).nnz == 0


def test_take_rows_renumbers_columns_to_the_ones_given():
    matrix = _matrix(rows=300, cols=200, seed=4)
    block = SparseBlock(matrix, torch.float32)
    rows = np.array([5, 120, 7, 299], dtype=np.int64)
    used = np.unique(matrix[rows].indices)
    columns = np.union1d(used, [0, 199]).astype(np.int64)  # sorted, a superset of the used
    part = block.take_rows(rows, columns)
    assert part.shape == (rows.size, columns.size) and part.nnz == matrix[rows].nnz
    dense = torch.randn(200, 6)
    want = torch.from_numpy(matrix[rows].astype(np.float32).toarray()) @ dense
    torch.testing.assert_close(part.matmul(dense[torch.from_numpy(columns)]), want)
    with pytest.raises(ValueError, match="outside the columns given"):
        block.take_rows(rows, used[1:])

"""The compiled CSR product prefetches the row it will gather PREFETCH_EDGES non-zeros ahead:
a hint that must not change a result or read past the arrays, whatever the edge count
(fewer non-zeros than the distance, the last rows' sources) and row width (narrower than
a cache line, not a multiple of one)."""

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from gnnscale.graph import kernels
from gnnscale.graph.bf16_bits import as_bits, from_bits
from gnnscale.graph.prefetch import PREFETCH_EDGES


def _matrix(rows, cols, nnz, seed):
    rng = np.random.default_rng(seed)
    r, c = rng.integers(0, rows, nnz), rng.integers(0, cols, nnz)
    c[-PREFETCH_EDGES:] = cols - 1  # the last non-zeros gather the array's last row
    return sp.csr_matrix((rng.random(nnz).astype(np.float32), (r, c)), shape=(rows, cols))


@pytest.mark.parametrize("nnz", [1, PREFETCH_EDGES - 1, PREFETCH_EDGES, PREFETCH_EDGES + 1,
                                 5000])
@pytest.mark.parametrize("width", [1, 7, 16, 100])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_float_products_equal_scipy(nnz, width, dtype):
    matrix = _matrix(300, 200, nnz, seed=nnz + width)
    matrix.sum_duplicates()
    x = np.random.default_rng(width).standard_normal((200, width)).astype(dtype)
    args = (matrix.indptr.astype(np.int64), matrix.indices.astype(np.int32),
            matrix.data.astype(dtype), x, 300, 2)
    np.testing.assert_allclose(kernels.csr_spmm(*args), matrix.astype(dtype) @ x, rtol=1e-5,
                               atol=1e-6)
    base = np.ones((300, width), dtype)
    np.testing.assert_allclose(kernels.csr_spmm(*args, add_to=base.copy()),
                               base + matrix.astype(dtype) @ x, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("nnz", [3, PREFETCH_EDGES, 4000])
@pytest.mark.parametrize("width", [33, 100])
def test_bf16_products_equal_float32_then_cast(nnz, width):
    matrix = _matrix(250, 180, nnz, seed=nnz)
    matrix.sum_duplicates()
    x = torch.randn(180, width).bfloat16()
    args = (matrix.indptr.astype(np.int64), matrix.indices.astype(np.int32), matrix.data)
    bits = kernels.csr_spmm(*args, as_bits(x), 250, 2)
    expected = kernels.csr_spmm(*args, x.float().numpy(), 250, 2)
    assert torch.equal(from_bits(bits), torch.from_numpy(expected).bfloat16())


@pytest.mark.parametrize("ahead", [0, 1, PREFETCH_EDGES, 64])
@pytest.mark.parametrize("bf16", [False, True])
def test_every_prefetch_distance_gives_the_same_bits(ahead, bf16):
    matrix = _matrix(400, 300, 6000, seed=ahead)
    matrix.sum_duplicates()
    x = torch.randn(300, 40)
    rows = as_bits(x.bfloat16()) if bf16 else x.numpy()
    args = (matrix.indptr.astype(np.int64), matrix.indices.astype(np.int32), matrix.data,
            rows, 400, 2)
    np.testing.assert_array_equal(kernels.csr_spmm(*args, prefetch_edges=ahead),
                                  kernels.csr_spmm(*args))


def test_a_negative_prefetch_distance_is_refused():
    matrix = _matrix(10, 10, 20, seed=0)
    with pytest.raises(ValueError, match="prefetch_edges must be >= 0, got -1"):
        kernels.csr_spmm(matrix.indptr.astype(np.int64), matrix.indices.astype(np.int32),
                         matrix.data, np.ones((10, 4), np.float32), 10, 1, prefetch_edges=-1)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_rows_of_the_narrow_width_take_the_fixed_width_kernel(dtype, monkeypatch):
    width = kernels.NARROW_WIDTH
    matrix = _matrix(500, 400, 8000, seed=width)
    matrix.sum_duplicates()
    x = np.random.default_rng(0).standard_normal((400, width)).astype(dtype)
    args = (matrix.indptr.astype(np.int64), matrix.indices.astype(np.int32),
            matrix.data.astype(dtype), x, 500, 2)
    calls = []
    real = kernels._csr_spmm_narrow
    monkeypatch.setattr(kernels, "_csr_spmm_narrow", lambda *a: calls.append(1) or real(*a))
    narrow = kernels.csr_spmm(*args)
    generic = kernels._csr_spmm(*args[:3], x, np.empty_like(narrow), PREFETCH_EDGES)
    assert calls == [1]
    np.testing.assert_allclose(narrow, generic, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(narrow, matrix.astype(dtype) @ x, rtol=1e-5, atol=1e-6)
    kernels.csr_spmm(*args[:3], np.ascontiguousarray(x[:, :width - 1]), 500, 2)
    assert calls == [1]  # other widths: another kernel


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_rows_under_the_narrow_width_take_the_small_kernel_with_the_same_sums(dtype,
                                                                              monkeypatch):
    """Widths 1 to 15 each have a compile-time trip count: the same sums, in the same order,
    as the general kernel (bit for bit), with and without prefetching; wider rows do not."""
    matrix = _matrix(700, 600, 9000, seed=3)
    matrix.sum_duplicates()
    rng = np.random.default_rng(1)
    csr = (matrix.indptr.astype(np.int64), matrix.indices.astype(np.int32),
           matrix.data.astype(dtype))
    calls = []
    real = kernels._csr_spmm_small
    monkeypatch.setattr(kernels, "_csr_spmm_small", lambda *a: calls.append(a[3].shape[1])
                        or real(*a))
    for width in range(1, kernels.NARROW_WIDTH):
        x = rng.standard_normal((600, width)).astype(dtype)
        for ahead in (0, PREFETCH_EDGES):
            small = kernels.csr_spmm(*csr, x, 700, 2, prefetch_edges=ahead)
            general = kernels._csr_spmm(*csr, x, np.empty_like(small), ahead)
            np.testing.assert_array_equal(small, general)
        np.testing.assert_allclose(small, matrix.astype(dtype) @ x, rtol=1e-5, atol=1e-5)
    assert calls == [w for w in range(1, kernels.NARROW_WIDTH) for _ in range(2)]
    kernels.csr_spmm(*csr, rng.standard_normal((600, 17)).astype(dtype), 700, 2)
    assert len(calls) == 2 * (kernels.NARROW_WIDTH - 1)  # 17 wide: the general kernel


@pytest.mark.parametrize("dtype", [np.float32, np.uint16])
def test_adding_leaves_rows_without_non_zeros_untouched(dtype):
    """A boundary block has a row for every owned node: adding its product skips the rows
    with no non-zero, whose values (here -0.0, which adding 0.0 would turn into +0.0) stay
    bit for bit what they were; the others get their sums."""
    matrix = sp.csr_matrix(([1.0, 2.0, 3.0], ([1, 1, 4], [0, 2, 1])), shape=(6, 3),
                           dtype=np.float32)
    x = torch.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    base = torch.full((6, 2), -0.0)
    out = base.clone() if dtype == np.float32 else base.bfloat16()
    target = out.numpy() if dtype == np.float32 else as_bits(out)
    got = kernels.csr_spmm(matrix.indptr.astype(np.int64), matrix.indices.astype(np.int64),
                           matrix.data, x.numpy() if dtype == np.float32 else as_bits(
                               x.bfloat16()), 6, 2, add_to=target)
    got = torch.from_numpy(got).float() if dtype == np.float32 else from_bits(got).float()
    empty = [0, 2, 3, 5]
    assert torch.signbit(got[empty]).all() and not got[empty].any()
    assert torch.equal(got[[1, 4]], torch.tensor([[11.0, 14.0], [9.0, 12.0]]))

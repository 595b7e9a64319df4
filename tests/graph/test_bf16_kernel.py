"""bf16 rows in the compiled product: read and written as bits, summed in float32, rounded once
(gnnscale/graph/bf16_bits.py, kernels.py, sparse.py)."""

import numba
import numpy as np
import pytest
import scipy.sparse as sp
import torch
from numba import njit

from gnnscale.graph import kernels
from gnnscale.graph import sparse as sparse_module
from gnnscale.graph.bf16_bits import as_bits, bf16_to_f32, f32_to_bf16, from_bits
from gnnscale.graph.sparse import HALF_ROWS_MIN_WIDTH, SparseBlock


@njit
def _round_and_widen(values):
    """Each value's bf16 bits and those bits widened back to float32."""
    bits = np.empty(values.shape[0], np.uint16)
    widened = np.empty(values.shape[0], np.float32)
    for i in range(values.shape[0]):
        bits[i] = f32_to_bf16(values[i])
        widened[i] = bf16_to_f32(bits[i])
    return bits, widened


def test_rounding_matches_torch_and_widening_is_exact():
    rng = np.random.default_rng(0)
    special = np.array([np.inf, -np.inf, 0.0, -0.0, 3.4e38, -3.4e38, 1e-40, -1e-40,
                        1.0 + 2.0**-8, 1.0 + 3 * 2.0**-8, 1.0 + 2.0**-9], np.float32)
    random = (rng.standard_normal(200_000) * 10.0 ** rng.integers(-38, 38, 200_000))
    values = np.concatenate([special, random.astype(np.float32)])
    ours, widened = _round_and_widen(values)
    assert np.array_equal(ours, as_bits(torch.from_numpy(values).to(torch.bfloat16)))
    assert np.array_equal(widened, from_bits(ours).float().numpy())
    nan, _ = _round_and_widen(np.array([np.nan, -np.nan], np.float32))
    assert torch.isnan(from_bits(nan)).all()


def _block(rows=700, cols=500, seed=0):
    matrix = sp.random(rows, cols, density=0.04, format="csr", random_state=seed,
                       dtype=np.float32)
    return matrix, SparseBlock(matrix, torch.float32)


@pytest.mark.parametrize("width", [HALF_ROWS_MIN_WIDTH, 40, 130])
def test_product_equals_the_float32_product_rounded_once(width):
    _, block = _block()
    x = torch.randn(500, width).to(torch.bfloat16)
    out = block.matmul(x)
    assert out.dtype == torch.bfloat16 and out.shape == (700, width)
    assert torch.equal(out, block.matmul(x.float()).to(torch.bfloat16))
    y = torch.randn(700, width).to(torch.bfloat16)
    assert torch.equal(block.matmul_transposed(y),
                       block.matmul_transposed(y.float()).to(torch.bfloat16))


def test_narrow_rows_take_the_float32_kernel_with_the_same_result(monkeypatch):
    _, block = _block()
    x = torch.randn(500, HALF_ROWS_MIN_WIDTH - 1).to(torch.bfloat16)
    calls = []
    real = kernels._csr_spmm_rows
    monkeypatch.setattr(kernels, "_csr_spmm_rows",
                        lambda *a: calls.append(a[3].dtype == np.uint16) or real(*a))
    assert torch.equal(block.matmul(x), block.matmul(x.float()).to(torch.bfloat16))
    assert calls == []
    block.matmul(torch.randn(500, HALF_ROWS_MIN_WIDTH).to(torch.bfloat16))
    assert calls == [True]


def test_added_in_place_into_a_column_block_rounded_once():
    _, block = _block()
    x = torch.randn(500, 48).to(torch.bfloat16)
    wide = torch.randn(700, 100).to(torch.bfloat16)
    before = wide.clone()
    target = wide[:, 20:68]  # rows contiguous, not the whole row
    assert block.matmul(x, add_to=target) is target
    expected = (before[:, 20:68].float() + block.matmul(x.float())).to(torch.bfloat16)
    assert torch.equal(wide[:, 20:68], expected)
    assert torch.equal(wide[:, :20], before[:, :20]) and torch.equal(wide[:, 68:],
                                                                     before[:, 68:])


def test_row_blocks_with_progress_and_any_thread_count(monkeypatch):
    monkeypatch.setattr(kernels, "MIN_CHUNK_ROWS", 64)
    _, block = _block(rows=2000)
    x = torch.randn(500, 64).to(torch.bfloat16)
    whole = block.matmul(x)
    ticks = []
    assert torch.equal(block.matmul(x, progress=lambda: ticks.append(1)), whole)
    assert len(ticks) == kernels.PROGRESS_CHUNKS
    previous = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        single = block.matmul(x)
    finally:
        numba.set_num_threads(previous)
    assert torch.equal(single, whole)


def test_torch_kernel_still_serves_bf16():
    _, block = _block()
    x = torch.randn(500, 64).to(torch.bfloat16)
    sparse_module.set_cpu_kernel("torch")
    try:
        through_torch = block.matmul(x)
    finally:
        sparse_module.set_cpu_kernel("compiled")
    torch.testing.assert_close(through_torch.float(), block.matmul(x).float(), rtol=2e-2,
                               atol=2e-2)

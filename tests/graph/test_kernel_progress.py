"""The compiled CSR product in row blocks with a progress call between them."""

import numpy as np
import pytest
import scipy.sparse as sp

from gnnscale.graph import kernels


def test_blocked_product_equals_the_whole_product_and_calls_progress():
    rng = np.random.default_rng(0)
    rows, cols = 3 * kernels.MIN_CHUNK_ROWS + 17, 500
    matrix = sp.random(rows, cols, density=0.01, format="csr", random_state=1,
                       dtype=np.float32)
    x = rng.standard_normal((cols, 8)).astype(np.float32)
    args = (matrix.indptr.astype(np.int64), matrix.indices.astype(np.int64), matrix.data, x,
            rows, 1)
    calls = []
    blocked = kernels.csr_spmm(*args, progress=lambda: calls.append(1))
    whole = kernels.csr_spmm(*args)
    assert np.array_equal(blocked, whole)  # same per-row sums, same order
    np.testing.assert_allclose(whole, matrix @ x, rtol=1e-5, atol=1e-6)
    assert len(calls) == -(-rows // max(kernels.MIN_CHUNK_ROWS,
                                        -(-rows // kernels.PROGRESS_CHUNKS)))
    small = kernels.csr_spmm(*args[:4], 10, 1, progress=lambda: calls.append(2))
    assert 2 not in calls and small.shape == (10, 8)  # too small to split


def test_accumulating_product_equals_the_sum_bit_for_bit_in_place():
    rng = np.random.default_rng(2)
    rows, cols = 2 * kernels.MIN_CHUNK_ROWS + 300, 700
    matrix = sp.random(rows, cols, density=0.02, format="csr", random_state=3, dtype=np.float32)
    x = rng.standard_normal((cols, 24)).astype(np.float32)
    base = rng.standard_normal((rows, 24)).astype(np.float32)
    args = (matrix.indptr.astype(np.int64), matrix.indices.astype(np.int32), matrix.data, x,
            rows, 2)
    expected = base + kernels.csr_spmm(*args)
    for progress in (None, lambda: None):  # whole and in row blocks
        target = base.copy()
        result = kernels.csr_spmm(*args, progress=progress, add_to=target)
        assert result is target
        assert np.array_equal(target, expected)


def test_accumulating_product_refuses_a_target_of_another_shape_or_dtype():
    matrix = sp.random(30, 20, density=0.2, format="csr", random_state=4, dtype=np.float32)
    x = np.ones((20, 3), np.float32)
    args = (matrix.indptr.astype(np.int64), matrix.indices.astype(np.int32), matrix.data, x,
            30, 1)
    for bad in (np.zeros((30, 4), np.float32), np.zeros((30, 3), np.float64),
                np.zeros((3, 30), np.float32).T):
        with pytest.raises(ValueError, match="add_to must be"):
            kernels.csr_spmm(*args, add_to=bad)

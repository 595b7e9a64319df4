"""The compiled CSR product in row blocks with a progress call between them."""

import numpy as np
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

"""Compiled CPU kernels for sparse x dense products (numba, parallel over rows).

``out[i] = sum_k vals[k] * x[indices[k]]`` for ``k`` in row ``i``'s CSR range, or with
``add_to`` given ``add_to[i] += (that sum)`` in place, the sum formed first from zero so the
result equals ``add_to + A @ x`` bit for bit without an [rows, F] temporary. Each output row
is private to one thread, so no atomics; the feature loop vectorises, and the row
``PREFETCH_EDGES`` non-zeros ahead is prefetched (``prefetch.py``: the gathers follow no
pattern the hardware can guess, and waiting on each row's latency left 2 threads well under
the memory bandwidth; docs/performance.md, "The aggregation kernel", has its rates and what it
gains over torch's MKL CSR product). The sum runs over a row's non-zeros in CSR order, so
results do not depend on the thread count.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from .bf16_bits import store, to_float
from .kernel_threads import follow_torch_threads
from .prefetch import PREFETCH_EDGES, prefetch_row


@njit(inline="always")
def _sum_row(indptr, indices, values, x, acc, i, width, ahead, ahead_end):  # pragma: no cover
    """``acc[:width] = sum_k values[k] * x[indices[k]]`` over row ``i``'s non-zeros (``x``
    float, or bf16 bits read as float32), prefetching the row ``ahead`` non-zeros on."""
    for c in range(width):
        acc[c] = 0.0
    for k in range(indptr[i], indptr[i + 1]):
        if k < ahead_end:
            prefetch_row(x, indices[k + ahead])
        j = indices[k]
        v = values[k]
        for c in range(width):
            acc[c] += v * to_float(x[j, c])


@njit(parallel=True, fastmath=True, cache=True, nogil=True)
def _csr_spmm(indptr, indices, values, x, out, ahead):  # pragma: no cover - compiled
    rows, width = out.shape
    ahead_end = indices.shape[0] - ahead if ahead > 0 else 0
    for i in prange(rows):
        _sum_row(indptr, indices, values, x, out[i], i, width, ahead, ahead_end)
    return out


#: rows of exactly this many columns (one AVX-512 register of float32) go to
#: :func:`_csr_spmm_narrow`
NARROW_WIDTH = 16


@njit(parallel=True, fastmath=True, cache=True, nogil=True)
def _csr_spmm_narrow(indptr, indices, values, x, out, ahead):  # pragma: no cover - compiled
    """:func:`_csr_spmm` for rows of :data:`NARROW_WIDTH` columns, the feature loop's trip
    count a compile-time constant: LLVM then makes it one vector operation, where with the
    width known only at run time it may vectorise for more columns than a row has and run
    the scalar remainder instead (docs/performance.md, "Ranks against threads, and the hidden
    exchange", has the figures)."""
    ahead_end = indices.shape[0] - ahead if ahead > 0 else 0
    for i in prange(out.shape[0]):
        _sum_row(indptr, indices, values, x, out[i], i, NARROW_WIDTH, ahead, ahead_end)
    return out


@njit(parallel=True, fastmath=True, cache=True, nogil=True)
def _csr_spmm_small(indptr, indices, values, x, out, ahead):  # pragma: no cover - compiled
    """:func:`_csr_spmm` for rows of 1 to 15 columns (a graph's few raw features, a model's
    classes), each width a compile-time trip count of its own as :func:`_csr_spmm_narrow`'s:
    the same sums in the same order, 17-35% less time per non-zero than the general kernel at
    3 to 12 columns (docs/performance.md, "The aggregation kernel")."""
    rows, width = out.shape
    ahead_end = indices.shape[0] - ahead if ahead > 0 else 0
    for i in prange(rows):
        if width == 1:
            _sum_row(indptr, indices, values, x, out[i], i, 1, ahead, ahead_end)
        elif width == 2:
            _sum_row(indptr, indices, values, x, out[i], i, 2, ahead, ahead_end)
        elif width == 3:
            _sum_row(indptr, indices, values, x, out[i], i, 3, ahead, ahead_end)
        elif width == 4:
            _sum_row(indptr, indices, values, x, out[i], i, 4, ahead, ahead_end)
        elif width == 5:
            _sum_row(indptr, indices, values, x, out[i], i, 5, ahead, ahead_end)
        elif width == 6:
            _sum_row(indptr, indices, values, x, out[i], i, 6, ahead, ahead_end)
        elif width == 7:
            _sum_row(indptr, indices, values, x, out[i], i, 7, ahead, ahead_end)
        elif width == 8:
            _sum_row(indptr, indices, values, x, out[i], i, 8, ahead, ahead_end)
        elif width == 9:
            _sum_row(indptr, indices, values, x, out[i], i, 9, ahead, ahead_end)
        elif width == 10:
            _sum_row(indptr, indices, values, x, out[i], i, 10, ahead, ahead_end)
        elif width == 11:
            _sum_row(indptr, indices, values, x, out[i], i, 11, ahead, ahead_end)
        elif width == 12:
            _sum_row(indptr, indices, values, x, out[i], i, 12, ahead, ahead_end)
        elif width == 13:
            _sum_row(indptr, indices, values, x, out[i], i, 13, ahead, ahead_end)
        elif width == 14:
            _sum_row(indptr, indices, values, x, out[i], i, 14, ahead, ahead_end)
        elif width == 15:
            _sum_row(indptr, indices, values, x, out[i], i, 15, ahead, ahead_end)
    return out


ADD_ROWS_PER_TASK = 256  # rows per parallel task of the row-summing kernel (one scratch row)


@njit(parallel=True, fastmath=True, cache=True, nogil=True)
def _csr_spmm_rows(indptr, indices, values, x, out, add, ahead):  # pragma: no cover - compiled
    """Each output row summed from zero in a scratch row of ``values``' dtype, then stored
    (``add``: added to the row's old value). ``x`` and ``out`` are float arrays or bf16 bits
    (uint16: summed in float32, rounded once when stored). ``ahead``: the prefetch distance in
    non-zeros (0: none). Adding, a row without non-zeros is left as it is (its sum is zero):
    a boundary block has a row for every owned node and non-zeros in few of them (amazon0601
    in 2 METIS parts: 46,708 non-zeros in 199,327 rows), and adding zero to the others took
    longer than its products."""
    rows, width = out.shape
    ahead_end = indices.shape[0] - ahead if ahead > 0 else 0
    tasks = (rows + ADD_ROWS_PER_TASK - 1) // ADD_ROWS_PER_TASK
    for task in prange(tasks):
        acc = np.empty(width, dtype=values.dtype)
        for i in range(task * ADD_ROWS_PER_TASK, min(rows, (task + 1) * ADD_ROWS_PER_TASK)):
            if add and indptr[i] == indptr[i + 1]:
                continue
            _sum_row(indptr, indices, values, x, acc, i, width, ahead, ahead_end)
            if add:
                for c in range(width):
                    store(out, (i, c), to_float(out[i, c]) + acc[c])
            else:
                for c in range(width):
                    store(out, (i, c), acc[c])
    return out


PROGRESS_CHUNKS = 16  # row blocks between progress calls
MIN_CHUNK_ROWS = 4096


def csr_spmm(indptr: np.ndarray, indices: np.ndarray, values: np.ndarray, x: np.ndarray,
             num_rows: int, threads: int, progress=None,
             add_to: np.ndarray | None = None,
             prefetch_edges: int = PREFETCH_EDGES) -> np.ndarray:
    """``A @ x`` for a CSR matrix ``A`` (``x`` C-contiguous 2-D: float32, float64, or uint16
    holding bf16 bits, summed in float32 and rounded once per output element; ``values`` float32
    for bf16).

    ``progress``: called between row blocks (e.g. ``Work.test`` of an exchange in flight, so
    that MPI moves its data while this product runs; MPI progresses only inside MPI calls).
    ``add_to``: a [num_rows, F] array of ``x``'s dtype whose rows are contiguous (e.g. a block
    of a wider array's columns); the product is added into it in place and it is returned.
    ``prefetch_edges``: how many non-zeros ahead the gathered row is prefetched (0: none; a
    hint that never changes the result).
    """
    if prefetch_edges < 0:
        raise ValueError(f"prefetch_edges must be >= 0, got {prefetch_edges}")
    follow_torch_threads(threads)
    if add_to is None:
        out = np.empty((num_rows, x.shape[1]), dtype=x.dtype)
    elif (add_to.shape != (num_rows, x.shape[1]) or add_to.dtype != x.dtype
            or add_to.strides[-1] != add_to.itemsize):
        raise ValueError(f"add_to must be a {x.dtype} array of shape "
                         f"{(num_rows, x.shape[1])} with contiguous rows, got "
                         f"{add_to.dtype} {add_to.shape} strides {add_to.strides}")
    else:
        out = add_to
    if x.dtype == np.uint16 or add_to is not None:
        add = add_to is not None

        def kernel(indptr, indices, values, x, out):
            return _csr_spmm_rows(indptr, indices, values, x, out, add, prefetch_edges)
    else:
        width = x.shape[1]
        product = (_csr_spmm_narrow if width == NARROW_WIDTH else
                   _csr_spmm_small if 0 < width < NARROW_WIDTH else _csr_spmm)

        def kernel(indptr, indices, values, x, out):
            return product(indptr, indices, values, x, out, prefetch_edges)
    if progress is None or num_rows < 2 * MIN_CHUNK_ROWS:
        return kernel(indptr, indices, values, x, out)
    step = max(MIN_CHUNK_ROWS, -(-num_rows // PROGRESS_CHUNKS))
    for lo in range(0, num_rows, step):
        hi = min(num_rows, lo + step)
        kernel(indptr[lo:hi + 1], indices, values, x, out[lo:hi])
        progress()
    return out

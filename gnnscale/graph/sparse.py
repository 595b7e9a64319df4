"""Sparse adjacency blocks as CSR matrices with their transposes (for backward).

Aggregation is a CSR sparse x dense product: no per-edge message tensors. On the CPU, float32,
float64 and bf16 rows go through the compiled kernel of :mod:`.kernels` (bf16 read and written
at half width, summed in float32; fp16 rows are converted to float32 and back); GPU tensors go through torch's sparse CSR product (cuSPARSE). The
transpose is built once, so backward is also a CSR product.

A block keeps, per orientation, only what the kernel reads: int64 row pointers, int32 column
indices (int64 beyond 2^31 - 1 columns) and the values in the block's dtype (float64 for a
float64 block, else float32): 8 bytes per non-zero and orientation in the common case. Values
for another dtype are cast from these once and kept.
"""

from __future__ import annotations

import warnings

import numpy as np
import scipy.sparse as sp
import torch

from .bf16_bits import as_bits, from_bits
from .kernels import csr_spmm

warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta state")

# the values each row dtype's kernel reads (bf16 rows are summed in float32)
_KERNEL_DTYPES = {torch.float32: np.float32, torch.float64: np.float64,
                  torch.bfloat16: np.float32}
KERNELS = ("compiled", "torch")
_kernel = {"name": "compiled"}
#: bf16 rows narrower than this are converted to float32 for the product: a float32 row of
#: 16 is one 64-byte cache line, so half-width rows save no memory traffic there and the
#: per-element conversion costs more than the two passes (docs/performance.md, "Engine
#: options")
HALF_ROWS_MIN_WIDTH = 32
#: column indices are stored as int32 below this many columns
INT32_COLUMNS = 2**31 - 1


def set_cpu_kernel(name: str) -> None:
    """Choose the CPU product: ``"compiled"`` (numba, default) or ``"torch"`` (MKL CSR)."""
    if name not in KERNELS:
        raise ValueError(f"unknown kernel {name!r}; choose one of {', '.join(KERNELS)}")
    _kernel["name"] = name


def csr_row_positions(indptr: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(indptr, positions)`` of the CSR rows ``rows`` taken out in that order: the new row
    pointers, and the positions of their entries in the whole matrix's arrays."""
    starts = indptr[rows]
    lengths = indptr[rows + 1] - starts
    taken = np.zeros(rows.size + 1, dtype=np.int64)
    np.cumsum(lengths, out=taken[1:])
    return taken, np.repeat(starts - taken[:-1], lengths) + np.arange(taken[-1])


def _sum_into(add_to, product: torch.Tensor) -> torch.Tensor:
    """``product``, or ``add_to`` with ``product`` added in place when one is given."""
    return product if add_to is None else add_to.add_(product)


class _CSR:
    """One orientation of the matrix: the kernel's arrays, a torch CSR built lazily."""

    def __init__(self, matrix: sp.csr_matrix, dtype: torch.dtype):
        matrix.sort_indices()
        self.shape = matrix.shape
        self.indptr = matrix.indptr.astype(np.int64)
        index_dtype = np.int32 if matrix.shape[1] <= INT32_COLUMNS else np.int64
        self.indices = matrix.indices.astype(index_dtype, copy=False)
        stored = np.float64 if dtype == torch.float64 else np.float32
        self.values = {stored: np.asarray(matrix.data, dtype=stored)}
        self._stored = stored
        self._torch = None

    def _values(self, np_dtype) -> np.ndarray:
        if np_dtype not in self.values:
            self.values[np_dtype] = self.values[self._stored].astype(np_dtype)
        return self.values[np_dtype]

    def _torch_csr(self, dtype: torch.dtype, device) -> torch.Tensor:
        return torch.sparse_csr_tensor(
            torch.from_numpy(self.indptr), torch.from_numpy(self.indices.astype(np.int64)),
            torch.from_numpy(self.values[self._stored]).to(dtype),
            size=self.shape, device=device, check_invariants=False)

    def matmul(self, dense: torch.Tensor, progress=None, add_to=None) -> torch.Tensor:
        cpu = dense.device.type == "cpu"
        compiled = cpu and dense.dim() == 2 and _kernel["name"] == "compiled"
        if cpu and dense.dtype in (torch.float16, torch.bfloat16) and not (
                compiled and dense.dtype == torch.bfloat16
                and dense.shape[-1] >= HALF_ROWS_MIN_WIDTH):
            # half-width rows no kernel reads as they are: summed in float32
            return _sum_into(add_to, self.matmul(dense.float(), progress).to(dense.dtype))
        if compiled and dense.dtype in _KERNEL_DTYPES:
            np_dtype = _KERNEL_DTYPES[dense.dtype]
            bf16 = dense.dtype == torch.bfloat16  # read and written as bits, summed in float32
            as_array = as_bits if bf16 else (lambda t: t.detach().numpy())
            in_place = (add_to is not None and add_to.dtype == dense.dtype
                        and add_to.device.type == "cpu" and add_to.stride(-1) == 1)
            out = csr_spmm(self.indptr, self.indices, self._values(np_dtype),
                           as_array(dense.contiguous()), self.shape[0],
                           torch.get_num_threads(), progress,
                           add_to=as_array(add_to) if in_place else None)
            if in_place:
                return add_to
            return _sum_into(add_to, from_bits(out) if bf16 else torch.from_numpy(out))
        if self._torch is None or self._torch.dtype != dense.dtype:
            self._torch = self._torch_csr(dense.dtype, dense.device)
        return _sum_into(add_to, torch.sparse.mm(self._torch, dense))


class SparseBlock:
    """A fixed sparse matrix ``A`` (rows x cols) that computes ``A @ X`` and ``A.T @ Y``.

    The scipy matrix passed in is not kept; each orientation holds its own compact arrays. The
    product runs where the dense operand lives (``device`` is accepted for the callers that
    name it; a GPU copy of the matrix is made on first use).
    """

    def __init__(self, matrix: sp.spmatrix, dtype: torch.dtype = torch.float32, device="cpu"):
        matrix = sp.csr_matrix(matrix)
        self.shape = matrix.shape
        self.nnz = int(matrix.nnz)
        self._forward = _CSR(matrix, dtype)
        transposed = matrix.T.tocsr()
        del matrix
        self._transpose = _CSR(transposed, dtype)

    def take_rows(self, rows: np.ndarray, columns: np.ndarray | None = None) -> "SparseBlock":
        """The block of rows ``rows`` (int64, in that order), from this block's own arrays
        (the same stored values; no full-size temporary). ``columns`` (int64, in order): the
        block's columns are these, renumbered ``0 .. len(columns) - 1``, for a product with
        a dense operand that holds only those rows; every column the rows use must be among
        them."""
        forward = self._forward
        rows = np.asarray(rows, dtype=np.int64)
        indptr, positions = csr_row_positions(forward.indptr, rows)
        values = forward.values[forward._stored][positions]
        indices = forward.indices[positions]
        width = self.shape[1]
        if columns is not None:
            columns = np.asarray(columns, dtype=np.int64)
            renumbered = np.full(self.shape[1], -1, dtype=np.int64)
            renumbered[columns] = np.arange(columns.size)
            indices = renumbered[indices]
            if indices.size and indices.min() < 0:
                raise ValueError("take_rows: the rows read columns outside the columns given")
            width = columns.size
        matrix = sp.csr_matrix((values, indices, indptr), shape=(rows.size, width))
        dtype = torch.float64 if forward._stored == np.float64 else torch.float32
        return SparseBlock(matrix, dtype)

    @property
    def nbytes(self) -> int:
        """Bytes held by both orientations (row pointers, indices, values of every dtype)."""
        return sum(part.indptr.nbytes + part.indices.nbytes
                   + sum(v.nbytes for v in part.values.values())
                   for part in (self._forward, self._transpose))

    def matmul(self, dense: torch.Tensor, progress=None, add_to=None) -> torch.Tensor:
        """``A @ dense``: [rows, F]. ``progress()`` is called between row blocks (CPU).

        ``add_to``: a [rows, F] tensor outside autograd's view (e.g. a fresh result inside an
        autograd function, or a block of its columns) that receives ``add_to + A @ dense`` in
        place and is returned; on the CPU kernel no [rows, F] temporary is made (same numbers
        as the sum)."""
        if self.nnz == 0 or dense.shape[0] == 0:
            if add_to is not None:
                return add_to
            return dense.new_zeros((self.shape[0], *dense.shape[1:]))
        return self._forward.matmul(dense, progress, add_to)

    def matmul_transposed(self, dense: torch.Tensor, progress=None,
                          add_to=None) -> torch.Tensor:
        """``A.T @ dense``: [cols, F]; ``add_to`` as for :meth:`matmul` ([cols, F])."""
        if self.nnz == 0 or dense.shape[0] == 0:
            if add_to is not None:
                return add_to
            return dense.new_zeros((self.shape[1], *dense.shape[1:]))
        return self._transpose.matmul(dense, progress, add_to)

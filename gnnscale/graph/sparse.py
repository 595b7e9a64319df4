"""Sparse adjacency blocks as CSR matrices with their transposes (for backward).

Aggregation is a CSR sparse x dense product: no per-edge message tensors. On the CPU, float32
and float64 go through the compiled kernel of :mod:`.kernels` (bf16 and fp16 rows too,
accumulated in float32); GPU tensors go through torch's sparse CSR product (cuSPARSE). The
transpose is built once, so backward is also a CSR product.
"""

from __future__ import annotations

import warnings

import numpy as np
import scipy.sparse as sp
import torch

from .kernels import csr_spmm

warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta state")


def _torch_csr(matrix: sp.csr_matrix, dtype: torch.dtype, device) -> torch.Tensor:
    matrix = matrix.tocsr()
    matrix.sort_indices()
    return torch.sparse_csr_tensor(
        torch.from_numpy(matrix.indptr.astype(np.int64)),
        torch.from_numpy(matrix.indices.astype(np.int64)),
        torch.from_numpy(np.ascontiguousarray(matrix.data)).to(dtype),
        size=matrix.shape, device=device, check_invariants=False)


_KERNEL_DTYPES = {torch.float32: np.float32, torch.float64: np.float64}
KERNELS = ("compiled", "torch")
_kernel = {"name": "compiled"}


def set_cpu_kernel(name: str) -> None:
    """Choose the CPU product: ``"compiled"`` (numba, default) or ``"torch"`` (MKL CSR)."""
    if name not in KERNELS:
        raise ValueError(f"unknown kernel {name!r}; choose one of {', '.join(KERNELS)}")
    _kernel["name"] = name


class _CSR:
    """One orientation of the matrix: NumPy arrays for the kernel, a torch CSR built lazily."""

    def __init__(self, matrix: sp.csr_matrix, dtype: torch.dtype, device):
        matrix.sort_indices()
        self.matrix = matrix
        self.dtype, self.device = dtype, device
        self.indptr = matrix.indptr.astype(np.int64)
        self.indices = matrix.indices.astype(np.int64)
        self.values = {}
        self._torch = None

    def matmul(self, dense: torch.Tensor, progress=None) -> torch.Tensor:
        if (dense.dtype in (torch.bfloat16, torch.float16) and dense.device.type == "cpu"
                and _kernel["name"] == "compiled"):
            # half-width rows (bf16 compute, bf16 halo messages): accumulate in float32
            return self.matmul(dense.float(), progress).to(dense.dtype)
        np_dtype = _KERNEL_DTYPES.get(dense.dtype)
        if (dense.device.type == "cpu" and np_dtype is not None and dense.dim() == 2
                and _kernel["name"] == "compiled"):
            if np_dtype not in self.values:
                self.values[np_dtype] = self.matrix.data.astype(np_dtype)
            out = csr_spmm(self.indptr, self.indices, self.values[np_dtype],
                           dense.detach().contiguous().numpy(), self.matrix.shape[0],
                           torch.get_num_threads(), progress)
            return torch.from_numpy(out)
        if self._torch is None or self._torch.dtype != dense.dtype:
            self._torch = _torch_csr(self.matrix, dense.dtype, dense.device)
        return torch.sparse.mm(self._torch, dense)


class SparseBlock:
    """A fixed sparse matrix ``A`` (rows x cols) that computes ``A @ X`` and ``A.T @ Y``."""

    def __init__(self, matrix: sp.spmatrix, dtype: torch.dtype = torch.float32, device="cpu"):
        matrix = sp.csr_matrix(matrix)
        self.shape = matrix.shape
        self.nnz = int(matrix.nnz)
        self._forward = _CSR(matrix, dtype, device)
        self._transpose = _CSR(matrix.T.tocsr(), dtype, device)

    def matmul(self, dense: torch.Tensor, progress=None) -> torch.Tensor:
        """``A @ dense``: [rows, F]. ``progress()`` is called between row blocks (CPU)."""
        if self.nnz == 0 or dense.shape[0] == 0:
            return dense.new_zeros((self.shape[0], *dense.shape[1:]))
        return self._forward.matmul(dense, progress)

    def matmul_transposed(self, dense: torch.Tensor, progress=None) -> torch.Tensor:
        """``A.T @ dense``: [cols, F]."""
        if self.nnz == 0 or dense.shape[0] == 0:
            return dense.new_zeros((self.shape[1], *dense.shape[1:]))
        return self._transpose.matmul(dense, progress)

"""Sparse adjacency blocks as CSR matrices with their transposes (for backward).

Aggregation is a CSR sparse x dense product (MKL on CPU, cuSPARSE on GPU): no per-edge message
tensors. The transpose is built once, so backward is also a CSR product.
"""

from __future__ import annotations

import warnings

import numpy as np
import scipy.sparse as sp
import torch

warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta state")


def _torch_csr(matrix: sp.csr_matrix, dtype: torch.dtype, device) -> torch.Tensor:
    matrix = matrix.tocsr()
    matrix.sort_indices()
    return torch.sparse_csr_tensor(
        torch.from_numpy(matrix.indptr.astype(np.int64)),
        torch.from_numpy(matrix.indices.astype(np.int64)),
        torch.from_numpy(np.ascontiguousarray(matrix.data)).to(dtype),
        size=matrix.shape, device=device, check_invariants=False)


class SparseBlock:
    """A fixed sparse matrix ``A`` (rows x cols) that computes ``A @ X`` and ``A.T @ Y``."""

    def __init__(self, matrix: sp.spmatrix, dtype: torch.dtype = torch.float32, device="cpu"):
        matrix = sp.csr_matrix(matrix)
        self.shape = matrix.shape
        self.nnz = int(matrix.nnz)
        self.forward_csr = _torch_csr(matrix, dtype, device)
        self.transpose_csr = _torch_csr(matrix.T.tocsr(), dtype, device)

    def matmul(self, dense: torch.Tensor) -> torch.Tensor:
        """``A @ dense``: [rows, F]."""
        if self.nnz == 0 or dense.shape[0] == 0:
            return dense.new_zeros((self.shape[0], *dense.shape[1:]))
        return torch.sparse.mm(self.forward_csr, dense)

    def matmul_transposed(self, dense: torch.Tensor) -> torch.Tensor:
        """``A.T @ dense``: [cols, F]."""
        if self.nnz == 0 or dense.shape[0] == 0:
            return dense.new_zeros((self.shape[1], *dense.shape[1:]))
        return torch.sparse.mm(self.transpose_csr, dense)

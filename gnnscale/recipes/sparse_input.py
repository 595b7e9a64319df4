"""Sparse bag-of-words inputs for the Planetoid recipes, as the GCN and GAT reference code keeps
them (Cora's features are 1.3% non-zero, CiteSeer's 0.9%).

The first layer's input dropout is applied to the non-zero values only (``sparse_dropout`` of
the GCN code): a dropped zero is still zero, so this is the same distribution as dense dropout.
The first layer's bias-free linear map then multiplies the sparse matrix (about 4x faster than
the dense product on Cora); every other computation is unchanged.
"""

from __future__ import annotations

import weakref

import torch
from torch import nn
from torch.nn import functional as F

from ..nn.dropout import dropout as fast_dropout

_csr_of: dict = {}  # id(x) -> (weak reference to x, x's version, its CSR copy)


def as_csr(x: torch.Tensor) -> torch.Tensor:
    """``x`` as a sparse CSR tensor, converted once per (tensor, version)."""
    cached = _csr_of.get(id(x))
    if cached is None or cached[0]() is not x or cached[1] != x._version:
        for key in [k for k, entry in _csr_of.items() if entry[0]() is None]:
            del _csr_of[key]  # tensors that are gone
        cached = (weakref.ref(x), x._version, x.detach().to_sparse_csr())
        _csr_of[id(x)] = cached
    return cached[2]


def sparse_dropout(x: torch.Tensor, p: float, training: bool) -> torch.Tensor:
    """Dropout on the stored values of the CSR matrix ``x`` (same sparsity pattern)."""
    if not training or p == 0.0:
        return x
    values = fast_dropout(x.values(), p, training)
    return torch.sparse_csr_tensor(x.crow_indices(), x.col_indices(), values, x.shape,
                                   check_invariants=False)


class SparseInputLinear(nn.Module):
    """A bias-free linear map (the wrapped layer's ``weight``, same name) that also takes a
    sparse CSR input. Shapes: ``[N, F_in]`` -> ``[N, F_out]``."""

    def __init__(self, linear: nn.Linear):
        super().__init__()
        if linear.bias is not None:
            raise ValueError("SparseInputLinear wraps bias-free linear maps only")
        self.weight = linear.weight

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return linear_map(x, self.weight)


def linear_map(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """``x @ weight.T`` for a sparse CSR or a dense ``x``."""
    if x.layout == torch.sparse_csr:
        return torch.sparse.mm(x, weight.t())
    return F.linear(x, weight)

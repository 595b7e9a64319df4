"""Rows of two tensors side by side in one: ``[a[rows] | b[rows]]``, one parallel pass.

SAGE's first layer, computing only some rows (the rows the loss reads), gathers those rows of
its aggregate and of its input either way; gathered side by side, its two products
``aggregate @ W_l^T + x @ W_r^T`` become one of twice the depth, ``[aggregate | x] @ [W_l |
W_r]^T``, whose output is written once rather than written and then read and written again.
"""

from __future__ import annotations

import numpy as np
import torch
from numba import njit, prange

from ..graph.kernel_threads import follow_torch_threads


@njit(parallel=True, cache=True, nogil=True)
def _side_by_side(a, b, rows, out):  # pragma: no cover - compiled
    width = a.shape[1]
    for i in prange(rows.shape[0]):
        out[i, :width] = a[rows[i]]
        out[i, width:] = b[rows[i]]
    return out


def stacked_rows(a: torch.Tensor, b: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """``torch.cat([a[rows], b[rows]], dim=1)`` for float32 CPU tensors ``a`` ``[N, F_a]`` and
    ``b`` ``[N, F_b]`` outside autograd (neither needs a gradient), without the two gathered
    temporaries."""
    if a.requires_grad or b.requires_grad:
        raise ValueError("stacked_rows: the inputs must need no gradient")
    out = np.empty((rows.numel(), a.shape[1] + b.shape[1]), dtype=np.float32)
    follow_torch_threads()
    _side_by_side(a.contiguous().numpy(), b.contiguous().numpy(), rows.numpy(), out)
    return torch.from_numpy(out)

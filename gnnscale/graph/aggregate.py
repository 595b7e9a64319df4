"""Distributed sparse aggregation with the halo exchange overlapped.

``out = A_inner @ owned + A_boundary @ halo`` where ``halo`` lives on other ranks.

Forward: post the halo exchange -> ``A_inner @ owned`` -> wait -> ``+= A_boundary @ halo``.
The inner product runs in row blocks with a test of the exchange between them, so the exchange
progresses (MPI moves data only inside MPI calls) while this rank computes.
Backward mirrors it: ``A_boundary.T @ grad`` first and post its reverse exchange ->
``A_inner.T @ grad`` while it travels -> wait -> add the returned rows into their owners.

With ``plan.configure(overlap=False)`` each exchange is waited for right after it is posted: the
same numbers, with the whole communication time exposed (for measuring what overlap hides).
"""

from __future__ import annotations

import torch

from .halo import HaloPlan
from .sparse import SparseBlock


def _progress(work, received):
    """While the inner product runs: test the exchange in flight, so MPI moves it (MPI
    progresses only inside MPI calls; the peers are waiting for this rank's rows)."""
    return work.test if work is not None and received is None else None


class DistributedAggregate(torch.autograd.Function):
    """Autograd function behind :func:`aggregate`."""

    @staticmethod
    def forward(ctx, owned: torch.Tensor, inner: SparseBlock, boundary: SparseBlock,
                plan: HaloPlan) -> torch.Tensor:
        ctx.blocks = (inner, boundary, plan)
        work = plan.post_forward(owned) if plan.exchanges_anything else None
        halo = plan.wait(work) if work is not None and not plan.overlap else None
        out = inner.matmul(owned, _progress(work, halo))
        if work is not None:
            if halo is None:
                halo = plan.wait(work)
            if boundary.nnz:  # added into out: no second [num_owned, F] tensor
                out = boundary.matmul(halo.to(out.dtype), add_to=out)
        return out

    @staticmethod
    def backward(ctx, grad_out: torch.Tensor):
        inner, boundary, plan = ctx.blocks
        if not ctx.needs_input_grad[0]:
            # Input features need no gradient (e.g. the first layer aggregating raw features):
            # skip the transposed products and the reverse exchange. Every rank runs the same
            # layers, so every rank skips the same collective.
            return None, None, None, None
        grad_out = grad_out.contiguous()
        work = None
        if plan.exchanges_anything:
            halo_grad = boundary.matmul_transposed(grad_out)
            work = plan.post_backward(halo_grad)
        sent_grad = plan.wait(work) if work is not None and not plan.overlap else None
        grad_owned = inner.matmul_transposed(grad_out, _progress(work, sent_grad))
        if work is not None:
            plan.accumulate_into_owned(grad_owned, sent_grad if sent_grad is not None
                                       else plan.wait(work))
        return grad_owned, None, None, None


def aggregate(owned: torch.Tensor, inner: SparseBlock, boundary: SparseBlock,
              plan: HaloPlan) -> torch.Tensor:
    """``[A_inner | A_boundary] @ [owned; halo]`` for this rank's rows, halo fetched as needed.

    owned: [num_owned, F] features of this rank's nodes. Returns [num_owned, F].
    """
    return DistributedAggregate.apply(owned, inner, boundary, plan)

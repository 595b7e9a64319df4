"""Distributed sparse aggregation with the halo exchange overlapped.

``out = A_inner @ owned + A_boundary @ halo`` where ``halo`` lives on other ranks.

Forward: post the halo exchange -> ``A_inner @ owned`` -> wait -> ``+= A_boundary @ halo``
(added into the inner product's rows in place).
The inner product runs in row blocks with a test of the exchange between them, so the exchange
progresses (MPI moves data only inside MPI calls) while this rank computes.
Backward mirrors it: ``A_boundary.T @ grad`` first and post its reverse exchange ->
``A_inner.T @ grad`` while it travels -> wait -> add the returned rows into their owners.

Rows wider than the plan's ``chunk_bytes`` allow travel in column blocks, one in flight while
the previous one is used (:class:`DistributedAggregate`).

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


def _columns(tensor: torch.Tensor, cols: slice) -> torch.Tensor:
    return tensor if cols == slice(0, tensor.shape[-1]) else tensor[:, cols]


def _column_blocks(plan: HaloPlan, tensor: torch.Tensor, gradient: bool = False
                   ) -> list[slice]:
    """Column blocks of ``tensor``'s exchange, sized on the bytes its rows travel as
    (``gradient``: the halo gradients' format)."""
    if tensor.dim() != 2:
        return [slice(0, tensor.shape[-1])]
    return plan.column_blocks(tensor.shape[1], tensor.element_size(), gradient=gradient)


def _exchange_in_blocks(plan: HaloPlan, blocks: list[slice], post, local_work):
    """Post the first block's exchange, run ``local_work(progress)`` while it travels, then
    hand out each block's received rows in turn, the next block posted before the current one
    is handed out. Returns ``(local result, iterator of (cols, rows, progress))``, where
    ``progress`` tests the next block's exchange while the caller uses the current rows. The
    iterator must be run to its end (every rank posts every block)."""
    work = post(blocks[0])
    received = plan.wait(work) if not plan.overlap else None
    result = local_work(_progress(work, received))

    def arrivals():
        nonlocal work, received
        for i, cols in enumerate(blocks):
            if received is None:
                received = plan.wait(work)
            following = next_work = None
            if i + 1 < len(blocks):  # posted now: it travels while this block is used
                work = next_work = post(blocks[i + 1])
                following = plan.wait(work) if not plan.overlap else None
            yield cols, received, _progress(next_work, following)
            received = following

    return result, arrivals()


class DistributedAggregate(torch.autograd.Function):
    """Autograd function behind :func:`aggregate`.

    Wide rows travel in column blocks (:meth:`HaloPlan.column_blocks`): the next block's
    exchange is posted before the current one is added in, so one block is in flight while
    another is used, and a rank never holds its whole halo at once. Every output element is
    the same sum as with one block."""

    @staticmethod
    def forward(ctx, owned: torch.Tensor, inner: SparseBlock, boundary: SparseBlock,
                plan: HaloPlan, send_index: torch.Tensor | None = None) -> torch.Tensor:
        ctx.blocks = (inner, boundary, plan, send_index)
        if not plan.exchanges_anything:
            return inner.matmul(owned)
        out, arrivals = _exchange_in_blocks(
            plan, _column_blocks(plan, owned),
            lambda cols: plan.post_forward(_columns(owned, cols), send_index),
            lambda progress: inner.matmul(owned, progress))
        for cols, halo, progress in arrivals:
            if boundary.nnz:  # added into out: no second [num_owned, F] tensor
                boundary.matmul(halo.to(out.dtype), progress, add_to=_columns(out, cols))
        return out

    @staticmethod
    def backward(ctx, grad_out: torch.Tensor):
        inner, boundary, plan, send_index = ctx.blocks
        if not ctx.needs_input_grad[0]:
            # Input features need no gradient (e.g. the first layer aggregating raw features):
            # skip the transposed products and the reverse exchange. Every rank runs the same
            # layers, so every rank skips the same collective.
            return None, None, None, None, None
        grad_out = grad_out.contiguous()
        if not plan.exchanges_anything:
            return inner.matmul_transposed(grad_out), None, None, None, None
        grad_owned, arrivals = _exchange_in_blocks(
            plan, _column_blocks(plan, grad_out, gradient=True),
            lambda cols: plan.post_backward(boundary.matmul_transposed(_columns(grad_out, cols))),
            lambda progress: inner.matmul_transposed(grad_out, progress))
        for cols, sent_grad, _ in arrivals:
            plan.accumulate_into_owned(_columns(grad_owned, cols), sent_grad, send_index)
        return grad_owned, None, None, None, None


def aggregate(owned: torch.Tensor, inner: SparseBlock, boundary: SparseBlock,
              plan: HaloPlan, send_index: torch.Tensor | None = None) -> torch.Tensor:
    """``[A_inner | A_boundary] @ [owned; halo]`` for this rank's rows, halo fetched as needed.

    owned: [num_owned, F] features of this rank's nodes (or of some of them, the inner
    block's columns renumbered to match, ``send_index`` then giving where the rows peers
    read sit in it: :meth:`HaloPlan.send_positions`). Returns [inner rows, F].
    """
    return DistributedAggregate.apply(owned, inner, boundary, plan, send_index)

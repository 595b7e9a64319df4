"""``sum_i x_i @ W_i^T`` over tall row blocks, with the weight gradients in the faster layout.

A layer that aggregates first multiplies ``[N, F_in]`` rows (N in the hundreds of thousands)
by a small weight. Autograd's linear computes the weight's gradient as ``G^T @ x``
(``[F_out, N] @ [N, F_in]``); ``(x^T @ G)^T``, the same product with the operands' roles
swapped, runs faster in MKL at these shapes (docs/performance.md, "How a training step
runs", has the figures). SAGE's two transforms
(neighbours and root) also share one output here: the second product is added into the first
in place, as ``addmm_`` does, and backward reads the output's gradient for both. The products
go through :mod:`~gnnscale.nn.gemm` (oneDNN where it is the faster; there the weight gradient
is summed over blocks of rows, :func:`~gnnscale.nn.gemm.mm_tn`).

Float32 and float64 without CPU autocast (the callers use ``F.linear`` otherwise, which
autocast casts).
"""

from __future__ import annotations

import torch

from .gemm import addmm_, cpu_autocast_dtype, mm, mm_tn


def can_use(x: torch.Tensor) -> bool:
    """Whether :func:`linear_sum` takes ``x`` (a floating tensor outside CPU autocast)."""
    return x.dtype in (torch.float32, torch.float64) and cpu_autocast_dtype() is None


def linear_sum(inputs: list[torch.Tensor], weights: list[torch.Tensor]) -> torch.Tensor:
    """``sum_i F.linear(inputs[i], weights[i])``: inputs ``[N, F_i]``, weights ``[O, F_i]``
    -> ``[N, O]``, differentiable in all of them."""
    if not inputs or len(inputs) != len(weights):
        raise ValueError(f"linear_sum needs as many weights as inputs (at least one), got "
                         f"{len(inputs)} inputs and {len(weights)} weights")
    return _LinearSum.apply(len(inputs), *inputs, *weights)


class _LinearSum(torch.autograd.Function):
    @staticmethod
    def forward(ctx, count, *tensors):
        inputs, weights = tensors[:count], tensors[count:]
        out = mm(inputs[0], weights[0].t())
        for x, weight in zip(inputs[1:], weights[1:]):
            addmm_(out, x, weight.t())
        ctx.count = count
        ctx.save_for_backward(*tensors)
        return out

    @staticmethod
    def backward(ctx, grad):
        tensors = ctx.saved_tensors
        count = ctx.count
        inputs, weights = tensors[:count], tensors[count:]
        needs = ctx.needs_input_grad[1:]
        grad_inputs = [mm(grad, weight) if need else None
                       for weight, need in zip(weights, needs[:count])]
        grad_weights = [mm_tn(x, grad).t() if need else None
                        for x, need in zip(inputs, needs[count:])]
        return None, *grad_inputs, *grad_weights

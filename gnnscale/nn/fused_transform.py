"""``dropout(relu(h + b)) @ W^T`` a block of rows at a time, the activation never stored.

Between two layers the model applies ReLU and the next layer's input dropout
(:func:`~gnnscale.nn.dropout.relu_dropout`), and a layer that transforms first multiplies the
result by its weight. Unfused, the activation ``[N, F]`` is written, read back by the product,
kept for both backward passes and read twice more there (the weight gradient and the mask).
Here each block of rows (about 2 MiB) is activated into a buffer that stays in the core's
cache and multiplied from there; backward activates the block again from ``h`` (the mask is a
hash of the element index, nothing is stored) for the weight gradient and masks the input
gradient in the same sweep. The step moves one ``[N, F]`` tensor fewer each way and holds one
fewer for backward. The previous layer's bias ``b`` may ride in the same sweep: added to each
element as it is read, rather than broadcast into (and summed over) an ``[N, F]`` tensor.

``h`` itself may come as a :class:`PendingLinear`, ``sum_i x_i @ W_i^T``, the previous layer's
products not yet formed (the first layer aggregating first: its aggregate, and for SAGE the
raw features, times its weights). Forward forms ``h`` in one product as before; backward
never forms ``h``'s gradient ``[N, F]``: each block's gradient at the pre-activation, still
in cache, goes straight into the ``W_i`` gradients (and the ``x_i`` gradients' rows, where
asked), sparing that tensor's write, its read by the weight-gradient product and its memory.

The products go through :mod:`~gnnscale.nn.gemm` (oneDNN where it is the faster).
Float32 on the CPU only (the callers fall back to the unfused pair otherwise); the mask, its
key and the generator draws are those of :func:`~gnnscale.nn.dropout.relu_dropout`, so the
results equal the unfused pair's up to the products' rounding.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from ..graph.kernel_threads import follow_torch_threads
from .dropout import (CHUNK, NOT_TRANSPOSED, draw, flat, masked_scale,
                     relu_dropout_grad, tiled_bias)
from .gemm import addmm, addmm_, cpu_autocast_dtype, mm, uses_onednn
from .tall_linear import linear_sum

#: bytes of activated rows per block: a few blocks fit the 2 MiB-per-core caches of this
#: class of machine with room for the weight
BLOCK_BYTES = 2 * 2**20


def block_rows(width: int) -> int:
    """Rows per block for rows of ``width`` float32: about :data:`BLOCK_BYTES`, and a whole
    number of the mask's chunks (so each block starts on a chunk of the whole tensor)."""
    unit = CHUNK // math.gcd(width, CHUNK)
    return unit * max(1, BLOCK_BYTES // (4 * width * unit))


class PendingLinear:
    """``sum_i inputs[i] @ weights[i]^T`` (inputs ``[N, F_i]``, weights ``[O, F_i]``), not yet
    computed: :func:`relu_dropout_linear` takes it as its ``h`` and forms it itself;
    :meth:`materialize` forms it for any other use."""

    def __init__(self, inputs: list[torch.Tensor], weights: list[torch.Tensor]):
        if not inputs or len(inputs) != len(weights):
            raise ValueError(f"a pending product needs as many weights as inputs (at least "
                             f"one), got {len(inputs)} inputs and {len(weights)} weights")
        self.inputs, self.weights = list(inputs), list(weights)

    def materialize(self) -> torch.Tensor:
        """The product as a tensor (:func:`~gnnscale.nn.tall_linear.linear_sum`)."""
        return linear_sum(self.inputs, self.weights)


def can_fuse(h) -> bool:
    """Whether :func:`relu_dropout_linear` takes ``h`` (float32, CPU, 2-D, no autocast; a
    :class:`PendingLinear` whose inputs all are)."""
    if isinstance(h, PendingLinear):
        return all(can_fuse(x) for x in h.inputs) and all(
            w.dtype == torch.float32 for w in h.weights)
    return (h.dtype == torch.float32 and h.device.type == "cpu" and h.dim() == 2
            and cpu_autocast_dtype() is None)


def relu_dropout_linear(h, weight: torch.Tensor, p: float, training: bool = True,
                        bias: torch.Tensor | None = None) -> torch.Tensor:
    """``F.linear(relu_dropout(h + bias, p, training), weight)`` without forming the activation.

    ``h`` [N, F] float32 or a :class:`PendingLinear` of that shape (see :func:`can_fuse`),
    ``weight`` [O, F], ``bias`` [F] or None (no bias) -> [N, O]. Differentiable in all of
    them (a pending product in its inputs and weights)."""
    # h given: one input and no weight of its own
    inputs, weights = (h.inputs, h.weights) if isinstance(h, PendingLinear) else ([h], [None])
    if training and p > 0.0 and inputs[0].shape[0] > 0:
        key, threshold, scale = draw(p)
    else:  # nothing dropped: ReLU alone (no draw, as relu_dropout)
        key, threshold, scale = np.uint64(0), 0, 1.0
    return _ReluDropoutLinear.apply(weight, bias, key, threshold, np.float32(scale),
                                    len(inputs), *inputs, *weights)


def _activate(h_rows: torch.Tensor, first_row: int, key, threshold, scale, bias,
              out: torch.Tensor) -> torch.Tensor:
    """``dropout(relu(. + bias))`` of rows ``first_row...`` of the whole ``h``, into ``out``
    (``bias`` from :func:`~gnnscale.nn.dropout.tiled_bias`)."""
    follow_torch_threads()
    masked_scale(flat(h_rows), key, threshold, scale, True, flat(out),
                 first_row * h_rows.shape[1] // CHUNK, bias)
    return out


def _blocks(h: torch.Tensor, buffers: int = 1):
    """``(lo, hi, buffers)`` per block of rows: ``buffers`` reused ``[block, F]`` tensors
    (stacked: ``[buffers, block, F]``) cut to the block."""
    n, width = h.shape
    rows = max(1, min(n, block_rows(width)))  # an empty part has no blocks
    stack = h.new_empty((buffers, rows, width))
    for lo in range(0, n, rows):
        hi = min(n, lo + rows)
        yield lo, hi, stack[:, :hi - lo]


def _pre_activation(inputs, weights) -> torch.Tensor:
    """``h``: the input itself (no weight), else ``sum_i x_i @ W_i^T`` in one output."""
    if weights[0] is None:
        return inputs[0].detach().contiguous()
    h = mm(inputs[0].detach(), weights[0].detach().t())
    for x, w in zip(inputs[1:], weights[1:]):
        addmm_(h, x.detach(), w.detach().t())
    return h


class _ReluDropoutLinear(torch.autograd.Function):
    """Inputs: the next weight, the bias, the mask's key, threshold and scale, then ``count``
    inputs ``x_i`` and their ``count`` weights ``W_i`` (one weight None: ``h = x_0``)."""

    @staticmethod
    def forward(ctx, weight, bias, key, threshold, scale, count, *pending):
        inputs, weights = pending[:count], pending[count:]
        h = _pre_activation(inputs, weights)
        weight = weight.detach()
        bias = None if bias is None else bias.detach()
        # zeros without a bias: the gradient pass reads one either way
        tiled = tiled_bias(np.zeros(1, np.float32) if bias is None else bias.numpy())
        out = h.new_empty((h.shape[0], weight.shape[0]))
        with torch.no_grad():
            for lo, hi, buffer in _blocks(h):
                mm(_activate(h[lo:hi], lo, key, threshold, scale, tiled, buffer[0]),
                   weight.t(), out=out[lo:hi])
        products = weights[0] is not None
        saved = [x.detach() for x in inputs] if products else []
        ctx.save_for_backward(h, weight, bias, *saved,
                              *[w.detach() for w in weights if w is not None])
        ctx.mask = (key, threshold, scale, tiled)
        ctx.count, ctx.products = count, products
        return out

    @staticmethod
    def backward(ctx, grad):
        h, weight, bias, *pending = ctx.saved_tensors
        key, threshold, scale, tiled = ctx.mask
        count, products = ctx.count, ctx.products
        inputs, weights = pending[:count], pending[count:]
        need_weight, need_bias = ctx.needs_input_grad[:2]
        need_inputs = ctx.needs_input_grad[6:6 + count]
        need_weights = ctx.needs_input_grad[6 + count:] if products else ()
        need_h = not products and need_inputs[0]
        # the gradient at the pre-activation, per block
        need_pre = need_h or need_bias or any(need_inputs) or any(need_weights)
        grad = grad.contiguous()
        grad_h = torch.empty_like(h) if need_h else None
        grad_weight = torch.zeros_like(weight) if need_weight else None
        grad_bias = torch.zeros_like(bias) if need_bias else None
        # products: inputs' gradients by rows, weights' summed over the blocks
        grad_inputs = [torch.empty_like(x) if need and products else None
                       for x, need in zip(inputs, need_inputs)]
        grad_weights = [torch.zeros_like(w) if need else None
                        for w, need in zip(weights, need_weights)]
        width = h.shape[1]
        transposed = uses_onednn()
        no_values = np.empty(0, np.float32)
        ones = h.new_ones(block_rows(width)) if need_bias else None
        for lo, hi, buffer in _blocks(h, 1 + need_weight + (not need_h) if need_pre else 1):
            if not need_pre:  # W' = sum over blocks of G^T relu_dropout(h + b), activated again
                grad_weight = addmm(grad_weight, grad[lo:hi].t(),
                                    _activate(h[lo:hi], lo, key, threshold, scale, tiled,
                                              buffer[0]))
                continue
            # (G W) masked where the element was kept and positive, and (for W') the block
            # activated again, from one computation of the mask
            through = mm(grad[lo:hi], weight, scratch=buffer[0])
            values = buffer[1] if need_weight else None
            mask_args = (flat(through), flat(h[lo:hi]), tiled, key, threshold, scale)
            mask_tail = (flat(values) if need_weight else no_values, lo * width // CHUNK)
            follow_torch_threads()
            if need_h or not transposed:  # the gradient's rows in place (or in a buffer)
                grad_pre = grad_h[lo:hi] if need_h else buffer[1 + need_weight]
                relu_dropout_grad(*mask_args, flat(grad_pre), *mask_tail, NOT_TRANSPOSED)
                grad_pre_t = grad_pre.t()
            else:  # stored transposed, [F, rows]: the weights' gradients reduce over the
                # rows, and oneDNN multiplies without copying when those are contiguous
                # (docs/performance.md, "Dense products")
                grad_pre_t = buffer[1 + need_weight].view(width, hi - lo)
                relu_dropout_grad(*mask_args, no_values, *mask_tail, grad_pre_t.numpy())
            if need_weight:
                grad_weight = addmm(grad_weight, grad[lo:hi].t(), values)
            if need_bias:  # a product with ones: faster than sum(0) over the cached block
                grad_bias.addmv_(grad_pre_t, ones[:hi - lo])
            for i, (x, w, grad_x) in enumerate(zip(inputs, weights, grad_inputs)):
                if grad_weights[i] is not None:  # += G_pre^T x over the block's rows
                    grad_weights[i] = addmm(grad_weights[i], grad_pre_t, x[lo:hi])
                if grad_x is not None:
                    mm(grad_pre_t.t(), w, out=grad_x[lo:hi])
        grads = [*grad_inputs, *grad_weights] if products else [grad_h, None]
        return grad_weight, grad_bias, None, None, None, None, *grads

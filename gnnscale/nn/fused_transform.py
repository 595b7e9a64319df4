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

Float32 on the CPU only (the callers fall back to the unfused pair otherwise); the mask, its
key and the generator draws are those of :func:`~gnnscale.nn.dropout.relu_dropout`, so the
results equal the unfused pair's up to the products' rounding.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from .dropout import _CHUNK, _draw, _flat, _masked_scale, _relu_dropout_grad, tiled_bias

#: bytes of activated rows per block: a few blocks fit the 2 MiB-per-core caches of this
#: class of machine with room for the weight
BLOCK_BYTES = 2 * 2**20


def block_rows(width: int) -> int:
    """Rows per block for rows of ``width`` float32: about :data:`BLOCK_BYTES`, and a whole
    number of the mask's chunks (so each block starts on a chunk of the whole tensor)."""
    unit = _CHUNK // math.gcd(width, _CHUNK)
    return unit * max(1, BLOCK_BYTES // (4 * width * unit))


def can_fuse(h: torch.Tensor) -> bool:
    """Whether :func:`relu_dropout_linear` takes ``h`` (float32, CPU, 2-D, no autocast)."""
    return (h.dtype == torch.float32 and h.device.type == "cpu" and h.dim() == 2
            and cpu_autocast_dtype() is None)


def cpu_autocast_dtype() -> torch.dtype | None:
    """The dtype CPU autocast runs in where it is on, else None."""
    try:
        enabled, dtype = torch.is_autocast_enabled("cpu"), torch.get_autocast_dtype("cpu")
    except TypeError:  # torch < 2.4
        enabled, dtype = torch.is_autocast_cpu_enabled(), torch.get_autocast_cpu_dtype()
    return dtype if enabled else None


def relu_dropout_linear(h: torch.Tensor, weight: torch.Tensor, p: float,
                        training: bool = True, bias: torch.Tensor | None = None) -> torch.Tensor:
    """``F.linear(relu_dropout(h + bias, p, training), weight)`` without forming the activation.

    ``h`` [N, F] float32 (see :func:`can_fuse`), ``weight`` [O, F], ``bias`` [F] or None (no
    bias) -> [N, O]. Differentiable in all three."""
    if training and p > 0.0 and h.numel() > 0:
        key, threshold, scale = _draw(p)
    else:  # nothing dropped: ReLU alone (no draw, as relu_dropout)
        key, threshold, scale = np.uint64(0), 0, 1.0
    return _ReluDropoutLinear.apply(h, weight, bias, key, threshold, np.float32(scale))


def _activate(h_rows: torch.Tensor, first_row: int, key, threshold, scale, bias,
              out: torch.Tensor) -> torch.Tensor:
    """``dropout(relu(. + bias))`` of rows ``first_row...`` of the whole ``h``, into ``out``
    (``bias`` from :func:`~gnnscale.nn.dropout.tiled_bias`)."""
    _masked_scale(_flat(h_rows), key, threshold, scale, True, _flat(out),
                  first_row * h_rows.shape[1] // _CHUNK, bias)
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


class _ReluDropoutLinear(torch.autograd.Function):
    @staticmethod
    def forward(ctx, h, weight, bias, key, threshold, scale):
        h = h.detach().contiguous()
        weight = weight.detach()
        bias = None if bias is None else bias.detach()
        # zeros without a bias: the gradient pass reads one either way
        tiled = tiled_bias(np.zeros(1, np.float32) if bias is None else bias.numpy())
        out = h.new_empty((h.shape[0], weight.shape[0]))
        with torch.no_grad():
            for lo, hi, buffer in _blocks(h):
                torch.mm(_activate(h[lo:hi], lo, key, threshold, scale, tiled, buffer[0]),
                         weight.t(), out=out[lo:hi])
        ctx.save_for_backward(h, weight, bias)
        ctx.mask = (key, threshold, scale, tiled)
        return out

    @staticmethod
    def backward(ctx, grad):
        h, weight, bias = ctx.saved_tensors
        key, threshold, scale, tiled = ctx.mask
        need_h, need_weight, need_bias = ctx.needs_input_grad[:3]
        need_pre = need_h or need_bias  # the gradient at the pre-activation
        grad = grad.contiguous()
        grad_h = torch.empty_like(h) if need_h else None
        grad_weight = torch.zeros_like(weight) if need_weight else None
        grad_bias = torch.zeros_like(bias) if need_bias else None
        width = h.shape[1]
        no_values = np.empty(0, np.float32)
        ones = h.new_ones(block_rows(width)) if need_bias else None
        for lo, hi, buffer in _blocks(h, 1 + need_weight + (not need_h) if need_pre else 1):
            if not need_pre:  # W' = sum over blocks of G^T relu_dropout(h + b), activated again
                grad_weight.addmm_(grad[lo:hi].t(),
                                   _activate(h[lo:hi], lo, key, threshold, scale, tiled,
                                             buffer[0]))
                continue
            # (G W) masked where the element was kept and positive, and (for W') the block
            # activated again, from one computation of the mask
            through = torch.mm(grad[lo:hi], weight, out=buffer[0])
            values = buffer[1] if need_weight else None
            grad_pre = grad_h[lo:hi] if need_h else buffer[1 + need_weight]
            _relu_dropout_grad(_flat(through), _flat(h[lo:hi]), tiled, key,
                               threshold, scale, _flat(grad_pre),
                               _flat(values) if need_weight else no_values,
                               lo * width // _CHUNK)
            if need_weight:
                grad_weight.addmm_(grad[lo:hi].t(), values)
            if need_bias:  # a product with ones: faster than sum(0) over the cached block
                grad_bias.addmv_(grad_pre.t(), ones[:hi - lo])
        return grad_h, grad_weight, grad_bias, None, None, None


"""Dropout whose mask is a counter-based hash of (key, element index), and ReLU fused with it.

torch's CPU Bernoulli sampler costs about 10 ns per element; full-batch training drops out the
whole feature matrix every epoch (R-MAT scale 18 at 256 hidden units: 67M elements per layer).
Here each dropout call draws one 64-bit key from this process's NumPy PCG64 generator; the
keep decision of element ``i`` is 16-bit slice ``i % 4`` of
``splitmix64(key + (i // 4) * golden)``,
computed inside one compiled, thread-parallel pass. Nothing per element is stored: backward
recomputes the mask from the key (plain dropout) or reads it off the saved output (ReLU fused
with dropout: a kept positive input is the only way to a positive output). Results do not
depend on the thread count.

The drop probability is rounded to a multiple of 1/65536 and kept elements are scaled by the
exact inverse keep rate, so the expectation is unchanged.

The generator is per process; :func:`manual_seed` seeds it (the trainer seeds it from
``(seed, rank)``), :func:`get_state`/:func:`set_state` save and restore it for checkpoints.
"""

from __future__ import annotations

import numpy as np
import torch
from numba import njit, prange
from torch.nn import functional as F

from ..graph.bf16_bits import kernel_array, kernel_empty, store, to_float, to_tensor
from ..graph.kernel_threads import follow_torch_threads
from ..graph.quantize import GOLDEN as _GOLDEN
from ..graph.quantize import splitmix64 as _splitmix64

_WORDS = 65536
_generator = np.random.default_rng(0)


def manual_seed(seed: int) -> None:
    """Re-seed this process's dropout generator."""
    global _generator
    _generator = np.random.default_rng(seed)


def get_state() -> dict:
    """The dropout generator's state (a plain dict, picklable)."""
    return _generator.bit_generator.state


def set_state(state: dict) -> None:
    """Restore a state returned by :func:`get_state`."""
    _generator.bit_generator.state = state


#: elements per task: 1,024 hashes of 4 16-bit words each; the mask of element ``e`` comes
#: from chunk ``e // CHUNK`` (the fused transform's row blocks start on chunks)
CHUNK = 4096


@njit(inline="always")
def _words(key, chunk):  # pragma: no cover - compiled
    """The 16-bit words of elements [chunk * CHUNK, (chunk + 1) * CHUNK) (little-endian:
    element ``4 b + j`` is bits ``16 j .. 16 j + 15`` of hash ``b``)."""
    hashes = np.empty(CHUNK // 4, dtype=np.uint64)
    first = np.uint64(chunk * (CHUNK // 4))
    for b in range(CHUNK // 4):
        hashes[b] = _splitmix64(key + (first + np.uint64(b)) * _GOLDEN)
    return hashes.view(np.uint16)


#: no bias for :func:`masked_scale`
_NO_BIAS = np.empty(0, np.float32)


def tiled_bias(bias: np.ndarray) -> np.ndarray:
    """A bias ``[F]`` for the compiled passes over a flattened ``[N, F]`` tensor: ``bias``
    repeated over ``CHUNK + F`` elements, so the chunk starting at element ``e`` adds
    ``tiled[e % F:e % F + CHUNK]`` element by element (a loop without an index modulo)."""
    width = bias.shape[0]
    return np.tile(bias.astype(np.float32), -(-(CHUNK + width) // width))[:CHUNK + width]


@njit(inline="always")
def _chunk_bias(tiled, chunk, n):  # pragma: no cover - compiled
    """The ``n`` bias elements of chunk ``chunk`` (an empty slice without a bias)."""
    if tiled.shape[0] == 0:
        return tiled[0:0]
    start = (chunk * CHUNK) % (tiled.shape[0] - CHUNK)
    return tiled[start:start + n]


@njit(inline="always")
def _masked_chunk(x, words, threshold, scale, relu, out, bias):  # pragma: no cover - compiled
    # fixed trip count and a branch-free select, so that the loop vectorises
    if bias.shape[0] > 0:  # dropout(relu(x + bias))
        for j in range(x.shape[0]):
            value = to_float(x[j]) + bias[j]
            store(out, j, value * scale if (words[j] >= threshold) & (value > 0) else 0.0)
    elif relu:
        for j in range(x.shape[0]):
            value = to_float(x[j])
            store(out, j, value * scale if (words[j] >= threshold) & (value > 0) else 0.0)
    else:
        for j in range(x.shape[0]):
            store(out, j, to_float(x[j]) * scale if words[j] >= threshold else 0.0)


@njit(parallel=True, fastmath=True, cache=True, nogil=True)
def masked_scale(x, key, threshold, scale, relu, out, first_chunk, bias):  # pragma: no cover
    """``out[i] = x[i] * scale`` where element i is kept (and, with relu, positive), else 0.
    ``x`` and ``out`` are float arrays or bf16 bits (uint16), each of its own type; ``x[0]``
    is element ``first_chunk * CHUNK`` of the tensor the mask is drawn over. With a bias
    (:func:`tiled_bias`, or :data:`_NO_BIAS`) ``dropout(relu(x + bias))`` instead."""
    n = x.shape[0]
    full = n // CHUNK
    for chunk in prange(full):
        lo = chunk * CHUNK
        _masked_chunk(x[lo:lo + CHUNK], _words(key, first_chunk + chunk), threshold, scale,
                      relu, out[lo:lo + CHUNK], _chunk_bias(bias, first_chunk + chunk, CHUNK))
    lo = full * CHUNK
    if lo < n:
        _masked_chunk(x[lo:], _words(key, first_chunk + full)[:n - lo], threshold, scale, relu,
                      out[lo:], _chunk_bias(bias, first_chunk + full, n - lo))
    return out


@njit(inline="always")
def _grad_chunk(grad, x, bias, words, threshold, scale, out, value):  # pragma: no cover
    if value.shape[0] == 0:
        for j in range(x.shape[0]):  # fixed trip count, branch-free select: vectorises
            keep = (words[j] >= threshold) & (x[j] + bias[j] > 0)
            out[j] = grad[j] * scale if keep else np.float32(0.0)
    else:  # two loops over few arrays each: LLVM vectorises a loop only while its
        # run-time overlap checks between the arrays stay few (numba 0.60 stopped at five)
        for j in range(x.shape[0]):
            value[j] = x[j] + bias[j]
        for j in range(x.shape[0]):
            keep = (words[j] >= threshold) & (value[j] > 0)
            out[j] = grad[j] * scale if keep else np.float32(0.0)
            value[j] = value[j] * scale if keep else np.float32(0.0)


#: no transposed output for :func:`relu_dropout_grad` (the gradient goes to ``out``)
NOT_TRANSPOSED = np.empty((0, 0), np.float32)


@njit(parallel=True, fastmath=True, cache=True, nogil=True)
def relu_dropout_grad(grad, x, bias, key, threshold, scale, out, value, first_chunk,
                      out_t):  # pragma: no cover
    """The gradient through ``dropout(relu(x + bias))``: ``out[i] = grad[i] * scale`` where
    element i is kept and ``x[i] + bias`` positive, else 0; with a non-empty ``value`` also
    the activation itself there (``(x[i] + bias) * scale`` or 0), from the same mask words
    (float32 arrays; ``bias`` from :func:`tiled_bias`, zeros for none; ``first_chunk`` as
    :func:`masked_scale`). With a non-empty ``out_t`` (else :data:`NOT_TRANSPOSED`) the
    gradient is stored transposed there instead: ``x`` and ``grad`` hold ``[R, F]`` row-major
    (flattened), ``out_t`` is ``[F, R]``, element ``(r, c)`` at ``out_t[c, r]`` (for a product
    reducing over the rows, which oneDNN wants contiguous), each chunk formed in a scratch
    row first; ``out`` is not written then."""
    n = x.shape[0]
    both = value.shape[0] == n
    transposed = out_t.shape[0] > 0
    chunks = (n + CHUNK - 1) // CHUNK
    for chunk in prange(chunks):
        lo = chunk * CHUNK
        hi = min(n, lo + CHUNK)
        chunk_bias = _chunk_bias(bias, first_chunk + chunk, hi - lo)
        words = _words(key, first_chunk + chunk)[:hi - lo]
        values = value[lo:hi] if both else value[0:0]
        if transposed:
            scratch = np.empty(hi - lo, dtype=np.float32)
            _grad_chunk(grad[lo:hi], x[lo:hi], chunk_bias, words, threshold, scale, scratch,
                        values)
            _store_transposed(scratch, lo, out_t.shape[0], out_t)
        else:
            _grad_chunk(grad[lo:hi], x[lo:hi], chunk_bias, words, threshold, scale,
                        out[lo:hi], values)
    return out


@njit(inline="always")
def _store_transposed(values, first, width, out_t):  # pragma: no cover - compiled
    """Flat elements ``first ...`` of a row-major ``[R, width]`` tensor, ``values``, into
    ``out_t`` ``[width, R]``: the chunk's whole rows column by column (contiguous stores), a
    partial row at either end element by element."""
    n = values.shape[0]
    row = first // width
    column = first - row * width
    j = 0
    if column != 0:  # the end of a row begun in the previous chunk
        j = min(width - column, n)
        for k in range(j):
            out_t[column + k, row] = values[k]
        row += 1
    rows = (n - j) // width
    for c in range(width):
        for r in range(rows):
            out_t[c, row + r] = values[j + r * width + c]
    j += rows * width
    row += rows
    for k in range(n - j):  # the start of a row the next chunk ends
        out_t[k, row] = values[j + k]


@njit(parallel=True, fastmath=True, cache=True, nogil=True)
def _keep_mask(n, key, threshold, out):  # pragma: no cover - compiled
    for chunk in prange((n + CHUNK - 1) // CHUNK):
        words = _words(key, chunk)
        lo = chunk * CHUNK
        for i in range(lo, min(n, lo + CHUNK)):
            out[i] = words[i - lo] >= threshold
    return out


@njit(parallel=True, fastmath=True, cache=True, nogil=True)
def _grad_where_positive(grad, out, scale, res):  # pragma: no cover - compiled
    for i in prange(grad.shape[0]):
        store(res, i, to_float(grad[i]) * scale if to_float(out[i]) > 0 else 0.0)
    return res


def flat(x: torch.Tensor) -> np.ndarray:
    """``x`` (made contiguous) as the one-dimensional array the kernels take (bf16 as its
    uint16 bits)."""
    return kernel_array(x.contiguous()).reshape(-1)


def _scale_type(dtype: torch.dtype):
    return np.float64 if dtype == torch.float64 else np.float32


def _apply(x: torch.Tensor, key: np.uint64, threshold: int, scale: float,
           relu: bool, dtype: torch.dtype) -> torch.Tensor:
    out = kernel_empty(x.numel(), dtype)
    follow_torch_threads()
    masked_scale(flat(x), key, threshold, _scale_type(x.dtype)(scale), relu, out, 0,
                 _NO_BIAS)
    return to_tensor(out, dtype).view(x.shape)


class _Dropout(torch.autograd.Function):
    """Dropout (optionally after ReLU) in one compiled pass each way (CPU float32, float64 or
    bf16), the output in ``dtype`` (a cast fused into the pass); the input's gradient comes
    back in the input's dtype."""

    @staticmethod
    def forward(ctx, x, key, threshold, scale, relu, dtype):
        out = _apply(x, key, threshold, scale, relu, dtype)
        ctx.params = (key, threshold, scale, relu, x.dtype)
        if relu:
            ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, grad):
        key, threshold, scale, relu, in_dtype = ctx.params
        if not relu:
            return _apply(grad, key, threshold, scale, False, in_dtype), *[None] * 5
        (out,) = ctx.saved_tensors
        res = kernel_empty(grad.numel(), in_dtype)
        follow_torch_threads()
        _grad_where_positive(flat(grad), flat(out), _scale_type(grad.dtype)(scale), res)
        return to_tensor(res, in_dtype).view(grad.shape), *[None] * 5


_KERNEL_DTYPES = (torch.float32, torch.float64, torch.bfloat16)


def draw(p: float) -> tuple[np.uint64, int, float]:
    """``(key, threshold, scale)`` of a new mask that drops with probability ``p`` in [0, 1):
    a fresh key from the module's generator, the 16-bit word below which an element is
    dropped, and ``1 / (1 - p)`` as the words make it."""
    if not 0.0 <= p < 1.0:
        raise ValueError(f"dropout probability must be in [0, 1), got {p}")
    threshold = int(round(p * _WORDS))
    key = np.uint64(_generator.integers(0, 2**63, dtype=np.int64))
    return key, threshold, _WORDS / (_WORDS - threshold)


def _signed(value: int) -> int:
    """A 64-bit pattern as the int64 that holds it (torch has no uint64 arithmetic on GPUs)."""
    return value - 2**64 if value >= 2**63 else value


_GOLDEN_I64 = _signed(int(_GOLDEN))
_MIX_I64 = (_signed(0xBF58476D1CE4E5B9), _signed(0x94D049BB133111EB))
#: hashes per pass of :func:`keep_mask_on`: bounds its int64 temporaries to 128 MiB each
MASK_HASHES_PER_PASS = 2**24


def _shift_right(z: torch.Tensor, bits: int) -> torch.Tensor:
    """Logical right shift of int64 bit patterns (torch's ``>>`` is arithmetic)."""
    return (z >> bits) & ((1 << (64 - bits)) - 1)


def keep_mask_on(numel: int, key: np.uint64, threshold: int, device) -> torch.Tensor:
    """The keep mask of :func:`_keep_mask` (bool, ``numel`` elements) computed by torch where
    the tensor lives: the same splitmix64 words in int64 arithmetic (products wrap modulo
    2^64 as the compiled kernel's do), so a GPU run drops exactly what a CPU run drops."""
    keep = torch.empty(numel, dtype=torch.bool, device=device)
    hashes = -(-numel // 4)
    key = _signed(int(key))
    for first in range(0, hashes, MASK_HASHES_PER_PASS):
        count = min(MASK_HASHES_PER_PASS, hashes - first)
        z = torch.arange(first, first + count, dtype=torch.int64, device=device)
        z = z.mul_(_GOLDEN_I64).add_(key)
        for bits, factor in zip((30, 27), _MIX_I64):
            z = z.bitwise_xor_(_shift_right(z, bits)).mul_(factor)
        z = z.bitwise_xor_(_shift_right(z, 31))
        # the hash's four 16-bit words in element order (little-endian), compared unsigned:
        # flipping the sign bit maps unsigned order onto int16's signed order
        words = z.view(torch.int16).bitwise_xor_(-(2**15))
        lo = first * 4
        keep[lo:lo + words.numel()] = words[:numel - lo] >= threshold - 2**15
    return keep


def _dropout(x: torch.Tensor, p: float, relu: bool, dtype: torch.dtype) -> torch.Tensor:
    key, threshold, scale = draw(p)
    if x.device.type == "cpu" and x.dtype in _KERNEL_DTYPES and dtype in _KERNEL_DTYPES:
        return _Dropout.apply(x, key, threshold, scale, relu, dtype)
    if x.device.type == "cpu":
        follow_torch_threads()
        keep = torch.from_numpy(_keep_mask(x.numel(), key, threshold,
                                           np.empty(x.numel(), dtype=np.bool_)))
    else:
        keep = keep_mask_on(x.numel(), key, threshold, x.device)
    factor = keep.view(x.shape).to(x.dtype).mul_(scale)
    return ((F.relu(x) if relu else x) * factor).to(dtype)


def dropout(x: torch.Tensor, p: float, training: bool = True,
            dtype: torch.dtype | None = None) -> torch.Tensor:
    """Zero each element of ``x`` with probability ``p`` and scale the rest (differentiable).

    ``dtype``: the dropped-out result's dtype (default ``x``'s), e.g. ``torch.bfloat16`` for
    rows about to be aggregated and transformed in bf16: the cast happens in the same pass.
    Where nothing is dropped (evaluation, ``p == 0``) ``x`` itself is returned, so an input
    that cannot change stays the same tensor (aggregates of such inputs are cached by
    identity)."""
    if not training or p == 0.0 or x.numel() == 0:
        return x
    return _dropout(x, p, False, dtype or x.dtype)


def relu_dropout(x: torch.Tensor, p: float, training: bool = True,
                 dtype: torch.dtype | None = None) -> torch.Tensor:
    """``dropout(relu(x), p)`` in one pass each way (and no stored mask); ``dtype`` as for
    :func:`dropout`."""
    dtype = dtype or x.dtype
    if not training or p == 0.0 or x.numel() == 0:
        return F.relu(x).to(dtype)
    return _dropout(x, p, True, dtype)

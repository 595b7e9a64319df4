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

_WORDS = 65536
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
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


@njit(inline="always")
def _splitmix64(z):  # pragma: no cover - compiled
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


_CHUNK = 4096  # elements per task: 1,024 hashes of 4 16-bit words each


@njit(inline="always")
def _words(key, chunk):  # pragma: no cover - compiled
    """The 16-bit words of elements [chunk * _CHUNK, (chunk + 1) * _CHUNK) (little-endian:
    element ``4 b + j`` is bits ``16 j .. 16 j + 15`` of hash ``b``)."""
    hashes = np.empty(_CHUNK // 4, dtype=np.uint64)
    first = np.uint64(chunk * (_CHUNK // 4))
    for b in range(_CHUNK // 4):
        hashes[b] = _splitmix64(key + (first + np.uint64(b)) * _GOLDEN)
    return hashes.view(np.uint16)


@njit(inline="always")
def _masked_chunk(x, words, threshold, scale, relu, out):  # pragma: no cover - compiled
    # fixed trip count and a branch-free select, so that the loop vectorises
    if relu:
        for j in range(x.shape[0]):
            value = x[j]
            out[j] = value * scale if (words[j] >= threshold) & (value > 0) else 0.0
    else:
        for j in range(x.shape[0]):
            out[j] = x[j] * scale if words[j] >= threshold else 0.0


@njit(parallel=True, fastmath=True, cache=True, nogil=True)
def _masked_scale(x, key, threshold, scale, relu, out):  # pragma: no cover - compiled
    """``out[i] = x[i] * scale`` where element i is kept (and, with relu, positive), else 0."""
    n = x.shape[0]
    full = n // _CHUNK
    for chunk in prange(full):
        lo = chunk * _CHUNK
        _masked_chunk(x[lo:lo + _CHUNK], _words(key, chunk), threshold, scale, relu,
                      out[lo:lo + _CHUNK])
    lo = full * _CHUNK
    if lo < n:
        _masked_chunk(x[lo:], _words(key, full)[:n - lo], threshold, scale, relu, out[lo:])
    return out


@njit(parallel=True, fastmath=True, cache=True, nogil=True)
def _keep_mask(n, key, threshold, out):  # pragma: no cover - compiled
    for chunk in prange((n + _CHUNK - 1) // _CHUNK):
        words = _words(key, chunk)
        lo = chunk * _CHUNK
        for i in range(lo, min(n, lo + _CHUNK)):
            out[i] = words[i - lo] >= threshold
    return out


@njit(parallel=True, fastmath=True, cache=True, nogil=True)
def _grad_where_positive(grad, out, scale, res):  # pragma: no cover - compiled
    for i in prange(grad.shape[0]):
        res[i] = grad[i] * scale if out[i] > 0 else 0.0
    return res


def _flat(x: torch.Tensor) -> np.ndarray:
    return x.detach().contiguous().numpy().reshape(-1)


def _apply(x: torch.Tensor, key: np.uint64, threshold: int, scale: float,
           relu: bool) -> torch.Tensor:
    flat = _flat(x)
    out = np.empty_like(flat)
    _masked_scale(flat, key, threshold, flat.dtype.type(scale), relu, out)
    return torch.from_numpy(out).view(x.shape)


class _Dropout(torch.autograd.Function):
    """Dropout (optionally after ReLU) in one compiled pass each way (CPU float32/float64)."""

    @staticmethod
    def forward(ctx, x, key, threshold, scale, relu):
        out = _apply(x, key, threshold, scale, relu)
        ctx.params = (key, threshold, scale, relu)
        if relu:
            ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, grad):
        key, threshold, scale, relu = ctx.params
        if not relu:
            return _apply(grad, key, threshold, scale, False), None, None, None, None
        (out,) = ctx.saved_tensors
        flat = _flat(grad)
        res = np.empty_like(flat)
        _grad_where_positive(flat, _flat(out), flat.dtype.type(scale), res)
        return torch.from_numpy(res).view(grad.shape), None, None, None, None


def _draw(p: float) -> tuple[np.uint64, int, float]:
    if not 0.0 <= p < 1.0:
        raise ValueError(f"dropout probability must be in [0, 1), got {p}")
    threshold = int(round(p * _WORDS))
    key = np.uint64(_generator.integers(0, 2**63, dtype=np.int64))
    return key, threshold, _WORDS / (_WORDS - threshold)


def _dropout(x: torch.Tensor, p: float, relu: bool) -> torch.Tensor:
    key, threshold, scale = _draw(p)
    if x.device.type == "cpu" and x.dtype in (torch.float32, torch.float64):
        return _Dropout.apply(x, key, threshold, scale, relu)
    keep = torch.from_numpy(_keep_mask(x.numel(), key, threshold,
                                       np.empty(x.numel(), dtype=np.bool_)))
    keep = keep.view(x.shape).to(x.device)
    return (F.relu(x) if relu else x) * keep * scale


def dropout(x: torch.Tensor, p: float, training: bool = True) -> torch.Tensor:
    """Zero each element of ``x`` with probability ``p`` and scale the rest (differentiable)."""
    if not training or p == 0.0 or x.numel() == 0:
        return x
    return _dropout(x, p, relu=False)


def relu_dropout(x: torch.Tensor, p: float, training: bool = True) -> torch.Tensor:
    """``dropout(relu(x), p)`` in one pass each way (and no stored mask)."""
    if not training or p == 0.0 or x.numel() == 0:
        return F.relu(x)
    return _dropout(x, p, relu=True)

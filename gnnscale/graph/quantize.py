"""Halo rows quantized to 8, 4 or 2 bits on the wire: a per-row affine code, stochastic
rounding from a counter-based hash, the codes packed into bytes.

**The code.** Each row ``x`` (``F`` values) of an exchange is sent as ``F`` unsigned ``b``-bit
integers ``q`` plus two float32 numbers, ``offset = min(x)`` and
``scale = (max(x) - min(x)) / (2^b - 1)``; it arrives as ``offset + q * scale``. One scale and
offset per *row*, not per block of a row and not per tensor: a halo row is one node's feature
vector, its values share a range (features after a ReLU, or one node's gradient), while rows
differ by orders of magnitude (degree-scaled GCN features, gradients of training against
non-training nodes), so a per-tensor range would spend the ``b`` bits of most rows on the
largest; the rows these layers send are narrow (the exchange sends the narrower of a layer's
input and output widths: 16 to 256 values), so blocks within a row would add metadata
without a different range to exploit. The two float32 numbers are 8 bytes per row; float32
rather than bf16 keeps ``offset`` the row's exact minimum and the error bound below exact
(bf16 would save 4 bytes per row, a quarter of an int2 row of 64 values).

**Stochastic rounding.** With ``t = (x - offset) / scale`` in ``[0, 2^b - 1]``,
``q = floor(t + u)``, ``u`` uniform in ``[0, 1)``: ``q`` is ``floor(t)`` or ``floor(t) + 1``,
so ``|x - (offset + q * scale)| <= scale`` (one step; plus the float32 rounding of the
result), and ``E[q] = t``: the received row is an unbiased estimate of the sent one, so the
errors of many rows and steps average out rather than add up as round-to-nearest's bias
does. ``u`` is the top 24 bits of ``splitmix64(key + i * golden)``, ``i = row * F + column``
the element's place in the sent buffer (the hash dropout uses, :mod:`gnnscale.nn.dropout`),
so the rounding is a pure function of ``(key, row, column)``: the same run gives the same
bits every time, and the thread count changes nothing. With 24-bit ``u`` the bias is at most
``2^-24`` of a step. ``key`` (:func:`exchange_key`) mixes the run's seed, the sending rank
and a counter of the plan's quantized exchanges, so every exchange (layer, direction,
step) draws fresh, uncorrelated rounding.

**Packing.** ``8 / b`` codes per byte, the first in the lowest bits; a row's
``ceil(F * b / 8)`` code bytes are followed by ``scale`` and ``offset`` (little-endian
float32), so each row is ``ceil(F * b / 8) + 8`` bytes and one ``alltoallv`` of uint8 rows
with the exchange's row counts carries codes and metadata together. Against float32 rows of
64 values (256 bytes): int8 72, int4 40, int2 24 bytes.

**Where.** :meth:`HaloPlan.post <gnnscale.graph.halo.HaloPlan.post>` encodes every exchange
it is given, so every path that sends halo rows takes the format: the overlapped and the
waited aggregation, column blocks (each block's piece of a row gets its own scale and offset),
the GAT and SAGE-max posts, the staleness policies and the vertex cut's exchanges (partial
sums in forward travel as rows, in backward as gradients). Halo *gradients* travel at the
rows' width (:func:`~gnnscale.graph.halo.gradient_wire`): on Cora and CiteSeer GCN, 4 ranks,
3 seeds (``benchmarks/quantized_halo_accuracy.py``), int2 rows with int2 gradients reached the
same test accuracy as with int8 gradients, for 28% fewer bytes per step on Cora (docs/
communication-avoiding.md, "Quantized halo exchange"); ``HaloPlan.configure(gradient_dtype=)``
sends them wider.

A row that holds an infinity or a NaN arrives as a row of NaNs (its offset is sent as NaN),
so a diverging run shows it as float32 would. Rows of one value arrive exactly
(``scale = 0``).

Both passes are compiled (numba, parallel over rows, each row private to one thread):
quantizing reads the row twice (range, then codes), dequantizing once.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from numba import njit, prange

from .bf16_bits import kernel_array, kernel_empty, store, to_float, to_tensor
from .kernel_threads import follow_torch_threads

#: splitmix64's increment (2^64 / golden ratio)
GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MASK = (1 << 64) - 1
#: bytes of metadata per row: float32 scale and offset
META_BYTES = 8


@njit(inline="always")
def splitmix64(z):  # pragma: no cover - compiled
    """splitmix64's finaliser of the uint64 ``z`` (a counter-based hash: independent-looking
    64-bit outputs for consecutive inputs)."""
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def _mix(value: int) -> int:
    """:func:`splitmix64` on a Python int (for keys, outside compiled code)."""
    z = value & _MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
    return z ^ (z >> 31)


def exchange_key(seed: int, rank: int, counter: int) -> int:
    """The rounding key of one exchange: ``seed`` (the run's), the sending ``rank`` and the
    plan's ``counter`` of quantized exchanges, each mixed in by splitmix64."""
    key = _mix(int(seed) * int(GOLDEN))
    key = _mix(key ^ ((int(rank) + 1) * int(GOLDEN) & _MASK))
    return _mix(key ^ ((int(counter) + 1) * 0xD1B54A32D192ED03 & _MASK))


@njit(parallel=True, fastmath=False, cache=True, nogil=True)
def quantize_rows(x, width, bits, key, codes, meta):  # pragma: no cover - compiled
    """Rows of ``x`` (flat ``[n * width]``, float or bf16 bits) -> ``codes[n, :]`` (uint8,
    packed) and ``meta[n, 2]`` (float32 scale, offset), stochastically rounded with ``key``."""
    n = meta.shape[0]
    levels = (1 << bits) - 1
    per_byte = 8 // bits
    code_bytes = (width * bits + 7) // 8
    for r in prange(n):
        base = r * width
        lo = np.inf
        hi = -np.inf
        bad = False
        for c in range(width):
            v = np.float64(to_float(x[base + c]))
            bad |= not np.isfinite(v)
            lo = min(lo, v)
            hi = max(hi, v)
        if width == 0:
            lo = 0.0
            hi = 0.0
        offset = np.float32(lo)
        scale = np.float32((hi - lo) / levels)
        if bad:
            offset = np.float32(np.nan)
            scale = np.float32(0.0)
        meta[r, 0] = scale
        meta[r, 1] = offset
        inv = 1.0 / np.float64(scale) if scale > 0 else 0.0
        for b in range(code_bytes):
            acc = 0
            for j in range(per_byte):
                c = b * per_byte + j
                if c < width:
                    t = (np.float64(to_float(x[base + c])) - np.float64(offset)) * inv
                    h = splitmix64(key + np.uint64(base + c) * GOLDEN)
                    u = np.float64(h >> np.uint64(40)) * (1.0 / 16777216.0)
                    q = int(t + u) if t > 0 else 0  # t >= 0: int() is floor
                    acc |= min(q, levels) << (j * bits)
            codes[r, b] = acc
    return codes


@njit(parallel=True, fastmath=False, cache=True, nogil=True)
def dequantize_rows(codes, meta, width, bits, out):  # pragma: no cover - compiled
    """``out`` (flat ``[n * width]``, float or bf16 bits) = ``offset + q * scale`` of every
    packed code in ``codes[n, :]``."""
    n = meta.shape[0]
    levels = (1 << bits) - 1
    per_byte = 8 // bits
    for r in prange(n):
        scale = meta[r, 0]
        offset = meta[r, 1]
        for c in range(width):
            q = (codes[r, c // per_byte] >> ((c % per_byte) * bits)) & levels
            store(out, r * width + c, offset + np.float32(q) * scale)
    return out


@dataclass(frozen=True)
class QuantizedWire:
    """A wire format of ``bits``-bit codes per value (8, 4 or 2), see the module docstring.
    Set as :meth:`HaloPlan.configure`'s ``message_dtype``."""

    bits: int

    def __post_init__(self):
        if self.bits not in (2, 4, 8):
            raise ValueError(f"quantized halo rows take 8, 4 or 2 bits, got {self.bits!r}")

    @property
    def name(self) -> str:
        return f"int{self.bits}"

    def code_bytes(self, width: int) -> int:
        """Bytes of the packed codes of a row of ``width`` values."""
        return (width * self.bits + 7) // 8

    def row_bytes(self, width: int) -> int:
        """Bytes on the wire of one row of ``width`` values (codes and metadata)."""
        return self.code_bytes(width) + META_BYTES

    def encode(self, rows: torch.Tensor, key: int) -> torch.Tensor:
        """``rows`` ``[n, ...]`` (CPU, float32/float64/bf16) -> uint8 ``[n, row_bytes]``,
        rounded with ``key`` (:func:`exchange_key`)."""
        if rows.device.type != "cpu":
            raise ValueError(f"quantized halo rows are packed on the CPU; got a tensor on "
                             f"{rows.device}")
        n = rows.shape[0]
        width = rows[0].numel() if n else int(np.prod(rows.shape[1:]))
        flat = rows.detach().contiguous().reshape(-1)
        if flat.dtype not in (torch.float32, torch.float64, torch.bfloat16):
            flat = flat.float()
        wire = np.empty((n, self.row_bytes(width)), np.uint8)
        meta = np.empty((n, 2), np.float32)
        follow_torch_threads()
        quantize_rows(kernel_array(flat), width, self.bits, np.uint64(key & _MASK),
                      wire[:, :self.code_bytes(width)], meta)
        wire[:, self.code_bytes(width):] = meta.view(np.uint8)
        return torch.from_numpy(wire)

    def decode(self, wire: torch.Tensor, row_shape: tuple, dtype: torch.dtype) -> torch.Tensor:
        """uint8 ``[n, row_bytes]`` from :meth:`encode` -> ``[n, *row_shape]`` of ``dtype``."""
        width = int(np.prod(row_shape))
        data = wire.numpy()
        n, split = data.shape[0], self.code_bytes(width)
        if data.shape[1] != split + META_BYTES:
            raise ValueError(f"{self.name} rows of {width} values are {split + META_BYTES} "
                             f"bytes, got {data.shape[1]}")
        meta = np.ascontiguousarray(data[:, split:]).view(np.float32)
        out_dtype = dtype if dtype in (torch.float32, torch.float64, torch.bfloat16) \
            else torch.float32
        out = kernel_empty(n * width, out_dtype)
        follow_torch_threads()
        dequantize_rows(data[:, :split], meta, width, self.bits, out)
        return to_tensor(out, out_dtype).reshape(n, *row_shape).to(dtype)


#: the ``--halo-dtype`` names of the quantized formats
WIRE_FORMATS = {f"int{bits}": QuantizedWire(bits) for bits in (8, 4, 2)}

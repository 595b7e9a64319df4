"""bfloat16 inside compiled kernels: NumPy and numba have no bf16 type, so a bf16 array is read
and written as ``uint16`` (a view of the torch tensor's memory) and converted here.

``bf16 -> float32`` is exact: the 16 bits are the high half of the float32. ``float32 -> bf16``
rounds to nearest, ties to even, as torch's ``.to(torch.bfloat16)`` does (infinities and
signed zeros are kept; a NaN stays a NaN, its payload may differ from torch's), so a kernel that
accumulates in float32 and stores bf16 gives the same bits as the float32 kernel followed by
torch's cast. Both conversions are
branch-free, so the loops around them vectorise.
"""

from __future__ import annotations

import numpy as np
import torch
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic, overload


@intrinsic
def _float_from_bits(typingctx, bits):  # pragma: no cover - compiled
    """The float32 whose bits are the low 32 bits of the unsigned integer ``bits`` (numba
    widens shifted uint32 values to uint64)."""
    if not isinstance(bits, types.Integer) or bits.signed or bits.bitwidth < 32:
        return None

    def codegen(context, builder, signature, args):
        low = args[0] if bits.bitwidth == 32 else builder.trunc(args[0], ir.IntType(32))
        return builder.bitcast(low, ir.FloatType())

    return types.float32(bits), codegen


@intrinsic
def _bits_from_float(typingctx, value):  # pragma: no cover - compiled
    if value != types.float32:
        return None

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.IntType(32))

    return types.uint32(types.float32), codegen


@njit
def bf16_to_f32(half):  # pragma: no cover - compiled
    """The float32 value of bf16 bits ``half`` (a uint16)."""
    return _float_from_bits(np.uint32(half) << np.uint32(16))


@njit
def f32_to_bf16(value):  # pragma: no cover - compiled
    """bf16 bits (uint16) of float32 ``value``, rounded to nearest, ties to even."""
    bits = _bits_from_float(np.float32(value))
    rounded = (bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)
    quiet_nan = (bits >> np.uint32(16)) | np.uint32(0x40)
    is_nan = (bits & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000)
    return np.uint16(quiet_nan if is_nan else rounded)


def as_bits(tensor: torch.Tensor) -> np.ndarray:
    """A uint16 NumPy view of a contiguous CPU bf16 tensor's memory (no copy)."""
    return tensor.detach().view(torch.int16).numpy().view(np.uint16)


def from_bits(bits: np.ndarray) -> torch.Tensor:
    """The bf16 tensor whose memory is the uint16 array ``bits`` (no copy)."""
    return torch.from_numpy(bits.view(np.int16)).view(torch.bfloat16)


def to_float(value):
    """In a compiled kernel: ``value`` as a float (bf16 bits, a uint16, converted; a float as
    it is), so one kernel reads float32, float64 and bf16 arrays."""
    raise NotImplementedError("compiled use only")


@overload(to_float)
def _to_float(value):  # pragma: no cover - compiled
    if value == types.uint16:
        return lambda value: bf16_to_f32(value)
    return lambda value: value


def store(out, index, value):
    """In a compiled kernel: ``out[index] = value``, rounded to bf16 bits where ``out`` is a
    uint16 array."""
    raise NotImplementedError("compiled use only")


@overload(store)
def _store(out, index, value):  # pragma: no cover - compiled
    if out.dtype == types.uint16:
        def store_bits(out, index, value):
            out[index] = f32_to_bf16(np.float32(value))
        return store_bits

    def store_value(out, index, value):
        out[index] = value
    return store_value


def kernel_array(tensor: torch.Tensor) -> np.ndarray:
    """A contiguous CPU tensor's memory as the NumPy array a kernel reads: bf16 as its uint16
    bits, other dtypes as they are (no copy)."""
    return as_bits(tensor) if tensor.dtype == torch.bfloat16 else tensor.detach().numpy()


def kernel_empty(n: int, dtype: torch.dtype) -> np.ndarray:
    """An uninitialised 1-D array of ``n`` elements of ``dtype`` for a kernel to write."""
    return np.empty(n, dtype=np.uint16 if dtype == torch.bfloat16
                    else torch.empty(0, dtype=dtype).numpy().dtype)


def to_tensor(array: np.ndarray, dtype: torch.dtype) -> torch.Tensor:
    """The tensor of ``dtype`` whose memory is ``array`` (written by a kernel; no copy)."""
    return from_bits(array) if dtype == torch.bfloat16 else torch.from_numpy(array)

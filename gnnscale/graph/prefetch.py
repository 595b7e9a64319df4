"""Software prefetch inside compiled kernels: ask the CPU to start loading a row it will
gather a few edges from now.

A CSR product's gathers go to rows in no order the hardware prefetchers can follow, so each
row's cache lines arrive one memory latency after the loop asks for them, and with 2 threads
too few requests are in flight to use the memory bus. ``prefetch_row`` issues
``llvm.prefetch`` (a hint: no fault, no effect on results) for every cache line of one row
of a C-contiguous 2-D array; the kernels call it for the row ``PREFETCH_EDGES`` non-zeros
ahead. What it gains is measured with the product alone, against the same product without
prefetching (``benchmarks/aggregation_kernel.py``; docs/performance.md, "The aggregation
kernel").
"""

from __future__ import annotations

from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

PREFETCH_EDGES = 16  # how many non-zeros ahead the gathered row is requested
CACHE_LINE_BYTES = 64


@intrinsic
def _prefetch(typingctx, array, flat_index):  # pragma: no cover - compiled
    """Prefetch (for reading, kept in all cache levels) the element ``flat_index`` of the
    C-contiguous ``array``'s memory."""
    if not isinstance(array, types.Array) or not isinstance(flat_index, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        data = context.make_array(signature.args[0])(context, builder, value=args[0]).data
        address = builder.gep(data, [args[1]])
        byte_ptr = ir.IntType(8).as_pointer()
        i32 = ir.IntType(32)
        fnty = ir.FunctionType(ir.VoidType(), [byte_ptr, i32, i32, i32])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.prefetch.p0i8")
        # read (0), high locality (3), data cache (1)
        builder.call(fn, [builder.bitcast(address, byte_ptr), ir.Constant(i32, 0),
                          ir.Constant(i32, 3), ir.Constant(i32, 1)])
        return context.get_dummy_value()

    return types.none(array, types.intp), codegen


@njit(inline="always")
def prefetch_row(x, row):  # pragma: no cover - compiled
    """Prefetch every cache line of row ``row`` of the C-contiguous 2-D array ``x``."""
    width = x.shape[1]
    per_line = max(1, CACHE_LINE_BYTES // x.itemsize)
    base = row * width
    for c in range(0, width, per_line):
        _prefetch(x, base + c)

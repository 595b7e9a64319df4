"""Keep freed memory in the process so each epoch's big tensors reuse the last epoch's pages.

Full-batch training allocates the same large activations every epoch (R-MAT scale 18 at 256
hidden units: 268 MB each). glibc serves blocks over its mmap threshold with fresh ``mmap``
calls and returns them to the kernel on free, so every epoch pays a page fault (and the
kernel's zeroing) for every 4 KiB page again, some 65,000 per such tensor
(``benchmarks/allocator_modes.py`` measures what that costs; docs/performance.md, "The
allocator and huge pages"). :func:`retain_freed_memory` tells glibc
to serve large blocks from its heap and never to trim it, so freed pages are reused: the
process's resident memory stays at its peak (which the trainer reports anyway) instead of
shrinking between epochs.

The price is memory: a heap that is never returned also keeps the holes between a step's
differently sized tensors, so training's peak grows by up to 0.75 of a step's tensors with 2
layers and dropout, up to 1.8 with 3, up to 0.85 without dropout
(``planning.memory_plan.retained_growth``). It is called by
:class:`gnnscale.engine.Trainer`; :func:`keep_allocator_defaults` (called by ``gnnscale train``
when the memory plan says the retained heap would not fit but the run itself does) or
``GNNSCALE_RETAIN_MEMORY=0`` keep the allocator's defaults. Other C libraries (musl, jemalloc
via LD_PRELOAD) are left alone.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os

_M_TRIM_THRESHOLD = -1
_M_MMAP_MAX = -4
_GLIBC_DEFAULT_MMAP_MAX = 65536
_GLIBC_DEFAULT_TRIM_THRESHOLD = 128 * 1024
#: mallopt's -1 disables trimming (glibc reads it as SIZE_MAX); the largest positive value,
#: 2 GiB - 1, still let the heap's top be returned and page-faulted back every step once a
#: step freed more than 2 GiB there (R-MAT 21, 2.1M nodes x 256 floats a tensor: 2-4 GiB
#: faulted in every other step; docs/large-graphs.md, "The engine tables' model on R-MAT 21")
_NEVER_TRIM = -1
_state = {"applied": None}


def _mallopt():
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc
        return None
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    return mallopt


def retain_freed_memory() -> bool:
    """Switch glibc's malloc to reuse freed large blocks (idempotent). True if applied."""
    if _state["applied"] is not None:
        return _state["applied"]
    applied = False
    if os.environ.get("GNNSCALE_RETAIN_MEMORY", "1") != "0":
        mallopt = _mallopt()
        if mallopt is not None:
            applied = bool(mallopt(_M_MMAP_MAX, 0)) and bool(
                mallopt(_M_TRIM_THRESHOLD, _NEVER_TRIM))
    _state["applied"] = applied
    return applied


def keep_allocator_defaults() -> None:
    """Leave (or put back) glibc's defaults: large blocks mapped and returned on free, the
    heap trimmed. Later :func:`retain_freed_memory` calls then change nothing."""
    if _state["applied"]:
        mallopt = _mallopt()
        if mallopt is not None:
            mallopt(_M_MMAP_MAX, _GLIBC_DEFAULT_MMAP_MAX)
            mallopt(_M_TRIM_THRESHOLD, _GLIBC_DEFAULT_TRIM_THRESHOLD)
    _state["applied"] = False


def retaining() -> bool:
    """Whether freed memory is being kept in the process (after :func:`retain_freed_memory`)."""
    return bool(_state["applied"])

"""This machine's rooflines, measured in the calling process: copy bandwidth and GEMM rate.

Shared by the benchmarks that report a phase's fraction of what the hardware allows
(``engine_phases.py``, ``aggregation_kernel.py``). Both figures are best-of-``reps``, with
the threads torch is set to use when called.
"""

from __future__ import annotations

import time

import numpy as np
import torch


def copy_bandwidth_gbs(gib: float = 1.0, reps: int = 5) -> float:
    """Best copy rate (bytes read + written, GB/s) over ``gib`` GiB arrays: NumPy's one-thread
    copy and torch's copy with the current threads, whichever is faster."""
    n = int(gib * 2**30 / 8)
    a, c = np.ones(n), np.empty(n)
    ta, tc = torch.from_numpy(a), torch.from_numpy(c)
    best = 0.0
    for _ in range(reps):
        for copy in (lambda: np.copyto(c, a), lambda: tc.copy_(ta)):
            best = max(best, 2 * 8 * n / timed(copy) / 1e9)
    return best


def gemm_gflops(shapes, dtype: torch.dtype = torch.float32, reps: int = 5) -> float:
    """Best GEMM rate (GFLOP/s) over ``(M, K, N)`` shapes (a ``[M, K] @ [K, N]`` product
    each) in ``dtype``, through the product the engine uses (:func:`gnnscale.nn.gemm.mm`:
    oneDNN or torch's, as ``GNNSCALE_GEMM`` chooses)."""
    from gnnscale.nn.gemm import mm

    best = 0.0
    for m, k, n in shapes:
        a, b = torch.randn(m, k).to(dtype), torch.randn(k, n).to(dtype)
        mm(a, b)
        best = max(best, 2.0 * m * k * n / min(timed(lambda: mm(a, b)) for _ in range(reps))
                   / 1e9)
    return best


def timed(fn) -> float:
    """Seconds ``fn()`` takes."""
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start

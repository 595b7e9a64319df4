"""How many threads the compiled (numba) kernels run on: torch's intra-op thread count.

numba's OpenMP threading layer and torch share one OpenMP runtime. When numba starts its thread
pool (the process's first parallel kernel), it sets the runtime's thread count to the pool's
size (``NUMBA_NUM_THREADS``: every core, or a rank's share of them, see
:mod:`gnnscale.threads`), and torch reads its own count back from the runtime. Left alone,
``--threads 1``, ``torch.set_num_threads(1)`` or ``OMP_NUM_THREADS=1`` turn into the pool's
size after the first kernel, for every torch operation after it, and ranks sharing a host spin
threads on one another's cores. :func:`follow_torch_threads` starts the pool once, giving torch
its count back, and sets the kernels the calling thread launches to torch's count (at most
the pool's size). Every Python function that launches a parallel kernel calls it first.
"""

from __future__ import annotations

import numba
import numpy as np
import torch
from numba import njit, prange

_pool_started = False


@njit(parallel=True, cache=True)
def _start_pool(x):  # pragma: no cover - compiled
    for i in prange(x.shape[0]):
        x[i] = i


def follow_torch_threads(threads: int | None = None) -> int:
    """Launch the calling thread's kernels on ``threads`` (default: torch's current count),
    at most the pool's size; start the pool first if it has not started, keeping torch's
    count. Returns the kernels' thread count."""
    global _pool_started
    wanted = torch.get_num_threads()
    if not _pool_started:
        _start_pool(np.zeros(1))  # sets the OpenMP runtime's count to the pool's size...
        torch.set_num_threads(wanted)  # ...so torch gets its own back
        _pool_started = True
    count = max(1, min(wanted if threads is None else threads, numba.config.NUMBA_NUM_THREADS))
    if numba.get_num_threads() != count:
        numba.set_num_threads(count)
    return count

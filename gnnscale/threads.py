"""Threads per rank: ``OMP_NUM_THREADS`` where it is set, else the cores divided among the
ranks that share a host.

Imported first by ``gnnscale/__init__.py``: when a launcher (mpirun, torchrun) started several
ranks on this host and ``NUMBA_NUM_THREADS`` is unset, it sizes the compiled kernels' thread
pool to this rank's share of the cores *before numba starts it*. Otherwise every rank starts a
pool of one thread per core whose idle threads spin (OpenMP threading layer) on the cores the
other ranks need (docs/performance.md, "Ranks against threads, and the hidden exchange", has
what that costs and the command that measures it). Set ``NUMBA_NUM_THREADS`` yourself to
choose otherwise.
"""

from __future__ import annotations

import os
import sys

_LOCAL_SIZE_VARIABLES = ("OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "LOCAL_WORLD_SIZE",
                         "MV2_COMM_WORLD_LOCAL_SIZE")


def local_ranks() -> int:
    """How many ranks of this job run on this host (1 when not launched by a known launcher)."""
    for name in _LOCAL_SIZE_VARIABLES:
        value = os.environ.get(name, "")
        if value.isdigit() and int(value) > 0:
            return int(value)
    return 1


def omp_threads() -> int | None:
    """``OMP_NUM_THREADS`` (its first level where it lists several), or None where it is unset
    or not a positive integer."""
    first = os.environ.get("OMP_NUM_THREADS", "").split(",")[0].strip()
    return int(first) if first.isdigit() and int(first) > 0 else None


def default_threads() -> int:
    """``OMP_NUM_THREADS`` where it is set (the variable every OpenMP program, torch among
    them, reads), else the cores divided among the ranks that share this host (at least 1)."""
    return omp_threads() or max(1, (os.cpu_count() or 1) // local_ranks())


def size_kernel_pool() -> None:
    """Set ``NUMBA_NUM_THREADS`` to :func:`default_threads` for multi-rank launches, unless set."""
    if local_ranks() > 1 and "NUMBA_NUM_THREADS" not in os.environ:
        os.environ["NUMBA_NUM_THREADS"] = str(default_threads())
        numba = sys.modules.get("numba")
        if numba is not None and not _numba_pool_started():
            # numba was imported first (``partitioning`` uses it): it must re-read the variable
            # now, before its pool starts, or a later compilation finds the pool's size and
            # its configuration disagreeing and refuses to run
            numba.core.config.reload_config()


def _numba_pool_started() -> bool:
    parallel = sys.modules.get("numba.np.ufunc.parallel")
    return bool(getattr(parallel, "_is_initialized", False))

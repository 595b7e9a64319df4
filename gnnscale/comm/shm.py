"""Shared-memory buffers and the allreduce over them, for ranks on one host.

Each rank maps every other rank's buffer, so an allreduce needs no messages at all: rank ``r``
sums chunk ``r`` of all buffers into its own and writes the result into chunk ``r`` of every
other buffer (a reduce-scatter then an allgather, done with loads and stores), then one
barrier. Per rank that moves ``3 n / P`` bytes through the reduction and
``n (P-1) / P`` through the copy, with no kernel copies (docs/performance.md, "CNN
data-parallel training: the collective layer", compares it with the CMA-based ring).

Buffers are plain files in ``/dev/shm`` mapped with ``mmap``: every rank creates its own,
all map all, and the files are unlinked as soon as everyone has mapped them, so nothing is left
behind if a rank dies. A buffer must be allocated collectively (same sizes, same order), which
:meth:`gnnscale.comm.mpi.MPICommunicator.alloc_buffer` arranges.
"""

from __future__ import annotations

import mmap
import os
from typing import Callable

import torch

from .base import chunk_bounds, reduce_into

SHM_DIR = "/dev/shm"


def shm_available() -> bool:
    """True where POSIX shared memory files can be created."""
    return os.path.isdir(SHM_DIR) and os.access(SHM_DIR, os.W_OK)


class SharedBuffer:
    """``nbytes`` of shared memory per rank of a one-host group: ``views[q]`` is rank q's."""

    def __init__(self, name_prefix: str, rank: int, size: int, nbytes: int,
                 agree: Callable[[bool], bool]):
        """Collective. ``agree(ok)`` is a barrier returning True only if every rank passed True;
        if any rank fails (no space in /dev/shm, ...) all raise ``OSError`` together."""
        self.rank, self.size, self.nbytes = rank, size, max(int(nbytes), 1)
        own_path = os.path.join(SHM_DIR, f"{name_prefix}-{rank}")
        own_map, error = None, None
        try:
            fd = os.open(own_path, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
            try:
                os.ftruncate(fd, self.nbytes)
                own_map = mmap.mmap(fd, self.nbytes)
            finally:
                os.close(fd)
        except OSError as exc:
            error = exc
        maps = []
        try:
            if not agree(error is None):  # every rank's file exists, or nobody goes on
                raise error or OSError(f"another rank could not create {name_prefix}")
            try:
                for peer in range(size):
                    if peer == rank:
                        maps.append(own_map)
                        continue
                    fd = os.open(os.path.join(SHM_DIR, f"{name_prefix}-{peer}"), os.O_RDWR)
                    try:
                        maps.append(mmap.mmap(fd, self.nbytes))
                    finally:
                        os.close(fd)
            except OSError as exc:
                error = exc
            if not agree(error is None):  # every rank has mapped every file
                raise error or OSError(f"another rank could not map {name_prefix}")
        finally:
            if own_map is not None:
                os.unlink(own_path)  # mapped everywhere (or given up): the name can go
        self._maps = maps
        self.views = [torch.frombuffer(m, dtype=torch.uint8) for m in maps]

    def typed(self, rank: int, dtype: torch.dtype, numel: int) -> torch.Tensor:
        """Rank ``rank``'s buffer as ``numel`` elements of ``dtype``."""
        itemsize = torch.empty((), dtype=dtype).element_size()
        return self.views[rank][:numel * itemsize].view(dtype)


def shm_allreduce(buffers: list[torch.Tensor], rank: int, op: str,
                  barrier: Callable[[], None], ready: bool = False) -> torch.Tensor:
    """Reduce the equally shaped 1-D ``buffers`` (one per rank, all mapped here) in place.

    Every rank calls this with the same buffers in the same order; afterwards every buffer holds
    the reduction. ``barrier()`` synchronises the group (it must also order memory, as an MPI
    barrier does); ``ready=True`` says the caller already knows every rank's data is in place
    (the checked-mode signature exchange, posted after the data were written, says so), which
    saves the first barrier.

    Rank ``r`` reduces chunk ``r`` into its own buffer, then *pushes* it into the same chunk of
    every other buffer (whose content there it has just consumed); after one barrier every
    buffer is complete and no rank touches another's memory any more, so the caller may
    overwrite its buffer at once.
    """
    size = len(buffers)
    own = buffers[rank]
    bounds = chunk_bounds(own.numel(), size)
    lo, hi = bounds[rank]
    if not ready:
        barrier()  # every rank's data is in place
    target = own[lo:hi]
    for peer in range(size):
        if peer == rank:
            continue
        reduce_into(target, buffers[peer][lo:hi], op)
    for peer in range(size):
        if peer != rank:
            buffers[peer][lo:hi].copy_(target)
    barrier()  # every chunk has reached every buffer
    return own

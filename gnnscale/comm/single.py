"""A world of one: every collective is the identity, so all code paths run in plain ``python``."""

from __future__ import annotations

import os
from typing import Any, Sequence

import torch

from .base import Communicator, Work, check_counts, check_op


class SingleCommunicator(Communicator):
    """Communicator with exactly one rank (rank 0 of size 1)."""

    backend = "single"

    @property
    def rank(self) -> int:
        return 0

    @property
    def size(self) -> int:
        return 1

    def allreduce_async(self, tensor: torch.Tensor, op: str = "sum") -> Work:
        check_op(op)
        return Work(result=tensor)

    def alltoallv_async(self, send: torch.Tensor, send_counts: Sequence[int],
                        recv_counts: Sequence[int]) -> Work:
        (s,) = check_counts(send_counts, 1, "send_counts")
        (r,) = check_counts(recv_counts, 1, "recv_counts")
        if s != r or send.shape[0] != s:
            raise ValueError(f"alltoallv on one rank: send {send.shape[0]} rows, "
                             f"send_counts {s}, recv_counts {r} must agree")
        return Work(result=send.clone())

    def allgather(self, tensor: torch.Tensor) -> torch.Tensor:
        return tensor.unsqueeze(0).clone()

    def broadcast(self, tensor: torch.Tensor, root: int = 0) -> torch.Tensor:
        if root != 0:
            raise ValueError(f"broadcast root {root} out of range for 1 rank")
        return tensor

    def allgather_object(self, obj: Any) -> list:
        return [obj]

    def barrier(self) -> None:
        return None

    def split(self, color: int, key: int | None = None) -> "SingleCommunicator":
        return SingleCommunicator()

    def abort(self, exit_code: int = 1) -> None:
        os._exit(exit_code)

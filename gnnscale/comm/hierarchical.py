"""Hierarchical allreduce: reduce within each node, allreduce among node leaders, broadcast back.

Jia et al. ("Highly Scalable Deep Learning Training System with Mixed-Precision", 2018) and
Horovod's hierarchical mode: ranks on one host combine their buffers through shared memory first,
so only one rank per node (its *leader*, local rank 0) sends over the network, and the
inter-node allreduce runs among ``nodes`` instead of ``ranks`` participants.

Node groups come from host names, or are forced with ``node_size`` (or ``$GNNSCALE_NODE_SIZE``):
ranks ``[0, node_size)`` form node 0 and so on, which lets one machine exercise the two-level
path. The result equals the flat allreduce up to floating-point summation order.
"""

from __future__ import annotations

import os
import socket
from typing import Any, Sequence

import torch

from .base import Communicator, Work, check_op
from .worker import CommWorker

ENV_NODE_SIZE = "GNNSCALE_NODE_SIZE"


def node_groups(comm: Communicator, node_size: int | None = None) -> list[int]:
    """Node index of every rank: forced blocks of ``node_size`` ranks, else by host name."""
    if node_size is None and os.environ.get(ENV_NODE_SIZE):
        node_size = int(os.environ[ENV_NODE_SIZE])
    if node_size is not None:
        if node_size < 1:
            raise ValueError(f"node_size must be >= 1, got {node_size}")
        return [rank // node_size for rank in range(comm.size)]
    hosts = comm.allgather_object(socket.gethostname())
    order = {host: index for index, host in enumerate(dict.fromkeys(hosts))}
    return [order[host] for host in hosts]


class HierarchicalCommunicator(Communicator):
    """Wraps ``comm``: allreduce is two-level; every other collective is ``comm``'s own.

    Args:
        comm: the flat communicator of the job.
        node_size: force nodes of this many consecutive ranks (for testing on one machine).
    Construction is collective (it splits ``comm`` twice).
    """

    def __init__(self, comm: Communicator, node_size: int | None = None):
        self.comm = comm
        nodes = node_groups(comm, node_size)
        self.num_nodes = len(set(nodes))
        self.local = comm.split(nodes[comm.rank], comm.rank)
        self.is_leader = self.local.rank == 0
        self.leaders = comm.split(0 if self.is_leader else 1, comm.rank)
        self.backend = f"hierarchical-{comm.backend}"
        self.guard = getattr(comm, "guard", None)
        self._worker: CommWorker | None = None

    @property
    def rank(self) -> int:
        return self.comm.rank

    @property
    def size(self) -> int:
        return self.comm.size

    def _two_level(self, tensor: torch.Tensor, op: str) -> torch.Tensor:
        if self.local.size > 1:
            self.local.reduce(tensor, 0, op)
        if self.is_leader and self.leaders.size > 1:
            self.leaders.allreduce(tensor, op)
        if self.local.size > 1:
            self.local.broadcast(tensor, 0)
        return tensor

    def allreduce_async(self, tensor: torch.Tensor, op: str = "sum") -> Work:
        check_op(op)
        if self.size == 1:
            return Work(result=tensor)
        if self._worker is None:
            self._worker = CommWorker("gnnscale-comm-hierarchical")
        job = self._worker.submit(lambda: self._two_level(tensor, op))

        def finish():
            if self.guard is not None:
                self.guard.wait(job.done.is_set, "hierarchical allreduce", block=job.done.wait)
            else:
                job.done.wait()
            return job.outcome()

        return Work(finish)

    def alltoallv_async(self, send: torch.Tensor, send_counts: Sequence[int],
                        recv_counts: Sequence[int]) -> Work:
        return self.comm.alltoallv_async(send, send_counts, recv_counts)

    def reduce(self, tensor: torch.Tensor, root: int = 0, op: str = "sum") -> torch.Tensor:
        return self.comm.reduce(tensor, root, op)

    def allgather(self, tensor: torch.Tensor) -> torch.Tensor:
        return self.comm.allgather(tensor)

    def broadcast(self, tensor: torch.Tensor, root: int = 0) -> torch.Tensor:
        return self.comm.broadcast(tensor, root)

    def allgather_object(self, obj: Any) -> list:
        return self.comm.allgather_object(obj)

    def barrier(self) -> None:
        self.comm.barrier()

    def split(self, color: int, key: int | None = None) -> Communicator:
        return self.comm.split(color, key)

    def abort(self, exit_code: int = 1) -> None:
        self.comm.abort(exit_code)

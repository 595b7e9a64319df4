"""A whole multi-rank job inside one process: one thread per rank, collectives over shared slots.

For property tests that need many small "distributed" runs: starting ``mpirun`` per example would
cost seconds each. Each collective: every rank writes its contribution, all meet at a barrier,
each computes the result from all contributions (reductions sum in rank order, so every rank
gets the same bits), and all meet again before the slots are reused. Posting blocks until every
rank has posted, which is fine because every rank posts the same collectives in the same order.
A rank that raises breaks the barrier, so the others stop instead of hanging (and a barrier
timeout bounds any wait).
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Sequence

import torch

from gnnscale.comm import Communicator, Work


class _World:
    def __init__(self, size: int, timeout: float):
        self.size = size
        self.slots: list = [None] * size
        self.barrier = threading.Barrier(size, timeout=timeout)


class ThreadCommunicator(Communicator):
    """Rank ``rank`` of a world shared by ``size`` threads (see :func:`run_ranks`)."""

    backend = "threads"

    def __init__(self, world: _World, rank: int):
        self._world, self._rank = world, rank

    @property
    def rank(self) -> int:
        return self._rank

    @property
    def size(self) -> int:
        return self._world.size

    def _exchange(self, value) -> list:
        world = self._world
        world.slots[self._rank] = value
        world.barrier.wait()
        everyone = list(world.slots)
        world.barrier.wait()
        return everyone

    def allreduce_async(self, tensor: torch.Tensor, op: str = "sum") -> Work:
        everyone = self._exchange(tensor.detach().clone())
        stack = torch.stack(everyone)
        reduced = {"sum": lambda: stack.sum(0), "max": lambda: stack.amax(0),
                   "min": lambda: stack.amin(0)}[op]()
        tensor.copy_(reduced)
        return Work(result=tensor)

    def alltoallv_async(self, send: torch.Tensor, send_counts: Sequence[int],
                        recv_counts: Sequence[int]) -> Work:
        send_counts = [int(c) for c in send_counts]
        blocks = list(torch.split(send.detach().clone(), send_counts))
        everyone = self._exchange((blocks, [int(c) for c in recv_counts]))
        received = [everyone[q][0][self._rank] for q in range(self.size)]
        for q, block in enumerate(received):  # what checked mode would catch on a real job
            assert block.shape[0] == int(recv_counts[q]), (self._rank, q, block.shape,
                                                          list(recv_counts))
        return Work(result=torch.cat(received) if received else send[:0].clone())

    def allgather(self, tensor: torch.Tensor) -> torch.Tensor:
        return torch.stack(self._exchange(tensor.detach().clone()))

    def broadcast(self, tensor: torch.Tensor, root: int = 0) -> torch.Tensor:
        return tensor.copy_(self._exchange(tensor.detach().clone())[root])

    def allgather_object(self, obj: Any) -> list:
        return self._exchange(obj)

    def barrier(self) -> None:
        self._exchange(None)

    def split(self, color: int, key: int | None = None) -> "Communicator":
        raise NotImplementedError("ThreadCommunicator does not split")

    def abort(self, exit_code: int = 1) -> None:
        self._world.barrier.abort()
        raise RuntimeError(f"rank {self._rank} aborted the job ({exit_code})")


def run_ranks(size: int, work: Callable[[Communicator], Any], timeout: float = 60.0) -> list:
    """Run ``work(comm)`` on ``size`` threads, one per rank; return the results by rank.

    The first exception (other than the broken barrier it causes elsewhere) is re-raised.
    """
    world = _World(size, timeout)
    results: list = [None] * size
    errors: list = [None] * size

    def target(rank: int) -> None:
        try:
            results[rank] = work(ThreadCommunicator(world, rank))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors[rank] = exc
            world.barrier.abort()

    threads = [threading.Thread(target=target, args=(r,), daemon=True) for r in range(size)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout * 4)
        assert not thread.is_alive(), "a rank thread is stuck"
    real = [e for e in errors if e is not None and not isinstance(e, threading.BrokenBarrierError)]
    if real or any(errors):
        raise (real or [e for e in errors if e is not None])[0]
    return results

"""The collective-communication interface shared by GNN and CNN training.

A :class:`Communicator` moves CPU (or, for backends that support it, CUDA) tensors between the
ranks of a job. Every blocking collective has an ``*_async`` twin that returns a :class:`Work`
whose ``wait()`` completes it and returns the result, so callers can compute while data moves.

Conventions:
- Buffers are contiguous tensors; ``allreduce`` works in place and returns its input.
- ``alltoallv`` moves *rows*: ``send`` is ``[sum(send_counts), *row_shape]`` and the result is
  ``[sum(recv_counts), *row_shape]``; block ``q`` of ``send`` goes to rank ``q``.
- Counts are Python ints or 1-D integer arrays of length ``size``.
"""

from __future__ import annotations

import abc
import time
from typing import Any, Callable, Sequence

import numpy as np
import torch

REDUCE_OPS = ("sum", "max", "min")
# each reduction op as an element-wise torch function, a torch reduction along a dimension and
# a NumPy ufunc: the backends' one table
_ELEMENTWISE = {"sum": torch.add, "max": torch.maximum, "min": torch.minimum}
_ALONG_DIM = {"sum": torch.sum, "max": torch.amax, "min": torch.amin}
_UFUNCS = {"sum": np.add, "max": np.maximum, "min": np.minimum}


class Work:
    """Handle of a posted (non-blocking) collective. ``wait()`` returns its result.

    ``started_at`` / ``finished_at`` (``time.perf_counter()`` values) tell when the data actually
    moved, where the backend knows (the MPI ring thread, gloo's completion callback); else None.
    """

    def __init__(self, wait_fn: Callable[[], Any] | None = None, result: Any = None,
                 test_fn: Callable[[], bool] | None = None):
        self._wait_fn = wait_fn
        self._result = result
        self._done = wait_fn is None
        self._test_fn = test_fn
        self.started_at: float | None = None
        self.finished_at: float | None = None

    def wait(self) -> Any:
        """Block until the collective has completed on this rank and return its result."""
        if not self._done:
            self._result = self._wait_fn()
            self._done = True
            self._wait_fn = None
        return self._result

    def is_completed(self) -> bool:
        """True once ``wait()`` has returned (completion is not polled)."""
        return self._done

    def test(self) -> bool:
        """Non-blocking check whether the data has arrived (False if the backend cannot tell).

        The first time it sees completion it records ``finished_at`` (if not known already).
        """
        if self._done:
            return True
        if self._test_fn is None or not self._test_fn():
            return False
        if self.finished_at is None:
            self.finished_at = time.perf_counter()
        return True


class Communicator(abc.ABC):
    """A group of ``size`` ranks; this process is ``rank``."""

    backend: str = "abstract"

    @property
    @abc.abstractmethod
    def rank(self) -> int:
        """This process's index in the group, 0 <= rank < size."""

    @property
    @abc.abstractmethod
    def size(self) -> int:
        """Number of ranks in the group."""

    # -- collectives (non-blocking primitives; blocking ones are derived) ------------------
    @abc.abstractmethod
    def allreduce_async(self, tensor: torch.Tensor, op: str = "sum") -> Work:
        """Reduce ``tensor`` element-wise across ranks, in place. ``op``: sum, max or min."""

    @abc.abstractmethod
    def alltoallv_async(self, send: torch.Tensor, send_counts: Sequence[int],
                        recv_counts: Sequence[int]) -> Work:
        """Exchange variable-sized row blocks; ``wait()`` returns the received rows."""

    @abc.abstractmethod
    def allgather(self, tensor: torch.Tensor) -> torch.Tensor:
        """Gather equally shaped tensors from every rank: result ``[size, *tensor.shape]``."""

    @abc.abstractmethod
    def broadcast(self, tensor: torch.Tensor, root: int = 0) -> torch.Tensor:
        """Overwrite ``tensor`` on every rank with ``root``'s copy (in place); returns it."""

    @abc.abstractmethod
    def allgather_object(self, obj: Any) -> list:
        """Gather one picklable object per rank (small metadata only)."""

    @abc.abstractmethod
    def barrier(self) -> None:
        """Block until every rank has entered the barrier."""

    @abc.abstractmethod
    def split(self, color: int, key: int | None = None) -> "Communicator":
        """Sub-communicator of the ranks that passed the same ``color``, ordered by ``key``."""

    @abc.abstractmethod
    def abort(self, exit_code: int = 1) -> None:
        """Terminate every rank of the job now (used when one rank fails)."""

    # -- derived conveniences -----------------------------------------------------------
    def allreduce(self, tensor: torch.Tensor, op: str = "sum") -> torch.Tensor:
        """Blocking :meth:`allreduce_async`; returns ``tensor`` reduced in place."""
        return self.allreduce_async(tensor, op).wait()

    def alltoallv(self, send: torch.Tensor, send_counts: Sequence[int],
                  recv_counts: Sequence[int]) -> torch.Tensor:
        """Blocking :meth:`alltoallv_async`."""
        return self.alltoallv_async(send, send_counts, recv_counts).wait()

    def reduce(self, tensor: torch.Tensor, root: int = 0, op: str = "sum") -> torch.Tensor:
        """Reduce ``tensor`` onto ``root`` in place; other ranks' tensors are left unspecified.

        This default is an allreduce; backends override it with a real reduce.
        """
        return self.allreduce(tensor, op)

    def alloc_buffer(self, numel: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """A zeroed 1-D CPU tensor that this backend reduces fastest (collective: every rank
        asks for the same sizes in the same order). Here: ordinary memory; the MPI backend
        returns shared memory on one host, which its allreduce reduces without messages."""
        return torch.zeros(int(numel), dtype=dtype)

    def free_buffer(self, tensor: torch.Tensor) -> None:
        """Forget a tensor from :meth:`alloc_buffer` (collective, like the allocation); the
        memory goes when the last reference to it does."""

    def broadcast_object(self, obj: Any, root: int = 0) -> Any:
        """Every rank returns ``root``'s ``obj`` (small metadata only)."""
        return self.allgather_object(obj if self.rank == root else None)[root]

    def allreduce_scalar(self, value: float, op: str = "sum") -> float:
        """Reduce one Python number across ranks (float64)."""
        buf = torch.tensor([float(value)], dtype=torch.float64)
        return float(self.allreduce(buf, op)[0])

    def __repr__(self) -> str:
        return f"{type(self).__name__}(rank={self.rank}, size={self.size})"


def check_op(op: str) -> str:
    """Validate a reduction name."""
    if op not in REDUCE_OPS:
        raise ValueError(f"unknown reduction op {op!r}; choose one of {', '.join(REDUCE_OPS)}")
    return op


def reduce_into(target: torch.Tensor, incoming: torch.Tensor, op: str) -> torch.Tensor:
    """``target = op(target, incoming)`` element-wise, in place; returns ``target``."""
    return _ELEMENTWISE[op](target, incoming, out=target)


def reduce_stack(stack: torch.Tensor, op: str) -> torch.Tensor:
    """Reduce ``stack`` [ranks, ...] over its first dimension with ``op``."""
    return _ALONG_DIM[op](stack, dim=0)


def numpy_reducer(op: str) -> np.ufunc:
    """The NumPy ufunc of ``op`` (``np.add``, ``np.maximum`` or ``np.minimum``)."""
    return _UFUNCS[op]


def chunk_bounds(numel: int, parts: int) -> list[tuple[int, int]]:
    """``parts`` contiguous ranges covering ``range(numel)``, sizes differing by at most 1
    (the first ``numel % parts`` one longer)."""
    base, extra = divmod(numel, parts)
    bounds, start = [], 0
    for index in range(parts):
        stop = start + base + (1 if index < extra else 0)
        bounds.append((start, stop))
        start = stop
    return bounds


def check_alltoallv(send: torch.Tensor, send_counts: Sequence[int], recv_counts: Sequence[int],
                    size: int) -> tuple[list[int], list[int]]:
    """Normalised ``(send_counts, recv_counts)`` of an alltoallv over ``size`` ranks; refuses
    counts of the wrong length, negative counts, and ``send`` rows that the counts do not sum
    to."""
    send_counts = check_counts(send_counts, size, "send_counts")
    recv_counts = check_counts(recv_counts, size, "recv_counts")
    if send.shape[0] != sum(send_counts):
        raise ValueError(f"alltoallv: send has {send.shape[0]} rows but send_counts sum to "
                         f"{sum(send_counts)}")
    return send_counts, recv_counts


def check_root(root: int, size: int) -> int:
    """Refuse a broadcast root outside ``[0, size)``."""
    if not 0 <= root < size:
        raise ValueError(f"broadcast root {root} out of range for {size} ranks")
    return root


def check_counts(counts: Sequence[int], size: int, what: str) -> list[int]:
    """Normalise per-rank row counts to a list of ``size`` non-negative ints."""
    counts = [int(c) for c in counts]
    if len(counts) != size:
        raise ValueError(f"{what} has {len(counts)} entries, expected one per rank ({size})")
    if any(c < 0 for c in counts):
        raise ValueError(f"{what} has a negative entry: {counts}")
    return counts

"""Never hang silently: checked collectives, deadlines, and job-wide failure notices.

Three mechanisms, shared by the multi-rank backends:

- **Checked mode** (on by default; ``init(check=False)`` or ``GNNSCALE_COMM_CHECK=0`` turns it
  off): before each collective every rank contributes a small fixed-size signature (call number,
  kind, op, dtype, element count, root, alltoallv counts) to an allgather on a side channel, and
  every rank compares them. A mismatch (say rank 1 reduces float64 while rank 0 reduces float32,
  or rank 0's send counts disagree with rank 1's receive counts) raises
  :class:`CollectiveMismatchError` on every rank, naming the ranks and their calls, within
  microseconds instead of hanging or corrupting memory. It costs one tiny allgather per call
  (~2 us with MPI on one node).
- **Deadlines**: every wait polls its request and gives up after ``timeout`` seconds (default
  :data:`DEFAULT_TIMEOUT_S`, ``init(timeout=...)`` or ``GNNSCALE_COMM_TIMEOUT``) with
  :class:`CommTimeoutError`.
- **Failure notices**: :func:`install_failure_handler` replaces ``sys.excepthook`` so that a rank
  dying of an uncaught exception first posts "rank r failed: ..." on a :class:`FailureBoard`
  (an MPI side communicator, or the torch.distributed store), gives the others a moment to read it,
  then aborts the job. Ranks blocked in a collective read the notice while they poll and raise
  :class:`PeerFailedError` naming the failed rank; ranks busy computing are killed by the abort.
  Without this, an exception on one mpi4py rank leaves the others blocked forever (and the failed
  rank itself hangs in ``MPI_Finalize``). A rank killed by a signal is handled by the launcher
  (``mpirun`` and ``torchrun`` both take the whole job down and name the rank).
"""

from __future__ import annotations

import math
import os
import sys
import threading
import time
import traceback
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
import torch

from ..errors import CommError

DEFAULT_TIMEOUT_S = 300.0
ENV_TIMEOUT = "GNNSCALE_COMM_TIMEOUT"
ENV_CHECK = "GNNSCALE_COMM_CHECK"
FAILURE_GRACE_S = 1.5  # how long a failing rank waits for peers to read its notice
BOARD_POLL_S = 0.1
SPIN_S = float(os.environ.get("GNNSCALE_SPIN_US", "100")) * 1e-6  # busy-poll first
YIELD_S = 1e-3  # then poll with sched_yield, then sleep
MAX_SIGNED_COUNTS = 64  # alltoallv counts are compared in full up to this many ranks


class CollectiveMismatchError(CommError):
    """Ranks entered different collectives (kind, op, dtype, size, root or counts)."""


class CommTimeoutError(CommError):
    """A collective did not complete within the configured timeout."""


class PeerFailedError(CommError):
    """Another rank failed; this rank stops instead of waiting for it forever."""

    def __init__(self, message: str, failed_rank: int):
        super().__init__(message)
        self.failed_rank = failed_rank


def resolve_timeout(timeout: float | None) -> float:
    """The timeout to use: the argument, else ``$GNNSCALE_COMM_TIMEOUT``, else the default."""
    if timeout is None:
        raw = os.environ.get(ENV_TIMEOUT, "")
        try:
            timeout = float(raw) if raw else DEFAULT_TIMEOUT_S
        except ValueError:
            raise CommError(f"{ENV_TIMEOUT}={raw!r} is not a number of seconds") from None
    if not timeout > 0:
        raise CommError(f"collective timeout must be positive seconds, got {timeout}")
    return float(timeout)


def resolve_check(check: bool | None) -> bool:
    """Checked mode: the argument, else ``$GNNSCALE_COMM_CHECK`` (0/1), else on."""
    if check is None:
        return os.environ.get(ENV_CHECK, "1").strip().lower() not in ("0", "false", "no", "off")
    return bool(check)


# -- signatures -------------------------------------------------------------------------------
_KINDS = ("allreduce", "alltoallv", "allgather", "broadcast", "allgather_object", "barrier",
          "reduce", "split", "alloc_buffer")
_OPS = (None, "sum", "max", "min")
_DTYPES = (None, torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64,
           torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool, torch.complex64,
           torch.complex128)
_HEADER = 9  # seq, kind, op, dtype, numel, root, row width, shape hash, path


_KIND_INDEX = {kind: index for index, kind in enumerate(_KINDS)}
_OP_INDEX = {op: index for index, op in enumerate(_OPS)}
_DTYPE_INDEX = {dtype: index for index, dtype in enumerate(_DTYPES)}


def signature_length(size: int) -> int:
    """Length of the int64 signature vector for a group of ``size`` ranks."""
    return _HEADER + 2 * min(size, MAX_SIGNED_COUNTS)


def fused_payload_bytes(size: int) -> int:
    """Bytes of data that ride along with each signature: 2 KiB (less for large groups), so
    one rank's share stays under the 4 KiB eager limit of shared-memory MPI transports."""
    return min(2048, 32768 // max(size, 1)) // 8 * 8


def exchange_length(size: int) -> int:
    """int64 words each rank contributes to a signature exchange: signature + payload slot."""
    return signature_length(size) + fused_payload_bytes(size) // 8


@dataclass(frozen=True)
class CallSignature:
    """What one rank is about to do: enough to tell whether all ranks agree."""

    kind: str
    op: str | None = None
    dtype: torch.dtype | None = None
    shape: tuple = ()
    root: int = -1
    send_counts: tuple | None = None
    recv_counts: tuple | None = None
    path: int = 0  # allreduce: 1 = over a shared-memory buffer from alloc_buffer

    def describe(self) -> str:
        """Human-readable form, e.g. ``allreduce(float32[1000], op=sum)``."""
        dtype = str(self.dtype).replace("torch.", "") if self.dtype is not None else "?"
        shape = "x".join(str(s) for s in self.shape) if self.shape else ""
        if self.kind in ("barrier", "allgather_object"):
            return f"{self.kind}()"
        if self.kind == "split":
            return "split()"
        if self.kind == "alltoallv":
            row = "x".join(str(s) for s in self.shape[1:]) or "1"
            return (f"alltoallv({dtype} rows of {row}, send_counts={list(self.send_counts)}, "
                    f"recv_counts={list(self.recv_counts)})")
        extra = f", op={self.op}" if self.op else ""
        extra += f", root={self.root}" if self.root >= 0 else ""
        extra += ", shared-memory buffer" if self.path == 1 else ""
        return f"{self.kind}({dtype}[{shape}]{extra})"

    def encode(self, seq: int, size: int, payload: np.ndarray | None = None) -> np.ndarray:
        """Fixed-length int64 vector (identical length on every rank of the group).

        The first :func:`signature_length` words are the signature; the rest (see
        :func:`exchange_length`) carry ``payload`` bytes, so a small allreduce can travel with
        its signature in one collective.
        """
        length = signature_length(size)
        shape = self.shape
        row = shape[1:] if self.kind == "alltoallv" else shape
        header = [seq, _KIND_INDEX[self.kind], _OP_INDEX[self.op],
                  _DTYPE_INDEX.get(self.dtype, len(_DTYPES)), math.prod(shape), self.root,
                  math.prod(row), hash(shape) & 0x3FFFFFFFFFFFFFFF, self.path]
        if self.send_counts is not None and size <= MAX_SIGNED_COUNTS:
            header += self.send_counts
            header += self.recv_counts
        else:
            header += [-1] * (length - _HEADER)
        vec = np.zeros(exchange_length(size), dtype=np.int64)
        vec[:length] = header
        if payload is not None:
            vec[length:].view(np.uint8)[:payload.size] = payload
        return vec

    @classmethod
    def decode(cls, vec: np.ndarray, size: int) -> tuple[int, "CallSignature"]:
        """Inverse of :meth:`encode` (the shape comes back as ``(numel,)`` or ``(rows, width)``)."""
        seq, kind, op, dtype, numel, root, row, _, path = (int(v) for v in vec[:_HEADER])
        counts = None, None
        if _KINDS[kind] == "alltoallv" and size <= MAX_SIGNED_COUNTS:
            counts = (tuple(int(c) for c in vec[_HEADER:_HEADER + size]),
                      tuple(int(c) for c in vec[_HEADER + size:_HEADER + 2 * size]))
        shape = (numel // max(row, 1), row) if _KINDS[kind] == "alltoallv" else (numel,)
        dtype_value = _DTYPES[dtype] if dtype < len(_DTYPES) else None
        return seq, cls(_KINDS[kind], _OPS[op], dtype_value, shape, root, *counts, path)


def find_mismatch(rows: np.ndarray, size: int, what: Callable[[], str] | str = "") -> str | None:
    """Compare the gathered signatures ``rows`` (``[size, L]``); describe a mismatch or None."""
    rows = np.asarray(rows).reshape(size, -1)[:, :signature_length(size)]
    first = rows[0]
    if first[1] != _KIND_INDEX["alltoallv"]:  # the common case: identical signatures
        packed = rows.tobytes()
        step = len(packed) // size
        if packed == packed[:step] * size:
            return None
    kinds = rows[:, 1]
    fields = {"allreduce": (1, 2, 3, 4, 8), "reduce": (1, 2, 3, 4, 5), "broadcast": (1, 3, 4, 5),
              "allgather": (1, 3, 4, 7), "alltoallv": (1, 3, 6), "allgather_object": (1,),
              "barrier": (1,), "split": (1,), "alloc_buffer": (1, 3, 4)}
    problem = None
    if np.any(kinds != first[1]) or np.any(rows[:, 0] != first[0]):
        problem = "different collectives"
    else:
        kind = _KINDS[int(first[1])]
        for index in fields[kind]:
            if np.any(rows[:, index] != first[index]):
                problem = {2: "different reduction ops", 3: "different dtypes",
                           4: "different element counts", 5: "different roots",
                           6: "different row widths", 7: "different shapes",
                           8: "a shared-memory buffer from alloc_buffer on some ranks only"
                           }.get(index)
                break
        if problem is None and kind == "alltoallv" and size <= MAX_SIGNED_COUNTS:
            send = rows[:, _HEADER:_HEADER + size]
            recv = rows[:, _HEADER + size:_HEADER + 2 * size]
            bad = np.argwhere(send != recv.T)
            if bad.size:
                p, q = (int(v) for v in bad[0])
                problem = (f"inconsistent alltoallv counts: rank {p} sends {int(send[p, q])} rows "
                           f"to rank {q}, which expects {int(recv[q, p])}")
    if problem is None:
        return None
    calls: dict[str, list[int]] = {}
    for rank in range(size):
        try:
            seq, sig = CallSignature.decode(rows[rank], size)
            call = f"{sig.describe()} (call #{seq})"
        except (IndexError, ValueError):
            call = "an unreadable signature"
        calls.setdefault(call, []).append(rank)
    listing = "; ".join(f"{_ranks(ranks)}: {call}" for call, ranks in calls.items())
    what = what() if callable(what) else what
    return (f"collective mismatch{' on ' + what if what else ''} ({problem}): {listing}. "
            f"Every rank must make the same collective calls in the same order with matching "
            f"arguments")


def _ranks(ranks: Sequence[int]) -> str:
    if len(ranks) == 1:
        return f"rank {ranks[0]}"
    if list(ranks) == list(range(ranks[0], ranks[-1] + 1)) and len(ranks) > 3:
        return f"ranks {ranks[0]}-{ranks[-1]}"
    return "ranks " + ",".join(str(r) for r in ranks)


# -- failure boards ---------------------------------------------------------------------------
class FailureBoard:
    """Where a failing rank leaves a note that the others read while they wait."""

    def post(self, message: str) -> None:
        """Tell every other rank that this rank failed (best effort, never blocks for long)."""

    def poll(self) -> tuple[int, str] | None:
        """``(failed_rank, message)`` if some rank has posted a notice, else None."""
        return None

    def close(self) -> None:
        """Release resources (at exit)."""


class MPIFailureBoard(FailureBoard):
    """Notices travel as point-to-point messages on a duplicate of the world communicator."""

    TAG = 9173
    SIZE = 4096

    def __init__(self, mpi_comm):
        from mpi4py import MPI

        self._MPI = MPI
        self._comm = mpi_comm.Dup()
        self._rank = self._comm.Get_rank()
        self._buffer = bytearray(self.SIZE)
        self._request = self._comm.Irecv(self._buffer, source=MPI.ANY_SOURCE, tag=self.TAG)
        self._status = MPI.Status()
        self._lock = threading.Lock()
        self._notice = None
        self._sends = []

    def post(self, message: str) -> None:
        payload = message.encode("utf-8", "replace")[: self.SIZE]
        for peer in range(self._comm.Get_size()):
            if peer != self._rank:
                self._sends.append(self._comm.Isend(payload, dest=peer, tag=self.TAG))

    def poll(self) -> tuple[int, str] | None:
        if self._notice is not None:
            return self._notice
        if not self._lock.acquire(blocking=False):  # another thread is polling right now
            return None
        try:
            if self._request is not None and self._request.Test(self._status):
                count = self._status.Get_count(self._MPI.BYTE)
                text = bytes(self._buffer[:count]).decode("utf-8", "replace")
                self._notice = (self._status.Get_source(), text)
                self._request = None
        finally:
            self._lock.release()
        return self._notice

    def close(self) -> None:
        with self._lock:
            if self._request is not None:
                try:
                    self._request.Cancel()
                    self._request.Wait()
                except Exception:  # finalisation must not fail because of the board
                    pass
                self._request = None


class StoreFailureBoard(FailureBoard):
    """Notices are keys in the torch.distributed key-value store (when there is no MPI)."""

    def __init__(self, store, rank: int, size: int, prefix: str = "gnnscale/failed"):
        self._store, self._rank, self._size, self._prefix = store, rank, size, prefix
        self._lock = threading.Lock()
        self._notice = None

    def post(self, message: str) -> None:
        try:
            self._store.set(f"{self._prefix}/{self._rank}", message)
            self._store.add(f"{self._prefix}/count", 1)
        except Exception:  # the store may be gone (rank 0 hosts it); nothing else to do
            pass

    def poll(self) -> tuple[int, str] | None:
        if self._notice is not None or not self._lock.acquire(blocking=False):
            return self._notice
        try:
            if self._store.add(f"{self._prefix}/count", 0) > 0:
                for rank in range(self._size):
                    key = f"{self._prefix}/{rank}"
                    if rank != self._rank and self._store.check([key]):
                        self._notice = (rank, self._store.get(key).decode("utf-8", "replace"))
                        break
        except Exception:  # store unreachable: rank 0 (its host) died; say so
            self._notice = (0, "the rendezvous store (hosted by rank 0) is unreachable")
        finally:
            self._lock.release()
        return self._notice


# -- waiting ----------------------------------------------------------------------------------
class Guard:
    """Deadline, failure notices and signature checks for one group of ranks."""

    def __init__(self, rank: int, size: int, timeout: float | None = None,
                 check: bool | None = None, board: FailureBoard | None = None):
        self.rank, self.size = rank, size
        self.timeout = resolve_timeout(timeout)
        self.check = resolve_check(check) and size > 1
        self.board = board or FailureBoard()
        self._last_poll = 0.0

    def for_group(self, size: int) -> "Guard":
        """The same policy (timeout, check, board) for a sub-group of ``size`` ranks.

        Messages keep naming this process by its rank in the job, which is what users see.
        """
        guard = Guard(self.rank, size, self.timeout, self.check, self.board)
        guard.check = self.check and size > 1
        return guard

    def poll_board(self, what: Callable[[], str] | str) -> None:
        """Raise :class:`PeerFailedError` if another rank has posted a failure notice."""
        now = time.monotonic()
        if now - self._last_poll < BOARD_POLL_S:
            return
        self._last_poll = now
        notice = self.board.poll()
        if notice is not None:
            failed, message = notice
            label = what() if callable(what) else what
            raise PeerFailedError(f"rank {failed} failed ({message}); rank {self.rank} gives up "
                                  f"waiting in {label}", failed)

    def wait(self, done: Callable[[], bool], what: Callable[[], str] | str,
             started: float | None = None, block: Callable[[float], bool] | None = None,
             spin_s: float = SPIN_S, yield_s: float = YIELD_S) -> None:
        """Poll ``done()`` until true; raise on deadline or on a peer's failure notice.

        ``block(seconds)``, if given, waits up to ``seconds`` for completion (an Event's wait,
        which releases the GIL at once) instead of polling. Otherwise three phases:

        1. spin for ``spin_s``: short collectives complete here, at full speed;
        2. poll with ``sched_yield`` for ``yield_s``: on a machine with more runnable
           processes than cores the peer we wait for may be waiting for our core; yielding
           lets it run and brings us back as soon as it has (a sleeping thread on a loaded
           machine was measured to wake ~1 ms late, often);
        3. sleep, backing off to 1 ms, so long waits cost no CPU.

        Another Python thread waits at most ``spin_s`` for the GIL, so a thread that shares the
        process with backward (the communication thread) passes a short ``spin_s``.
        """
        if done():
            return
        start = time.monotonic() if started is None else started
        deadline = start + self.timeout
        if block is None:
            now = time.perf_counter()
            spin_until, yield_until = now + spin_s, now + spin_s + yield_s
            while time.perf_counter() < spin_until:
                if done():
                    return
            while time.perf_counter() < yield_until:
                os.sched_yield()
                if done():
                    return
        pause = 10e-6
        while True:
            if block is not None:
                if block(min(0.05, max(pause, 1e-3))):
                    return
            else:
                time.sleep(pause)
                if done():
                    return
            pause = min(pause * 1.5, 1e-3)
            self.poll_board(what)
            now = time.monotonic()
            if now > deadline:
                label = what() if callable(what) else what
                raise CommTimeoutError(
                    f"rank {self.rank}: {label} did not complete within {self.timeout:g} s "
                    f"(a rank may be stuck, computing, or waiting in a different call); raise "
                    f"the limit with init(timeout=...) or {ENV_TIMEOUT} if this is expected")

    def verify(self, rows: np.ndarray, what: Callable[[], str] | str = "") -> None:
        """Raise :class:`CollectiveMismatchError` if the gathered signatures disagree."""
        problem = find_mismatch(rows, self.size, what)
        if problem is not None:
            raise CollectiveMismatchError(f"rank {self.rank}: {problem}")


# -- the job-wide failure handler -------------------------------------------------------------
_handler = {"installed": False, "board": None, "rank": 0, "abort": None, "previous": None}


def install_failure_handler(rank: int, board: FailureBoard, abort: Callable[[int], None]) -> None:
    """Make an uncaught exception on this rank take the whole job down, loudly.

    The hook prints ``gnnscale: rank R failed: <traceback>``, posts the notice on ``board`` (so
    ranks blocked in a collective raise :class:`PeerFailedError` naming rank R), waits
    :data:`FAILURE_GRACE_S` for them, then calls ``abort(1)``.
    """
    _handler.update(board=board, rank=rank, abort=abort)
    if not _handler["installed"]:
        _handler["previous"] = sys.excepthook
        sys.excepthook = _excepthook
        _handler["installed"] = True


def report_failure(message: str) -> None:
    """Post a failure notice for this rank (for entry points that catch exceptions themselves)."""
    board = _handler["board"]
    if board is not None:
        board.post(message)


def _excepthook(exc_type, exc, tb) -> None:
    if issubclass(exc_type, KeyboardInterrupt) or _handler["abort"] is None:
        return _handler["previous"](exc_type, exc, tb)
    rank = _handler["rank"]
    text = "".join(traceback.format_exception(exc_type, exc, tb))
    try:
        sys.stderr.write(f"gnnscale: rank {rank} failed:\n{text}")
        sys.stderr.flush()
        sys.stdout.flush()
    except Exception:
        pass
    if not isinstance(exc, PeerFailedError):
        report_failure(f"{exc_type.__name__}: {exc}"[:3000])
        time.sleep(FAILURE_GRACE_S)
    _handler["abort"](1)

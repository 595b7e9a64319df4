"""Failure boards: where a failing rank leaves a note that the others read while they wait."""

from __future__ import annotations

import threading
import time

#: How long the store may stay unreachable before rank 0 counts as failed. Rank 0 hosts the
#: store and may simply have finished: it leaves the last collective as soon as its own part is
#: done, while another rank still waits for its result. A rank that really died also breaks the
#: collective's own connections, which fail the wait on their own.
STORE_GONE_GRACE_S = 10.0


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
        from ..mpi_library import load_mpi

        self._MPI = MPI = load_mpi()
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

    def __init__(self, store, rank: int, size: int, prefix: str = "gnnscale/failed",
                 grace_s: float = STORE_GONE_GRACE_S):
        self._store, self._rank, self._size, self._prefix = store, rank, size, prefix
        self._lock = threading.Lock()
        self._notice = None
        self._grace_s = grace_s
        self._unreachable_since: float | None = None

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
            self._unreachable_since = None
        except Exception:  # store unreachable: rank 0 (its host) finished or died
            now = time.monotonic()
            if self._unreachable_since is None:
                self._unreachable_since = now
            elif now - self._unreachable_since >= self._grace_s:
                self._notice = (0, f"the rendezvous store (hosted by rank 0) has been unreachable "
                                   f"for {self._grace_s:g} s")
        finally:
            self._lock.release()
        return self._notice

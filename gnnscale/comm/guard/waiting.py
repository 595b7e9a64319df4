"""Waiting under a deadline, with an eye on the failure board: :class:`Guard`."""

from __future__ import annotations

import os
import time
from typing import Callable

import numpy as np

from ...errors import CommError
from .boards import FailureBoard
from .settings import BOARD_POLL_S, ENV_TIMEOUT, SPIN_S, YIELD_S, resolve_check, resolve_timeout
from .signatures import CollectiveMismatchError, find_mismatch


class CommTimeoutError(CommError):
    """A collective did not complete within the configured timeout."""


class PeerFailedError(CommError):
    """Another rank failed; this rank stops instead of waiting for it forever."""

    def __init__(self, message: str, failed_rank: int):
        super().__init__(message)
        self.failed_rank = failed_rank



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

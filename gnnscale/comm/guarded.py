"""What the multi-rank backends share: rank and size, the guard, call numbers, guarded waits."""

from __future__ import annotations

from typing import Any, Callable

from .base import Communicator, Work
from .guard import Guard
from .guard.signatures import CallSignature


class GuardedCommunicator(Communicator):
    """A communicator whose every wait runs under a :class:`~.guard.Guard` (deadline, failure
    notices) and whose calls are numbered, so messages can say which call stalled.

    Subclasses set ``_rank``, ``_size``, ``guard`` and ``name`` in ``__init__`` and call
    :meth:`_init_calls`.
    """

    _rank: int
    _size: int
    guard: Guard
    name: str

    def _init_calls(self) -> None:
        self._seq = 0  # collective calls made so far on this communicator

    @property
    def rank(self) -> int:
        return self._rank

    @property
    def size(self) -> int:
        return self._size

    def _label(self, sig: CallSignature) -> Callable[[], str]:
        """The current call, described lazily (only an error message needs the text)."""
        seq = self._seq
        return lambda: f"{sig.describe()} (call #{seq} on {self.name})"

    def _guarded_work(self, test: Callable[[], bool], what, started: float,
                      finish: Callable[[], Any] | None = None,
                      block: Callable[[float], bool] | None = None) -> Work:
        """A :class:`Work` whose ``wait()`` polls ``test()`` under the guard (``block``, if
        given, waits instead of polling, see :meth:`Guard.wait`) and then returns
        ``finish()``; its ``test()`` also drives the backend's progress."""
        def complete():
            self.guard.wait(test, what, started, block=block)
            return finish() if finish is not None else None

        return Work(complete, test_fn=test)

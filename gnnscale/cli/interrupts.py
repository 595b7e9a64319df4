"""Ctrl-C that is never lost.

Python raises a SIGINT's KeyboardInterrupt wherever the interpreter happens to be, and drops it
when that is a weakref callback or a ``__del__`` (importlib forgets its module locks in such a
callback; the tensor caches forget entries in others): it prints "Exception ignored in ..." and
carries on. While :func:`remembering` is in force every SIGINT is also written down, so the
code can check :data:`signalled` where it is safe to stop, and the dropped exception is not
reported.
"""

from __future__ import annotations

import contextlib
import signal
import sys

#: the signals received while :func:`remembering` was in force, oldest first
signalled: list[int] = []


def raise_interrupt(signum, frame) -> None:
    """The plain handler: write the signal down, then raise KeyboardInterrupt as Python does."""
    signalled.append(signum)
    raise KeyboardInterrupt


def quiet_interrupt(report):
    """A ``sys.unraisablehook`` that does not report a dropped KeyboardInterrupt (the code
    checks :data:`signalled` instead); anything else goes to ``report``, the hook in place."""
    def hook(unraisable) -> None:
        if not isinstance(unraisable.exc_value, KeyboardInterrupt):
            report(unraisable)
    return hook


@contextlib.contextmanager
def remembering(handler=raise_interrupt, fresh: bool = True):
    """Within this block SIGINT goes to ``handler`` (which must append to :data:`signalled`),
    starting with an empty record where ``fresh`` (a block inside another keeps what the outer
    one wrote down), and dropped KeyboardInterrupts are not reported. A process
    that ignores SIGINT (a job started in the background) keeps ignoring it. Both the handler
    and the hook in place before are restored at the end."""
    if fresh:
        signalled.clear()
    before = signal.getsignal(signal.SIGINT)
    if before is not signal.SIG_IGN:
        signal.signal(signal.SIGINT, handler)
    report = sys.unraisablehook
    sys.unraisablehook = quiet_interrupt(report)
    try:
        yield signalled
    finally:
        if before is not signal.SIG_IGN:
            signal.signal(signal.SIGINT, before)
        sys.unraisablehook = report


def stop_if_signalled() -> None:
    """Raise the KeyboardInterrupt of a Ctrl-C that was written down but dropped."""
    if signalled:
        raise KeyboardInterrupt

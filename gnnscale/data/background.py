"""One large file read in a background thread while the caller does other work.

The OGB readers parse or inflate the feature table (the largest file) this way while the edges
load and become a CSR: both the readers and the CSR build release the GIL, and neither alone
keeps two cores busy. Overlapping holds the features, the edge list and the CSR at once, so the
readers overlap only when that fits easily (:func:`overlap_fits`); otherwise they read one
after the other, at the lower peak. A read that takes ``cancel=`` stops with
:class:`Cancelled` at its next batch once the event is set (:func:`stop_if_cancelled`);
:class:`BackgroundRead` sets it when the caller's own work fails, so an error is reported at
once and no parse is left running behind it.
"""

from __future__ import annotations

import threading


class Cancelled(Exception):
    """Raised by a reader whose ``cancel`` event was set (between two batches)."""


def stop_if_cancelled(cancel, what) -> None:
    """A reader's check between two batches: :class:`Cancelled` once ``cancel`` (a
    ``threading.Event`` or None) is set; ``what`` names the read."""
    if cancel is not None and cancel.is_set():
        raise Cancelled(str(what))


#: overlap only while what both sides hold at once stays under this share of the memory
#: available: on a host where it does not fit, the reads run one after the other (lower peak)
OVERLAP_SHARE = 0.5


def overlap_fits(held_at_once: float) -> bool:
    """Whether holding ``held_at_once`` bytes (the background result and the caller's arrays
    together) stays within :data:`OVERLAP_SHARE` of the memory this host has available."""
    from gnnscale.host_memory import available_bytes

    return held_at_once <= OVERLAP_SHARE * available_bytes()


class BackgroundRead:
    """``fn(path, *args, cancel=EVENT, **kwargs)`` in a daemon thread, as a context manager.

    Nothing runs when ``path`` is None (``result()`` is then None). ``result()`` waits and
    returns the value or re-raises the reader's error in the caller's thread. Leaving the block
    with an exception sets the event and waits for the thread. With ``overlap=False`` nothing
    runs in the background: ``result()`` calls ``fn`` itself (after the caller's work, so the
    two never hold memory at the same time).
    """

    def __init__(self, fn, path, *args, overlap: bool = True, **kwargs):
        self._value, self._error = None, None
        self._thread = None
        self._later = None
        self._cancel = threading.Event()
        if path is not None:
            kwargs = {**kwargs, "cancel": self._cancel}
            if not overlap:
                self._later = (fn, path, args, kwargs)
                return
            self._thread = threading.Thread(target=self._run, args=(fn, path, args, kwargs),
                                            name="gnnscale-read", daemon=True)

    def _run(self, fn, path, args, kwargs):
        try:
            self._value = fn(path, *args, **kwargs)
        except BaseException as exc:  # re-raised in the caller's thread by result()
            self._error = exc

    def __enter__(self) -> "BackgroundRead":
        if self._thread is not None:
            self._thread.start()
        return self

    def __exit__(self, exc_type, *_):
        if self._thread is not None:
            if exc_type is not None:
                self._cancel.set()
            self._thread.join()
        return False

    def result(self):
        if self._later is not None:
            fn, path, args, kwargs = self._later
            self._later = None
            self._value = fn(path, *args, **kwargs)
        if self._thread is not None:
            self._thread.join()
        if self._error is not None:
            raise self._error
        return self._value

"""One large file read in a background thread while the caller does other work.

The OGB readers parse or inflate the feature table (the largest file) this way while the edges
load and become a CSR: both the readers and the CSR build release the GIL, and neither alone
keeps two cores busy. A read that takes ``cancel=`` stops with :class:`Cancelled` at its next
batch once the event is set; :class:`BackgroundRead` sets it when the caller's own work fails,
so an error is reported at once and no parse is left running behind it.
"""

from __future__ import annotations

import threading


class Cancelled(Exception):
    """Raised by a reader whose ``cancel`` event was set (between two batches)."""


class BackgroundRead:
    """``fn(path, *args, cancel=EVENT, **kwargs)`` in a daemon thread, as a context manager.

    Nothing runs when ``path`` is None (``result()`` is then None). ``result()`` waits and
    returns the value or re-raises the reader's error in the caller's thread. Leaving the block
    with an exception sets the event and waits for the thread.
    """

    def __init__(self, fn, path, *args, **kwargs):
        self._value, self._error = None, None
        self._thread = None
        self._cancel = threading.Event()
        if path is not None:
            kwargs = {**kwargs, "cancel": self._cancel}
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
        if self._thread is not None:
            self._thread.join()
        if self._error is not None:
            raise self._error
        return self._value

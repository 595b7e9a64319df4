"""The job-wide failure handler: an uncaught exception on one rank takes the job down, loudly."""

from __future__ import annotations

import sys
import time
import traceback
from typing import Callable

from .boards import FailureBoard
from .settings import FAILURE_GRACE_S
from .waiting import PeerFailedError

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

"""Load the MPI library (through mpi4py) with gnnscale's settings for a failing job.

Every import of ``mpi4py.MPI`` in gnnscale goes through :func:`load_mpi`, so that the settings
below are in place before ``MPI_Init`` reads them.

**The launcher names a dead rank first.** When a rank's process dies on another host, its peers
see their TCP connections close at once. Open MPI treats that as fatal in the peer (``An error
occurred in Socket closed ... on a NULL communicator``, whatever the error handler) and aborts
the job from there, so the launcher may report the surviving rank that aborted ("process rank 1
on node node0 calling abort") and never the one that died. Open MPI's ``opal_abort_delay``
makes an aborting process wait that many seconds first; meanwhile the dead rank's daemon tells
the launcher, which names it ("process rank 2 ... on node node1 exited on signal 9") and ends
the job. :data:`ABORT_DELAY_S` is the default, the same wait the torch backend makes
(:data:`.torch_dist.LAUNCHER_FIRST_S`); ``OMPI_MCA_opal_abort_delay`` set by the user wins
(0 turns it off). Checked in ``tests/cluster/test_cross_host_faults.py``.

gnnscale's own aborts (:func:`abort_world`: a rank that raised, after its notice and grace
period; a collective that timed out; Ctrl-C) have named the failure already and skip that
wait: they set the library's ``opal_abort_delay`` to 0 first, where they find it and where the
delay is gnnscale's rather than the user's.
"""

from __future__ import annotations

import os

#: seconds an aborting Open MPI process waits before it ends the job (``opal_abort_delay``)
ABORT_DELAY_S = 2
_ABORT_DELAY_VARIABLES = ("OMPI_MCA_opal_abort_delay", "OMPI_MCA_mpi_abort_delay")


_delay_is_ours = {"value": False}


def load_mpi():
    """``mpi4py.MPI``, initialised with :data:`ABORT_DELAY_S` unless the user set a delay.

    Raises ImportError where mpi4py or its MPI library cannot be loaded."""
    if not any(name in os.environ for name in _ABORT_DELAY_VARIABLES):
        os.environ["OMPI_MCA_opal_abort_delay"] = str(ABORT_DELAY_S)
        _delay_is_ours["value"] = True
    from mpi4py import MPI  # imported lazily: plain `python` runs never load MPI

    return MPI


def abort_world(exit_code: int) -> None:
    """``MPI_Abort`` on the world, at once: without the abort delay :func:`load_mpi` set (the
    caller has named the failure; a delay the user set is kept)."""
    if _delay_is_ours["value"]:
        set_abort_delay(0)
    load_mpi().COMM_WORLD.Abort(exit_code)


def set_abort_delay(seconds: int) -> bool:
    """Set Open MPI's ``opal_abort_delay`` in the running library; False where this process has
    no Open MPI library loaded that exports it (another MPI: nothing to do)."""
    import ctypes

    for path in _loaded_libraries("libopen-pal"):
        try:
            ctypes.c_int.in_dll(ctypes.CDLL(path), "opal_abort_delay").value = int(seconds)
            return True
        except (OSError, ValueError):  # not loadable, or no such symbol
            continue
    return False


def _loaded_libraries(stem: str) -> list[str]:
    """Paths of the shared libraries mapped into this process whose file name starts with
    ``stem`` (from /proc/self/maps; none where there is no /proc)."""
    try:
        maps = open("/proc/self/maps").read().splitlines()
    except OSError:
        return []
    paths = {line.split()[-1] for line in maps if len(line.split()) >= 6}
    return sorted(p for p in paths if os.path.basename(p).startswith(stem))

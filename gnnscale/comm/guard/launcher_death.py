"""A rank ends with the launcher process that started it, instead of lingering as an orphan.

``mpirun`` (or a remote ``prted``), ``srun``'s step daemon and ``torchrun``'s agent each start
their ranks as child processes and take them down when the job fails. Where that launcher
process itself ends first (killed, its host's daemon lost, or ending while a rank is still busy
in a wait that does not notice), the rank would go on alone with no one to read its output: a
rank of a failed job still running minutes later. :func:`end_with_launcher` asks Linux to
SIGKILL this process the moment its parent ends (``prctl(PR_SET_PDEATHSIG)``). A checkpoint is
written to a temporary file and renamed, so the last complete one stays intact.

Only ranks whose parent is a launcher's own process are tied to it: ``mpirun``/``mpiexec``,
``srun``, and ``torchrun`` (``TORCHELASTIC_RUN_ID``); a process given ``RANK``/``WORLD_SIZE`` by
hand (say under ``nohup`` from a shell) keeps running when that shell ends. Elsewhere than Linux
nothing is done.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

from ..launch import LaunchInfo

PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>


def started_by_launcher(launch: LaunchInfo, environ=None) -> bool:
    """Whether this process's parent is a launcher's process (not a shell the user typed in)."""
    env = os.environ if environ is None else environ
    if launch.launcher in ("mpi", "slurm"):
        return True
    return launch.launcher == "torchrun" and "TORCHELASTIC_RUN_ID" in env


def end_with_launcher(launch: LaunchInfo, environ=None) -> bool:
    """Have this process SIGKILLed when its parent, the launcher's process, ends.

    Returns whether that is now in place (False off Linux, outside a launcher, or where the
    kernel refuses). Where the parent has ended already, this process ends at once."""
    if not sys.platform.startswith("linux") or not started_by_launcher(launch, environ):
        return False
    parent = os.getppid()
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) != 0:
            return False
    except (OSError, AttributeError):  # no C library to call, or no prctl in it
        return False
    if os.getppid() != parent:  # the launcher ended before the request was in place
        os.kill(os.getpid(), signal.SIGKILL)
    return True

"""The collective layer: one :class:`Communicator` interface, one backend per file.

``init()`` returns the communicator for this process: MPI when launched by ``mpirun``/``mpiexec``
(or ``srun`` with an MPI library), a world of one in a plain ``python`` process.
"""

from __future__ import annotations

from .base import Communicator, Work
from .launch import LaunchInfo, detect_launch, env_rank
from .single import SingleCommunicator

BACKENDS = ("auto", "mpi", "single")

__all__ = ["Communicator", "Work", "SingleCommunicator", "LaunchInfo", "detect_launch",
           "env_rank", "init", "BACKENDS"]


def init(backend: str = "auto") -> Communicator:
    """Create the communicator for this process.

    backend: ``"auto"`` (MPI under an MPI launcher or srun, otherwise a world of one),
    ``"mpi"`` or ``"single"``.
    """
    from ..errors import CommError

    if backend not in BACKENDS:
        raise CommError(f"unknown communication backend {backend!r}; choose one of "
                        f"{', '.join(BACKENDS)}")
    launch = detect_launch()
    if backend == "auto":
        backend = "mpi" if launch.launcher in ("mpi", "slurm") else "single"
    if backend == "single":
        if launch.size > 1:
            raise CommError(f"backend 'single' was asked for, but the launcher started "
                            f"{launch.size} ranks; use backend 'mpi' or launch one process")
        return SingleCommunicator()
    try:
        from .mpi import MPICommunicator

        return MPICommunicator()
    except ImportError as exc:  # mpi4py missing or its MPI library not loadable
        raise CommError(f"backend 'mpi' needs mpi4py with a working MPI library ({exc}); "
                        f"install gnnscale's dependencies (`make venv`)") from None

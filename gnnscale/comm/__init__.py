"""The collective layer: one :class:`Communicator` interface, one backend per file.

``init()`` returns the communicator for this process:

- ``"mpi"`` (:mod:`.mpi`): mpi4py; CPU tensors; a threaded ring for large allreduces.
- ``"torch"`` (:mod:`.torch_dist`): torch.distributed, gloo on CPU and NCCL on GPU.
- ``"single"`` (:mod:`.single`): a world of one, so every code path runs in plain ``python``.
- ``"auto"``: MPI under ``mpirun``/``mpiexec``/``srun``, torch under ``torchrun``, else single;
  under ``srun`` with an MPI that is not wired to Slurm (MPI sees a world of one), torch.

Hierarchical allreduce over node groups is :class:`HierarchicalCommunicator`. How launchers are
recognised is documented in :mod:`.launch`; how hangs are avoided in :mod:`.guard`.

Importing this package loads no torch: :mod:`.launch` (``detect_launch``, ``env_rank``,
``LaunchInfo``) and ``BACKENDS`` are here at once, so the command line parses its arguments
without torch; the communicators and the guard's errors load from their modules on first use
(``from gnnscale.comm import SingleCommunicator`` works as any import does).
"""

from __future__ import annotations

from ..lazy_names import on_first_use
from .launch import LaunchInfo, detect_launch, env_rank

BACKENDS = ("auto", "mpi", "torch", "single")

__all__ = ["Communicator", "Work", "SingleCommunicator", "HierarchicalCommunicator", "LaunchInfo",
           "detect_launch", "env_rank", "init", "BACKENDS", "CollectiveMismatchError",
           "CommTimeoutError", "PeerFailedError", "node_groups", "report_failure"]

#: the names loaded when one of them is first asked for (their modules import torch)
_ON_FIRST_USE = ("Communicator", "Work", "SingleCommunicator", "HierarchicalCommunicator",
                 "node_groups", "CollectiveMismatchError", "CommTimeoutError", "PeerFailedError",
                 "report_failure")


def _load() -> dict:
    """The names of :data:`_ON_FIRST_USE`, imported."""
    from .base import Communicator, Work
    from .guard import CollectiveMismatchError, CommTimeoutError, PeerFailedError, report_failure
    from .hierarchical import HierarchicalCommunicator, node_groups
    from .single import SingleCommunicator

    return locals()


__getattr__, __dir__ = on_first_use(globals(), _ON_FIRST_USE, _load)


def init(backend: str = "auto", *, timeout: float | None = None, check: bool | None = None,
         device: str | None = None) -> Communicator:
    """Create the communicator for this process.

    Args:
        backend: ``"auto"``, ``"mpi"``, ``"torch"`` or ``"single"`` (see the module doc).
        timeout: seconds a collective may wait before :class:`CommTimeoutError` (default
            ``$GNNSCALE_COMM_TIMEOUT`` or 300).
        check: compare call signatures across ranks before each collective so mismatches
            raise :class:`CollectiveMismatchError` (default ``$GNNSCALE_COMM_CHECK`` or on).
        device: torch backend only: ``"cpu"`` (gloo), ``"cuda"`` (gloo + NCCL), None = CUDA
            if available.

    With more than one rank, an uncaught exception on any rank prints its traceback, tells the
    other ranks (they raise :class:`PeerFailedError` naming it) and aborts the job.
    """
    from ..errors import CommError
    from .guard import install_failure_handler
    from .guard.launcher_death import end_with_launcher
    from .single import SingleCommunicator

    if backend not in BACKENDS:
        raise CommError(f"unknown communication backend {backend!r}; choose one of "
                        f"{', '.join(BACKENDS)}")
    launch = detect_launch()
    end_with_launcher(launch)  # a rank never outlives the launcher process that started it
    requested = backend
    if backend == "auto":
        backend = {"mpi": "mpi", "slurm": "mpi", "torchrun": "torch"}.get(launch.launcher,
                                                                          "single")
    if backend == "mpi" and launch.launcher == "slurm" and launch.size > 1:
        seen = _mpi_world_size()
        if seen is not None and seen != launch.size:
            # srun started the tasks, but this MPI is not wired to Slurm (no PMI): each task
            # would be a world of one and train alone
            if requested == "auto":
                backend = "torch"  # the tasks meet over TCP instead (see .launch)
            else:
                raise CommError(f"srun started {launch.size} tasks but MPI sees a world of "
                                f"{seen}: this MPI is not wired to Slurm; use backend 'torch' "
                                "(--backend torch), or srun --mpi=pmix with an MPI built for "
                                "Slurm")
    if backend == "single":
        if launch.size > 1:
            raise CommError(f"backend 'single' was asked for, but the launcher started "
                            f"{launch.size} ranks; use backend 'mpi' or launch one process")
        return SingleCommunicator()
    if backend == "torch":
        from .torch_dist import TorchCommunicator

        comm = TorchCommunicator.create(launch, timeout=timeout, check=check, device=device)
    else:
        try:
            from .mpi import MPICommunicator

            comm = MPICommunicator(timeout=timeout, check=check)
        except ImportError as exc:  # mpi4py missing or its MPI library not loadable
            raise CommError(f"backend 'mpi' needs mpi4py with a working MPI library ({exc}); "
                            f"install gnnscale's dependencies (`make venv`)") from None
    if comm.size > 1:
        install_failure_handler(comm.rank, comm.guard.board, comm.abort_job)
    return comm


def _mpi_world_size() -> int | None:
    """How many ranks MPI's world holds (None when mpi4py cannot load an MPI library)."""
    from .mpi_library import load_mpi

    try:
        MPI = load_mpi()
    except ImportError:
        return None
    return MPI.COMM_WORLD.Get_size()

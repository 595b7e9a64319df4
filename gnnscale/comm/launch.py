"""Find out how this process was launched: rank and size from the launcher's environment.

Recognised launchers (first match wins):
- Open MPI ``mpirun``/``mpiexec``: ``OMPI_COMM_WORLD_RANK`` / ``OMPI_COMM_WORLD_SIZE``
- MPICH / Intel MPI (Hydra): ``PMI_RANK`` / ``PMI_SIZE``
- PMIx-based launchers: ``PMIX_RANK``
- Slurm ``srun``: ``SLURM_PROCID`` / ``SLURM_NTASKS``
- ``torchrun``: ``RANK`` / ``WORLD_SIZE`` (with ``MASTER_ADDR``/``MASTER_PORT``)
"""

from __future__ import annotations

import os
from dataclasses import dataclass

_MPI_VARS = (("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"), ("PMI_RANK", "PMI_SIZE"),
             ("PMIX_RANK", None), ("MPI_LOCALRANKID", None))


@dataclass(frozen=True)
class LaunchInfo:
    """Where this process sits in the job, as its launcher describes it."""

    launcher: str  # "mpi", "slurm", "torchrun" or "none"
    rank: int
    size: int
    local_rank: int


def _int(name: str, default: int) -> int:
    value = os.environ.get(name)
    return int(value) if value not in (None, "") else default


def detect_launch(environ=None) -> LaunchInfo:
    """Describe the launcher from environment variables; ``launcher='none'`` for plain python."""
    env = os.environ if environ is None else environ
    for rank_var, size_var in _MPI_VARS:
        if rank_var in env:
            size = int(env[size_var]) if size_var and size_var in env else -1
            local = int(env.get("OMPI_COMM_WORLD_LOCAL_RANK", env.get("MPI_LOCALRANKID", 0)))
            return LaunchInfo("mpi", int(env[rank_var]), size, local)
    if "SLURM_PROCID" in env and "SLURM_NTASKS" in env and "SLURM_STEP_ID" in env:
        return LaunchInfo("slurm", int(env["SLURM_PROCID"]), int(env["SLURM_NTASKS"]),
                          int(env.get("SLURM_LOCALID", 0)))
    if "RANK" in env and "WORLD_SIZE" in env:
        return LaunchInfo("torchrun", int(env["RANK"]), int(env["WORLD_SIZE"]),
                          int(env.get("LOCAL_RANK", 0)))
    return LaunchInfo("none", 0, 1, 0)


def env_rank() -> int:
    """This process's rank as the launcher set it (0 when not launched by one)."""
    return detect_launch().rank

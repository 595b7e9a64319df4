"""Find out how this process was launched: rank and size from the launcher's environment.

Recognised launchers (first match wins):

- Open MPI ``mpirun``/``mpiexec``: ``OMPI_COMM_WORLD_RANK`` / ``OMPI_COMM_WORLD_SIZE``
  (``OMPI_COMM_WORLD_LOCAL_RANK`` for the rank on this host). Example::

      mpirun -n 4 python train.py            # add --oversubscribe for more ranks than cores

- MPICH / Intel MPI (Hydra ``mpiexec``): ``PMI_RANK`` / ``PMI_SIZE`` (``MPI_LOCALRANKID``).
- PMIx-based launchers (``prun``, Open MPI 5 internals): ``PMIX_RANK``.
- Slurm ``srun``: ``SLURM_PROCID`` / ``SLURM_NTASKS`` / ``SLURM_LOCALID`` inside a job step
  (``SLURM_STEP_ID``). With an MPI library wired to Slurm (PMI/PMIx) both backends work;
  without it the torch backend meets at ``MASTER_ADDR`` (default: the first host of
  ``SLURM_STEP_NODELIST``) on ``MASTER_PORT`` (default ``20000 + SLURM_JOB_ID % 20000``)::

      srun -N 2 --ntasks-per-node 4 python train.py --backend torch

- ``torchrun``: ``RANK`` / ``WORLD_SIZE`` / ``LOCAL_RANK``, rendezvous at
  ``MASTER_ADDR``/``MASTER_PORT`` (torchrun sets them)::

      torchrun --nproc-per-node 4 train.py   # gnnscale.comm.init() picks backend "torch"

``mpirun`` with ``init(backend="torch")`` needs nothing else: rank 0 picks a free port and
shares it through MPI (see :mod:`.torch_dist`).
"""

from __future__ import annotations

import os
import re
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


def first_host(nodelist: str) -> str:
    """The first host of a Slurm node list: ``"gpu[07-09,12],cpu1"`` -> ``"gpu07"``."""
    match = re.match(r"\s*([^,\[]+)(?:\[([^\]]+)\])?", nodelist)
    if not match or not match.group(1):
        raise ValueError(f"cannot read a host name from the Slurm node list {nodelist!r}")
    prefix, ranges = match.group(1), match.group(2)
    if ranges is None:
        return prefix
    return prefix + ranges.split(",")[0].split("-")[0]


def slurm_rendezvous(environ=None) -> tuple[str, int]:
    """(address, port) where the ranks of a Slurm step meet when there is no MPI."""
    env = os.environ if environ is None else environ
    address = env.get("MASTER_ADDR")
    if not address:
        nodelist = env.get("SLURM_STEP_NODELIST") or env.get("SLURM_JOB_NODELIST")
        if not nodelist:
            raise ValueError("under srun without MPI set MASTER_ADDR (no SLURM_STEP_NODELIST)")
        address = first_host(nodelist)
    port = int(env.get("MASTER_PORT") or 20000 + int(env.get("SLURM_JOB_ID", 0)) % 20000)
    return address, port

"""Collectives on the world of one and on real MPI jobs of 1-4 ranks."""

from pathlib import Path

import pytest
import torch

from gnnscale.comm import SingleCommunicator, detect_launch, init
from gnnscale.errors import CommError
from mpi_launch import run_python_mpi

DRIVER = Path(__file__).with_name("comm_driver.py")


def test_single_world_collectives_are_identities():
    comm = init("single")
    assert isinstance(comm, SingleCommunicator) and (comm.rank, comm.size) == (0, 1)
    t = torch.arange(3.0)
    assert comm.allreduce(t) is t
    out = comm.alltoallv(torch.ones(2, 4), [2], [2])
    assert out.shape == (2, 4)
    assert comm.allgather(torch.tensor([7])).tolist() == [[7]]
    assert comm.broadcast_object({"a": 1}) == {"a": 1}
    with pytest.raises(ValueError, match="send_counts"):
        comm.alltoallv(torch.ones(2, 4), [3], [3])


def test_unknown_backend_is_a_clear_error():
    with pytest.raises(CommError, match="unknown communication backend 'nccl2'"):
        init("nccl2")


def test_launch_detection_reads_launcher_variables():
    assert detect_launch({}).launcher == "none"
    info = detect_launch({"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "8",
                          "OMPI_COMM_WORLD_LOCAL_RANK": "1"})
    assert (info.launcher, info.rank, info.size, info.local_rank) == ("mpi", 3, 8, 1)
    assert detect_launch({"PMI_RANK": "2", "PMI_SIZE": "4"}).rank == 2
    info = detect_launch({"SLURM_PROCID": "5", "SLURM_NTASKS": "6", "SLURM_STEP_ID": "0"})
    assert (info.launcher, info.rank, info.size) == ("slurm", 5, 6)
    info = detect_launch({"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1"})
    assert (info.launcher, info.size) == ("torchrun", 2)


@pytest.mark.parametrize("nprocs", [1, 2, 3, 4])
def test_mpi_collectives(nprocs):
    result = run_python_mpi(nprocs, DRIVER, ["mpi"], timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.count(" ok") == nprocs

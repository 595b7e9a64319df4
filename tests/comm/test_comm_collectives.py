"""Collectives on the world of one and on a real MPI job: 1-4 ranks, and the extra paths.

The MPI cases share one 4-rank launch (comm_driver.py); the torch backend's are in
test_comm_backends.py.
"""

import pytest
import torch

from comm_cases import assert_case_passed, run_cases
from gnnscale.comm import SingleCommunicator, detect_launch, init
from gnnscale.errors import CommError

MPI_RANKS = 4  # the one MPI launch of this file


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


@pytest.fixture(scope="module")
def mpi_job():
    """init('mpi') on 4 ranks: the collective checks on the world of 4 and on 1, 2 and 3 ranks
    split off it (the other ranks checking theirs beside them), then the extra paths on the
    world. A split is the same MPICommunicator over an mpi4py communicator of that size as a
    smaller job's world; init's own set-up runs on the world of 4. Every check compares with
    values computed on the spot (or the hierarchical allreduce with the flat one, both in the
    same case), so what one case leaves behind could not make another pass."""
    return run_cases(MPI_RANKS, "mpi", ["collectives:4", "collectives:1", "collectives:2",
                                        "collectives:3", "extra:2"], timeout=300)


@pytest.mark.parametrize("nprocs", [1, 2, 3, 4])
def test_mpi_collectives(nprocs, mpi_job):
    assert_case_passed(mpi_job, f"collectives:{nprocs}", MPI_RANKS)


@pytest.mark.parametrize("backend,nprocs", [("mpi", 4)])  # torch-3: test_comm_backends.py
def test_ring_reduce_split_and_hierarchical_allreduce(backend, nprocs, mpi_job):
    """Threaded ring (forced on small buffers), reduce, nested split, big objects, and the
    two-level allreduce over forced 2-rank nodes equal to the flat one."""
    assert_case_passed(mpi_job, "extra:2", nprocs)

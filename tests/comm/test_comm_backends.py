"""The torch.distributed backend passes the same collective tests as MPI, and the extra paths.

Every multi-rank case is a real ``mpirun`` job with a timeout (tests/mpi_launch.py); the cases
on 2 and 3 ranks share one 3-rank launch (comm_driver.py). The MPI backend's cases are in
test_comm_collectives.py.
"""

import subprocess
import sys

import pytest

from comm_cases import DRIVER, assert_case_passed, run_cases
from mpi_launch import REPO_ROOT, mpi_env


@pytest.fixture(scope="module")
def torch_job():
    """init('torch') on 3 ranks: the collective checks on the world of 3 and on 2 ranks split
    off it, then the extra paths on the world. Every check compares with values computed on
    the spot (or the hierarchical allreduce with the flat one, both in the same case), so
    what one case leaves behind could not make another pass."""
    return run_cases(3, "torch", ["collectives:3", "collectives:2", "extra:2", "uneven:0"],
                     timeout=240)


def test_torch_backend_collectives_under_mpirun(torch_job):
    """init('torch') under mpirun: rendezvous through MPI, gloo collectives, the same checks as
    MPI's, on the world and on a sub-group."""
    assert_case_passed(torch_job, "collectives:3", 3)
    assert_case_passed(torch_job, "collectives:2", 3)


def test_torch_split_over_uneven_groups_is_refused(torch_job):
    """A rank that made one torch process group more than its peers: the next split raises
    on every rank, naming the counts, where torch alone would wait forever."""
    assert_case_passed(torch_job, "uneven:0", 3)


def test_torch_backend_in_a_plain_process():
    """No launcher: a gloo world of one on a store at a free local port."""
    result = subprocess.run([sys.executable, str(DRIVER), "torch"], capture_output=True,
                            text=True, timeout=120, env=mpi_env(), cwd=REPO_ROOT)
    assert_case_passed(result, "collectives:1", 1)


@pytest.mark.parametrize("backend,nprocs", [("torch", 3)])  # mpi-4: test_comm_collectives.py
def test_ring_reduce_split_and_hierarchical_allreduce(backend, nprocs, torch_job):
    """Threaded ring (forced on small buffers), reduce, nested split, big objects, and the
    two-level allreduce over forced 2-rank nodes equal to the flat one."""
    assert_case_passed(torch_job, "extra:2", nprocs)

"""The torch.distributed backend passes the same collective tests as MPI; extra paths of both.

Every multi-rank case is a real ``mpirun`` job with a timeout (tests/mpi_launch.py).
"""

import subprocess
import sys
from pathlib import Path

import pytest

from mpi_launch import REPO_ROOT, mpi_env, run_python_mpi

HERE = Path(__file__).parent
DRIVER = HERE / "comm_driver.py"
EXTRA = HERE / "comm_extra_driver.py"


def test_torch_backend_collectives_under_mpirun():
    """init('torch') under mpirun: rendezvous through MPI, gloo collectives, same checks
    (3 ranks run in the next file's extra driver)."""
    result = run_python_mpi(2, DRIVER, ["torch"], timeout=150)
    assert result.returncode == 0, result.stderr
    assert result.stdout.count(" ok") == 2


def test_torch_backend_in_a_plain_process():
    """No launcher: a gloo world of one on a store at a free local port."""
    result = subprocess.run([sys.executable, str(DRIVER), "torch"], capture_output=True,
                            text=True, timeout=120, env=mpi_env(), cwd=REPO_ROOT)
    assert result.returncode == 0, result.stderr
    assert "rank 0 ok" in result.stdout


@pytest.mark.parametrize("backend,nprocs", [("mpi", 4), ("torch", 3)])
def test_ring_reduce_split_and_hierarchical_allreduce(backend, nprocs):
    """Threaded ring (forced on small buffers), reduce, nested split, big objects, and the
    two-level allreduce over forced 2-rank nodes equal to the flat one."""
    result = run_python_mpi(nprocs, EXTRA, [backend, "2"], timeout=180,
                            env={"GNNSCALE_RING_MIN_BYTES": "4096"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.count(" ok") == nprocs

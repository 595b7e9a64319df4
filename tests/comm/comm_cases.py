"""The tests' side of comm_driver.py: one launch runs several cases, and each test asserts
its own case."""

from pathlib import Path

from comm_driver import ALL_RAN
from mpi_launch import run_python_mpi

DRIVER = Path(__file__).with_name("comm_driver.py")
#: forces comm_extra_driver.py's ring allreduce onto small buffers (MPI backend; the torch
#: backend reads no such variable). comm_driver.py's own allreduces are of 40 bytes at most,
#: far below it: they take the same paths as under the default threshold.
RING_ON_SMALL_BUFFERS = {"GNNSCALE_RING_MIN_BYTES": "4096"}


def run_cases(nprocs: int, backend: str, cases: list[str], timeout: float):
    """comm_driver.py's ``cases`` in one launch of ``nprocs`` ranks on ``backend``."""
    return run_python_mpi(nprocs, DRIVER, [backend, *cases], timeout=timeout,
                          env=RING_ON_SMALL_BUFFERS)


def assert_case_passed(result, case: str, nprocs: int) -> None:
    """Every rank of the launch (``nprocs``) said it passed its part of ``case``, and the
    launch ended well or in a case after this one (whose own test fails)."""
    lines = set(result.stdout.splitlines())
    missing = [r for r in range(nprocs) if f"{case} rank {r} of {nprocs} ok" not in lines]
    assert not missing, (f"{case}: ranks {missing} did not pass it (it failed, or an earlier "
                         f"case did and ended the launch)\n{result.stderr[-4000:]}")
    assert result.returncode == 0 or ALL_RAN not in lines, (
        f"every case passed, but the launch failed (exit code {result.returncode})\n"
        f"{result.stderr[-4000:]}")

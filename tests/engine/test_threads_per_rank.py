"""Threads per rank: OMP_NUM_THREADS where set, else the rank's share of the cores; the compiled
kernels' pool is sized to it."""

import os
import sys

import pytest

from gnnscale import threads
from mpi_launch import run_mpi

pytestmark = pytest.mark.timeout(300)


def test_default_threads_divides_the_cores_among_local_ranks(monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    for name in threads._LOCAL_SIZE_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    assert threads.local_ranks() == 1
    assert threads.default_threads() == (os.cpu_count() or 1)
    monkeypatch.setenv("OMPI_COMM_WORLD_LOCAL_SIZE", str(4 * (os.cpu_count() or 1)))
    assert threads.default_threads() == 1  # never zero
    monkeypatch.setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "junk")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "1")
    assert threads.local_ranks() == 1


@pytest.mark.parametrize("value, expected", [("3", 3), ("4,2", 4), ("0", None), ("x", None),
                                             ("", None)])
def test_omp_num_threads_is_the_default_where_set(monkeypatch, value, expected):
    monkeypatch.setenv("OMP_NUM_THREADS", value)
    monkeypatch.setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "2")
    assert threads.omp_threads() == expected
    assert threads.default_threads() == (expected or max(1, (os.cpu_count() or 1) // 2))


def test_size_kernel_pool_respects_an_explicit_setting(monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    # numba's configuration is not re-read here: it would outlive the test's environment
    monkeypatch.setattr(threads, "_numba_pool_started", lambda: True)
    monkeypatch.setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "2")
    monkeypatch.setenv("NUMBA_NUM_THREADS", "7")
    threads.size_kernel_pool()
    assert os.environ["NUMBA_NUM_THREADS"] == "7"
    monkeypatch.delenv("NUMBA_NUM_THREADS")
    threads.size_kernel_pool()
    assert os.environ["NUMBA_NUM_THREADS"] == str(max(1, (os.cpu_count() or 1) // 2))


def test_ranks_launched_by_mpirun_get_their_share_before_numba_starts():
    code = ("import os; os.environ.pop('NUMBA_NUM_THREADS', None); "  # as if never set
            "import gnnscale, numba; "
            "print('pool', numba.config.NUMBA_NUM_THREADS, os.environ['NUMBA_NUM_THREADS'])")
    result = run_mpi(4, [sys.executable, "-c", code])
    assert result.returncode == 0, result.stderr
    share = max(1, (os.cpu_count() or 1) // 4)
    lines = [line for line in result.stdout.splitlines() if line.startswith("pool")]
    assert lines == [f"pool {share} {share}"] * 4

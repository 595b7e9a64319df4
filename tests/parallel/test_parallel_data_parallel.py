"""K-rank DataParallel equals one process on the concatenated batch (real mpirun jobs)."""

from pathlib import Path

import pytest

from mpi_launch import run_python_mpi

DRIVER = Path(__file__).with_name("parallel_dp_driver.py")


@pytest.mark.parametrize("backend", ["mpi", "torch"])
def test_data_parallel_matches_one_process(backend, tmp_path):
    """plain and no_sync: 3 SGD steps within 1e-5 of one process; unused parameters; fp16/bf16
    compression within the stated tolerance. Small buckets and a forced ring exercise the
    threaded path of the MPI backend."""
    result = run_python_mpi(2, DRIVER, [backend], timeout=180,
                            env={"GNNSCALE_RING_MIN_BYTES": "1024",
                                 "GNNSCALE_CACHE_DIR": str(tmp_path)})
    assert result.returncode == 0, result.stderr
    for mode in ("plain", "no_sync", "unused", "fp16", "bf16"):
        assert result.stdout.count(f" ok {mode}") == 2, result.stdout

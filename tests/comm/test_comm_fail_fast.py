"""Jobs that would hang end quickly instead, every rank non-zero, with a message naming ranks.

Each case is a real 2-rank ``mpirun`` job of comm_failure_driver.py. The limits are generous
(a loaded machine starts Python slowly); the elapsed-time checks bound from above what
gnnscale promises: a mismatch ends the job within seconds, a failure within 30 s.
"""

import time
from pathlib import Path

import pytest

from mpi_launch import run_python_mpi

DRIVER = Path(__file__).with_name("comm_failure_driver.py")


def run(backend, scenario, env=None):
    start = time.monotonic()
    result = run_python_mpi(2, DRIVER, [backend, scenario], timeout=120, env=env)
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    assert "UNREACHED" not in output, output
    return output, time.monotonic() - start


@pytest.mark.parametrize("backend,scenario,expected", [
    ("mpi", "dtype", r"different dtypes\): rank 0: allreduce\(float32\[10\], op=sum\) "
                     r"\(call #2\); rank 1: allreduce\(float64\[10\], op=sum\)"),
    ("mpi", "size_large", r"different element counts\): rank 0: allreduce\(float32\[300000\]"),
    ("mpi", "counts", r"rank 0 sends 1 rows to rank 0, which expects 2"),
    ("torch", "size", r"different element counts\): rank 0: allreduce\(float32\[10\], "
                      r"op=sum\) \(call #2\); rank 1: allreduce\(float32\[11\]"),
])
def test_mismatched_collectives_fail_on_every_rank(backend, scenario, expected):
    import re

    output, _ = run(backend, scenario)
    assert "CollectiveMismatchError" in output
    for rank in (0, 1):  # both ranks report the same mismatch
        assert re.search(rf"rank {rank}: collective mismatch", output), output
    assert re.search(expected, output), output


@pytest.mark.parametrize("backend", ["mpi", "torch"])
def test_a_raising_rank_stops_the_job_and_is_named(backend):
    output, elapsed = run(backend, "raise")
    assert "gnnscale: rank 1 failed" in output and "ValueError: rank one cannot go on" in output
    assert "rank 1 failed (ValueError: rank one cannot go on); rank 0 gives up" in output
    assert elapsed < 60


def test_a_stalled_rank_times_out_the_others():
    output, elapsed = run("mpi", "stall", env={"DRIVER_TIMEOUT": "2"})
    assert "CommTimeoutError: rank 0: barrier() (call #2 on world) did not complete within 2 s" \
        in output
    assert elapsed < 60  # rank 1 sleeps 120 s: the abort ended it

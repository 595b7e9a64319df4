"""On several ranks the layers before the last compute only the rows read after them: the
rows the loss's rows read and every row sent to a peer's halo (peers' rows read those). Under
mpirun (2 and 3 ranks, METIS parts), each rank's training logits and parameter gradients equal
the same model's computing every row (dropout 0; exact halos, and a staleness policy's first
step, which fetches them synchronously); the whole trainer on several ranks is
checked against PyG on one process in tests/engine/test_exactness.py."""

import json
from pathlib import Path

import pytest

from mpi_launch import run_python_mpi

DRIVER = Path(__file__).with_name("narrowed_ranks_driver.py")
CASES = 7  # the driver's CASES


@pytest.mark.parametrize("nprocs", [2, 3])
def test_narrowed_rows_on_several_ranks_equal_every_row(nprocs):
    result = run_python_mpi(nprocs, DRIVER, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    lines = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    assert len(lines) == nprocs * CASES
    for line in lines:
        assert line["largest_relative_error"] <= 1e-5, line
        assert line["halo"] > 0 and line["sent"] > 0  # the ranks do exchange rows
    # some rank computes fewer rows than it owns before the last layer
    assert any(line["read"] is not None and line["read"] < line["owned"] for line in lines)

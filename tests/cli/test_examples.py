"""The Python API example runs on one process and under mpirun and agrees with itself."""

import re
from pathlib import Path

import pytest

from mpi_launch import REPO_ROOT, run_python_mpi

EXAMPLE = REPO_ROOT / "examples" / "python_api.py"


@pytest.mark.timeout(300)
@pytest.mark.parametrize("nprocs", [1, 2])
def test_python_api_example(nprocs, datasets_root):
    result = run_python_mpi(nprocs, EXAMPLE, ["--data-root", str(datasets_root),
                                              "--epochs", "30"], timeout=240)
    assert result.returncode == 0, result.stderr[-2000:]
    match = re.search(r"test accuracy ([\d.]+), predicted 2708 nodes, recomputed test "
                      r"accuracy ([\d.]+)", result.stdout)
    assert match, result.stdout
    assert match.group(1) == match.group(2)  # gathered predictions agree with the metric
    assert float(match.group(1)) > 0.6

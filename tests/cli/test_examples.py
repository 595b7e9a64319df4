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


@pytest.mark.timeout(300)
def test_python_api_example_without_data_root_and_with_a_wrong_one(tmp_path):
    """From any folder the example finds the shipped data; a data root without the dataset is
    one line and exit code 2, not a traceback."""
    import sys

    from mpi_launch import mpi_env, run_command

    found = run_command([sys.executable, str(EXAMPLE), "--epochs", "3"], timeout=240,
                        cwd=tmp_path, env=mpi_env({"GNNSCALE_DATA_ROOT": ""}))
    assert found.returncode == 0, found.stderr[-2000:]
    assert "predicted 2708 nodes" in found.stdout
    missing = run_command([sys.executable, str(EXAMPLE), "--data-root", str(tmp_path)],
                          timeout=240, cwd=tmp_path)
    assert missing.returncode == 2 and "Traceback" not in missing.stderr, missing.stderr
    assert missing.stderr.count("error:") == 1 and "cora" in missing.stderr

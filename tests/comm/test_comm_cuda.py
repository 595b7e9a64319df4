"""CUDA / NCCL: the torch backend on GPU tensors. Skipped where torch sees no GPU.

NCCL refuses two ranks on one GPU, so the multi-rank case needs two or more GPUs; the one-rank
case runs every code path through NCCL and DataParallel on a single GPU.
"""

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from mpi_launch import REPO_ROOT, mpi_env, run_python_mpi

DRIVER = Path(__file__).with_name("comm_cuda_driver.py")
GPUS = torch.cuda.device_count() if torch.cuda.is_available() else 0

pytestmark = pytest.mark.skipif(GPUS == 0, reason="no CUDA device visible to torch")


def test_nccl_single_rank():
    result = subprocess.run([sys.executable, str(DRIVER)], capture_output=True, text=True,
                            timeout=300, env=mpi_env(), cwd=REPO_ROOT)
    assert result.returncode == 0, result.stderr
    assert "rank 0 cuda ok" in result.stdout


@pytest.mark.skipif(GPUS < 2, reason="NCCL needs one GPU per rank")
def test_nccl_two_ranks_under_mpirun():
    result = run_python_mpi(2, DRIVER, [], timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("cuda ok") == 2

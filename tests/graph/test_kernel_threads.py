"""The compiled kernels run on torch's thread count, and starting their pool leaves torch's
count alone (numba's OpenMP pool and torch share one OpenMP runtime: the pool's start used to
raise torch's count to the pool's size for the rest of the process)."""

import json
import subprocess
import sys

import pytest

from mpi_launch import REPO_ROOT

PROBE = """
import json, sys, torch, numba
from gnnscale.nn.dropout import dropout
from gnnscale.graph.kernels import csr_spmm
import numpy as np
seen = {}
torch.set_num_threads(int(sys.argv[1]))
dropout(torch.ones(1000, 8), 0.5)                 # the process's first parallel kernel
seen["after dropout"] = [torch.get_num_threads(), numba.get_num_threads()]
indptr, indices = np.array([0, 1, 2], np.int64), np.array([1, 0], np.int32)
csr_spmm(indptr, indices, np.ones(2, np.float32), np.ones((2, 4), np.float32), 2,
         torch.get_num_threads())
seen["after spmm"] = [torch.get_num_threads(), numba.get_num_threads()]
torch.set_num_threads(2)
dropout(torch.ones(1000, 8), 0.5)
seen["torch set to 2"] = [torch.get_num_threads(), numba.get_num_threads()]
print(json.dumps(seen))
"""


@pytest.mark.parametrize("first", [1, 2])
def test_kernels_follow_torch_and_the_pool_leaves_torch_alone(first):
    env = {"NUMBA_NUM_THREADS": "2", "PATH": "/usr/bin:/bin"}  # no OMP_NUM_THREADS
    done = subprocess.run([sys.executable, "-c", PROBE, str(first)], capture_output=True,
                          text=True, cwd=REPO_ROOT, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.splitlines()[-1])
    assert seen == {"after dropout": [first, first], "after spmm": [first, first],
                    "torch set to 2": [2, 2]}, seen

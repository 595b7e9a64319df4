"""Tasks started the way ``srun`` starts them, with an MPI that is not wired to Slurm (each task's
MPI world holds one rank): backend ``auto`` joins them over TCP (torch) instead of training each
task alone, and backend ``mpi`` refuses in one line."""

import socket
import subprocess
import sys

from mpi_launch import REPO_ROOT, mpi_env

SCRIPT = """
import sys
from gnnscale.comm import init
from gnnscale.errors import CommError
import torch
try:
    comm = init(sys.argv[1])
except CommError as error:
    print("refused:", error, flush=True)
    raise SystemExit(2)
total = comm.allreduce(torch.ones(1))
print(comm.backend, comm.rank, comm.size, float(total[0]), flush=True)
comm.barrier()
import os
os._exit(0)  # what is tested is above; gloo's threads at interpreter exit are not (torch_dist._destroy)
"""


def srun_tasks(backend: str, ntasks: int = 2) -> list[subprocess.CompletedProcess]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    procs = []
    for rank in range(ntasks):
        env = mpi_env({"SLURM_PROCID": str(rank), "SLURM_NTASKS": str(ntasks),
                       "SLURM_LOCALID": str(rank), "SLURM_STEP_ID": "0", "SLURM_JOB_ID": "7",
                       "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)})
        for name in [n for n in env if n.startswith(("OMPI_COMM_WORLD", "PMIX_", "PMI_"))]:
            del env[name]
        procs.append(subprocess.Popen([sys.executable, "-c", SCRIPT, backend], env=env,
                                      cwd=REPO_ROOT, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True))
    done = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        done.append(subprocess.CompletedProcess(proc.args, proc.returncode, out, err))
    return done


def test_auto_joins_the_tasks_over_tcp():
    done = srun_tasks("auto")
    for rank, task in enumerate(done):
        assert task.returncode == 0, task.stderr[-2000:]
        assert task.stdout.split() == ["torch", str(rank), "2", "2.0"], task.stdout


def test_mpi_backend_refuses_in_one_line():
    for task in srun_tasks("mpi"):
        assert task.returncode == 2, task.stderr[-2000:]
        assert task.stdout.startswith("refused: srun started 2 tasks but MPI sees a world of 1")

"""Run under mpirun by test_comm_fail_fast.py: one scenario of a job that must not hang.

argv: backend scenario. Each scenario makes the ranks disagree or fail; the test checks that
every rank exits non-zero quickly with a message naming the ranks (and never reaches "UNREACHED").
"""

import os
import signal
import sys
import time

import torch

from gnnscale.comm import init


def main() -> None:
    backend, scenario = sys.argv[1], sys.argv[2]
    torch.set_num_threads(1)
    comm = init(backend, timeout=float(os.environ.get("DRIVER_TIMEOUT", "60")))
    rank = comm.rank
    comm.allreduce(torch.ones(4))  # everybody is up
    if scenario == "dtype":
        comm.allreduce(torch.ones(10, dtype=torch.float64 if rank == 1 else torch.float32))
    elif scenario == "size":
        comm.allreduce(torch.ones(10 + rank))
    elif scenario == "size_large":  # the threaded ring path of the MPI backend
        comm.allreduce_async(torch.ones(300_000 + rank)).wait()
    elif scenario == "kind":
        if rank == 0:
            comm.broadcast(torch.ones(3), root=0)
        else:
            comm.allreduce(torch.ones(3))
    elif scenario == "op":
        comm.allreduce(torch.ones(3), "max" if rank == 0 else "sum")
    elif scenario == "counts":
        size = comm.size
        recv = [2 if rank == 0 else 1] * size  # rank 0 expects 2 rows from everyone; gets 1
        comm.alltoallv(torch.ones(size, 3), [1] * size, recv)
    elif scenario == "raise":
        if rank == 1:
            time.sleep(0.3)
            raise ValueError("rank one cannot go on")
        comm.allreduce(torch.ones(3))
    elif scenario == "kill":
        if rank == 1:
            time.sleep(0.3)
            os.kill(os.getpid(), signal.SIGKILL)
        comm.allreduce(torch.ones(3))
    elif scenario == "stall":  # rank 1 never arrives; the others give up after the timeout
        if rank == 1:
            time.sleep(120)
        comm.barrier()
    else:
        raise SystemExit(f"unknown scenario {scenario}")
    print(f"rank {rank} UNREACHED", flush=True)


if __name__ == "__main__":
    main()

"""Driver: the torch backend joins every gloo worker thread before the interpreter finalises.

A handler registered before the communicator runs after the backend's own exit handler
(atexit is last in, first out); it prints the threads still alive then.
"""

import atexit
import os
import sys

import torch

from gnnscale.comm import init


def thread_names() -> list[str]:
    tasks = f"/proc/{os.getpid()}/task"
    return sorted(open(f"{tasks}/{t}/comm").read().strip() for t in os.listdir(tasks))


atexit.register(lambda: print("at exit:", " ".join(thread_names()), flush=True))
comm = init("torch")
sub = comm.split(comm.rank % 2)
pending = [comm.allreduce_async(torch.ones(64)), sub.allreduce_async(torch.ones(8))]
for work in pending:
    work.wait()
print("running:", " ".join(thread_names()), flush=True)
sys.exit(0)
